"""Wildcard grants (issue 16): `*` and `?` in a grant's id, matched part by part as Sentry does.

Held to the reference (pyDatalog) and the compiled engine alike; tests/property/test_oracle.py
holds them to an independent oracle on generated worlds, tests/spark the pipeline.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from privilog.engine.authorizer import Authorizer, RequestError
from privilog.engine.ids import EntityId, IdError
from privilog.engine.justify import justify
from privilog.engine.patterns import is_pattern, matches, parse_pattern
from privilog.engine.world import Grant, WorldError

import privilog
from privilog import dsl
from privilog.api import load_world_for
from privilog.render.explain import render_decision

BACKENDS = ["compiled", "pydatalog"]

WORLD = {
    "entities": [
        "dataset:ns1.sales.2024",
        "dataset:ns1.hr",
        "program:ns1.app.service.api",
        "program:ns1.app.spark.job",
        "program:ns2.app.service.api",
        "artifact:ns1.etl",
    ],
    "grants": [
        ["user:alice", "READ", "dataset:ns1.sales.*"],
        ["group:eng", "EXECUTE", "program:ns1.app.*.*"],
        ["user:carol", "ADMIN", "dataset:ns?.new*"],
        ["user:dave", "ADMIN", "application:ns1.*"],
        ["user:dave", "ADMIN", "artifact:ns1.e?l"],
    ],
    "members": [["user:bob", "group:eng"]],
    "admins": ["user:root"],
}


def load(backend: str, world: dict[str, object] | None = None) -> Authorizer:
    policy = dsl.load_policy("cdap")
    return Authorizer(policy, load_world_for(policy, dict(world or WORLD)), backend=backend)


@pytest.mark.parametrize(
    ("pattern", "entity", "expected"),
    [
        ("dataset:ns1.sales.*", "dataset:ns1.sales.2024", True),  # `*` crosses a dataset name's dots
        ("dataset:ns1.sales.*", "dataset:ns1.sales", False),  # ... but the `.` before it is literal
        ("dataset:*.hr", "dataset:ns1.hr", True),
        ("dataset:*.hr", "dataset:ns1.x.hr", False),  # the namespace's `*` stays in the namespace
        ("program:ns1.app.*.*", "program:ns1.app.service.api", True),
        ("program:ns1.app.*.api", "program:ns1.app.spark.job", False),
        ("application:ns1.a?p", "application:ns1.app", True),
        ("application:ns1.a?p", "application:ns1.ap", False),  # `?` is exactly one character
        ("application:ns1.*", "dataset:ns1.app", False),  # a pattern matches its own type only
        ("namespace:ns*", "namespace:ns10", True),
        ("kerberosprincipal:*@EXAMPLE.COM", "kerberosprincipal:alice@EXAMPLE.COM", True),
        ("dataset:ns1.a.b*", "dataset:ns1.aXb1", False),  # everything but `*` and `?` is literal
        ("dataset:ns1.d$x", "dataset:ns1.d$x", True),
    ],
)
def test_a_pattern_matches_part_by_part(pattern: str, entity: str, expected: bool) -> None:
    assert matches(parse_pattern(pattern), EntityId.parse(entity)) is expected


@pytest.mark.parametrize("text", ["dataset:ns1.*", "program:ns1.*.*.*", "namespace:*", "artifact:*.*", "stream:n?.s"])
def test_a_grant_may_name_a_wildcard_in_any_part(text: str) -> None:
    assert is_pattern(parse_pattern(text))


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("dataset:ns*", "malformed dataset pattern"),  # no dataset part
        ("dataset:ns1.a b*", "malformed dataset pattern"),
        ("securekey:ns1.KEY*", "malformed securekey pattern"),  # keys are lower case, wildcards or not
        ("widget:*", "unknown entity type `widget`"),
    ],
)
def test_a_malformed_pattern_is_refused_in_one_line(text: str, said: str) -> None:
    with pytest.raises(IdError, match=said) as raised:
        parse_pattern(text)
    assert "\n" not in str(raised.value)


def test_only_a_grant_may_name_a_wildcard() -> None:
    authz = load("compiled")
    with pytest.raises(RequestError, match="only a grant may name one"):
        authz.request("user:alice", "dataset.read", "dataset:ns1.*")
    with pytest.raises(RequestError, match="only a grant may name one"):
        authz.request("user:dave", "application.deploy", "application:ns1.new", {"artifact": "artifact:ns1.*"})
    policy = dsl.load_policy("cdap")
    with pytest.raises(WorldError, match="only a grant may name one"):
        load_world_for(policy, {"entities": ["dataset:ns1.*"]})


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("principal", "operation", "entity", "args", "allowed"),
    [
        ("user:alice", "dataset.read", "dataset:ns1.sales.2024", {}, True),
        ("user:alice", "dataset.read", "dataset:ns1.hr", {}, False),
        ("user:alice", "dataset.write", "dataset:ns1.sales.2024", {}, False),  # the action still counts
        ("user:bob", "program.start", "program:ns1.app.service.api", {}, True),  # a group's wildcard grant
        ("user:bob", "program.start", "program:ns2.app.service.api", {}, False),
        ("user:carol", "dataset.create", "dataset:ns2.newone", {}, True),  # an entity that does not exist yet
        ("user:carol", "dataset.create", "dataset:ns2.old", {}, False),
        # an argument's entity, existing or not, is matched too
        ("user:dave", "application.deploy", "application:ns1.new", {"artifact": "artifact:ns1.etl"}, True),
        ("user:dave", "application.deploy", "application:ns1.new", {"artifact": "artifact:ns1.other"}, False),
        (
            "user:dave",
            "application.deploy",
            "application:ns1.new",
            {"artifact": "artifact:ns1.e2l", "new_artifact": "true"},
            True,
        ),
        ("user:alice", "namespace.get", "namespace:ns1", {}, True),  # a matched dataset inside it
        ("user:alice", "namespace.get", "namespace:ns2", {}, False),
    ],
)
def test_decisions_through_wildcard_grants(
    backend: str, principal: str, operation: str, entity: str, args: dict[str, str], allowed: bool
) -> None:
    authz = load(backend)
    request = authz.request(principal, operation, entity, args)
    assert authz.check(request).allowed is allowed
    assert authz.decide(request) is allowed


def test_the_proof_names_the_wildcard_grant() -> None:
    authz = load("compiled")
    decision = authz.check(authz.request("user:bob", "program.start", "program:ns1.app.service.api"))
    text = render_decision(decision)
    assert "by the wildcard grant on program:ns1.app.*.*" in text, text
    (witness,) = decision.outcomes[0].witnesses
    assert witness.pattern == "program:ns1.app.*.*" and witness.to_json()["pattern"] == "program:ns1.app.*.*"


def test_changes_keep_the_matches_as_a_fresh_load_has_them() -> None:
    """A grant, a revoke, a new entity and a deletion, applied one by one, leave the backend's
    facts (matches included) and its answers as loading the changed world anew gives them."""
    authz = load("compiled")
    check = ("user:erin", "dataset.read", "dataset:ns3.x")
    authz.add_entity("user:root", EntityId.parse("dataset:ns3.x"))
    assert not authz.check(authz.request(*check)).allowed
    authz.grant("user:root", [Grant("user:erin", "READ", parse_pattern("dataset:ns3.*"))])
    assert authz.check(authz.request(*check)).allowed
    authz.add_entity("user:root", EntityId.parse("dataset:ns3.y"))
    assert authz.check(authz.request("user:erin", "dataset.read", "dataset:ns3.y")).allowed
    authz.delete_entity("user:root", EntityId.parse("dataset:ns3.y"))
    kept = {relation: set(rows) for relation, rows in authz.loaded.facts.items()}
    fresh = load("compiled", authz.world.to_data())
    assert kept == fresh.loaded.facts
    authz.revoke("user:root", [Grant("user:erin", "READ", parse_pattern("dataset:ns3.*"))])
    assert not authz.check(authz.request(*check)).allowed
    assert not any("dataset:ns3.*" in row for row in authz.loaded.facts["matches"])


def test_least_privilege_counts_the_wildcard_grant_as_used() -> None:
    authz = load("compiled")
    requests = [authz.request("user:bob", "program.start", "program:ns1.app.service.api")]
    (justified,) = justify(authz, requests)
    assert justified.allowed
    assert justified.grants() == {Grant("group:eng", "EXECUTE", parse_pattern("program:ns1.app.*.*"))}


def test_a_world_file_keeps_its_wildcard_grants(tmp_path: object) -> None:
    authz = privilog.load("cdap", dict(WORLD))
    assert Grant("user:alice", "READ", parse_pattern("dataset:ns1.sales.*")) in authz.world.grants
    assert any(g[2] == "dataset:ns1.sales.*" for g in authz.world.to_data()["grants"])


def test_the_cost_of_matching_wildcards_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A crafted world of many `*` patterns over many entities is refused in one line, before its
    facts are made; a grant that would cost too much is refused before the world changes."""
    entities = [f"dataset:ns1.d{i}" for i in range(1200)]
    grants = [["user:x", "READ", f"dataset:ns1.{'?' * n}*"] for n in range(1, 4)]
    monkeypatch.setenv("PRIVILOG_MAX_WILDCARD_TRIES", "1000")
    with pytest.raises(privilog.PrivilogError, match="entity-pattern comparisons; the limit is 1000") as raised:
        load("compiled", {"entities": entities, "grants": grants, "admins": ["user:root"]})
    assert "PRIVILOG_MAX_WILDCARD_TRIES" in str(raised.value)
    authz = load("compiled", {"entities": entities, "admins": ["user:root"]})
    with pytest.raises(privilog.PrivilogError, match=r"matching the wildcard grant on dataset:ns1\.d\*"):
        authz.grant("user:root", [Grant("user:x", "READ", parse_pattern("dataset:ns1.d*"))])
    assert not authz.world.grants
    narrow = Grant("user:x", "READ", parse_pattern("dataset:ns1.d59?"))  # its literal prefix leaves 11 entities
    assert authz.grant("user:root", [narrow]) == [narrow]
    assert authz.check(authz.request("user:x", "dataset.read", "dataset:ns1.d595")).allowed


SYSTEM_DATASETS = (Path(__file__).parent / "system_datasets.policy").read_text()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_policys_rules_match_entity_names_by_pattern(backend: str) -> None:
    policy = dsl.parse_policy(SYSTEM_DATASETS, "sysds.policy")
    authz = Authorizer(policy, load_world_for(policy, {"entities": ["dataset:ns1.system.queue.a"]}), backend=backend)
    for entity, allowed in [
        ("dataset:ns1.system.queue.a", True),  # exists
        ("dataset:ns2.system.queue.b", True),  # created
        ("dataset:ns1.system.streams", True),
        ("dataset:ns1.systemqueue", False),
        ("dataset:ns1.other", False),
    ]:
        decision = authz.check(authz.request("user:x", "dataset.create", entity))
        assert decision.allowed is allowed, entity
        assert decision.bypassed == (("system dataset",) if allowed else ())
    assert not authz.check(authz.request("user:x", "dataset.read", "dataset:ns1.system.queue.a")).allowed


def test_a_malformed_pattern_in_a_policy_is_refused_at_its_place() -> None:
    policy = dsl.parse_policy(SYSTEM_DATASETS.replace('"dataset:*.system.queue*"', '"dataset:ns1"'), "sysds.policy")
    with pytest.raises(privilog.PrivilogError, match=r"sysds.policy:10:\d+: malformed dataset id `dataset:ns1`"):
        Authorizer(policy)
