"""Hostile world files and changes (issue 18): refused with a located one-line error, never an allow."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from privilog.dsl.errors import PrivilogError
from privilog.dsl.files import POLICY_BYTES_VAR, WORLD_BYTES_VAR
from privilog.engine.ids import EntityId, IdError
from privilog.engine.world import Grant, NotAnAdmin, World, WorldError, load_world, parse_world, save_world
from privilog.engine.world.formats import Unreadable, load_document

import privilog

ACTIONS = ("READ", "WRITE", "EXECUTE", "ADMIN")


def one_line(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text and "Traceback" not in text
    return text


# ---- 1. keys written twice ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("admins: [user:root]\nadmins: [user:eve]\n", "w.yaml:2:1"),
        ("grants:\n  - [user:a, READ, namespace:ns1]\ngrants:\n  - [user:b, READ, namespace:ns1]\n", "w.yaml:3:1"),
        ('{"admins": ["user:root"], "admins": ["user:eve"]}', "w.yaml:1:27"),
        ("grants:\n  - {principal: user:a, principal: user:eve, action: READ, entity: namespace:ns1}\n", "w.yaml:2:25"),
        ("grants:\n  - principal: user:a\n    action: READ\n    action: ADMIN\n    entity: namespace:ns1\n", "w.yaml:4:5"),
        ("admins: [user:root]\n# \u00e9\nadmins: [user:eve]\n", "w.yaml:3:1"),  # not ASCII: libyaml's path
    ],
)
def test_a_key_written_twice_is_an_error_naming_its_line(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(WorldError) as caught:
        load_world(path, ACTIONS)
    assert one_line(caught.value).startswith(f"{path.parent}/{where}: the key ")
    assert "written twice" in str(caught.value)


def test_every_fast_reader_gives_up_on_a_key_written_twice() -> None:
    for text in ('{"a": 1, "a": 2}', "a: [x]\na: [y]\n", "a: [x]\n# \u00e9\na: [y]\n", "a: [{b: x, b: y}]\n"):
        with pytest.raises(Unreadable):
            load_document(text)


def test_a_scenario_with_a_key_written_twice_is_refused(tmp_path: Path) -> None:
    from privilog.testing.scenario import run_scenarios

    path = tmp_path / "s.yaml"
    path.write_text(
        "policy: cdap\ncases:\n  - request: {principal: user:a, operation: namespace.get, entity: namespace:ns1}\n"
        "    expect: deny\n    expect: allow\n"
    )
    run = run_scenarios([path])  # the file cannot be run: its one error, located, and no case run
    (result,) = run.results
    assert result.error and run.errors == 1
    assert re.search(r"s\.yaml:5:5: the key `expect` is written twice", result.detail)


# ---- 2. anchors and aliases ----------------------------------------------------------------


def billion_laughs(levels: int = 7) -> str:
    lines = ['a0: &a0 ["user:x"]']
    for n in range(1, levels):
        lines.append(f"a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 10) + "]")
    return "\n".join(lines) + f"\nentities: *a{levels - 1}\n"


def test_anchors_and_aliases_are_refused_before_they_expand(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(billion_laughs())
    assert path.stat().st_size < 1000
    with pytest.raises(WorldError, match=r"w\.yaml:1:\d+: an anchor \(&\) `a0`: anchors and aliases are not allowed"):
        load_world(path, ACTIONS)


def test_an_alias_alone_is_refused_where_it_is(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text('admins: [user:root]\ngrants: [[user:a, READ, *x]]\n')
    with pytest.raises(WorldError, match=r"w\.json:2:25: an alias \(\*\) `x`"):
        load_world(path, ACTIONS)


# ---- 3. what is read, and how much ----------------------------------------------------------


def test_a_device_a_fifo_and_a_folder_are_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "world.yaml"
    os.mkfifo(fifo)
    with pytest.raises(WorldError, match="not a regular file"):
        load_world(fifo, ACTIONS)  # never blocks: opened without waiting for a writer
    with pytest.raises(WorldError, match="not a regular file"):
        load_world("/dev/zero", ACTIONS)
    table = tmp_path / "t" / "grants.csv"
    table.parent.mkdir()
    os.mkfifo(table)
    with pytest.raises(WorldError, match="not a regular file"):
        load_world(table.parent, ACTIONS)


def test_a_world_larger_than_the_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("admins: [user:root]\n" + "# padding\n" * 100)
    monkeypatch.setenv(WORLD_BYTES_VAR, "100")
    with pytest.raises(WorldError, match=f"larger than privilog reads .*set {WORLD_BYTES_VAR} to raise it"):
        load_world(path, ACTIONS)
    monkeypatch.setenv(WORLD_BYTES_VAR, "10000")
    assert load_world(path, ACTIONS).admins == {"user:root"}


def test_a_policy_larger_than_the_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from privilog import dsl

    path = tmp_path / "p.policy"
    path.write_text("policy p\nactions READ\nentity namespace\n" + "# padding\n" * 100)
    monkeypatch.setenv(POLICY_BYTES_VAR, "100")
    with pytest.raises(PrivilogError, match=f"set {POLICY_BYTES_VAR} to raise it"):
        dsl.load_policy(str(path))


# ---- 4. instance names, and text that is not UTF-8 -------------------------------------------


@pytest.mark.parametrize("name", ["a b\u0000:../x", "", "x:y", "../x", "a b"])
def test_an_instance_name_is_validated_as_ids_are(tmp_path: Path, name: str) -> None:
    import json

    for text in (json.dumps({"instance": name}), f"instance: {json.dumps(name)}\n"):
        with pytest.raises(WorldError, match=r"w\.yaml:1:\d+: malformed instance name"):
            parse_world(text, ACTIONS, str(tmp_path / "w.yaml"))


def test_a_world_that_is_not_utf8_names_the_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_bytes(b"admins: [user:root]\ngrants:\n  - [user:\xe9a, READ, namespace:ns1]\n")
    with pytest.raises(WorldError) as caught:
        load_world(path, ACTIONS)
    assert one_line(caught.value).startswith(f"{path}:3:11: the world is not UTF-8 text")


# ---- 6. entities change only through an admin ------------------------------------------------


def test_entities_are_added_and_deleted_only_by_an_admin() -> None:
    authz = privilog.load("cdap", {"entities": ["namespace:ns1"], "admins": ["user:root"]})
    with pytest.raises(NotAnAdmin, match="user:eve is not an authorization admin, so cannot change entities"):
        authz.add_entity("user:eve", EntityId.parse("namespace:ns2"))
    with pytest.raises(NotAnAdmin):
        authz.delete_entity("user:eve", EntityId.parse("namespace:ns1"))
    with pytest.raises(NotAnAdmin):
        authz.world.delete_entity("user:eve", EntityId.parse("namespace:ns1"))
    assert {str(e) for e in authz.world.entities} == {"namespace:ns1"}
    authz.add_entity("user:root", EntityId.parse("namespace:ns2"))
    assert authz.delete_entity("user:root", EntityId.parse("namespace:ns1")) == {EntityId.parse("namespace:ns1")}


# ---- 7. what privilog writes, it reads back ---------------------------------------------------


def test_the_write_path_validates_what_the_read_path_requires(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("admins: [user:root]\n")
    world = load_world(path, ACTIONS, bind=True)
    with pytest.raises(IdError):
        EntityId("namespace", "x y")
    with pytest.raises(IdError):
        world.grant("user:root", [Grant("user:e v\nil", "ADMIN", EntityId.parse("namespace:x"))])
    with pytest.raises(IdError):
        world.grant("user:root", [Grant("user:eve", "SUPER", EntityId.parse("namespace:x"))])
    with pytest.raises(IdError):
        world.add_members("user:root", [("user:eve", "group:a b")])
    assert load_world(path, ACTIONS).grants == set()


_text = st.text(st.characters(codec="utf-8"), max_size=12)
_grants = st.builds(
    lambda kind, name, action, etype, ename: (f"{kind}:{name}", action, etype, ename),
    st.sampled_from(["user", "group", "role", "bad"]),
    st.one_of(_text, st.from_regex(r"[a-z][a-z0-9_.@-]{0,6}", fullmatch=True)),
    st.one_of(st.sampled_from([*ACTIONS, "ALL", "read"]), _text),
    st.sampled_from(["namespace", "dataset", "program", "instance", "kerberosprincipal", "nope"]),
    st.one_of(_text, st.from_regex(r"[a-z0-9_]{1,4}(\.[a-z0-9_]{1,4}){0,3}", fullmatch=True)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_grants, max_size=6))
def test_whatever_world_grant_accepts_round_trips(tmp_path: Path, raw: list[tuple[str, str, str, str]]) -> None:
    path = tmp_path / "w.yaml"
    world = World(admins={"user:root"}, actions=ACTIONS, path=path)
    for principal, action, etype, ename in raw:
        try:
            grant = Grant(principal, action, EntityId(etype, ename))
            world.grant("user:root", [grant])
        except PrivilogError as error:
            one_line(error)
    save_world(world, path)
    again = load_world(path, ACTIONS)
    assert again.grants == world.grants and again.admins == world.admins


# ---- 8. saving keeps links, modes and owners ------------------------------------------------


def test_saving_through_a_symlink_keeps_the_link_and_the_mode(tmp_path: Path) -> None:
    real = tmp_path / "real.yaml"
    real.write_text("admins: [user:root]\n")
    real.chmod(0o640)
    link = tmp_path / "link.yaml"
    link.symlink_to(real)
    world = load_world(link, ACTIONS, bind=True)
    world.grant("user:root", [Grant("user:a", "READ", EntityId.parse("namespace:ns1"))])
    assert link.is_symlink()
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert load_world(real, ACTIONS).grants == world.grants
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.yaml", "real.yaml", "real.yaml.lock"]


def test_a_new_world_file_gets_the_umask_mode(tmp_path: Path) -> None:
    mask = os.umask(0o022)
    try:
        save_world(World(), tmp_path / "new.yaml")
    finally:
        os.umask(mask)
    assert stat.S_IMODE((tmp_path / "new.yaml").stat().st_mode) == 0o644


# ---- fuzz: crafted world files are refused, never an allow ------------------------------------

_PRINCIPALS = st.sampled_from(["user:eve", "user:root", "group:g"])
_ENTITIES = st.sampled_from(["namespace:ns1", "dataset:ns1.ds", "instance:cdap"])
_GRANT_LINES = st.lists(
    st.tuples(_PRINCIPALS, st.sampled_from([*ACTIONS, "ALL"]), _ENTITIES).map(lambda g: f"  - [{g[0]}, {g[1]}, {g[2]}]"),
    max_size=3,
)
_KEYS = st.sampled_from(["admins", "grants", "entities", "members", "instance"])


def _block(key: str, grants: list[str]) -> str:
    return {
        "admins": "admins: [user:root]",
        "grants": "\n".join(["grants:", *grants]) if grants else "grants: []",
        "entities": "entities: [namespace:ns1]",
        "members": "members: [[user:eve, group:g]]",
        "instance": "instance: cdap",
    }[key]


def _never_allows(path: Path) -> None:
    """Loading ``path`` is refused with a one-line located error: nothing is decided from it."""
    with pytest.raises(PrivilogError) as caught:
        authz = privilog.load("cdap", str(path))
        authz.check(authz.request("user:eve", "namespace.delete", "namespace:ns1"))
    one_line(caught.value)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_KEYS, min_size=1, max_size=4, unique=True), _GRANT_LINES, st.data(), st.booleans())
def test_fuzz_a_key_written_twice_anywhere(
    tmp_path: Path, keys: list[str], grants: list[str], data: st.DataObject, as_json: bool
) -> None:
    twice = data.draw(st.sampled_from(keys), label="twice")
    blocks = [_block(k, grants) for k in keys]
    at = data.draw(st.integers(0, len(blocks)), label="at")
    blocks.insert(at, _block(twice, ["  - [user:eve, ADMIN, namespace:ns1]"]))
    path = tmp_path / "w.yaml"
    if as_json:
        import json

        items = [f'"{k}": {json.dumps(["user:root"] if k != "instance" else "cdap")}' for k in keys]
        items.insert(at, f'"{twice}": ' + ('"cdap"' if twice == "instance" else '["user:eve"]'))
        path.write_text("{" + ", ".join(items) + "}")
    else:
        path.write_text("\n".join(blocks) + "\n")
    _never_allows(path)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_KEYS, st.sampled_from(["anchor", "alias", "both", "merge"]), st.from_regex(r"[a-z]{1,6}", fullmatch=True))
def test_fuzz_anchors_and_aliases_anywhere(tmp_path: Path, key: str, kind: str, name: str) -> None:
    value = {"instance": "cdap", "grants": "[[user:eve, ADMIN, namespace:ns1]]"}.get(key, "[user:eve]")
    text = {
        "anchor": f"{key}: &{name} {value}\n",
        "alias": f"{key}: *{name}\n",
        "both": f"{key}: &{name} {value}\nadmins: *{name}\n" if key != "admins" else f"{key}: &{name} {value}\ngrants: *{name}\n",
        "merge": f"{key}: {value}\ngrants:\n  - {{<<: {{principal: user:eve}}, action: ADMIN, entity: namespace:ns1}}\n",
    }[kind]
    path = tmp_path / "w.yaml"
    path.write_text(text)
    _never_allows(path)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["fifo", "zero", "folder", "large"]), st.integers(10, 200))
def test_fuzz_oversized_and_irregular_files(
    tmp_path_factory: pytest.TempPathFactory, kind: str, cap: int
) -> None:
    where = tmp_path_factory.mktemp("w")
    path = where / "world.yaml"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        path = Path("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    else:
        path.write_text("admins: [user:root]\n" + "#\n" * cap)
    old = os.environ.get(WORLD_BYTES_VAR)
    os.environ[WORLD_BYTES_VAR] = str(cap)
    try:
        _never_allows(path)
    finally:
        if old is None:
            del os.environ[WORLD_BYTES_VAR]
        else:
            os.environ[WORLD_BYTES_VAR] = old


@pytest.mark.parametrize("name", ["grants.csv", "grants.jsonl"])
def test_a_table_that_is_not_utf8_names_the_line_and_column(tmp_path: Path, name: str) -> None:
    header = b"principal,action,entity\n" if name.endswith(".csv") else b""
    row = b"user:a,READ,namespace:ns1\n" if name.endswith(".csv") else b'{"principal": "user:a", "action": "READ", "entity": "namespace:ns1"}\n'
    path = tmp_path / name
    path.write_bytes(header + row * 3 + b"user:\xff" + row)
    with pytest.raises(WorldError) as caught:
        load_world(path, ACTIONS)
    line = 5 if header else 4
    assert one_line(caught.value).startswith(f"{path}:{line}:6: the grants table is not UTF-8 text")
