"""`by NAME`: a requirement met by the policy's own rule (issue 16, item 2).

What a table cannot say (only one's own grants count; one's own kerberos principal needs no
grant) a policy writes as a rule of the request, and a requirement names it as an option. Both
in-memory backends give the same decisions, proofs and explanations; the pipeline is held to
them in tests/spark/test_pipeline.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from privilog.dsl.format import format_text
from privilog.engine.authorizer import Authorizer

from privilog import dsl
from privilog.api import load_world_for
from privilog.render.explain import render_decision

BACKENDS = ["compiled", "pydatalog"]

HERE = Path(__file__).parent
POLICY = (HERE / "by_rules.policy").read_text()

WORLD = yaml.safe_load((HERE / "by_rules_world.yaml").read_text())
OWNER = {"owner": "kerberosprincipal:alice@EX.COM"}


def load(backend: str) -> Authorizer:
    policy = dsl.parse_policy(POLICY, "byp.policy")
    return Authorizer(policy, load_world_for(policy, WORLD), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("principal", "operation", "entity", "args", "allowed"),
    [
        ("user:alice", "namespace.create", "namespace:new", OWNER, True),  # by own_owner
        ("user:bob", "namespace.create", "namespace:new", OWNER, False),
        ("user:bob", "namespace.create", "namespace:new", {}, True),  # the guarded requirement does not apply
        ("user:carol", "namespace.get", "namespace:ns1", {}, True),  # her own grant inside
        ("user:dave", "namespace.get", "namespace:ns1", {}, False),  # only through a group: not counted
        ("user:dave", "dataset.read", "dataset:ns1.d", {}, True),  # where groups count, they still do
    ],
)
def test_decisions(backend: str, principal: str, operation: str, entity: str, args: dict[str, str], allowed: bool) -> None:
    authz = load(backend)
    request = authz.request(principal, operation, entity, args)
    decision = authz.check(request)
    assert decision.allowed is allowed
    assert authz.decide(request) is allowed
    assert bool(decision.unmet) is not allowed


def test_the_proof_names_the_rule_and_a_denial_says_it_does_not_hold() -> None:
    authz = load("compiled")
    allowed = authz.check(authz.request("user:alice", "namespace.create", "namespace:new", OWNER))
    assert allowed.outcomes[1].by == ("own_owner",) and allowed.outcomes[1].to_json()["by"] == ["own_owner"]
    assert "the policy's rule `own_owner` holds for this request" in render_decision(allowed)
    denied = authz.check(authz.request("user:bob", "namespace.create", "namespace:new", OWNER))
    text = render_decision(denied)
    assert "and the policy's rule `own_owner` does not hold" in text and "grant ADMIN on kerberosprincipal:alice@EX.COM" in text
    only = render_decision(authz.check(authz.request("user:dave", "namespace.get", "namespace:ns1")))
    assert "the policy's rule `sees_own` does not hold for this request" in only


def test_the_policy_formats_back_to_what_it_was() -> None:
    policy = dsl.parse_policy(POLICY, "byp.policy")
    text = format_text(POLICY, "byp.policy")
    assert "ADMIN on $owner or by own_owner if $owner" in text and "get requires by sees_own" in text
    assert dsl.parse_policy(text, "again.policy").operations == policy.operations


@pytest.mark.parametrize(
    ("rule", "said"),
    [
        ("get requires by nothing_like_it", "`by nothing_like_it`: no rule derives `nothing_like_it`"),
        ("get requires by owner_of", "`owner_of` has 2 columns; it must have one, the request"),
        ("get requires by allowed", "`by allowed`: `allowed` is not the policy's own rule"),
        ("get requires by grant", "`by grant`: `grant` is not the policy's own rule"),
    ],
)
def test_a_bad_rule_option_is_refused_with_its_place(rule: str, said: str) -> None:
    text = POLICY.replace("get requires by sees_own", rule)
    with pytest.raises(dsl.PolicyErrors, match=said.replace("$", r"\$")) as raised:
        dsl.parse_policy(text, "bad.policy")
    assert "bad.policy:10:16:" in str(raised.value)


def test_a_requirement_of_only_a_rule_still_applies() -> None:
    """Fail closed: a requirement whose one option is a rule is a requirement (an unmet one denies),
    not a requirement of nothing."""
    authz = load("compiled")
    decision = authz.check(authz.request("user:nobody", "namespace.get", "namespace:ns1"))
    assert not decision.allowed and [o.id for o in decision.unmet] == ["namespace.get#1"]


OWN_PRINCIPAL = (HERE / "own_principal.policy").read_text()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("principal", "owner", "allowed"),
    [
        ("user:alice@EX.COM", "kerberosprincipal:alice@EX.COM", True),  # the same name exactly
        ("user:alice", "kerberosprincipal:alice@EX.COM", False),  # a short name is another name
        ("user:bob", "kerberosprincipal:alice@EX.COM", False),
        ("user:carol@EX.COM", "kerberosprincipal:carol@EX.COM", True),  # named nowhere in the world
        ("group:alice@EX.COM", "kerberosprincipal:alice@EX.COM", True),  # the name, whatever the kind
    ],
)
def test_a_rule_compares_a_principals_name_with_an_entitys(backend: str, principal: str, owner: str, allowed: bool) -> None:
    policy = dsl.parse_policy(OWN_PRINCIPAL, "own_principal.policy")
    world = {"grants": [[p, "ADMIN", "namespace:new"] for p in ("user:alice@EX.COM", "user:alice", "user:bob")]}
    world["grants"] += [["user:carol@EX.COM", "ADMIN", "namespace:new"], ["group:alice@EX.COM", "ADMIN", "namespace:new"]]
    authz = Authorizer(policy, load_world_for(policy, world), backend=backend)
    request = authz.request(principal, "namespace.create", "namespace:new", {"owner": owner})
    assert authz.check(request).allowed is allowed
    assert authz.decide(request) is allowed


def test_names_are_made_only_for_a_policy_that_reads_them() -> None:
    policy = dsl.parse_policy(OWN_PRINCIPAL, "own_principal.policy")
    world = {"grants": [["user:bob", "ADMIN", "namespace:new"]], "admins": ["user:root"]}
    reads = Authorizer(policy, load_world_for(policy, world))
    assert ("user:bob", "bob") in reads.loaded.facts["name_of"]
    reads.add_members("user:root", [("user:eve", "group:ops")])  # a change names new ids: their names too
    assert {("user:eve", "eve"), ("group:ops", "ops")} <= reads.loaded.facts["name_of"]
    assert not load("compiled").loaded.facts.get("name_of")
