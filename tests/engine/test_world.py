"""Worlds: reading with located errors, admin-only changes, durability, deletion semantics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from privilog.engine.ids import EntityId
from privilog.engine.world import Grant, NotAnAdmin, WorldError, load_world, parse_world

import privilog

ACTIONS = ("READ", "WRITE", "EXECUTE", "ADMIN")


def test_reads_both_grant_forms_and_expands_all() -> None:
    world = parse_world(
        "grants:\n"
        "  - [user:a, ALL, namespace:ns1]\n"
        "  - {principal: group:g, actions: [READ, WRITE], entity: dataset:ns1.d}\n",
        ACTIONS,
    )
    ns1, ds = EntityId.parse("namespace:ns1"), EntityId.parse("dataset:ns1.d")
    assert {Grant("user:a", a, ns1) for a in ACTIONS} | {Grant("group:g", "READ", ds), Grant("group:g", "WRITE", ds)} == world.grants


def test_json_worlds_read_the_same() -> None:
    data = {"entities": ["namespace:ns1"], "grants": [["user:a", "READ", "namespace:ns1"]], "admins": ["user:root"]}
    world = parse_world(json.dumps(data), ACTIONS, "w.json")
    assert world.admins == {"user:root"}
    assert world.entities == {EntityId.parse("namespace:ns1")}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("grants:\n  - [user:a, READ]\n", "w.yaml:2:5: a grant is [PRINCIPAL, ACTION, ENTITY]"),
        ("grantz: []\n", "w.yaml:1:9: unknown key `grantz`: did you mean `grants`?"),
        ("members:\n  - [user:a]\n", "w.yaml:2:5: a membership is [PRINCIPAL, GROUP_OR_ROLE]"),
        ("admins: [root]\n", "w.yaml:1:10: malformed principal `root`"),
        ("entities: namespace:ns1\n", "w.yaml:1:11: `entities` must be a list"),
        ("- 1\n", "w.yaml:1:1: a world is a mapping"),
    ],
)
def test_errors_name_the_place(text: str, message: str) -> None:
    with pytest.raises(WorldError) as raised:
        parse_world(text, ACTIONS, "w.yaml")
    assert str(raised.value).startswith(message)


def test_only_admins_change_grants(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("admins: [user:root, group:secadmins]\nmembers: [[user:sam, group:secadmins]]\n")
    world = load_world(path, ACTIONS, bind=True)
    grant = Grant("user:a", "READ", EntityId.parse("dataset:ns1.d"))
    with pytest.raises(NotAnAdmin, match="user:mallory is not an authorization admin"):
        world.grant("user:mallory", [grant])
    assert world.grants == set()
    assert load_world(path, ACTIONS).grants == set()
    assert world.grant("user:sam", [grant]) == [grant]  # an admin through a group
    with pytest.raises(NotAnAdmin):
        world.revoke("user:a", [grant])


def test_changes_are_saved_at_once_and_survive_a_reload(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("admins: [user:root]\n")
    world = load_world(path, ACTIONS, bind=True)
    grants = [Grant("user:a", "ADMIN", EntityId.parse("namespace:ns9")), Grant("group:g", "READ", EntityId.parse("stream:ns9.s"))]
    world.grant("user:root", grants)
    world.add_entity("user:root", EntityId.parse("stream:ns9.s"))
    again = load_world(path, ACTIONS)
    assert again.grants == set(grants)
    assert again.entities == {EntityId.parse("stream:ns9.s")}
    world.revoke("user:root", grants[:1])
    assert load_world(path, ACTIONS).grants == set(grants[1:])
    # no temporary files left behind: the world, and the lock its writers take (the log is compacted away)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.yaml", "w.yaml.lock"]


def test_privileges_survive_delete_and_apply_again_on_recreate() -> None:
    authz = privilog.load(
        "cdap",
        {"entities": ["namespace:ns1", "dataset:ns1.d"], "grants": [["user:b", "READ", "dataset:ns1.d"]], "admins": ["user:root"]},
    )
    def sees_d() -> bool:
        return [str(v.entity) for v in authz.visible("user:b", "dataset")] == ["dataset:ns1.d"]

    def sees_ns1() -> bool:
        return [str(v.entity) for v in authz.visible("user:b", "namespace")] == ["namespace:ns1"]

    assert sees_d() and sees_ns1()
    removed = authz.world.delete_entity("user:root", EntityId.parse("dataset:ns1.d"))
    authz.refresh()
    assert removed == {EntityId.parse("dataset:ns1.d")}
    assert authz.world.grants == {Grant("user:b", "READ", EntityId.parse("dataset:ns1.d"))}
    assert not sees_d()
    assert sees_ns1(), "the grant's id lies under namespace:ns1: it still shows it (the code's reading)"
    authz.world.add_entity("user:root", EntityId.parse("dataset:ns1.d"))
    authz.refresh()
    assert sees_d() and sees_ns1()


def test_deleting_a_namespace_deletes_what_is_inside() -> None:
    authz = privilog.load(
        "cdap", {"entities": ["program:ns1.app.service.api", "dataset:ns1.d", "dataset:ns2.e"], "admins": ["user:root"]}
    )
    removed = authz.world.delete_entity("user:root", EntityId.parse("namespace:ns1"))
    assert {str(e) for e in removed} == {"namespace:ns1", "application:ns1.app", "program:ns1.app.service.api", "dataset:ns1.d"}
    assert {str(e) for e in authz.world.existing()} == {"dataset:ns2.e", "namespace:ns2", "instance:cdap"}
