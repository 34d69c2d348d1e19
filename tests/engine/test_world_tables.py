"""A world written as tables reads back as the same world, and a store's grants exported to CSV
and imported into another store are the same grants."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from privilog.engine.world import World, load_world, world_from_data, write_tables
from privilog.engine.world.tables import TablesRefused

from privilog import dsl
from privilog.store import open_store

POLICY = dsl.load_policy("cdap")
PRINCIPALS = ["user:alice", "user:bob", "group:eng", "group:ops", "role:admins"]
ENTITIES = [
    "namespace:ns1",
    "namespace:ns_2",
    "application:ns1.app",
    "program:ns1.app.service.api",
    "schedule:ns1.app.hourly",
    "dataset:ns1.orders.archive",
    "dataset_module:ns1.mod",
    "dataset_type:ns1.co.cask.App$Custom",
    "artifact:ns1.etl-lib",
    "stream:ns1.clicks",
    "securekey:ns1.db-password",
    "kerberosprincipal:svc/host@EXAMPLE.COM",
]
WILDCARDS = ["dataset:ns1.tmp_*", "program:ns1.app.*.*", "namespace:ns?"]
ADMINS = st.lists(st.sampled_from(["user:root", "group:ops", "role:admins", "user:alice"]), unique=True, max_size=3)


@st.composite
def worlds(draw: st.DrawFn) -> dict[str, Any]:
    """Entities of every type, grants (on what exists, anywhere, and patterns) and memberships."""
    on = st.sampled_from([*ENTITIES, *WILDCARDS])
    actions = st.sampled_from(["READ", "WRITE", "EXECUTE", "ADMIN", "ALL"])
    return {
        "entities": draw(st.lists(st.sampled_from(ENTITIES), unique=True, max_size=8)),
        "grants": [list(g) for g in draw(st.lists(st.tuples(st.sampled_from(PRINCIPALS), actions, on), max_size=12))],
        "members": [
            list(m)
            for m in draw(st.lists(st.tuples(st.sampled_from(PRINCIPALS), st.sampled_from(PRINCIPALS[2:])), max_size=5))
            if m[0] != m[1]
        ],
    }


def _world(data: dict[str, Any], admins: list[str]) -> World:
    return world_from_data({**data, "admins": admins}, POLICY.actions)


def _same(a: World, b: World) -> None:
    assert (a.instance, a.entities, a.grants, a.members, a.admins) == (
        b.instance,
        b.entities,
        b.grants,
        b.members,
        b.admins,
    )


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=worlds(), admins=ADMINS, fmt=st.sampled_from(["csv", "jsonl"]))
def test_a_world_written_as_tables_reads_back_the_same(
    tmp_path_factory: pytest.TempPathFactory, data: dict[str, Any], admins: list[str], fmt: str
) -> None:
    world = _world(data, admins)
    folder = tmp_path_factory.mktemp("tables") / "world"
    written = write_tables(world, folder, fmt)
    assert sorted(p.name for p in written) == sorted(f"{t}.{fmt}" for t in ("entities", "grants", "members", "admins"))
    _same(load_world(str(folder), POLICY.actions), world)


def test_parquet_tables_read_back_the_same(tmp_path: Path) -> None:
    world = load_world("privilog/samples/world.yaml", POLICY.actions)
    write_tables(world, tmp_path / "pq", "parquet")
    _same(load_world(str(tmp_path / "pq"), POLICY.actions), world)


def test_grants_exported_to_csv_and_imported_into_another_store_are_unchanged(tmp_path: Path) -> None:
    world = load_world("privilog/samples/world.yaml", POLICY.actions)
    world.grants.update(_world({"grants": [["group:eng", "EXECUTE", "program:sales.etl.*.*"]]}, []).grants)
    with open_store(str(tmp_path / "a.db"), POLICY.actions, create=True) as first:
        first.import_world(world, "local:test")
        exported, _ = first.snapshot()
    write_tables(exported, tmp_path / "csv", "csv")
    with open_store(str(tmp_path / "b.db"), POLICY.actions, create=True) as second:
        second.import_world(load_world(str(tmp_path / "csv"), POLICY.actions), "local:test")
        again, _ = second.snapshot()
    assert again.grants == exported.grants == world.grants
    _same(again, exported)


def test_what_tables_cannot_hold_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    owned = load_world("privilog/samples/world.yaml", POLICY.actions)
    owned.instance = "prod"
    with pytest.raises(TablesRefused, match="instance: prod"):
        write_tables(owned, tmp_path / "out", "csv")
    assert not (tmp_path / "out").exists() and list(tmp_path.iterdir()) == []
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    with pytest.raises(TablesRefused, match="already there"):
        write_tables(World(), tmp_path / "full", "csv")
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["keep.txt"]
