"""A policy's own `denied` rules, explained (issue 32, item 4).

A decision a rule of the policy denies names the rule (its text and FILE:LINE) and proves
it: each premise grounded, a derived one down to facts of the world, the request and the
policy. The fixes take a premise away (a membership removed, a grant revoked) and meet
what that leaves unmet; each is applied to the world here and the request decided again.
Both in-memory backends give the same answers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from privilog.engine.authorizer import Authorizer
from privilog.engine.decision import (
    Decision,
    GrantChange,
    MembershipChange,
    Premise,
    RemoveMemberChange,
    RevokeChange,
)
from privilog.engine.denial import deny_rules
from privilog.engine.ids import EntityId
from privilog.engine.world import Grant

from privilog import dsl
from privilog.api import load_world_for
from privilog.render.explain import render_decision, render_short

BACKENDS = ["compiled", "pydatalog"]
DATASET = "dataset:ns1.a"

BLOCKLIST = (Path(__file__).parent / "blocklist.policy").read_text(encoding="utf-8")  # shared by the deny-rule tests

WORLD: dict[str, Any] = {
    "admins": ["user:root"],
    "entities": ["namespace:ns1", DATASET],
    "grants": [
        ["user:mallory", "READ", DATASET],
        ["group:bad", "READ", DATASET],
        ["user:x", "READ", DATASET],
        ["user:carl", "READ", DATASET],
        ["user:carl", "ADMIN", "namespace:ns1"],
    ],
    "members": [
        ["user:eve", "group:bad"],
        ["user:fred", "group:quiet"],
        # a cycle: group:a and group:b are each in the other, and group:b in the blocked group:c
        ["user:x", "group:a"],
        ["group:a", "group:b"],
        ["group:b", "group:a"],
        ["group:b", "group:c"],
    ],
}


def load(policy_text: str, backend: str, world: dict[str, Any] | None = None) -> Authorizer:
    policy = dsl.parse_policy(policy_text, "deny.policy")
    return Authorizer(policy, load_world_for(policy, world or WORLD), backend=backend)


def decide(authz: Authorizer, principal: str, entity: str = DATASET) -> Decision:
    return authz.check(authz.request(principal, "dataset.read", entity))


def tree(premise: Premise) -> Any:
    """A premise as (fact, source, place or rule, premises), for comparing whole proofs."""
    return (premise.fact, premise.source, premise.at, tuple(tree(p) for p in premise.premises))


def apply(authz: Authorizer, fix: tuple[Any, ...]) -> None:
    """Make a suggested fix in the world, as its admin."""
    for change in fix:
        if isinstance(change, GrantChange):
            authz.grant("user:root", [Grant(change.principal, change.action, change.entity)])
        elif isinstance(change, RevokeChange):
            authz.revoke("user:root", [Grant(change.principal, change.action, change.entity)])
        elif isinstance(change, MembershipChange):
            authz.add_members("user:root", [(change.principal, change.group)])
        else:
            authz.remove_members("user:root", [(change.principal, change.group)])


def fixes_allow(policy_text: str, backend: str, principal: str, decision: Decision) -> None:
    """Every fix of the decision, made in a fresh copy of the world, allows the request."""
    assert decision.fixes
    for fix in decision.fixes:
        authz = load(policy_text, backend)
        apply(authz, fix)
        assert decide(authz, principal).allowed, fix


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_fact_of_the_policy_denies_mallory(backend: str) -> None:
    decision = decide(load(BLOCKLIST, backend), "user:mallory")
    assert not decision.allowed and not decision.unmet  # READ is met: the rule denies it
    (denial,) = decision.denied_by
    assert denial.rule == "denied(R) :- request(R, P, _, _), blocked(P)"
    assert denial.at == "deny.policy:6"
    assert [tree(p) for p in denial.premises] == [
        ('request(R, user:mallory, "dataset.read", dataset:ns1.a)', "request", "", ()),
        ("blocked(user:mallory)", "policy", "deny.policy:3", ()),
    ]
    assert [p.fact for p in denial.written()] == ["blocked(user:mallory)"]
    assert decision.fixes == ()  # nothing of the world to take away: the policy says so itself


@pytest.mark.parametrize("backend", BACKENDS)
def test_eve_is_blocked_through_her_group_and_leaving_it_is_the_fix(backend: str) -> None:
    decision = decide(load(BLOCKLIST, backend), "user:eve")
    (denial,) = decision.denied_by
    blocked = denial.premises[1]
    assert tree(blocked) == (
        "blocked(user:eve)",
        "rule",
        "deny.policy:5",
        (
            ("member_of(user:eve, group:bad)", "world", "", ()),
            ("blocked(group:bad)", "policy", "deny.policy:4", ()),
        ),
    )
    assert blocked.rule == "blocked(P) :- member_of(P, G), blocked(G)"
    # out of group:bad she is no longer blocked, and no longer holds READ through it: a grant too
    assert decision.fixes == (
        (GrantChange("user:eve", "READ", decision.request.entity), RemoveMemberChange("user:eve", "group:bad")),
    )
    fixes_allow(BLOCKLIST, backend, "user:eve", decision)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cycle_of_groups_is_proven_and_every_way_out_verified(backend: str) -> None:
    authz = load(BLOCKLIST.replace("blocked(group:bad).", "blocked(group:c)."), backend)
    decision = decide(authz, "user:x")
    (denial,) = decision.denied_by
    facts = [p.fact for p in denial.walk()]
    assert facts == [
        'request(R, user:x, "dataset.read", dataset:ns1.a)',
        "blocked(user:x)",
        "member_of(user:x, group:a)",
        "blocked(group:a)",
        "member_of(group:a, group:b)",
        "blocked(group:b)",
        "member_of(group:b, group:c)",  # not back through group:a, which is being proven
        "blocked(group:c)",
    ]
    assert {fix for fix in decision.fixes} == {
        (RemoveMemberChange("group:a", "group:b"),),
        (RemoveMemberChange("group:b", "group:c"),),
        (RemoveMemberChange("user:x", "group:a"),),
    }
    fixes_allow(BLOCKLIST.replace("blocked(group:bad).", "blocked(group:c)."), backend, "user:x", decision)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_denial_and_an_unmet_requirement_are_both_shown_and_both_fixed(backend: str) -> None:
    policy = BLOCKLIST + "blocked(group:quiet).\n"
    decision = decide(load(policy, backend), "user:fred")
    assert [o.text for o in decision.unmet] == ["READ"]
    assert len(decision.denied_by) == 1
    assert render_short(decision) == (
        "DENY user:fred dataset.read dataset:ns1.a: unmet: READ; denied by the policy's rule "
        "denied(R) :- request(R, P, _, _), blocked(P) (deny.policy:6)"
    )
    assert decision.fixes == (
        (GrantChange("user:fred", "READ", decision.request.entity), RemoveMemberChange("user:fred", "group:quiet")),
    )
    fixes_allow(policy, backend, "user:fred", decision)


NEGATION = """policy trusted_readers
include "cdap"
trusted(P) :- member_of(P, group:trusted).
denied(R) :- request(R, P, _, E), is_a(E, "dataset"), not trusted(P), P != user:root.
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_denial_through_a_negation_and_a_comparison(backend: str) -> None:
    decision = decide(load(NEGATION, backend), "user:mallory")
    (denial,) = decision.denied_by
    assert [(p.fact, p.source) for p in denial.premises] == [
        ('request(R, user:mallory, "dataset.read", dataset:ns1.a)', "request"),
        ("is_a(dataset:ns1.a, dataset)", "world"),
        ("not trusted(user:mallory)", "absent"),
        ("user:mallory != user:root", "comparison"),
    ]
    assert decision.fixes == ()  # nothing to take away (joining group:trusted adds: not searched)
    text = render_decision(decision)
    assert "└─ user:mallory != user:root: holds" in text
    assert "├─ not trusted(user:mallory): holds: no such fact" in text
    assert "No change of grants or memberships found takes away a premise of the denying rule." in text
    assert "No change of grants or memberships allows it" not in text


SEPARATION = """policy separation_of_duties
include "cdap"
# who administers a namespace may not read its datasets
denied(R) :- request(R, P, "dataset.read", E), child_of(E, N), grant(P, "ADMIN", N).
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_rule_of_two_relations_is_fixed_by_a_revoke(backend: str) -> None:
    decision = decide(load(SEPARATION, backend), "user:carl")
    (denial,) = decision.denied_by
    assert denial.at == "deny.policy:4"
    assert [(p.fact, p.source) for p in denial.premises] == [
        ('request(R, user:carl, "dataset.read", dataset:ns1.a)', "request"),
        ("child_of(dataset:ns1.a, namespace:ns1)", "world"),
        ('grant(user:carl, "ADMIN", namespace:ns1)', "world"),
    ]
    assert decision.fixes == ((RevokeChange("user:carl", "ADMIN", EntityId.parse("namespace:ns1")),),)
    assert "  1. revoke ADMIN on namespace:ns1 from user:carl" in render_decision(decision)
    fixes_allow(SEPARATION, backend, "user:carl", decision)
    assert decide(load(SEPARATION, backend), "user:mallory").allowed  # no ADMIN: not denied


def test_a_policy_without_deny_rules_explains_as_before() -> None:
    authz = Authorizer(dsl.load_policy("cdap"), load_world_for(dsl.load_policy("cdap"), WORLD))
    assert deny_rules(authz.program) == ()  # the prelude's `denied(R) :- unmet(R, _)` is not one
    decision = decide(authz, "user:nobody")
    assert decision.denied_by == () and "denied_by" not in decision.to_json()
    assert render_short(decision) == "DENY user:nobody dataset.read dataset:ns1.a: unmet: READ"


def test_the_briefs_blocklist_blocks_only_mallory() -> None:
    """group:bad is not blocked unless the policy says so: eve, in it, may read."""
    policy = BLOCKLIST.replace("blocked(group:bad).\n", "")
    for backend in BACKENDS:
        authz = load(policy, backend)
        assert decide(authz, "user:eve").allowed
        assert decide(authz, "user:mallory").denied_by


def test_the_json_names_the_rule_and_its_proof() -> None:
    data = decide(load(BLOCKLIST, "compiled"), "user:eve").to_json()
    assert list(data) == ["request", "decision", "policy", "requirements", "fixes", "remaining", "denied_by"]
    assert data["fixes"] == [
        [
            {"grant": {"principal": "user:eve", "action": "READ", "entity": DATASET}},
            {"remove_member": {"principal": "user:eve", "group": "group:bad"}},
        ]
    ]
    (denial,) = data["denied_by"]
    assert denial["rule"] == "denied(R) :- request(R, P, _, _), blocked(P)" and denial["at"] == "deny.policy:6"
    request, blocked = denial["premises"]
    assert request == {
        "fact": 'request(R, user:eve, "dataset.read", dataset:ns1.a)',
        "source": "request",
        "relation": "request",
        "values": ["R", "user:eve", "dataset.read", DATASET],
    }
    assert blocked["rule"] == "blocked(P) :- member_of(P, G), blocked(G)" and blocked["at"] == "deny.policy:5"
    assert blocked["premises"] == [
        {
            "fact": "member_of(user:eve, group:bad)",
            "source": "world",
            "relation": "member_of",
            "values": ["user:eve", "group:bad"],
        },
        {
            "fact": "blocked(group:bad)",
            "source": "policy",
            "relation": "blocked",
            "values": ["group:bad"],
            "at": "deny.policy:4",
        },
    ]
    assert "denied_by" not in decide(load(BLOCKLIST, "compiled"), "user:x").to_json()  # allowed: x is not blocked


def test_the_world_is_left_as_it_was_after_the_fixes_are_searched() -> None:
    authz = load(BLOCKLIST, "compiled")
    before = {r: authz.backend.query(r) for r in ("grant", "member_of", "holds", "blocked")}
    decide(authz, "user:eve")
    assert {r: authz.backend.query(r) for r in before} == before
    assert ("user:eve", "group:bad") in authz.world.members


def test_why_draws_the_proof_under_the_requirements() -> None:
    text = render_decision(decide(load(BLOCKLIST, "compiled"), "user:eve"))
    assert text == "\n".join(
        [
            "DENY user:eve dataset.read dataset:ns1.a  (policy cdap_with_blocklist)",
            "├─ READ: met",
            "│  └─ user:eve is in group:bad, which holds READ on dataset:ns1.a",
            "└─ denied by the policy's rule denied(R) :- request(R, P, _, _), blocked(P) (deny.policy:6)",
            '   ├─ request(R, user:eve, "dataset.read", dataset:ns1.a): the request',
            "   └─ blocked(user:eve): by the rule blocked(P) :- member_of(P, G), blocked(G) (deny.policy:5)",
            "      ├─ member_of(user:eve, group:bad): in the world",
            "      └─ blocked(group:bad): the policy's fact (deny.policy:4)",
            "Would allow it:",
            "  1. remove user:eve from group:bad; grant READ on dataset:ns1.a to user:eve",
            "A change of the policy takes a premise away too: retract its fact blocked(group:bad) (deny.policy:4).",
        ]
    )
    mallory = render_decision(decide(load(BLOCKLIST, "compiled"), "user:mallory"))
    assert mallory.splitlines()[-1] == (
        "Taking a premise away needs a change of the policy: retract its fact blocked(user:mallory) (deny.policy:3)."
    )
    assert "No change of grants or memberships allows it" not in mallory


def test_an_unmet_rule_of_the_policy_is_not_said_to_be_beyond_every_change() -> None:
    """A requirement met `by` a rule of the policy's: the fix search tries grants of the actions a
    requirement names, not what would make the rule hold, so finding none it says so, and does not
    say that no change allows it (here a grant of bob's own on the dataset would)."""
    text = (
        'policy sees "a rule of its own"\nactions READ, ADMIN\nentity instance\nentity namespace in instance\n'
        "entity dataset in namespace\ndataset:\n  read requires by sees_own\n"
        "sees_own(R) :- request(R, P, _, E), grant(P, _, E).\n"
    )
    world = {"entities": ["namespace:ns1", DATASET], "members": [["user:bob", "group:readers"]],
             "grants": [["group:readers", "READ", DATASET]], "admins": ["user:root"]}  # fmt: skip
    authz = load(text, "compiled", world)
    decision = decide(authz, "user:bob")
    assert not decision.allowed and not decision.fixes
    rendered = render_decision(decision)
    assert "No change of grants or memberships allows it." not in rendered
    assert "the search does not try what would make the policy's rule `sees_own` hold" in rendered
    authz.grant("user:root", [Grant("user:bob", "READ", EntityId.parse(DATASET))])
    assert decide(authz, "user:bob").allowed
