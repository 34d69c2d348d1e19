"""Who owns an entity (a world's `owners:`, read as `owned_by(ENTITY, OWNER)`): cdap-5.1 lets a
namespace's owner list and read it without a grant (issue 16, behaviour 4)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from privilog.engine.authorizer import Authorizer
from privilog.engine.world import WorldError, load_world

from privilog import dsl
from privilog.api import load_world_for

BACKENDS = ["compiled", "pydatalog"]
OWNED = {
    "entities": ["namespace:ns1", "namespace:ns2"],
    "owners": {"namespace:ns1": "kerberosprincipal:alice@EXAMPLE.COM"},
    "grants": [["user:bob@EXAMPLE.COM", "READ", "namespace:ns2"]],
}


def authorizer(world: dict[str, object], backend: str = "compiled", policy: str = "cdap-5.1") -> Authorizer:
    checked = dsl.load_policy(policy)
    return Authorizer(checked, load_world_for(checked, world), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_owner_lists_and_reads_its_namespace_without_a_grant(backend: str) -> None:
    authz = authorizer(OWNED, backend)
    alice = "user:alice@EXAMPLE.COM"
    assert [str(v.entity) for v in authz.visible(alice, "namespace")] == ["namespace:ns1"]
    decision = authz.check(authz.request(alice, "namespace.get", "namespace:ns1"))
    assert decision.allowed and decision.outcomes[0].by == ("own_namespace",)
    assert not authz.decide(authz.request(alice, "namespace.get", "namespace:ns2"))
    assert not authz.decide(authz.request(alice, "namespace.delete", "namespace:ns1")), "owning is no ADMIN"
    assert not authz.decide(authz.request("user:alice", "namespace.get", "namespace:ns1")), "the same name exactly"
    assert [str(v.entity) for v in authz.visible("user:bob@EXAMPLE.COM", "namespace")] == ["namespace:ns2"]
    documented = authorizer(OWNED, backend, "cdap")  # the documents know no owner
    assert not documented.decide(documented.request(alice, "namespace.get", "namespace:ns1"))


def test_owners_round_trip_through_a_world_file(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(
        "entities: [namespace:ns1]\nowners:\n  namespace:ns1: kerberosprincipal:alice@EXAMPLE.COM\n", encoding="utf-8"
    )
    world = load_world(path, ("READ", "ADMIN"))
    assert {str(e): str(o) for e, o in world.owners.items()} == {"namespace:ns1": "kerberosprincipal:alice@EXAMPLE.COM"}
    assert world.to_data()["owners"] == {"namespace:ns1": "kerberosprincipal:alice@EXAMPLE.COM"}


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("owners: [namespace:ns1]", "`owners` is a mapping of ENTITY to its owner's id"),
        ("owners: {'namespace:': kerberosprincipal:a@X}", "w.yaml:1:24: an owned entity: malformed namespace id"),
        ("owners: {namespace:ns1: alice}", "w.yaml:1:25: malformed entity id `alice`"),
        ("owners: {namespace:ns1: [kerberosprincipal:a@X]}", "an entity id must be text"),
    ],
)
def test_a_bad_owner_is_refused_in_one_line_with_its_place(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(text + "\n", encoding="utf-8")
    with pytest.raises(WorldError) as raised:
        load_world(path, ("READ", "ADMIN"))
    assert said in str(raised.value) and "\n" not in str(raised.value)


def test_the_store_refuses_a_world_with_owners(tmp_path: Path) -> None:
    world = tmp_path / "w.yaml"
    world.write_text("owners: {namespace:ns1: kerberosprincipal:a@X}\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "privilog", "store", "import", str(world), "--store", str(tmp_path / "authz.db")],
        capture_output=True, text=True, check=False,
    )
    assert done.returncode == 2
    assert "not `owners:` (1 owned entities)" in done.stderr and done.stderr.count("\n") == 1


TYPES = {
    "entities": ["namespace:system", "namespace:ns1", "dataset_type:system.table", "dataset_type:system.kvTable",
                 "dataset_type:ns1.kvTable", "dataset_type:ns1.Custom", "dataset:system.Meta"],
    "grants": [["user:alice", "ADMIN", "dataset:ns1.new"]],
}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_dataset_type_named_anywhere_resolves_to_cdaps_own_by_its_last_name(backend: str) -> None:
    """cdap-5.1 (DatasetInstanceService.getTypeInfo): a type of a system type's name needs no privilege in
    whichever namespace it is named, there or not (issue 37, behaviour 4); `last_name_of` finds it."""
    authz = authorizer(TYPES, backend)

    def create(kind: str) -> bool:
        return authz.decide(authz.request("user:alice", "dataset.create", "dataset:ns1.new", {"dataset_type": kind}))

    assert create("dataset_type:system.table") and create("dataset_type:ns1.table"), "not in ns1: system's"
    assert create("dataset_type:ns1.kvTable"), "in ns1 and unreadable: system's"
    assert create("dataset_type:ns9.table"), "a namespace the world does not name"
    assert not create("dataset_type:ns1.Custom"), "a custom type needs a privilege"
    assert not create("dataset_type:ns1.Meta"), "a dataset of namespace system is no type"
    decision = authz.check(authz.request("user:alice", "dataset.create", "dataset:ns1.new", {"dataset_type": "dataset_type:ns1.table"}))
    assert decision.allowed and ("system_type",) in [o.by for o in decision.outcomes]
