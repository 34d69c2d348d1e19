"""Answers about the past on the command line and in the REPL (``--as-of``, ``as of``), the revision a
change on a store answers with, and ``privilog store diff``: over a real SQLite store in a temporary
folder, made through the command line itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from privilog.engine.whatif import impact_whole
from privilog.engine.world import World

from privilog import dsl
from privilog.cli import main
from privilog.repl.session import Session
from privilog.store import open_store
from privilog.store.diff import diff, steps

NS = "namespace:ns1"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def store(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> str:
    """A store whose log is: #1 root made admin, #2 ns1 created, #3 alice granted ADMIN on it, #4 bob READ,
    #5 dave into group:g, #6 group:g granted ADMIN, #7 alice's ADMIN revoked, #8 dave out of group:g."""
    monkeypatch.delenv("PRIVILOG_STORE", raising=False)
    path = str(tmp_path / "authz.db")
    assert run(capsys, "store", "init", "--store", path, "--admin", "user:root")[0] == 0
    for change in (
        ["entity", "add", NS],
        ["grant", "user:alice", "ADMIN", NS],
        ["grant", "user:bob", "READ", NS],
        ["member", "add", "user:dave", "group:g"],
        ["grant", "group:g", "ADMIN", NS],
        ["revoke", "user:alice", "ADMIN", NS],
        ["member", "remove", "user:dave", "group:g"],
    ):
        code, _out, err = run(capsys, *change, "--store", path, "--as", "user:root")
        assert code == 0, err
    return path


# ---- --as-of on the command line ----------------------------------------------------------------


def test_check_as_of_an_entry_answers_as_the_store_stood_then(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    asked = ("check", "user:alice", "namespace.update", NS, "--store", store)
    code, out, err = run(capsys, *asked, "--as-of", "3")
    assert (code, out.strip()) == (0, f"ALLOW user:alice namespace.update {NS}")
    assert err.startswith("as of log entry 3 (") and "policy cdap version" in err
    assert run(capsys, *asked, "--as-of", "2")[0] == 1  # before the grant
    assert run(capsys, *asked)[0] == 1  # now: revoked at #7
    code, out, _ = run(capsys, *asked, "--as-of", "6", "--json")
    answer = json.loads(out)
    assert answer["decision"] == "allow" and answer["as_of"]["seq"] == 6 and answer["as_of"]["asked"] == "6"
    assert answer["as_of"]["revision"].startswith("plr1_") and answer["as_of"]["policy"]["recorded"] is False


def test_why_list_who_report_and_query_take_as_of(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "why", "user:dave", "namespace.update", NS, "--store", store, "--as-of", "6")
    assert code == 0 and "group:g" in out and "as of log entry 6" in err
    code, out, _ = run(capsys, "who", "namespace.update", NS, "--store", store, "--as-of", "6", "--json")
    who = json.loads(out)
    assert {p["principal"] for p in who["allowed"]} >= {"user:alice", "user:dave"} and who["as_of"]["seq"] == 6
    code, out, _ = run(capsys, "who", "namespace.update", NS, "--store", store)
    assert "user:alice" not in out and "user:dave" not in out
    code, out, _ = run(capsys, "report", "user:alice", "--store", store, "--as-of", "3", "--json")
    assert [g["action"] for g in json.loads(out)["grants"]] == ["ADMIN"]
    code, out, _ = run(capsys, "report", "user:alice", "--store", store, "--json")
    assert json.loads(out)["grants"] == [] and "as_of" not in json.loads(out)
    code, out, _ = run(capsys, "list", "user:bob", "--store", store, "--as-of", "3", "--json")
    assert json.loads(out)["visible"] == [] and json.loads(out)["as_of"]["seq"] == 3
    code, out, _ = run(capsys, "query", 'grant(P, "ADMIN", E)', "--store", store, "--as-of", "3")
    assert "user:alice" in out


def test_a_revision_handed_back_is_a_moment(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    _code, out, _ = run(capsys, "grant", "user:eve", "ADMIN", NS, "--store", store, "--as", "user:root", "--json")
    token = json.loads(out)["revision"]
    assert token.startswith("plr1_")
    run(capsys, "revoke", "user:eve", "ADMIN", NS, "--store", store, "--as", "user:root")
    asked = ("check", "user:eve", "namespace.update", NS, "--store", store)
    assert run(capsys, *asked, "--as-of", token)[0] == 0
    assert run(capsys, *asked)[0] == 1


def test_changes_and_checks_on_a_store_say_their_revision(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    _code, out, _ = run(capsys, "grant", "user:fay", "READ", NS, "--store", store, "--as", "user:root")
    lines = out.splitlines()
    assert lines[0] == f"granted READ on {NS} to user:fay"
    assert lines[1].startswith("revision plr1_") and lines[1].endswith("(log entry 9)")
    _code, out, _ = run(capsys, "check", "user:fay", "namespace.get", NS, "--store", store, "--json")
    assert json.loads(out)["revision"].startswith("plr1_")
    with open_store(store, create=False) as opened:
        assert opened.audit()[-1].seq == 9


@pytest.mark.parametrize(
    ("moment", "says"),
    [
        ("99", "log entry 99 is not in the store's log (its last entry is 8)"),
        ("2001-01-01", "is before the store's first log entry"),
        ("last tuesday", "--as-of takes a time"),
        ("plr1_bm9wZQ", "is not a revision"),
    ],
)
def test_a_moment_outside_the_log_is_one_line(
    store: str, capsys: pytest.CaptureFixture[str], moment: str, says: str
) -> None:
    code, out, err = run(capsys, "check", "user:alice", "namespace.update", NS, "--store", store, "--as-of", moment)
    assert (code, out) == (2, "") and says in err and len(err.strip().splitlines()) == 1


def test_as_of_with_a_world_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    world = tmp_path / "w.yaml"
    world.write_text("grants: []\n")
    code, out, err = run(capsys, "check", "user:a", "namespace.get", NS, "--world", str(world), "--as-of", "1")
    assert (code, out) == (2, "") and "--as-of reads a store's log" in err and len(err.splitlines()) == 1


# ---- the REPL -----------------------------------------------------------------------------------


def test_the_repl_answers_as_of_a_moment_and_refuses_changes_then(store: str) -> None:
    session = Session(store=store)
    assert session.one_shot(f"check user:alice namespace.update {NS}").startswith("DENY")
    said = session.one_shot("as of 3")
    assert said.startswith("as of log entry 3 (")
    answer = session.one_shot(f"check user:alice namespace.update {NS}").splitlines()
    assert answer[0].startswith("ALLOW") and answer[-1].startswith("(as of log entry 3, ")
    assert "user:alice" in session.one_shot(f"who namespace.update {NS}")
    assert "user:alice" in session.one_shot('?- grant(P, "ADMIN", E).')
    refused = session.run(f"grant user:zed READ {NS} as user:root")
    assert refused.error and "the past is read, never changed" in refused.text
    assert session.one_shot("as of now").startswith("back to now (log entry 8)")
    assert session.one_shot(f"check user:alice namespace.update {NS}").startswith("DENY")
    made = session.one_shot(f"grant user:zed READ {NS} as user:root").splitlines()
    assert made[-1].startswith("revision plr1_") and made[-1].endswith("(log entry 9)")
    bad = session.run("as of 77")
    assert bad.error and "log entry 77 is not in the store's log" in bad.text


def test_the_repl_keeps_its_moment_across_a_new_policy(store: str) -> None:
    session = Session(store=store)
    session.one_shot("as of 3")
    assert "loaded policy cdap-4.2" in session.one_shot("load policy cdap-4.2")
    assert session.past is not None and session.past.seq == 3 and session.past.policy.name == "cdap-4.2"
    assert session.one_shot(f"check user:alice namespace.update {NS}").startswith("ALLOW")


def test_the_repl_on_a_world_file_says_as_of_needs_a_store() -> None:
    reply = Session().run("as of 1")
    assert reply.error and "start the session on a store" in reply.text and "\n" not in reply.text


# ---- store diff ---------------------------------------------------------------------------------


def test_store_diff_names_the_change_behind_each_access(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "store", "diff", "--store", store, "--from", "2", "--to", "6", "--json")
    found = json.loads(out)
    assert code == 0 and (found["from"], found["to"], found["changes"]) == (2, 6, 4)
    by = {(g["principal"], g["operation"]): g["change"] for g in found["gained"]}
    assert by["user:alice", "namespace.update"]["seq"] == 3
    assert by["user:alice", "namespace.update"]["items"] == [["user:alice", "ADMIN", NS]]
    assert by["user:dave", "namespace.update"]["kind"] == "grant" and by["user:dave", "namespace.update"]["seq"] == 6
    assert by["user:bob", "namespace.get"]["actor"] == "user:root" and found["lost"] == []
    # alice's ADMIN was granted (#3) and revoked (#7): over 2..8 neither end knows her, so nothing of hers
    code, out, _ = run(capsys, "store", "diff", "--store", store, "--from", "2", "--to", "8", "--json")
    found = json.loads(out)
    assert {a["principal"] for a in found["gained"]} == {"user:bob"} and found["lost"] == []
    # dave is in group:g from #5 to #8; #6 gave him ADMIN through it, #8 took it: over 5..8, back where it was
    code, out, _ = run(capsys, "store", "diff", "--store", store, "--from", "5", "--to", "8", "--json")
    found = json.loads(out)
    assert found["flipped_back"] > 0 and not any(a["principal"] == "user:dave" for a in found["lost"])
    assert {a["principal"] for a in found["lost"]} == {"user:alice"}
    code, out, _ = run(capsys, "store", "diff", "--store", store, "--from", "6", "--principal", "user:dave")
    assert code == 0 and "lost    user:dave" in out and "#8 " in out and "member.remove" in out
    assert "user:alice" not in out


def test_store_diff_filters_and_refuses(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "store", "diff", "--store", store, "--from", "1", "--to", "4", "--entity", "namespace:other")
    assert code == 0 and "no access changes" in out
    code, out, err = run(capsys, "store", "diff", "--store", store, "--from", "8", "--to", "2")
    assert code == 2 and "after --to" in err
    code, out, err = run(capsys, "store", "diff", "--store", store, "--from", "2", "--to", "30")
    assert code == 2 and "log entry 30 is not in the store's log (its last entry is 8)" in err
    code, out, err = run(capsys, "store", "diff", "--store", store, "--from", "yesterday")
    assert code == 2 and "store diff: --from: a moment is a time" in err and "not `yesterday`" in err
    code, out, err = run(capsys, "store", "diff", "--store", store, "--from", "2", "--principal", "group:g")
    assert code == 2 and "give user:NAME" in err


def rows(world: World) -> tuple[object, ...]:
    return world.instance, world.entities, world.grants, world.members, world.admins


def test_store_diff_steps_are_the_history_and_its_net_is_the_what_if(store: str) -> None:
    policy = dsl.load_policy("cdap")
    with open_store(store, policy.actions, create=False) as opened:
        for entry, before, after in steps(opened, 1, 8):  # each step's worlds: the store's own history
            assert rows(after) == rows(opened.history(entry.seq).world)
            assert rows(before) == rows(opened.history(entry.seq - 1).world)
        for start, end in ((1, 8), (2, 6), (4, 8), (5, 5)):
            found = diff(opened, policy, start, end)
            reference = impact_whole(policy, opened.history(start).world, opened.history(end).world)
            assert tuple(a for a, _ in found.gained) == reference.gained, (start, end)
            assert tuple(a for a, _ in found.lost) == reference.lost, (start, end)
            for user in ("user:alice", "user:dave"):  # one user's: the changes that cannot reach it skipped
                own = diff(opened, policy, start, end, principal=user)
                assert own.gained == tuple((a, c) for a, c in found.gained if a.principal == user)
                assert own.lost == tuple((a, c) for a, c in found.lost if a.principal == user)
