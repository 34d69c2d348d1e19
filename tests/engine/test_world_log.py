"""A world file's change log and lock (engine/world/log.py; issue 17, items 1 and 2).

Several bound worlds in one process stand for several processes here: each holds the lock on
its own open file, as another process would. tests/crash/ does it with real processes.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from privilog.dsl.files import FileRefused, write_atomically
from privilog.engine.ids import EntityId
from privilog.engine.world import Grant, NotAnAdmin, World, WorldError, load_world

import privilog
from privilog.repl.session import Session

ACTIONS = ("READ", "WRITE", "EXECUTE", "ADMIN")
TEXT = "# who may do what\nadmins: [user:root, user:sam]\ngrants:\n  - [user:x, READ, namespace:a]  # the first\n"
NS = EntityId.parse("namespace:a")


def grant(principal: str, action: str = "READ") -> Grant:
    return Grant(principal, action, NS)


@pytest.fixture
def path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PRIVILOG_WORLD_LOG_BYTES", "100000")  # no compaction unless asked
    world = tmp_path / "world.yaml"
    world.write_text(TEXT)
    return world


def log_of(path: Path) -> Path:
    return path.with_name(path.name + ".log")


def test_changes_go_to_the_log_and_every_reader_sees_them(path: Path) -> None:
    world = load_world(path, ACTIONS, bind=True)
    world.grant("user:root", [grant("user:alice")])
    world.revoke("user:root", [grant("user:x")])
    world.grant("user:root", [grant("user:alice")])  # changes nothing: nothing logged
    assert path.read_text() == TEXT
    lines = log_of(path).read_text().splitlines()
    assert [line.split('"kind":')[1][:8] for line in lines] == ['"grant",', '"revoke"']
    assert load_world(path, ACTIONS).grants == {grant("user:alice")}  # a reader that does not bind
    authz = privilog.load("cdap", path)
    assert authz.allows("user:alice", "namespace.get", "namespace:a")


def test_compaction_edits_the_file_in_place_and_removes_the_log(path: Path) -> None:
    world = load_world(path, ACTIONS, bind=True)
    world.grant("user:root", [grant("user:alice")])
    world.save()
    assert path.read_text() == TEXT + "  - [user:alice, READ, namespace:a]\n"
    assert not log_of(path).exists()
    assert load_world(path, ACTIONS).grants == {grant("user:x"), grant("user:alice")}


def test_the_log_is_compacted_once_past_its_bound(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVILOG_WORLD_LOG_BYTES", "300")
    world = load_world(path, ACTIONS, bind=True)
    sizes = []
    for n in range(5):
        world.grant("user:root", [grant(f"user:u{n}")])
        sizes.append(log_of(path).stat().st_size if log_of(path).exists() else 0)
    assert 0 in sizes and max(sizes) > 0  # grown, then compacted
    assert load_world(path, ACTIONS).grants == world.grants
    assert path.read_text().startswith("# who may do what\n")


def test_two_bound_worlds_never_overwrite_each_other(path: Path) -> None:
    first, second = load_world(path, ACTIONS, bind=True), load_world(path, ACTIONS, bind=True)
    first.grant("user:root", [grant("user:alice")])
    second.grant("user:root", [grant("user:bob")])  # takes alice's grant in first
    assert second.following is not None and second.following.taken_in == 1
    first.save()  # compacts: takes bob's in, writes both
    second.revoke("user:root", [grant("user:x")])  # reads the compacted file again
    assert second.following.rereads == 1
    assert load_world(path, ACTIONS).grants == {grant("user:alice"), grant("user:bob")} == second.grants


def test_the_admin_check_sees_the_other_writers_changes(path: Path) -> None:
    first, second = load_world(path, ACTIONS, bind=True), load_world(path, ACTIONS, bind=True)
    second.remove_admins("user:root", ["user:sam"])
    with pytest.raises(NotAnAdmin, match="user:sam is not an authorization admin"):
        first.grant("user:sam", [grant("user:alice")])
    assert load_world(path, ACTIONS).grants == {grant("user:x")}


def test_an_authorizer_over_a_bound_world_follows_the_other_writer(path: Path) -> None:
    first, second = privilog.load("cdap", path, bind=True), privilog.load("cdap", path, bind=True)
    first.grant("user:root", [grant("user:alice")])
    first.add_entity("user:root", EntityId.parse("dataset:a.d"))
    assert not second.allows("user:alice", "namespace.get", "namespace:a")  # not read in yet
    second.grant("user:root", [grant("user:bob")])
    assert second.allows("user:alice", "namespace.get", "namespace:a")
    assert second.inventory.exists(EntityId.parse("dataset:a.d"))
    first.delete_entity("user:root", EntityId.parse("dataset:a.d"))
    assert second.world.take_in() == 1
    assert not second.inventory.exists(EntityId.parse("dataset:a.d"))


def test_a_torn_last_line_is_ignored_and_cut_off_by_the_next_writer(path: Path) -> None:
    world = load_world(path, ACTIONS, bind=True)
    world.grant("user:root", [grant("user:alice")])
    whole = log_of(path).read_bytes()
    with log_of(path).open("ab") as log:
        log.write(whole[: len(whole) // 2].replace(b"alice", b"mallo"))  # a crash mid-append
    assert load_world(path, ACTIONS).grants == {grant("user:x"), grant("user:alice")}
    load_world(path, ACTIONS, bind=True).grant("user:root", [grant("user:bob")])
    assert log_of(path).read_bytes().startswith(whole + b'{"at"')
    assert len(log_of(path).read_bytes().splitlines()) == 2
    assert load_world(path, ACTIONS).grants == {grant("user:x"), grant("user:alice"), grant("user:bob")}


def test_a_damaged_line_with_changes_after_it_is_an_error(path: Path) -> None:
    world = load_world(path, ACTIONS, bind=True)
    world.grant("user:root", [grant("user:alice")])
    world.grant("user:root", [grant("user:bob")])
    log_of(path).write_bytes(log_of(path).read_bytes().replace(b"alice", b"mallo", 1))  # the checksum fails
    with pytest.raises(WorldError) as raised:
        load_world(path, ACTIONS)
    assert str(raised.value) == (
        f"{log_of(path)}:1: a change in the world's log is damaged, and changes follow it; "
        "restore the log from a backup, or delete line 1 to give up that change"
    )


def test_a_logged_value_is_checked_as_the_files_are(path: Path) -> None:
    world = load_world(path, ACTIONS, bind=True)
    world.grant("user:root", [grant("user:alice", "ADMIN")])
    with pytest.raises(WorldError, match=r"world\.yaml\.log:1: unknown action `ADMIN`"):
        load_world(path, ("READ", "WRITE"))


def test_a_crash_between_compaction_and_removing_the_log_changes_nothing(path: Path) -> None:
    world = load_world(path, ACTIONS, bind=True)
    world.grant("user:root", [grant("user:alice"), grant("user:bob")])
    world.revoke("user:root", [grant("user:alice")])
    world.grant("user:root", [grant("user:alice", "WRITE")])
    kept = path.with_name("kept.log")
    shutil.copy(log_of(path), kept)
    world.save()
    shutil.copy(kept, log_of(path))  # as if the compaction died before the log was removed
    again = load_world(path, ACTIONS)
    assert again.grants == world.grants == {grant("user:x"), grant("user:bob"), grant("user:alice", "WRITE")}


def test_a_world_made_in_memory_and_bound_writes_itself_first(tmp_path: Path) -> None:
    path = tmp_path / "new.yaml"
    world = World(admins={"user:root"}, actions=ACTIONS, path=path)
    world.grant("user:root", [grant("user:alice")])
    world.grant("user:root", [grant("user:bob")])
    assert load_world(path, ACTIONS).grants == {grant("user:alice"), grant("user:bob")}


# ---- the REPL: changes kept until `save world`, others' taken in ---------------------------------


def test_two_sessions_saving_keep_both_changes_and_say_so(path: Path) -> None:
    first, second = Session("cdap", path), Session("cdap", path)
    first.one_shot("grant user:alice READ namespace:a as user:root")
    second.one_shot("grant user:bob READ namespace:a as user:root")
    assert first.one_shot("save world").startswith("saved the world to")
    assert second.one_shot("save world").splitlines()[0] == (
        f"note: {path} was changed by someone else since this session read it; read it again "
        "(the session's 1 unsaved change kept on top)"
    )
    assert {str(g) for g in load_world(path, ACTIONS).grants} >= {"user:alice READ namespace:a", "user:bob READ namespace:a"}


def test_a_session_reads_in_a_bound_writers_changes_before_each_line(path: Path) -> None:
    session = Session("cdap", path)
    session.one_shot("grant user:carol READ namespace:a as user:root")
    writer = privilog.load("cdap", path, bind=True)
    writer.grant("user:root", [grant("user:alice")])
    reply = session.one_shot("check user:alice namespace.get namespace:a")
    assert reply.splitlines() == [
        f"note: {path} was changed by someone else since this session read it; read in their 1 change "
        "(the session's 1 unsaved change kept on top)",
        "ALLOW user:alice namespace.get namespace:a",
    ]
    assert session.one_shot("check user:carol namespace.get namespace:a").startswith("ALLOW")
    writer.remove_admins("user:root", ["user:root"])
    notes = session.one_shot("check user:carol namespace.get namespace:a").splitlines()
    assert notes[1] == "note: dropped this session's unsaved grant as user:root: user:root is no longer an authorization admin"
    assert notes[2].startswith("DENY")


# ---- every other writer: nothing overwritten that it has not read ------------------------------


def test_an_atomic_write_refuses_to_replace_a_file_changed_since_it_was_read(tmp_path: Path) -> None:
    path = tmp_path / "p.policy"
    path.write_bytes(b"policy p\r\nactions READ\r\n")
    write_atomically(path, "policy p\nactions READ\n", "policy", read="policy p\r\nactions READ\r\n")
    assert path.read_bytes() == b"policy p\nactions READ\n"
    with pytest.raises(FileRefused, match=r"p\.policy: the policy was changed by someone else meanwhile"):
        write_atomically(path, "policy q\n", "policy", read="what was read before someone saved")
    assert path.read_bytes() == b"policy p\nactions READ\n"
    assert [p.name for p in tmp_path.iterdir()] == ["p.policy"]  # the temporary file removed
