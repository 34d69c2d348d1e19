"""The authorizer over the reference backend: decisions, proofs, fixes, listings, isolation."""

from __future__ import annotations

import pytest
from privilog.engine.authorizer import Authorizer
from privilog.engine.decision import GrantChange, MembershipChange
from privilog.engine.ids import EntityId
from privilog.engine.world import World

import privilog
from privilog import dsl


def test_unknown_operation_is_an_error_not_a_deny() -> None:
    authz = privilog.load("cdap")
    with pytest.raises(privilog.RequestError, match=r"did you mean `namespace\.delete`"):
        authz.request("user:a", "namespace.delet", "namespace:ns1")


def test_deny_lists_every_unmet_requirement_and_the_smallest_fixes() -> None:
    authz = privilog.load(
        "cdap",
        {"entities": ["namespace:ns1", "artifact:ns1.art"], "grants": [["group:deployers", "READ", "artifact:ns1.art"]]},
    )
    request = authz.request("user:c", "application.deploy", "application:ns1.app", {"artifact": "artifact:ns1.art"})
    decision = authz.check(request)
    assert not decision.allowed
    assert [o.text for o in decision.unmet] == ["ADMIN", "any on $artifact"]
    app, art = EntityId.parse("application:ns1.app"), EntityId.parse("artifact:ns1.art")
    fixes = {frozenset(fix) for fix in decision.fixes}
    assert all(len(fix) == 2 for fix in fixes)
    assert frozenset({GrantChange("user:c", "ADMIN", app), GrantChange("user:c", "READ", art)}) in fixes
    assert frozenset({GrantChange("user:c", "ADMIN", app), MembershipChange("user:c", "group:deployers")}) in fixes


def test_every_fix_allows_the_request() -> None:
    world = {"entities": ["program:ns1.app.service.p", "dataset:ns1.d", "stream:ns1.s"],
             "grants": [["user:a", "ADMIN", "namespace:ns1"], ["group:g", "ADMIN", "dataset:ns1.d"]]}
    authz = privilog.load("cdap", world)
    request = authz.request("user:a", "namespace.delete", "namespace:ns1")
    decision = authz.check(request)
    assert not decision.allowed and decision.fixes
    for fix in decision.fixes:
        trial = privilog.load("cdap", world)
        for change in fix:
            if isinstance(change, GrantChange):
                trial.world.grants.add(privilog.Grant(change.principal, change.action, change.entity))
            else:
                trial.world.members.add((change.principal, change.group))
        trial.refresh()
        assert trial.check(request).allowed, fix


def test_partial_delete_names_what_would_remain() -> None:
    authz = privilog.load("cdap", {
        "entities": ["program:ns1.app.service.p", "dataset:ns1.d"],
        "grants": [["user:a", "ADMIN", "namespace:ns1"], ["user:a", "ADMIN", "dataset:ns1.d"],
                   ["user:a", "ADMIN", "application:ns1.app"]],
    })
    decision = authz.check(authz.request("user:a", "namespace.delete", "namespace:ns1"))
    assert not decision.allowed
    every = decision.unmet[0]
    assert [str(e) for e in every.covered] == ["application:ns1.app", "dataset:ns1.d", "program:ns1.app.service.p"]
    assert [str(e) for e in every.lacking] == ["program:ns1.app.service.p"]
    assert [str(e) for e in decision.remaining] == ["application:ns1.app", "namespace:ns1", "program:ns1.app.service.p"]


def test_visible_carries_the_grant_that_shows_each_entity() -> None:
    authz = privilog.load("cdap", {"entities": ["dataset:ns1.d", "namespace:ns2"], "grants": [["user:b", "WRITE", "dataset:ns1.d"]]})
    (shown,) = authz.visible("user:b", "namespace")
    assert str(shown.entity) == "namespace:ns1"
    assert shown.witness is not None
    assert (shown.witness.action, str(shown.witness.entity)) == ("WRITE", "dataset:ns1.d")
    assert [str(e) for e in shown.witness.inside] == ["dataset:ns1.d", "namespace:ns1"]


def test_two_policies_in_one_process_do_not_leak() -> None:
    strict = dsl.parse_policy(
        "policy strict\nactions READ\nentity instance\nentity namespace in instance\nnamespace:\n  get requires READ\n"
    )
    open_policy = dsl.parse_policy(
        "policy open\nactions READ\nentity instance\nentity namespace in instance\nnamespace:\n  get requires nothing\n"
    )
    world = World()
    a = Authorizer(strict, world)
    b = Authorizer(open_policy, world)
    ns = "namespace:ns1"
    assert not a.check(a.request("user:x", "namespace.get", ns)).allowed
    assert b.check(b.request("user:x", "namespace.get", ns)).allowed
    assert not a.check(a.request("user:x", "namespace.get", ns)).allowed
    b.world.grants.add(privilog.Grant("user:x", "READ", EntityId.parse(ns)))
    b.refresh()
    assert not a.check(a.request("user:x", "namespace.get", ns)).allowed  # a has not been refreshed


def test_a_rule_added_to_a_policy_works_without_code_changes() -> None:
    text = (dsl.rules_dir() / "cdap.policy").read_text()
    text += "\n# auditors may read every dataset\nheld_by_auditor(P, A, E) :- member_of(P, \"role:auditors\"), is_a(E, \"dataset\"), requires(_, _, A, _, _).\n"
    policy = dsl.parse_policy(text, "extended.policy")
    assert any(r.head.predicate == "held_by_auditor" for r in policy.rules)


def test_request_entity_type_must_be_in_the_policy() -> None:
    policy = dsl.parse_policy("policy p\nactions READ\nentity instance\nentity namespace in instance\nnamespace:\n  get requires READ\n")
    authz = Authorizer(policy)
    with pytest.raises(privilog.RequestError, match="has no entity type `dataset`"):
        authz.entity("dataset:ns1.d")


def test_policy_hierarchy_must_match_the_ids() -> None:
    policy = dsl.parse_policy("policy p\nactions READ\nentity instance\nentity namespace\nnamespace:\n  get requires READ\n")
    with pytest.raises(privilog.PrivilogError, match="write `entity namespace in instance`"):
        Authorizer(policy)
