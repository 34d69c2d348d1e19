"""The reference backend: pyDatalog, driven through its engine API.

Policy text never reaches pyDatalog's ``load()`` or ``ask()`` (they go through
Python's ``exec``/``eval``): clauses are built from the IR. Each backend owns
a fresh pyDatalog logic, so two policies in one process never share facts.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

from pyDatalog import Logic, pyEngine

from dsl.ir import Atom, Comparison, Const, Rule, Term, Var
from engine.program import Program, Row

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


class PyDatalogBackend:
    """Evaluates a program top-down with pyDatalog's tabled resolution."""

    name = "pydatalog"

    def __init__(self, program: Program):
        self.program = program
        with _LOCK:
            Logic()  # a fresh logic for this backend alone
            self._logic = Logic(True)
            self._declare()
            for rule in program.rules:
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
        gc.disable()  # ENGINES.md: bulk loads run 2x faster without the collector
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
