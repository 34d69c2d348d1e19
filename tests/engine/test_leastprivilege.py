"""Least privilege: the needs of a decision, the keep set, and the recommendation proving itself.

The brute force here knows nothing of needs: it takes grants away from the world, decides the log
again with the engine, and finds the most grants that can go together. The recommendation must be
safe (every request allowed before stays allowed) and, where the method is exact, as large.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from privilog.engine.justify import justify
from privilog.engine.leastprivilege import analyse, harmonic, keep_set, verify
from privilog.engine.world import Grant

import privilog
from privilog.api import load_world_for
from privilog.cli import main

POLICIES = {name: privilog.load(name) for name in ("cdap", "cdap-4.2")}

ENTITIES = [
    "namespace:ns1",
    "application:ns1.a1",
    "program:ns1.a1.service.p1",
    "dataset:ns1.d1",
    "dataset:ns1.d2",
    "stream:ns1.s1",
    "artifact:ns1.art1",
]
USERS = ["user:u1", "user:u2"]
HOLDERS = [*USERS, "group:g1"]
OPERATIONS = {
    "namespace": ["namespace.get", "namespace.delete"],
    "application": ["application.get", "application.delete"],
    "program": ["program.start", "program.get"],
    "dataset": ["dataset.read", "dataset.write", "dataset.get"],
    "stream": ["stream.read", "stream.get"],
    "artifact": ["artifact.get"],
}
OPERATIONS_42 = {"namespace": ["namespace.drop_all_streams"]}


def authorizer(policy: str, world: dict[str, Any]) -> privilog.Authorizer:
    authz = POLICIES[policy]
    authz.world = load_world_for(authz.policy, world)
    authz.refresh()
    return authz


@st.composite
def deployments(draw: st.DrawFn, policy: str = "cdap") -> tuple[dict[str, Any], list[tuple[str, str, str]]]:
    entities = draw(st.lists(st.sampled_from(ENTITIES), min_size=1, max_size=5, unique=True))
    grants = draw(
        st.lists(
            st.tuples(st.sampled_from(HOLDERS), st.sampled_from(["READ", "WRITE", "ADMIN", "EXECUTE"]),
                      st.sampled_from(ENTITIES)),
            min_size=1, max_size=7, unique=True,
        )
    )  # fmt: skip
    members = draw(st.lists(st.tuples(st.sampled_from(USERS), st.just("group:g1")), max_size=2, unique=True))
    world = {"entities": entities, "grants": [list(g) for g in grants], "members": [list(m) for m in members]}
    operations = dict(OPERATIONS)
    if policy == "cdap-4.2":
        operations = {"namespace": ["namespace.get", *OPERATIONS_42["namespace"]], "dataset": ["dataset.read"]}
    usable = [e for e in ENTITIES if e.split(":")[0] in operations]
    log = draw(
        st.lists(
            st.sampled_from(USERS).flatmap(
                lambda u: st.sampled_from(usable).flatmap(
                    lambda e: st.sampled_from(operations[e.split(":")[0]]).map(lambda o: (u, o, e))
                )
            ),
            min_size=1, max_size=8,
        )
    )  # fmt: skip
    return world, log


def _requests(authz: privilog.Authorizer, log: list[tuple[str, str, str]]) -> list[privilog.Request]:
    return [authz.request(*row) for row in log]


def brute_force_most_removable(policy: str, world: dict[str, Any], log: list[tuple[str, str, str]]) -> int:
    """The most grants that can go together with every allowed request staying allowed (by deciding)."""
    authz = authorizer(policy, world)
    allowed = [r for r in _requests(authz, log) if authz.decide(r)]
    grants = sorted({tuple(g) for g in world["grants"]})
    for size in range(len(grants), 0, -1):
        for removed in itertools.combinations(grants, size):
            kept = [list(g) for g in grants if g not in removed]
            after = authorizer(policy, {**world, "grants": kept})
            if all(after.decide(r) for r in allowed):
                return size
    return 0


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("policy", ["cdap", "cdap-4.2"])
@SETTINGS
@given(data=st.data())
def test_the_recommendation_keeps_every_allowed_request_and_is_as_large_as_brute_force(
    policy: str, data: st.DataObject
) -> None:
    world, log = data.draw(deployments(policy))
    authz = authorizer(policy, world)
    decided = list(justify(authz, _requests(authz, log)))
    report = analyse(authz.world, decided)
    assert report.method == "exact"
    allowed = [j.request for j in decided if j.allowed]
    assert verify(authz, report.removals, allowed) == []
    removable = len(report.removals)
    authz = authorizer(policy, world)  # brute force reuses the authorizer; ask it afresh
    assert removable == brute_force_most_removable(policy, world, log)


@SETTINGS
@given(data=st.data())
def test_unused_grants_serve_no_allowed_request_and_sole_ones_are_needed(data: st.DataObject) -> None:
    world, log = data.draw(deployments())
    authz = authorizer("cdap", world)
    requests = _requests(authz, log)
    report = analyse(authz.world, list(justify(authz, requests)))
    allowed = [r for r in requests if authz.decide(r)]
    everything = sorted({tuple(g) for g in world["grants"]})
    for grant in report.unused:  # taking one unused grant away changes no allowed request
        without = authorizer("cdap", {**world, "grants": [list(g) for g in everything if g != _row(grant)]})
        assert all(without.decide(r) for r in allowed)
    for sole in report.sole:  # taking a sole grant away denies its example
        without = authorizer("cdap", {**world, "grants": [list(g) for g in everything if g != _row(sole.grant)]})
        assert not without.decide(sole.examples[0])


def _row(grant: Grant) -> tuple[str, str, str]:
    return (grant.principal, grant.action, str(grant.entity))


def test_a_delete_of_everything_inside_needs_admin_on_each_entity() -> None:
    world = {
        "entities": ["namespace:ns1", "dataset:ns1.d1", "stream:ns1.s1"],
        "grants": [
            ["user:u1", "ADMIN", "namespace:ns1"],
            ["user:u1", "ADMIN", "dataset:ns1.d1"],
            ["group:g1", "ADMIN", "dataset:ns1.d1"],
            ["user:u1", "ADMIN", "stream:ns1.s1"],
            ["user:u1", "READ", "stream:ns1.s1"],
        ],
        "members": [["user:u1", "group:g1"]],
    }
    authz = authorizer("cdap", world)
    (decided,) = justify(authz, [authz.request("user:u1", "namespace.delete", "namespace:ns1")])
    assert decided.allowed
    needs = {(str(n.covered), frozenset(map(str, n.grants))) for n in decided.needs}
    assert ("dataset:ns1.d1", frozenset({"user:u1 ADMIN dataset:ns1.d1", "group:g1 ADMIN dataset:ns1.d1"})) in needs
    assert ("stream:ns1.s1", frozenset({"user:u1 ADMIN stream:ns1.s1"})) in needs
    report = analyse(authz.world, [decided])
    assert [str(g) for g in report.unused] == ["user:u1 READ stream:ns1.s1"]
    assert len(report.removals) == 2  # the READ, and one of the two ADMINs on the dataset
    assert {str(s.grant) for s in report.sole} == {"user:u1 ADMIN namespace:ns1", "user:u1 ADMIN stream:ns1.s1"}


def test_greedy_is_used_beyond_the_exact_limit_and_says_its_bound() -> None:
    grants = [Grant(f"user:u{i}", "READ", privilog.EntityId.parse("dataset:ns1.d")) for i in range(6)]
    needs = [frozenset(grants[i : i + 3]) for i in range(4)]
    keep, method, bound = keep_set(needs, exact_limit=3)
    assert method == "greedy" and bound == round(harmonic(3), 3)
    assert all(need & keep for need in needs)
    exact, method, bound = keep_set(needs, exact_limit=24)
    assert method == "exact" and bound is None and len(exact) == 2 and len(keep) >= len(exact)


LOG = """\
principal,operation,entity,args,timestamp
user:bob,dataset.read,dataset:sales.orders,,2026-11-01T10:00:00Z
user:dave,namespace.get,namespace:marketing,,2026-11-02T10:00:00Z
user:alice,namespace.delete,namespace:sales,,2026-11-03T10:00:00Z
user:bob,dataset.rread,dataset:sales.orders,,2026-11-04T10:00:00Z
"""
SAMPLE = Path(__file__).resolve().parents[2] / "privilog" / "samples" / "world.yaml"


def test_privilog_unused_on_the_sample(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "log.csv"
    log.write_text(LOG)
    assert main(["unused", "--world", str(SAMPLE), "--log", str(log), "--verify"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        "log: 4 rows, from 2026-11-01T10:00:00Z to 2026-11-03T10:00:00Z: 2 allowed, 1 denied, 1 rejected\n"
    )
    assert f"{log}:5: unknown operation `dataset.rread`" in out
    assert "all 2 allowed requests stay allowed" in out
    assert main(["unused", "--world", str(SAMPLE), "--log", str(log), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["summary"]["allowed"] == 2 and report["summary"]["rejected"] == 1
    sole = {(s["principal"], s["action"], s["entity"]) for s in report["sole"]}
    assert sole == {("user:bob", "READ", "dataset:sales.orders"), ("group:analysts", "READ", "dataset:marketing.campaigns")}
    assert {"principal": "user:bob", "action": "READ", "entity": "dataset:sales.orders", "used": True} not in report[
        "recommended_removals"
    ]


def test_a_log_in_json_lines_gives_the_same_answers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv_log, json_log = tmp_path / "log.csv", tmp_path / "log.jsonl"
    csv_log.write_text(LOG)
    rows = [line.split(",") for line in LOG.splitlines()[1:]]
    json_log.write_text(
        "\n".join(json.dumps({"principal": p, "operation": o, "entity": e, "timestamp": t}) for p, o, e, _, t in rows)
    )
    answers = []
    for log in (csv_log, json_log):
        assert main(["unused", "--world", str(SAMPLE), "--log", str(log), "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        answers.append({k: v for k, v in report.items() if k != "rejected"})
    assert answers[0] == answers[1]


def test_a_log_that_cannot_be_read_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "log.csv"
    log.write_text("who,what\nuser:a,x\n")
    assert main(["unused", "--world", str(SAMPLE), "--log", str(log)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"privilog: {log}:1: a request needs the columns principal, operation, entity; missing")
    assert main(["unused", "--world", str(SAMPLE), "--log", str(tmp_path / "nope.csv")]) == 2
    assert "no such access log file" in capsys.readouterr().err


@pytest.mark.parametrize(
    "command",
    [
        ["unused", "--world", str(SAMPLE), "--log", "log.csv"],
        ["pipeline", "unused", "--entities", "e.csv", "--grants", "g.csv", "--requests", "log.csv", "--out", "out"],
    ],
)
@pytest.mark.parametrize("limit", ["-1", "many", "2.5"])
def test_an_exact_limit_that_is_not_a_count_is_refused_in_one_line(
    command: list[str], limit: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both commands share the option (privilog.usage); refused before anything is read or Spark starts."""
    assert main([*command, "--exact-limit", limit]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "argument --exact-limit: expected " in err and limit in err


def test_the_docs_example_is_what_privilog_prints(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import re
    import shlex

    root = SAMPLE.parents[2]
    section = (root / "docs" / "least-privilege.md").read_text(encoding="utf-8")
    block = re.search(r"```console\n\$ (.*?)\n(.*?)```", section, flags=re.S)
    assert block is not None
    argv = shlex.split(block.group(1))
    monkeypatch.chdir(root)
    assert argv[0] == "privilog" and main(argv[1:]) == 0
    assert capsys.readouterr().out == block.group(2)
