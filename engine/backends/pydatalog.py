"""The reference backend: pyDatalog, driven through its engine API.

Policy text never reaches pyDatalog's ``load()`` or ``ask()`` (they go through
Python's ``exec``/``eval``): clauses are built from the IR. Each backend owns
a fresh pyDatalog logic, so two policies in one process never share facts.
One rule of the prelude is given in the shape pyDatalog answers fast (``top_down``).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

from privilog.dsl.ir import Atom, Comparison, Const, Rule, Term, Var
from privilog.engine.program import Program, Row
from pyDatalog import Logic, pyEngine

_LOCK = threading.RLock()
_PYDATALOG_OPERATORS = {"==": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def _term(term: Term) -> pyEngine.Term:
    if isinstance(term, Var):
        return pyEngine.Var(term.name)
    assert isinstance(term, Const)
    return pyEngine.Const(term.value)


def _literal(literal: Atom | Comparison) -> pyEngine.Literal:
    if isinstance(literal, Comparison):
        return pyEngine.Literal(_PYDATALOG_OPERATORS[literal.operator], [_term(literal.left), _term(literal.right)])
    name = f"~{literal.predicate}" if literal.negated else literal.predicate
    return pyEngine.Literal(name, [_term(t) for t in literal.terms])


def _clause(rule: Rule) -> pyEngine.Clause:
    return pyEngine.Clause(_literal(rule.head), [_literal(b) for b in rule.body])


def _atom(predicate: str, *variables: str) -> Atom:
    return Atom(predicate, tuple(Var(v) for v in variables))


# The prelude's rules for what a principal holds through its groups (rules/prelude).
_OWN = Rule(_atom("holds", "P", "A", "E", "P"), (_atom("grant", "P", "A", "E"),))
_DOWN = Rule(_atom("holds", "P", "A", "E", "G"), (_atom("holds", "M", "A", "E", "G"), _atom("member_of", "P", "M")))
_IN_GROUP = (
    Rule(_atom("in_group", "P", "G"), (_atom("member_of", "P", "G"),)),
    Rule(_atom("in_group", "P", "G"), (_atom("in_group", "P", "M"), _atom("member_of", "M", "G"))),
)
_THROUGH = Rule(_atom("holds", "P", "A", "E", "G"), (_atom("in_group", "P", "G"), _atom("grant", "G", "A", "E")))
# ... and for wildcard grants, what the prelude's `holds(P, A, E, P) :- grant(P, A, W), matches(E, W)`
# gives through groups
_WILD = Rule(_atom("holds", "P", "A", "E", "P"), (_atom("grant", "P", "A", "W"), _atom("matches", "E", "W")))
_WILD_THROUGH = Rule(
    _atom("holds", "P", "A", "E", "G"),
    (_atom("in_group", "P", "G"), _atom("grant", "G", "A", "W"), _atom("matches", "E", "W")),
)


def top_down(rules: Iterable[Rule]) -> list[Rule]:
    """The rules, with ``holds`` through groups in the shape a top-down engine answers fast.

    The prelude derives ``holds`` down ``member_of`` (``_DOWN``): linear for the bottom-up
    backends, where the closure ``in_group`` has N²/2 rows for a chain of N groups, and
    left-linear, so that pyDatalog ends on cyclic memberships. But pyDatalog asks ``holds``
    with the principal bound, and from that shape it tables every holder of the action
    (a ``namespace.get`` at 10k grants took 1.4 s instead of 9 ms); through the principal's
    own groups (``in_group``, left-linear from it) it visits only those. The two rules derive
    the same rows when ``holds`` and ``in_group`` have only the prelude's rules, which a
    policy cannot add to (dsl.check's ``prelude`` pass); only then is one exchanged for the other.

    >>> rules = [_OWN, _WILD, _DOWN, *_IN_GROUP]
    >>> top_down(rules)[2] == _THROUGH, top_down(rules)[-1] == _WILD_THROUGH, top_down(rules[:3])[2] == _DOWN
    (True, True, True)
    """
    rules = list(rules)
    holds = {r for r in rules if r.head.predicate == "holds"}
    in_group = {r for r in rules if r.head.predicate == "in_group"}
    if holds not in ({_OWN, _DOWN}, {_OWN, _WILD, _DOWN}) or in_group != set(_IN_GROUP):
        return rules
    through = [_THROUGH if r == _DOWN else r for r in rules]
    return [*through, _WILD_THROUGH] if _WILD in holds else through


class PyDatalogBackend:
    """Evaluates a program top-down with pyDatalog's tabled resolution."""

    name = "pydatalog"

    def __init__(self, program: Program):
        self.program = program
        with _LOCK:
            Logic()  # a fresh logic for this backend alone
            self._logic = Logic(True)
            self._declare()
            for rule in top_down(program.rules):
                pyEngine.assert_(_clause(rule))
            for relation, rows in program.facts.items():
                self._assert(relation, rows)

    @contextmanager
    def _active(self) -> Iterator[None]:
        """Make this backend's logic the current one (pyDatalog's state is per thread)."""
        with _LOCK:
            current = getattr(Logic.tl, "logic", None)
            if current is not self._logic:
                Logic(self._logic)
                self._logic = Logic.tl.logic
            yield

    def _declare(self) -> None:
        # pyDatalog raises on a negated predicate it has never seen; declare them all.
        for name, arity in self.program.relations.items():
            pyEngine.insert(pyEngine.Pred(name, arity))

    def _assert(self, relation: str, rows: Iterable[Row]) -> None:
        enabled = gc.isenabled()
        gc.disable()  # measured: bulk loads run 2x faster without the collector
        try:
            for row in rows:
                literal = pyEngine.Literal(relation, [pyEngine.Const(v) for v in row])
                pyEngine.assert_(pyEngine.Clause(literal, []))
        finally:
            if enabled:
                gc.enable()

    def add(self, relation: str, rows: Iterable[Row]) -> None:
        with self._active():
            self._assert(relation, rows)

    def remove(self, relation: str, rows: Iterable[Row]) -> None:
        with self._active():
            for row in rows:
                literal = pyEngine.Literal(relation, [pyEngine.Const(v) for v in row])
                pyEngine.retract(pyEngine.Clause(literal, []))

    def query(self, relation: str, bound: Mapping[int, str] | None = None) -> set[Row]:
        bound = bound or {}
        arity = self.program.relations[relation]
        terms = [pyEngine.Const(bound[i]) if i in bound else pyEngine.Var(f"Q{i}") for i in range(arity)]
        with self._active():
            answer = pyEngine.Literal(relation, terms).ask()
        if answer is True:
            return {tuple(bound[i] for i in range(arity))}
        if not answer:
            return set()
        # pyDatalog answers with every column, bound ones included
        return {tuple(str(v) for v in found) for found in answer}
