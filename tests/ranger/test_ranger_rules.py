"""rules/prelude/ranger.policy: Ranger's evaluation as rules over its facts, the same on every backend.

The facts here are written in a policy's own text (as `privilog ranger import` writes them into a world's
`facts:`), so that the rules are held apart from the import: deny over allow, an exception cancelling its
item within its policy, excludes, override priority, `public`, groups and nested roles, deny-all-else, the
`_any` request (visibility) through a policy that names something inside, and secure keys never matched.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from privilog.dsl.errors import PrivilogError
from privilog.engine.authorizer import Authorizer

from privilog import dsl
from privilog.api import load_world_for
from privilog.cli import main

FACTS = """
policy ranger_facts
include "ranger-cdap.policy"
ranger_user(user:alice).
ranger_user(user:bob).
ranger_user(user:carol).
ranger_user(user:dave).
ranger_policy("policy 1", "finance").
ranger_resource("policy 1", dataset:finance.sales).
ranger_resource("policy 1", dataset:finance.ledger).
ranger_resource("policy 1", namespace:finance).
ranger_exclude("policy 1", dataset:finance.ledger).
ranger_item("policy 1", "allow", "group:analysts", "READ").
ranger_item("policy 1", "deny", "user:bob", "READ").
ranger_item("policy 1", "allow", "public", "WRITE").
ranger_item("policy 1", "allow_except", "user:carol", "WRITE").
ranger_policy("policy 2", "hr, override").
ranger_override("policy 2").
ranger_inside("policy 2", namespace:hr).
ranger_resource("policy 2", dataset:hr.pay).
ranger_item("policy 2", "allow", "role:payroll", "READ").
ranger_delegate("policy 2", "role:payroll").
ranger_policy("policy 3", "hr, deny").
ranger_resource("policy 3", dataset:hr.pay).
ranger_item("policy 3", "deny", "public", "READ").
ranger_policy("policy 4", "keys").
ranger_resource("policy 4", securekey:finance.k1).
ranger_item("policy 4", "allow", "public", "READ").
ranger_policy("policy 5", "deny all else").
ranger_deny_all_else("policy 5").
ranger_resource("policy 5", dataset:finance.sales).
ranger_item("policy 5", "allow", "user:alice", "READ").
"""

WORLD = {
    "entities": ["dataset:finance.sales", "dataset:finance.ledger", "dataset:hr.pay", "securekey:finance.k1"],
    "members": [
        ["user:alice", "group:analysts"],
        ["user:bob", "group:analysts"],
        ["group:payroll_team", "role:payroll_base"],
        ["role:payroll_base", "role:payroll"],
        ["user:dave", "group:payroll_team"],
    ],
}

# (principal, action, entity) -> Ranger's answer, each with the rule of Ranger it holds
HOLDS = [
    ("user:alice", "READ", "dataset:finance.sales", True),  # group item; deny-all-else policy 5 allows her
    ("user:bob", "READ", "dataset:finance.sales", False),  # deny item beats the group's allow
    ("user:alice", "READ", "dataset:finance.ledger", False),  # excluded from policy 1
    ("user:alice", "WRITE", "dataset:finance.sales", False),  # public allow, but policy 5 denies all else
    ("user:carol", "WRITE", "dataset:finance.ledger", False),  # excluded
    ("user:carol", "WRITE", "namespace:finance", False),  # allow exception cancels public's allow
    ("user:bob", "WRITE", "namespace:finance", True),  # public
    ("user:dave", "READ", "dataset:hr.pay", True),  # nested role, override beats policy 3's deny
    ("user:alice", "READ", "dataset:hr.pay", False),  # policy 3 denies public
    ("user:alice", "READ", "securekey:finance.k1", False),  # CDAP's plugin never matches a secure key
]


@pytest.fixture(scope="module", params=["compiled", "pydatalog"])
def authorizer(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Authorizer:
    folder = tmp_path_factory.mktemp("ranger")
    (folder / "facts.policy").write_text(FACTS, encoding="utf-8")
    policy = dsl.load_policy(str(folder / "facts.policy"))
    return Authorizer(policy, load_world_for(policy, WORLD), backend=request.param)


@pytest.mark.parametrize(("principal", "action", "entity", "allowed"), HOLDS)
def test_ranger_decides_each_access(authorizer: Authorizer, principal: str, action: str, entity: str, allowed: bool) -> None:
    rows = authorizer.backend.query("holds", {0: principal, 1: action, 2: entity})
    assert bool(rows) is allowed


def test_a_policy_naming_something_inside_shows_the_entity(authorizer: Authorizer) -> None:
    # policy 2 names dataset:hr.pay inside namespace:hr: dave (its role) sees the namespace, alice does not
    assert authorizer.check(authorizer.request("user:dave", "namespace.get", "namespace:hr")).allowed
    assert not authorizer.check(authorizer.request("user:alice", "namespace.get", "namespace:hr")).allowed


def test_an_allow_names_the_ranger_policy(authorizer: Authorizer, capsys: pytest.CaptureFixture[str]) -> None:
    decision = authorizer.check(authorizer.request("user:dave", "dataset.read", "dataset:hr.pay"))
    assert decision.allowed
    holders = {w.holder for outcome in decision.outcomes for w in outcome.witnesses}
    assert holders == {"policy 2"}


def test_a_delegate_admin_may_grant_on_what_the_policy_is_about(authorizer: Authorizer) -> None:
    def grant(principal: str, entity: str) -> bool:
        kind = entity.partition(":")[0]
        return authorizer.check(authorizer.request(principal, f"{kind}.grant", entity)).allowed

    assert grant("user:dave", "dataset:hr.pay")  # by the nested role, delegate admin of policy 2
    assert not grant("user:dave", "namespace:hr")  # policy 2 names something inside it: not about it
    assert not grant("user:alice", "dataset:hr.pay")  # may read through nothing, and is no delegate


def test_a_policy_of_ones_own_still_may_not_add_to_holds(tmp_path: Path) -> None:
    (tmp_path / "mine.policy").write_text(
        'policy mine\ninclude "ranger-cdap.policy"\nholds(P, A, E, P) :- ranger_user(P), is_a(E, "dataset"), A == "READ".\n',
        encoding="utf-8",
    )
    with pytest.raises(PrivilogError, match="`holds` is defined by the prelude"):
        dsl.load_policy(str(tmp_path / "mine.policy"))


def test_the_prover_refuses_a_policy_of_world_facts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prove", "ranger-cdap", "--examples", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "reads `ranger_delegate`, `ranger_deny_all_else`" in err[0] and "not proved" in err[0]


ANY = """
policy ranger_any
include "ranger-cdap.policy"
ranger_user(user:bob).
ranger_policy("policy 1", "deny bob on fin").
ranger_resource("policy 1", namespace:fin).
ranger_item("policy 1", "deny", "user:bob", "READ").
ranger_policy("policy 2", "allow bob on fin").
ranger_resource("policy 2", namespace:fin).
ranger_item("policy 2", "allow", "user:bob", "READ").
ranger_policy("policy 3", "deny and allow bob inside hr").
ranger_inside("policy 3", namespace:hr).
ranger_resource("policy 3", dataset:hr.pay).
ranger_item("policy 3", "deny", "user:bob", "READ").
ranger_item("policy 3", "allow", "user:bob", "READ").
ranger_policy("policy 4", "allow bob inside ops, but not to write").
ranger_inside("policy 4", namespace:ops).
ranger_resource("policy 4", dataset:ops.logs).
ranger_item("policy 4", "allow", "user:bob", "READ").
ranger_item("policy 4", "allow", "user:bob", "WRITE").
ranger_item("policy 4", "allow_except", "user:bob", "WRITE").
"""


@pytest.mark.parametrize("backend", ["compiled", "pydatalog"])
def test_any_access_as_ranger_merges_verdicts(backend: str, tmp_path: Path) -> None:
    (tmp_path / "any.policy").write_text(ANY, encoding="utf-8")
    policy = dsl.load_policy(str(tmp_path / "any.policy"))
    world = {"entities": ["namespace:fin", "dataset:hr.pay", "dataset:ops.logs"]}
    authorizer = Authorizer(policy, load_world_for(policy, world), backend=backend)

    def sees(entity: str) -> bool:
        return bool(authorizer.backend.query("ranger_sees", {0: "user:bob", 1: entity}))

    # READ itself is denied (deny beats an allow of the same priority) ...
    assert not authorizer.backend.query("holds", {0: "user:bob", 1: "READ", 2: "namespace:fin"})
    # ... but for `_any`, policy 2's allow replaces policy 1's deny of the same priority
    assert sees("namespace:fin")
    # inside: policy 3's deny item decides it (deny items first), and is then ignored: no allow
    assert not sees("namespace:hr")
    # an allow exception cancels only its own access: READ is still allowed, so the namespace shows
    assert sees("namespace:ops")
