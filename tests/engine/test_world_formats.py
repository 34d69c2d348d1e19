"""World formats: YAML and JSON read fast (the same World, the same errors as the located reader),
tables (CSV, JSON lines, Parquet) with the columns the pipeline reads, and bad rows named by file and line."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from privilog.engine.world import World, WorldError, load_world, parse_located, parse_world, save_world
from privilog.engine.world.formats import _NotSimple, _Subset, load_document
from privilog.engine.world.readers import _PlainReader

from privilog.cli import main

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "privilog" / "samples" / "world.yaml"
ACTIONS = ("READ", "WRITE", "EXECUTE", "ADMIN")


def outcome(read: Any) -> World | str:
    """The world read, or the message of the error it raised."""
    try:
        return read()
    except WorldError as error:
        return f"error: {error}"


def same_either_way(text: str, file: str = "w.yaml") -> World | str:
    """Read ``text`` fast and with positions; both give the same world or the same message."""
    fast = outcome(lambda: parse_world(text, ACTIONS, file))
    slow = outcome(lambda: parse_located(text, ACTIONS, file))
    assert fast == slow
    return fast


def read_plain(text: str) -> World:
    """The fast path alone: it must take ``text`` without falling back."""
    return _PlainReader(ACTIONS).read(load_document(text), None)


# ---- YAML and JSON: the fast path and the located path agree ----------------------------


def test_the_sample_world_is_read_fast_and_the_same() -> None:
    text = SAMPLE.read_text()
    assert read_plain(text) == parse_located(text, ACTIONS) == load_world(SAMPLE, ACTIONS)
    data = yaml.safe_load(text)
    assert read_plain(json.dumps(data)) == read_plain(json.dumps(data, indent=2)) == parse_located(text, ACTIONS)


def scenario_worlds() -> list[tuple[str, Any]]:
    found = []
    for path in sorted((ROOT / "tests").rglob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        cases = data.get("cases", []) if isinstance(data, dict) else []
        worlds = [data.get("world")] + [c.get("world") for c in cases if isinstance(c, dict)]
        found += [(f"{path.name}:{i}", w) for i, w in enumerate(worlds) if isinstance(w, dict)]
    return found


@pytest.mark.parametrize(("name", "data"), scenario_worlds(), ids=lambda v: v if isinstance(v, str) else "")
def test_test_worlds_read_the_same_both_ways(name: str, data: dict[str, Any]) -> None:
    for text in (yaml.safe_dump(data), yaml.safe_dump(data, default_flow_style=None), json.dumps(data)):
        assert read_plain(text) == parse_located(text, ACTIONS)


def test_a_saved_generated_world_reads_back_fast(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import worldgen
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    world = worldgen.generate(2000, seed=3).world
    save_world(world, tmp_path / "w.yaml")
    text = (tmp_path / "w.yaml").read_text()
    assert read_plain(text) == parse_located(text, ACTIONS) == world
    assert read_plain(json.dumps(world.to_data())) == world


TEXTS = [
    "",
    "# only a comment\n",
    "grants:\n",
    "grants: []\nentities: ~\nmembers: null\n",
    "instance: prod\nentities: [namespace:ns1, 'dataset:ns1.a.b', \"stream:ns1.s\"]\n",
    "entities: ['namespace:ns1',\n  'namespace:ns2', ]   # trailing comma\n",
    "entities: [\n  namespace:ns1, # first\n  namespace:ns2\n]\n",
    "grants:\n- [user:a, READ, namespace:ns1]\n- [user:b, ALL, 'dataset:ns1.d']\n",
    "grants:\n  - [user:a, READ, namespace:ns1]   # why\n\n  # between\n  - [user:a, [READ, WRITE], namespace:ns1]\n",
    "grants:\n  - {principal: group:g, actions: [READ], entity: dataset:ns1.d}\n"
    "  - {principal: user:a, action: ADMIN, entity: namespace:ns1}\n",
    "grants:\n  - {principal: user:a, actions: [], entity: namespace:ns1}\n",
    "members:\n  - [user:a, group:g]\n  - {principal: group:g, group: role:r}\n",
    "admins: [user:root]\n",
    "admins:\n- user:root\n- 'group:admins'\n",
    "grants:\r\n- [user:a, READ, namespace:ns1]\r\n",
    "\ufeffgrants:\n- [user:a, READ, namespace:ns1]\n",
    "grants:\n\t- [user:a, READ, namespace:ns1]\n",
    "grants:\n- [user:a, READ, namespace:ns1]\n  - [user:b, READ, namespace:ns1]\n",
    "grants:\n  - [user:a, READ, namespace:ns1]\n - [user:b, READ, namespace:ns1]\n",
    "grants:\n- [user:a, READ]\n",
    "grants:\n- [user:a, REED, namespace:ns1]\n",
    "grants:\n- [user:a, READ, namespace:ns1, extra]\n",
    "grants:\n- {principal: user:a, entity: namespace:ns1}\n",
    "grants:\n- {principal: user:a, actions: null, entity: namespace:ns1}\n",
    "grants:\n- {principal: user:a, actions: READ, entity: namespace:ns1, why: x}\n",
    "grants:\n- [user:a, [READ, 1], namespace:ns1]\n",
    "grants:\n- [root, READ, namespace:ns1]\n",
    "grants:\n- [user:a, READ, 'namespace:ns 1']\n",
    "grants:\n- [user:a, yes, namespace:ns1]\n",
    "grants:\n- - user:a\n  - READ\n  - namespace:ns1\n",
    "grants:\n- principal: user:a\n  action: READ\n  entity: namespace:ns1\n",
    "base: &g [user:a, READ, namespace:ns1]\n",
    "grants:\n- &g [user:a, READ, namespace:ns1]\n- *g\n",
    "<<: {grants: [[user:a, READ, namespace:ns1]]}\n",
    "grants:\n- {<<: {principal: user:a}, action: READ, entity: namespace:ns1}\n",
    "grantz: []\n",
    "true: []\n",
    "'grants': [[user:a, READ, namespace:ns1]]\n",
    "grants: [[user:a, READ, namespace:ns1]]\ngrants: []\n",
    "{grants: [[user:a, READ, namespace:ns1]]}\n",
    "- 1\n",
    "just text\n",
    "instance: 12\n",
    "instance: 'two words'\n",
    "instance: caf\u00e9\n",
    "entities: namespace:ns1\n",
    "entities: [namespace:ns1\n",
    "entities: [namespace:ns1,, namespace:ns2]\n",
    "entities: [namespace:ns1 namespace:ns2]\n",
    "entities: [namespace:ns1]]\n",
    "entities: ['it''s:x']\n",
    "entities: [\"namespace:\\x41\"]\n",
    "entities:\n- namespace:ns1\nnot a key\n",
    "members: [[user:a, group:g], [user:a]]\n",
    "members:\n- [user:a, group:g, role:r]\n",
    "---\ngrants: []\n",
    "grants: []\n...\n",
    '{"grants": [["user:a", "READ", "namespace:ns1"]], "admins": ["user:root"]}',
    '{"grants": [["user:a", "READ", "namespace:ns1"]],\n\t"admins": ["user:root"]}',
    '{"instance": "\\u00e9", "grants": []}',
    '{"grants": [["user:a", "READ", "namespace:ns1"]], "grants": []}',
    '{"entities": [1e5]}',
    '{"grants": [["user:a", "READ", "namespace:ns1"]]',
]


@pytest.mark.parametrize("text", TEXTS)
def test_fast_and_located_reading_agree(text: str) -> None:
    same_either_way(text)


# Where libyaml reads what PyYAML's own reader refuses: the fast path must not take these.
DIVERGENT = [
    "instance: |#c\n",
    "instance: >#c\n",
    "grants:\n\t- [user:a, READ, namespace:ns1]\n",
    '{"grants": [["user:a", "READ", "namespace:ns1"]],\n\t"admins": ["user:root"]}',
    "instance: cdap\n\ufeffadmins: [user:root]\n",
    "instance: cdap\x85admins: [user:root]\n",
    "entities: [\r~? ]\n",
]


@pytest.mark.parametrize("text", DIVERGENT)
def test_where_libyaml_differs_the_located_reader_decides(text: str) -> None:
    same_either_way(text)


def test_valid_plain_worlds_take_the_fast_path() -> None:
    for text in TEXTS[:16]:
        assert read_plain(text) == parse_located(text, ACTIONS), text


def test_errors_found_fast_are_placed_by_the_located_reader() -> None:
    assert same_either_way("grants:\n  - [user:a, REED, namespace:ns1]\n") == (
        "error: w.yaml:2:14: unknown action `REED`: did you mean `READ`?"
    )
    assert same_either_way('{"admins": ["root"]}', "w.json").startswith("error: w.json:1:13: malformed principal")


# Random texts in and around the subset the scanner reads: whatever it reads, PyYAML reads the same.
_PIECES = [
    "grants:", "entities:", "admins:", "instance:", "x:", " ", "  ", "\n", "\n", "\n  ", "- ", "-", "[", "]",
    "{", "}", ", ", ",", ": ", "#c", " # c", "'", "''", '"', "user:a", "namespace:ns1", "READ", "ALL", "a b",
    "null", "~", "yes", "1", "1:20", "0x1f", "2024-01-01", "'x:y'", '"q"', "'it''s'", "&a ", "*a", "!!str ",
    "? ", "|", ">", "|#c", "%", "@", "`", "\t", "\r\n", "\r", "...", "---", "a:b:", "-x", "<<: ", "\x85",
    "\u2028", "\ufeff", "\xa0", "\u00e9", "\\",
]


@settings(max_examples=400, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_PIECES), max_size=24))
def test_what_the_subset_reads_yaml_reads_the_same(pieces: list[str]) -> None:
    text = "".join(pieces)
    try:
        mine = _Subset(text).document()
    except _NotSimple:
        return
    assert mine == yaml.safe_load(text)


@pytest.mark.parametrize("text", [t for t in TEXTS if not t.startswith("{")])
def test_the_subset_reads_as_yaml_does(text: str) -> None:
    try:
        mine = _Subset(text).document()
    except _NotSimple:
        return
    assert mine == yaml.safe_load(text)


def test_a_mapping_is_read_without_writing_yaml() -> None:
    import privilog

    data = {"grants": [["user:a", "ALL", "namespace:ns1"]], "members": [{"principal": "user:b", "group": "group:g"}]}
    assert privilog.load("cdap", data).world == parse_located(yaml.safe_dump(data), ACTIONS)
    with pytest.raises(WorldError) as raised:
        privilog.load("cdap", {"grants": [["user:a", "READ"]]})
    assert str(raised.value) == "<world>:2:3: a grant is [PRINCIPAL, ACTION, ENTITY]"


# ---- tables ---------------------------------------------------------------------------------


def sample_tables(world: World) -> dict[str, list[tuple[str, ...]]]:
    data = world.to_data()
    return {
        "entities": [(e,) for e in data["entities"]],
        "grants": [tuple(g) for g in data["grants"]],
        "members": [tuple(m) for m in data["members"]],
        "admins": [(a,) for a in data["admins"]],
    }


COLUMNS = {
    "entities": ("entity",),
    "grants": ("principal", "action", "entity"),
    "members": ("principal", "group"),
    "admins": ("principal",),
}


def write_csv(path: Path, columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(columns)
        writer.writerows(rows)


def write_jsonl(path: Path, columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    path.write_text("".join(json.dumps(dict(zip(columns, r, strict=True))) + "\n" for r in rows))


@pytest.fixture
def sample() -> World:
    return load_world(SAMPLE, ACTIONS)


@pytest.mark.parametrize(("suffix", "write"), [(".csv", write_csv), (".jsonl", write_jsonl), (".json", write_jsonl)])
def test_a_folder_of_tables_is_the_same_world(tmp_path: Path, sample: World, suffix: str, write: Any) -> None:
    for table, rows in sample_tables(sample).items():
        write(tmp_path / f"{table}{suffix}", COLUMNS[table], rows)
    (tmp_path / f"requests{suffix}").write_text("not a world table, not read\n")
    world = load_world(tmp_path, ACTIONS)
    assert (world.entities, world.grants, world.members, world.admins) == (
        sample.entities,
        sample.grants,
        sample.members,
        sample.admins,
    )


def test_tables_as_written_by_privilog_generate(tmp_path: Path) -> None:
    from privilog.pipeline.generate import generate

    generate(tmp_path, entities=60, grants=80, requests=5, seed=2)
    world = load_world(tmp_path, ACTIONS)
    rows = list(csv.DictReader((tmp_path / "grants.csv").read_text().splitlines()))
    expanded = sum(4 if r["action"] == "ALL" else 1 for r in rows)
    assert 0 < len(world.grants) <= expanded
    assert len(world.entities) == len((tmp_path / "entities.csv").read_text().splitlines()) - 1


def test_spark_style_folders_of_parts_and_one_table_file(tmp_path: Path) -> None:
    (tmp_path / "grants").mkdir()
    write_csv(tmp_path / "grants" / "part-0000.csv", COLUMNS["grants"], [("user:a", "READ", "namespace:ns1")])
    write_csv(tmp_path / "grants" / "part-0001.csv", COLUMNS["grants"], [("user:b", "ALL", "dataset:ns1.d")])
    (tmp_path / "grants" / "_SUCCESS").write_text("")
    world = load_world(tmp_path, ACTIONS)
    assert len(world.grants) == 5
    single = tmp_path / "one" / "grants.csv"
    single.parent.mkdir()
    write_csv(single, ("entity", "action", "principal", "note"), [("namespace:ns1", "READ", "user:a", "extra")])
    assert {str(g) for g in load_world(single, ACTIONS).grants} == {"user:a READ namespace:ns1"}


def test_csv_columns_may_come_in_any_order_and_quoted(tmp_path: Path) -> None:
    (tmp_path / "grants.csv").write_text('entity,principal,action\n"dataset:ns1.a,b",user:a,READ\n')
    with pytest.raises(WorldError, match=r"grants\.csv:2: malformed dataset id"):
        load_world(tmp_path, ACTIONS)


BAD_ROWS = [
    ("grants.csv", "principal,action,entity\nuser:a,READ,namespace:ns1\nbob,READ,namespace:ns1\n",
     "grants.csv:3: malformed principal `bob`: expected user:NAME, group:NAME or role:NAME; did you mean `user:bob`?"),
    ("grants.csv", "principal,action,entity\n\nuser:a,REED,namespace:ns1\n",
     "grants.csv:3: unknown action `REED`: did you mean `READ`?"),
    ("grants.csv", "principal,action,entity\nuser:a,READ,\n", "grants.csv:2: the `entity` column is empty"),
    ("grants.csv", "principal,action,entity\nuser:a,READ\n",
     "grants.csv:2: a row of 3 fields (principal, action, entity) has 2: user:a,READ"),
    ("grants.csv", "principal,entity\nuser:a,namespace:ns1\n",
     "grants.csv: the grants table needs the columns principal, action, entity; missing action "
     "(found principal, entity)"),
    ("entities.csv", 'entity\nnamespace:ns1\n"dataset:ns1.x\n', "entities.csv:3: not valid CSV"),
    ("members.jsonl", '{"principal": "user:a", "group": "group:g"}\n{"principal": "user:a"}\n',
     "members.jsonl:2: a row of the members table needs `group`"),
    ("members.jsonl", '{"principal": "user:a", "group": 7}\n', "members.jsonl:1: the `group` column must be text, not 7"),
    ("admins.jsonl", '{"principal": "user:a"}\n{"principal": \n', "admins.jsonl:2:15: not valid JSON: Expecting value"),
    ("admins.jsonl", '["user:a"]\n', "admins.jsonl:1: a row is a JSON object with the keys principal"),
    ("entities.jsonl", '{"entity": "namespce:ns1"}\n',
     "entities.jsonl:1: unknown entity type `namespce` in `namespce:ns1`: did you mean `namespace`?"),
]


@pytest.mark.parametrize(("name", "text", "message"), BAD_ROWS)
def test_a_bad_row_is_one_error_with_file_and_line(tmp_path: Path, name: str, text: str, message: str) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(WorldError) as raised:
        load_world(tmp_path, ACTIONS)
    assert str(raised.value).removeprefix(f"{tmp_path}/").startswith(message)


def test_folders_without_tables_and_tables_twice(tmp_path: Path) -> None:
    with pytest.raises(WorldError, match="no world tables here"):
        load_world(tmp_path, ACTIONS)
    write_csv(tmp_path / "grants.csv", COLUMNS["grants"], [])
    write_jsonl(tmp_path / "grants.jsonl", COLUMNS["grants"], [])
    with pytest.raises(WorldError, match=r"the grants table is written twice \(grants.csv, grants.jsonl\)"):
        load_world(tmp_path, ACTIONS)
    other = tmp_path / "x" / "acls.csv"
    other.parent.mkdir()
    other.write_text("principal\n")
    with pytest.raises(WorldError, match="a world table is named after its table"):
        load_world(other, ACTIONS)
    with pytest.raises(WorldError, match="a world of tables is not changed in place"):
        load_world(tmp_path / "x", ACTIONS, bind=True)


def test_parquet_without_pyarrow_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    (tmp_path / "grants.parquet").write_bytes(b"PAR1")
    with pytest.raises(WorldError, match=r"grants\.parquet: reading a Parquet table needs pyarrow.*pip install .privilog\[parquet\]"):
        load_world(tmp_path, ACTIONS)


def test_parquet_tables(tmp_path: Path, sample: World) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    for table, rows in sample_tables(sample).items():
        columns = list(zip(*rows, strict=True)) if rows else [[] for _ in COLUMNS[table]]
        pq.write_table(pa.table(dict(zip(COLUMNS[table], columns, strict=True))), tmp_path / f"{table}.parquet")
    world = load_world(tmp_path, ACTIONS)
    assert (world.entities, world.grants, world.members) == (sample.entities, sample.grants, sample.members)
    pq.write_table(pa.table({"principal": ["user:a", None], "group": ["group:g", "group:h"]}), tmp_path / "members.parquet")
    with pytest.raises(WorldError) as raised:
        load_world(tmp_path, ACTIONS)
    assert str(raised.value) == f"{tmp_path / 'members.parquet'}: row 2: the `principal` column is empty"


def test_the_cli_reads_tables_and_exits_2_on_a_bad_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_csv(tmp_path / "grants.csv", COLUMNS["grants"], [("user:bob", "READ", "dataset:sales.orders")])
    write_csv(tmp_path / "entities.csv", COLUMNS["entities"], [("dataset:sales.orders",)])
    assert main(["check", "user:bob", "dataset.read", "dataset:sales.orders", "--world", str(tmp_path)]) == 0
    assert main(["check", "user:eve", "dataset.read", "dataset:sales.orders", "--world", str(tmp_path)]) == 1
    capsys.readouterr()
    write_csv(tmp_path / "grants.csv", COLUMNS["grants"], [("user:bob", "READ", "dataset:sales")])
    assert main(["check", "user:bob", "dataset.read", "dataset:sales.orders", "--world", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == f"privilog: {tmp_path / 'grants.csv'}:2: malformed dataset id `dataset:sales`: expected the form `dataset:ns1.sales`\n"
