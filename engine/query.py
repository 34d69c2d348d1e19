"""Conjunctive Datalog queries over any backend: ``?- edge(X, Y), not blocked(Y).``

The backend answers one relation at a time with some columns bound; the query
joins those answers left to right, and negations and comparisons filter as soon
as their variables are bound. Queries are built from the IR, never from text
handed to an evaluator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from dsl.errors import PrivilogError
from dsl.ir import Atom, Comparison, Const, Literal, Var
from engine.program import Row


class QueryError(PrivilogError):
    """A query that cannot be answered as written (an unsafe variable)."""


Query = Callable[[str, Mapping[int, str] | None], set[Row]]


def solve(query: Query, body: Sequence[Literal]) -> Iterator[dict[str, str]]:
    """Every binding of the variables of ``body`` (a conjunction) that the relations hold.

    Positive literals are joined left to right, each asked of the backend with the columns
    bound so far; negations and comparisons filter as soon as their variables are bound.

    >>> facts = {"edge": {("a", "b"), ("b", "c")}}
    >>> def query(relation, bound=None):
    ...     return {r for r in facts[relation] if all(r[i] == v for i, v in (bound or {}).items())}
    >>> x, y, z = Var("X"), Var("Y"), Var("Z")
    >>> list(solve(query, [Atom("edge", (x, y)), Atom("edge", (y, z))]))
    [{'X': 'a', 'Y': 'b', 'Z': 'c'}]
    """
    positives = [lit for lit in body if isinstance(lit, Atom) and not lit.negated]
    filters = [lit for lit in body if not (isinstance(lit, Atom) and not lit.negated)]
    schedule: list[list[Literal]] = []
    bound: set[str] = set()
    for atom in positives:
        bound.update(atom.variables)
        schedule.append([f for f in filters if set(f.variables) <= bound])
        filters = [f for f in filters if not set(f.variables) <= bound]
    if filters:
        name = sorted(set(filters[0].variables) - bound)[0]
        raise QueryError(f"unsafe variable `{name}`: bind it with a literal that is not negated")
    cache: dict[tuple[str, tuple[tuple[int, str], ...]], set[Row]] = {}

    def ask(atom: Atom, binding: Mapping[str, str]) -> set[Row]:
        given = tuple(
            (i, binding[t.name] if isinstance(t, Var) else t.value)
            for i, t in enumerate(atom.terms)
            if isinstance(t, Const) or t.name in binding
        )
        key = (atom.predicate, given)
        if key not in cache:
            cache[key] = query(atom.predicate, dict(given))
        return cache[key]

    def extend(depth: int, binding: dict[str, str]) -> Iterator[dict[str, str]]:
        if depth == len(positives):
            yield binding
            return
        atom = positives[depth]
        for row in sorted(ask(atom, binding)):
            found = _unify(atom, row, binding)
            if found is not None and all(_holds(f, found, ask) for f in schedule[depth]):
                yield from extend(depth + 1, found)

    yield from extend(0, {})


def _unify(atom: Atom, row: Row, binding: dict[str, str]) -> dict[str, str] | None:
    found = dict(binding)
    for term, value in zip(atom.terms, row, strict=True):
        if isinstance(term, Var) and term.name != "_" and found.setdefault(term.name, value) != value:
            return None
    return found


_COMPARE: dict[str, Callable[[str, str], bool]] = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _holds(literal: Literal, binding: Mapping[str, str], ask: Callable[[Atom, Mapping[str, str]], set[Row]]) -> bool:
    if isinstance(literal, Comparison):
        left, right = (binding[t.name] if isinstance(t, Var) else t.value for t in (literal.left, literal.right))
        return _COMPARE[literal.operator](left, right)
    return not any(_unify(literal, row, dict(binding)) is not None for row in ask(literal, binding))
