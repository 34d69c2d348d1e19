"""Memberships nested deep and in cycles: decided, explained and fixed alike on every backend,
in rows linear in the memberships (issue 18, item 11).

No timing is asserted: what stays linear is counted (the rows each backend keeps).
benchmarks/README.md, "Deep memberships", has the times.
"""

from __future__ import annotations

from typing import Any

import pytest
from privilog.engine.authorizer import Authorizer
from privilog.engine.backends.pydatalog import _DOWN, _THROUGH, _WILD_THROUGH, top_down
from privilog.engine.compiled.backend import CompiledBackend
from privilog.engine.decision import GrantChange, MembershipChange
from privilog.engine.ids import EntityId
from privilog.engine.program import compile_policy

import privilog
from privilog import dsl
from privilog.render.explain import render_decision

DATASET = "dataset:ns1.d"
BACKENDS = ["pydatalog", "compiled"]


def chain(depth: int, cycle: bool = False) -> dict[str, Any]:
    """user:u → group:g0 → … → group:g{depth}, the last holding READ on a dataset and ADMIN on
    its namespace; with ``cycle``, group:g{depth} is in group:g0 again."""
    members = [["user:u", "group:g0"], *([f"group:g{i}", f"group:g{i + 1}"] for i in range(depth))]
    if cycle:
        members.append([f"group:g{depth}", "group:g0"])
    top = f"group:g{depth}"
    return {
        "entities": [DATASET],
        "grants": [[top, "READ", DATASET], [top, "ADMIN", "namespace:ns1"]],
        "members": members,
        "admins": ["user:root"],
    }


def materialized(authz: Authorizer) -> dict[str, int]:
    backend = authz.backend
    assert isinstance(backend, CompiledBackend)
    return {name: len(relation) for name, relation in backend.store.items()}


def test_a_deep_chain_keeps_rows_linear_in_its_depth() -> None:
    depth = 2000
    authz = privilog.load("cdap", chain(depth))
    assert authz.allows("user:u", "dataset.read", DATASET)
    authz.check(authz.request("user:u", "dataset.write", DATASET))  # a denial: its fixes walk the groups
    authz.check(authz.request("user:u", "namespace.get", "namespace:ns1"))
    authz.add_members("user:root", [("user:v", "group:g0")])
    authz.grant("user:root", [privilog.Grant(f"group:g{depth // 2}", "WRITE", EntityId.parse(DATASET))])
    assert authz.allows("user:v", "dataset.write", DATASET)
    rows = materialized(authz)
    assert rows["holds"] >= 2 * depth  # every member of the chain holds what its top holds
    assert {name: n for name, n in rows.items() if n > 4 * depth} == {}
    assert rows.get("in_group", 0) == 0  # the closure (depth²/2 rows) is not kept


def test_in_group_is_still_answered_when_asked() -> None:
    world = chain(3, cycle=True)
    answers = {}
    for backend in BACKENDS:
        authz = privilog.load("cdap", world, backend)
        first = authz.backend.query("in_group", {0: "user:u"})
        authz.add_members("user:root", [("group:g1", "group:new")])
        answers[backend] = (first, authz.backend.query("in_group"))
    assert answers["compiled"] == answers["pydatalog"]
    first, after = answers["compiled"]
    assert first == {("user:u", f"group:g{i}") for i in range(4)}
    assert ("user:u", "group:new") in after and ("group:g3", "group:new") in after


@pytest.mark.parametrize("cycle", [False, True], ids=["chain", "cycle"])
def test_a_deep_chain_is_decided_explained_and_fixed(cycle: bool) -> None:
    depth = 5000
    authz = privilog.load("cdap", chain(depth, cycle))
    allowed = authz.check(authz.request("user:u", "dataset.read", DATASET))
    assert allowed.allowed
    (witness,) = allowed.outcomes[0].witnesses
    assert witness.holder == f"group:g{depth}"
    assert witness.groups == ("user:u", *(f"group:g{i}" for i in range(depth + 1)))
    assert f"group:g{depth - 1}, which is in group:g{depth}" in render_decision(allowed)

    stranger = authz.check(authz.request("user:v", "dataset.read", DATASET))
    assert not stranger.allowed
    fixes = {fix for (fix,) in stranger.fixes}
    assert GrantChange("user:v", "READ", EntityId.parse(DATASET)) in fixes
    assert MembershipChange("user:v", f"group:g{depth}") in fixes
    # a member is offered no group it is already in
    member = authz.check(authz.request("user:u", "dataset.write", DATASET))
    assert not any(isinstance(c, MembershipChange) for fix in member.fixes for c in fix)


@pytest.mark.parametrize("cycle", [False, True], ids=["chain", "cycle"])
def test_memberships_in_depth_and_in_cycles_give_the_reference_answers(cycle: bool) -> None:
    world = chain(40, cycle)
    world["members"] += [["user:w", "group:g20"], ["group:g30", "group:g10"], ["role:r", "group:g5"]]
    world["grants"] += [["group:g25", "WRITE", DATASET], ["role:r", "EXECUTE", "namespace:ns1"]]
    requests = [
        (principal, operation, entity)
        for principal in ("user:u", "user:w", "user:x", "group:g10", "group:g40", "role:r")
        for operation, entity in [
            ("dataset.read", DATASET),
            ("dataset.write", DATASET),
            ("namespace.get", "namespace:ns1"),
            ("namespace.delete", "namespace:ns1"),
        ]
    ]
    answers = {}
    for backend in BACKENDS:
        authz = privilog.load("cdap", world, backend)
        answers[backend] = (
            [authz.check(authz.request(*r)).to_json() for r in requests],
            [authz.visible_entities(p, "dataset") for p in ("user:u", "user:w", "user:x", "role:r")],
        )
    assert answers["compiled"] == answers["pydatalog"]
    decisions, visible = answers["compiled"]
    assert decisions[0]["decision"] == "allow"  # user:u reads through 41 groups
    assert decisions[17]["decision"] == ("allow" if cycle else "deny")  # group:g40 writes only round the cycle
    assert visible[0] == [EntityId.parse(DATASET)] and visible[2] == []


def test_an_admin_through_a_cycle_of_groups_is_an_admin() -> None:
    world = {"members": [["user:a", "group:x"], ["group:x", "group:y"], ["group:y", "group:x"]], "admins": ["group:y"]}
    authz = privilog.load("cdap", world)
    assert authz.world.is_admin("user:a") and authz.world.is_admin("group:x")
    assert not authz.world.is_admin("user:b")


@pytest.mark.parametrize("name", ["cdap", "cdap-4.2", "cdap-draft", "cdap-draft-revised", "cdap-proposed"])
def test_the_reference_asks_holds_through_the_principals_groups(name: str) -> None:
    """pyDatalog, top-down, is given `holds` through `in_group` for every shipped policy (the
    prelude's rule, down `member_of`, tables every holder of an action when it is asked), and the
    groups' wildcard grants the same way."""
    rules = compile_policy(dsl.load_policy(name)).rules
    exchanged = top_down(rules)
    assert len(exchanged) == len(rules) + 1 and set(exchanged) ^ set(rules) == {_DOWN, _THROUGH, _WILD_THROUGH}
