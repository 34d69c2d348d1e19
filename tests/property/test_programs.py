"""Every backend against the reference and an independent engine, on generated *programs*.

The differential tests elsewhere draw worlds for the shipped policies; here Hypothesis draws
the policies too (programs.py): relations with facts written in the policy and rules deriving
more of them, recursion of every shape, stratified negation, comparisons, constants of every
kind, deny rules, bypasses and `by` options over the prelude. On each program:

* the compiled backend (the default) and pyDatalog (the reference) hold the same rows of
  every relation as clingo (clingo_oracle.py: translated from the IR, not from anything
  privilog's engine makes), when the world is loaded and after each change of it;
* over the prelude, the two backends give the same decision, proof, unmet requirements and
  fixes for every request (``Decision.to_json``), and the fast paths (``allows``, ``decide``,
  a batch) give the decision ``check`` gives.

``--hypothesis-profile=long`` runs many more programs (tests/README.md: "Programs").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import clingo_oracle
import pytest
from deadline import Overdue, in_child
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from privilog.dsl.ir import Policy
from privilog.engine.backends import Backend, make_backend
from privilog.engine.program import by_rules, compile_policy, table_facts
from programs import (
    ENTITIES,
    GROUPS,
    PATTERNS,
    USERS,
    Program,
    generic_programs,
    prelude_policies,
    prelude_worlds,
)

from privilog import Authorizer, dsl
from privilog.api import load_world_for

BACKENDS = ("compiled", "pydatalog")
# Programs drawn (generic, over the prelude) under each profile (tests/conftest.py):
# the suite's, `long` by hand before an engine change lands, `mutation` for each mutant.
EXAMPLES = {"long": (5000, 1000), "mutation": (40, 6)}
PROFILE = getattr(settings, "_current_profile", "default")  # the one --hypothesis-profile loaded
GENERIC, OVER_PRELUDE = EXAMPLES.get(PROFILE, (150, 25))
SETTINGS = settings(
    max_examples=GENERIC,
    derandomize=PROFILE != "long",  # the suite's run is the same every time; the long one explores
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
PRELUDE_SETTINGS = settings(SETTINGS, max_examples=OVER_PRELUDE)

Row = tuple[str, ...]
REFERENCE_TIME = 3.0  # seconds pyDatalog is given for one program (most take milliseconds; a few never end)


def contents(backend: Backend, relations: Mapping[str, int]) -> dict[str, set[Row]]:
    return {name: backend.query(name) for name in relations}


def disagreements(expected: Mapping[str, set[Row]], got: Mapping[str, Mapping[str, set[Row]]]) -> list[str]:
    """Each relation whose rows differ from clingo's, on each backend, with the rows."""
    out = []
    for backend, relations in got.items():
        for name, rows in relations.items():
            want = expected.get(name, set())
            if rows != want:
                out.append(f"{backend} `{name}`: missing {sorted(want - rows)}, extra {sorted(rows - want)}")
    return out


# ---- generic programs, without the prelude ----------------------------------------------------


def _apply(backends: Mapping[str, Backend], world: dict[str, set[Row]], kind: str, name: str, row: Row) -> bool:
    """A change of one world row on every backend (as the authorizer makes them: only real ones)."""
    rows = world[name]
    if (kind == "add") == (row in rows):
        return False
    for backend in backends.values():
        (backend.add if kind == "add" else backend.remove)(name, {row})
    (rows.add if kind == "add" else rows.discard)(row)
    return True


@SETTINGS
@given(generic_programs())
def test_generic_programs_agree_with_clingo(program: Program) -> None:
    policy = dsl.parse_policy(program.text, file="generated.policy", include_prelude=False)
    compiled = compile_policy(policy)
    backends = {name: make_backend(name, compiled) for name in BACKENDS}
    world = {name: set() for name in program.world}
    for name, rows in program.world.items():
        for row in rows:
            _apply(backends, world, "add", name, row)
    steps = [("load", "", ()), *program.changes]
    reference = True
    for kind, name, row in steps:
        if kind != "load" and not _apply(backends, world, kind, name, row):
            continue
        expected = clingo_oracle.solve(policy.rules, world)
        got = {"compiled": contents(backends["compiled"], program.relations)}
        if reference:
            try:
                got["pydatalog"] = in_child(lambda: contents(backends["pydatalog"], program.relations), REFERENCE_TIME)
            except Overdue:
                # pyDatalog's resolution does not end on some recursive programs with negation;
                # clingo, which grounds and solves, answers them and decides alone
                event("pyDatalog gave no answer in time; clingo decides")
                reference = False
        wrong = disagreements(expected, got)
        assert not wrong, f"after {kind} {name}{row}:\n" + "\n".join(wrong)


# ---- policies over the prelude -----------------------------------------------------------------


def _requests(draw: st.DrawFn, policy: Policy) -> list[tuple[str, str, str]]:
    by_type: dict[str, list[str]] = {}
    for op in policy.operations:
        by_type.setdefault(op.entity_type, []).append(op.qualified)
    entities = [e for e in ENTITIES if e.split(":")[0] in by_type]
    out = []
    for _ in range(draw(st.integers(1, 8))):
        entity = draw(st.sampled_from(entities))
        operation = draw(st.sampled_from(by_type[entity.split(":")[0]]))
        out.append((draw(st.sampled_from([*USERS, *GROUPS])), operation, entity))
    return out


def _oracle_rows(authz: Authorizer, ids: Mapping[str, Any]) -> dict[str, set[Row]]:
    """What clingo derives from the policy's rules (the prelude's, its own, its `by` options) over
    the facts the authorizer gave its backend and the requests asserted."""
    facts: dict[str, set[Row]] = {k: set(v) for k, v in table_facts(authz.policy)[0].items()}
    for name, rows in authz.loaded.facts.items():
        facts.setdefault(name, set()).update(rows)
    for rid, request in ids.items():
        for name, rows in authz.deciding.request_facts(rid, request).items():
            facts.setdefault(name, set()).update(rows)
    # the wildcards among the world's facts match what programs.PATTERNS says, among the entities that
    # exist and those the requests name: not what the engine worked out
    given = {v for rows in authz.world.facts.values() for row in rows for v in row if v in PATTERNS}
    places = {str(e) for e in authz.world.existing()} | {str(r.entity) for r in ids.values()}
    facts["matches"] = {row for row in facts.get("matches", set()) if row[1] not in PATTERNS} | {
        (entity, pattern) for pattern in given for entity in PATTERNS[pattern] if entity in places
    }
    return clingo_oracle.solve([*authz.policy.rules, *by_rules(authz.policy)], facts)


def _named(rows: set[Row], ids: Mapping[str, int]) -> set[Row]:
    """Rows with each request id replaced by the request's place in the batch."""
    return {tuple(f"#{ids[v]}" if v in ids else v for v in row) for row in rows}


def _answers(
    policy: Policy, world: Mapping[str, Any], backend: str, requests: list[tuple[str, str, str]]
) -> tuple[list[Any], dict[str, set[Row]], dict[str, set[Row]]]:
    """One backend's decisions (as JSON) for the requests, after checking that its fast paths and
    a batch decide as ``check`` does; every relation's rows with the requests asserted; and, from
    the very facts it was given, clingo's rows."""
    authz = Authorizer(policy, load_world_for(policy, dict(world)), backend)
    built = [authz.request(*r) for r in requests]
    checked = [authz.check(r) for r in built]
    for request, one, many in zip(built, checked, authz.check_many(built), strict=True):
        assert many.to_json() == one.to_json(), f"{backend}: a batch decides {request} otherwise"
        assert authz.decide(request) == one.allowed, f"{backend}: decide() differs from check() on {request}"
        allowed = authz.allows(request.principal, request.operation, str(request.entity))
        assert allowed == one.allowed, f"{backend}: allows() differs from check() on {request}"
    with authz.asserted(built) as ids:
        places = {rid: i for i, rid in enumerate(ids)}
        rows = {r: _named(authz.backend.query(r), places) for r in authz.program.relations}
        expected = {r: _named(found, places) for r, found in _oracle_rows(authz, ids).items()}
    return [d.to_json() for d in checked], rows, expected


@PRELUDE_SETTINGS
@given(prelude_policies(), prelude_worlds(), st.data())
def test_policies_over_the_prelude_agree(policy_text: tuple[str, list[str]], world: dict[str, Any], data: Any) -> None:
    text, _own = policy_text
    policy = dsl.parse_policy(text, file="generated.policy")
    requests = _requests(data.draw, policy)
    decisions, rows, expected = _answers(policy, world, "compiled", requests)
    wrong = disagreements(expected, {"compiled": rows})
    assert not wrong, "\n".join(wrong)
    try:
        reference, reference_rows, _ = in_child(lambda: _answers(policy, world, "pydatalog", requests), REFERENCE_TIME)
    except Overdue:
        event("pyDatalog gave no answer in time; clingo decides")
        return
    assert not disagreements(expected, {"pydatalog": reference_rows}), "pyDatalog differs from clingo"
    for request, mine, theirs in zip(requests, decisions, reference, strict=True):
        assert mine == theirs, f"the backends decide or explain {request} otherwise"


@pytest.mark.parametrize(
    "text, relation, rows",
    [
        (  # the issue's two programs: facts written in the policy and rules deriving more
            'orbits("earth", "sun").\norbits("moon", "earth").\norbits(X, Y) :- orbits(X, Z), orbits(Z, Y).',
            "orbits",
            {("earth", "sun"), ("moon", "earth"), ("moon", "sun")},
        ),
        (  # the same constant spelled two ways; `01` is another
            'p(1).\np("1").\np(01).\nq(X) :- p(X), X == "1".',
            "q",
            {("1",)},
        ),
        (  # docs/language.md's: a relation of no columns, a body of a negation alone
            "maintenance().\nopen() :- not maintenance().\nclosed() :- maintenance().",
            "closed",
            {()},
        ),
        (  # text compares as text: "10" < "9"
            "n(10).\nn(9).\nless(X, Y) :- n(X), n(Y), X < Y.",
            "less",
            {("10", "9")},
        ),
    ],
)
def test_programs_the_issue_names(text: str, relation: str, rows: set[Row]) -> None:
    policy = dsl.parse_policy(text, include_prelude=False)
    program = compile_policy(policy)
    assert clingo_oracle.solve(policy.rules, {}).get(relation, set()) == rows
    for name in BACKENDS:
        assert make_backend(name, program).query(relation) == rows, name
