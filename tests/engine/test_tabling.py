"""A request's row of the decisions table (``Authorizer.tabled``, what ``privilog decide`` writes)
by the compiled backend's plans, against the same row read off the reference backend's checked
Decision (pyDatalog): identical, on hand-written cases that reach every column.

The cases: an allow with the grant behind it (a group's, an ``ALL`` grant's action), a denial
with its unmet requirements, a delete of many entities lacking some of them, arguments (and a
requirement they switch off), a create of an entity that does not exist yet, a list argument
(decided without plans), wildcard grants, a superuser's bypass, a policy's own deny rules
(``denied_by``), and a policy whose requirements are met by its own `by` rules.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from privilog.engine.authorizer import Authorizer, RequestError, tabled

import privilog
from privilog import dsl
from privilog.api import load_world_for

HERE = Path(__file__).parent

WORLD: dict[str, Any] = {
    "config": {"superusers": ["user:root"]},
    "entities": [
        "dataset:ns1.a",
        "dataset:ns1.b",
        "dataset:ns1.c",
        "program:ns1.app.workflow.w",
        "artifact:ns1.lib.1",
        "dataset:ns2.x",
        "dataset:ns2.sales_eu",
        "dataset:ns2.sales_us",
    ],
    "grants": [
        ["user:alice", "ADMIN", "namespace:ns1"],
        ["user:alice", "ADMIN", "dataset:ns1.a"],
        ["user:alice", "ADMIN", "dataset:ns1.b"],
        ["group:eng", "ALL", "dataset:ns1.c"],
        ["user:bob", "READ", "dataset:ns1.a"],
        ["user:bob", "READ", "artifact:ns1.lib.1"],
        ["user:carol", "READ", "dataset:ns2.sales_*"],
        ["user:carol", "ADMIN", "namespace:ns2"],
        ["user:dave", "EXECUTE", "program:ns1.app.workflow.w"],
        ["user:dave", "ADMIN", "application:ns1.app"],
    ],
    "members": [["user:bob", "group:eng"], ["user:mallory", "group:eng"]],
}

CASES = [
    ("user:bob", "dataset.read", "dataset:ns1.a", None),  # own grant
    ("user:bob", "dataset.read", "dataset:ns1.c", None),  # a group's ALL grant
    ("user:bob", "dataset.write", "dataset:ns1.b", None),  # denied, one unmet
    ("user:nobody", "dataset.read", "dataset:ns1.a", None),
    ("user:alice", "namespace.delete", "namespace:ns1", None),  # every descendant: lacks some
    ("user:carol", "namespace.delete", "namespace:ns2", None),
    ("user:alice", "namespace.get", "namespace:ns1", None),  # any on self or descendant
    ("user:bob", "namespace.get", "namespace:ns1", None),
    ("user:carol", "dataset.read", "dataset:ns2.sales_eu", None),  # a wildcard grant
    ("user:carol", "dataset.read", "dataset:ns2.x", None),
    ("user:alice", "dataset.create", "dataset:ns1.new", None),  # a create: the entity does not exist
    ("user:bob", "dataset.create", "dataset:ns1.new", {"dataset_type": "dataset_type:ns1.t"}),
    ("user:alice", "application.deploy", "application:ns1.app2", {"artifact": "artifact:ns1.lib.1"}),
    ("user:bob", "application.deploy", "application:ns1.app2", {"artifact": "artifact:ns1.lib.1", "new_artifact": "true"}),
    ("user:dave", "application.deploy", "application:ns1.app", {"artifact": "artifact:ns1.lib.1"}),
    ("user:dave", "schedule.resume", "schedule:ns1.app.s", {"program": "program:ns1.app.workflow.w"}),
    ("user:root", "dataset.drop", "dataset:ns1.a", None),  # a superuser: bypass, unmet listed
    ("user:root", "namespace.delete", "namespace:ns2", None),
    ("user:mallory", "dataset.read", "dataset:ns1.c", None),
    ("user:mallory", "dataset.write", "dataset:ns1.a", None),
]


def _both(policy: str, world: dict[str, Any]) -> tuple[Authorizer, Authorizer]:
    loaded = dsl.load_policy(policy)
    return (
        privilog.Authorizer(loaded, load_world_for(loaded, dict(world)), backend="compiled"),
        privilog.Authorizer(loaded, load_world_for(loaded, dict(world)), backend="pydatalog"),
    )


def _reference(authz: Authorizer, principal: str, operation: str, entity: str, args: Any) -> Any:
    return tabled(authz.check(authz.request(principal, operation, entity, args)), authz.policy)


@pytest.mark.parametrize("policy", ["cdap", str(HERE / "blocklist.policy")])
def test_rows_by_plans_are_the_reference_rows(policy: str) -> None:
    fast, reference = _both(policy, WORLD)
    for case in CASES:
        assert fast.tabled(*case) == _reference(reference, *case), case
        assert fast.tabled(*case) == fast.tabled(*case)  # the second time, from what was kept


def test_the_columns_say_what_was_decided_and_why() -> None:
    fast, _ = _both("cdap", WORLD)
    row = fast.tabled("user:bob", "dataset.read", "dataset:ns1.c")
    assert (row.decision, row.unmet, row.bypass, row.denied_by) == ("allow", (), (), ())
    assert row.allowed_by == (("dataset.read#1", "group:eng", "READ", "dataset:ns1.c"),)
    row = fast.tabled("user:alice", "namespace.delete", "namespace:ns1")
    assert row.decision == "deny"
    lacking = {u[0]: u[2] for u in row.unmet}
    assert lacking["namespace.delete#2"] == (
        "application:ns1.app",
        "artifact:ns1.lib.1",
        "dataset:ns1.c",
        "program:ns1.app.workflow.w",
    )
    row = fast.tabled("user:root", "dataset.drop", "dataset:ns1.a")
    assert (row.decision, row.bypass, [u[0] for u in row.unmet]) == ("allow", ("superuser",), ["dataset.drop#1"])
    row = fast.tabled("user:bob", "dataset.create", "dataset:ns1.new", {"dataset_type": "dataset_type:ns1.t"})
    assert row.unmet == (
        ("dataset.create#1", "ADMIN", ()),
        ("dataset.create#2", "any on $dataset_type if $dataset_type", ()),
    )  # each requirement's text as the policy writes it, with its condition


def test_a_policy_s_own_deny_rule_is_named_by_its_place() -> None:
    fast, reference = _both(str(HERE / "blocklist.policy"), WORLD)
    row = fast.tabled("user:mallory", "dataset.read", "dataset:ns1.c")
    assert row.decision == "deny" and row.unmet == ()
    assert len(row.denied_by) == 1 and row.denied_by[0].endswith("blocklist.policy:6")  # FILE:LINE
    assert row == _reference(reference, "user:mallory", "dataset.read", "dataset:ns1.c", None)


def test_requirements_met_by_a_policy_s_own_rules() -> None:
    import yaml

    world = yaml.safe_load((HERE / "by_rules_world.yaml").read_text())
    fast, reference = _both(str(HERE / "by_rules.policy"), world)
    cases = [
        ("user:alice", "namespace.create", "namespace:new", {"owner": "kerberosprincipal:alice@EX.COM"}),
        ("user:bob", "namespace.create", "namespace:new", {"owner": "kerberosprincipal:alice@EX.COM"}),
        ("user:carol", "namespace.get", "namespace:ns1", None),
        ("user:dave", "namespace.get", "namespace:ns1", None),
        ("user:dave", "dataset.read", "dataset:ns1.d", None),
    ]
    for case in cases:
        assert fast.tabled(*case) == _reference(reference, *case), case


def test_a_list_argument_is_decided_without_plans_and_the_same(tmp_path: Path) -> None:
    from test_list_arguments import POLICY
    from test_list_arguments import WORLD as LISTS

    path = tmp_path / "lists.policy"
    path.write_text(POLICY, encoding="utf-8")
    fast, reference = _both(str(path), LISTS)
    for datasets in (["dataset:ns1.a", "dataset:ns1.stage_1"], ["dataset:ns1.a", "dataset:ns1.b", "dataset:ns1.c"]):
        case = ("user:alice", "application.deploy", "application:ns1.app", {"datasets": datasets})
        assert fast.tabled(*case) == _reference(reference, *case), case
    row = fast.tabled(*case)
    assert [(u[0], u[2]) for u in row.unmet] == [("application.deploy#2", ("dataset:ns1.b", "dataset:ns1.c"))]


def test_a_bad_request_is_the_reference_engine_s_error() -> None:
    fast, _ = _both("cdap", WORLD)
    with pytest.raises(RequestError, match=r"unknown operation `dataset\.rread`"):
        fast.tabled("user:bob", "dataset.rread", "dataset:ns1.a")
    with pytest.raises(RequestError, match="acts on a dataset"):
        fast.tabled("user:bob", "dataset.read", "namespace:ns1")
    with pytest.raises(RequestError, match="takes"):
        fast.tabled("user:bob", "dataset.read", "dataset:ns1.a", {"nope": "x"})


def test_a_kept_row_is_not_answered_after_the_world_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    from privilog.engine.authorizer import tabling
    from privilog.engine.world import Grant

    monkeypatch.setattr(tabling, "COSTLY", -1.0)  # keep every row
    fast, reference = _both("cdap", {**WORLD, "admins": ["user:admin"]})
    case = ("user:bob", "dataset.write", "dataset:ns1.b", None)
    assert fast.tabled(*case).decision == "deny"
    assert fast.tabled(*case).decision == "deny"  # kept
    grant = Grant("user:bob", "WRITE", fast.entity("dataset:ns1.b"))
    fast.grant("user:admin", [grant])
    reference.grant("user:admin", [grant])
    assert fast.tabled(*case) == _reference(reference, *case)
    assert fast.tabled(*case).decision == "allow"
