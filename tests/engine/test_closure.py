"""A transitive closure walked when asked (engine/compiled/closure.py), held to one worked out directly.

The compiled backend keeps the prelude's `ancestor` and `descendant` (and any relation a policy
defines as exactly the transitive closure of another) as a :class:`Closure` over its edges. Here
its rows, lookups by either end, and the deltas it reports when edges come and go are compared
with the closure recomputed from scratch, on generated graphs with cycles and shared nodes (not
only CDAP's trees), in both orientations. The generated-program and stateful differential tests
(tests/property) hold whole programs that read them to the reference backend.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from privilog.dsl.ir import Atom, Rule, Var
from privilog.engine.analysis import Component, Kind
from privilog.engine.authorizer import Authorizer
from privilog.engine.compiled.closure import Closure, closure_edge
from privilog.engine.compiled.relation import Relation
from privilog.engine.ids import EntityId
from privilog.engine.world import Grant

from privilog import dsl
from privilog.api import load_world_for

X, Y, M = Var("X"), Var("Y"), Var("M")
NODES = "abcdef"


def reference(edges: set[tuple[str, str]], reversed_: bool) -> set[tuple[str, str]]:
    steps = {(b, a) if reversed_ else (a, b) for a, b in edges}
    closure = set(steps)
    while True:
        more = {(a, d) for a, b in closure for c, d in steps if b == c} - closure
        if not more:
            return closure
        closure |= more


def component(*rules: Rule) -> Component:
    return Component(frozenset({"r"}), rules, Kind.WORLD)


def rule(head: tuple[Var, Var], *body: tuple[str, tuple[Var, Var]]) -> Rule:
    return Rule(Atom("r", head), tuple(Atom(p, t) for p, t in body))


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        ((rule((X, Y), ("e", (X, Y))), rule((X, Y), ("r", (X, M)), ("e", (M, Y)))), ("e", False)),
        ((rule((X, Y), ("e", (X, Y))), rule((X, Y), ("e", (X, M)), ("r", (M, Y)))), ("e", False)),
        ((rule((X, Y), ("r", (X, M)), ("e", (M, Y))), rule((X, Y), ("e", (X, Y)))), ("e", False)),
        ((rule((X, Y), ("e", (Y, X))), rule((X, Y), ("r", (X, M)), ("e", (Y, M)))), ("e", True)),
        ((rule((X, Y), ("e", (Y, X))), rule((X, Y), ("e", (M, X)), ("r", (M, Y)))), ("e", True)),
        # not a closure: the step goes the other way from the base, joins the wrong ends, or reads another relation
        ((rule((X, Y), ("e", (X, Y))), rule((X, Y), ("r", (X, M)), ("e", (Y, M)))), None),
        ((rule((X, Y), ("e", (X, Y))), rule((X, Y), ("r", (M, X)), ("e", (M, Y)))), None),
        ((rule((X, Y), ("e", (X, Y))), rule((X, Y), ("r", (X, M)), ("f", (M, Y)))), None),
        ((rule((X, Y), ("e", (X, Y))), rule((X, Y), ("r", (X, M)), ("r", (M, Y)))), None),
        ((rule((X, Y), ("e", (X, X))), rule((X, Y), ("r", (X, M)), ("e", (M, Y)))), None),
        ((rule((X, Y), ("e", (X, Y))),), None),
    ],
)
def test_only_a_transitive_closure_is_recognized(rules: tuple[Rule, ...], expected: tuple[str, bool] | None) -> None:
    assert closure_edge(component(*rules)) == expected


def check(closure: Closure, edges: set[tuple[str, str]]) -> None:
    want = reference(edges, closure.reversed)
    assert set(closure.rows) == want
    assert bool(closure.rows) is bool(want)
    for a in NODES:
        assert set(closure.index((0,)).get(a, ())) == {r for r in want if r[0] == a}
        assert set(closure.index((1,)).get(a, ())) == {r for r in want if r[1] == a}
        assert bool(closure.index((0,)).get(a)) is any(r[0] == a for r in want)  # as plans test it: `if not x.get(k)`
        assert bool(closure.index((1,)).get(a)) is any(r[1] == a for r in want)
        for b in NODES:
            assert ((a, b) in closure.rows) is ((a, b) in want)


edge = st.tuples(st.sampled_from(NODES), st.sampled_from(NODES))


@settings(max_examples=150, deadline=None)
@given(
    start=st.sets(edge, max_size=10),
    changes=st.lists(st.tuples(st.sets(edge, max_size=3), st.sets(edge, max_size=3)), max_size=6),
    reversed_=st.booleans(),
)
def test_rows_lookups_and_deltas_match_the_closure_worked_out_anew(
    start: set[tuple[str, str]], changes: list[tuple[set[tuple[str, str]], set[tuple[str, str]]]], reversed_: bool
) -> None:
    edges = Relation("e", 2, start)
    closure = Closure("r", edges, reversed_)
    check(closure, start)
    for add, remove in changes:
        before = reference(set(edges.rows), reversed_)
        removed = edges.remove(remove - add)  # as an update: removals first, then additions
        added = edges.add(add)
        gained, lost = closure.delta(added, removed)
        after = reference(set(edges.rows), reversed_)
        assert (gained, lost) == (after - before, before - after)
        check(closure, set(edges.rows))


def test_the_prelude_hierarchy_is_walked_and_decides_as_the_reference() -> None:
    policy = dsl.load_policy("cdap")
    data = {
        "entities": ["dataset:ns1.a", "application:ns1.app", "program:ns1.app.service.s"],
        "grants": [["user:alice", "ADMIN", "dataset:ns1.a"], ["user:alice", "ADMIN", "application:ns1.app"],
                   ["user:bob", "READ", "program:ns1.app.service.s"]],
        "admins": ["user:root"],
    }
    compiled = Authorizer(policy, load_world_for(policy, data), "compiled")
    reference_ = Authorizer(policy, load_world_for(policy, data), "pydatalog")  # a world each: a change changes it
    store = compiled.loaded.backend.store  # type: ignore[attr-defined]
    assert isinstance(store["ancestor"], Closure) and isinstance(store["descendant"], Closure)
    asked = [
        ("user:alice", "namespace.delete", "namespace:ns1"),  # ADMIN on every descendant: the program is missing
        ("user:bob", "namespace.get", "namespace:ns1"),  # visible through a descendant
        ("user:bob", "application.get", "application:ns1.app"),
        ("user:alice", "dataset.create", "dataset:ns1.b"),  # a create: the entity placed for the decision
        ("user:bob", "program.start", "program:ns1.app.service.t"),
    ]
    for who, operation, entity in asked:
        mine, theirs = compiled.check(compiled.request(who, operation, entity)), reference_.check(
            reference_.request(who, operation, entity))
        assert mine.allowed == theirs.allowed, (who, operation, entity)
        assert mine.unmet == theirs.unmet
    for authz in (compiled, reference_):
        authz.grant("user:root", [Grant("user:alice", "ADMIN", EntityId.parse("program:ns1.app.service.s"))])
        authz.revoke("user:root", [Grant("user:bob", "READ", EntityId.parse("program:ns1.app.service.s"))])
    for who, operation, entity in asked:
        assert compiled.decide(compiled.request(who, operation, entity)) == reference_.decide(
            reference_.request(who, operation, entity)), (who, operation, entity)
