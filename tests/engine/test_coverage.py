"""The reverse lookup (`engine.who`, which `expect: {who: ...}` asks) and which rules derive something for a request
(`engine.coverage`), on the reference backend and the compiled one alike."""

from __future__ import annotations

import pytest
from privilog.engine.authorizer import Authorizer
from privilog.engine.coverage import deriving_rules
from privilog.engine.who import who
from privilog.engine.world import world_from_data

import privilog
from privilog import dsl

BACKENDS = ["pydatalog", "compiled"]
WORLD = {
    "entities": ["namespace:ns1", "dataset:ns1.ds", "dataset:ns1.logs"],
    "grants": [
        ["group:eng", "READ", "dataset:ns1.ds"],
        ["user:zed", "READ", "dataset:ns1.ds"],
        ["user:zed", "ADMIN", "namespace:ns1"],
    ],
    "members": [["user:ann", "group:eng"], ["user:out", "group:other"]],
}


@pytest.mark.parametrize("backend", BACKENDS)
def test_who_is_the_exact_set_of_the_worlds_principals_users_first(backend: str) -> None:
    authz = privilog.load("cdap", WORLD, backend=backend)
    found = who(authz, "dataset.read", "dataset:ns1.ds")
    assert [d.request.principal for d in found.allowed] == ["user:ann", "user:zed", "group:eng"]
    assert found.checked == 5
    assert all(d.allowed for d in found.allowed)
    assert who(authz, "namespace.delete", "namespace:ns1").allowed == ()


def test_who_in_a_world_without_principals_still_checks_the_request() -> None:
    authz = privilog.load("cdap", {})
    assert who(authz, "dataset.read", "dataset:ns1.ds").allowed == ()
    with pytest.raises(privilog.PrivilogError, match=r"dataset\.reed"):
        who(authz, "dataset.reed", "dataset:ns1.ds")


def test_the_rules_deriving_something_are_the_same_on_every_backend() -> None:
    policy = dsl.load_policy("cdap")
    found = {}
    for backend in BACKENDS:
        authz = Authorizer(policy, world_from_data(WORLD, policy.actions), backend)
        requests = [
            authz.request("user:ann", "dataset.read", "dataset:ns1.ds"),
            authz.request("user:zed", "namespace.delete", "namespace:ns1"),
            authz.request("user:ann", "dataset.create", "dataset:ns1.new", {"owner": "kerberosprincipal:k"}),
        ]
        found[backend] = [deriving_rules(authz, r) for r in requests]
        assert authz.check(requests[0]).allowed  # the request's facts were retracted after
    assert found["compiled"] == found["pydatalog"]
    heads = [{policy.rules[i].head.predicate for i in rules} for rules in found["compiled"]]
    assert "allowed" in heads[0] and "lacking" not in heads[0]
    assert {"lacking", "denied"} <= heads[1]  # zed lacks ADMIN on the datasets inside
    assert "given" in heads[2]
