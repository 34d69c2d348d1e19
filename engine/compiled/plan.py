"""Rule bodies compiled to Python functions of nested loops over hash indexes.

A conjunction of literals, with some variables bound on entry, becomes the
source of one function: each positive literal a loop over the index on its
bound columns (or a membership test when every column is bound), each
negation and comparison an ``if`` as soon as its variables are bound, and at
the innermost point either ``emit(row)`` or ``return True``.

No text from a policy becomes source: variables get generated names, constants
are read from a tuple ``K`` of values, relations from a tuple ``S`` of sources
in the order the caller gave them, and comparison operators from a fixed table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

from privilog.dsl.ir import Atom, Comparison, Const, Literal, Term, Var
from privilog.engine.compiled.relation import Relation

OPERATORS = {"==": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
EMPTY: frozenset[Any] = frozenset()


@dataclass(frozen=True)
class Slot:
    """Where an atom of the body reads its rows: ``source`` (an index into the sources a
    plan is made with) and, while deleting, ``union`` (a second source whose rows count
    too). ``small`` atoms are joined first (a delta, a request)."""

    source: int
    union: int | None = None
    small: bool = False


Maker = Callable[[Sequence[Relation]], Callable[..., Any]]


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.constants: list[str] = []
        self.names: dict[str, str] = {}
        self.depth = 2

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def const(self, value: str) -> str:
        self.constants.append(value)
        return f"K[{len(self.constants) - 1}]"

    def term(self, term: Term) -> str:
        if isinstance(term, Const):
            return self.const(term.value)
        return self.names[term.name]

    def var(self, name: str) -> str:
        self.names[name] = f"v{len(self.names)}"
        return self.names[name]


def compile_conjunction(
    body: Sequence[Literal],
    slots: Sequence[Slot | None],
    entry: Sequence[str],
    head: Sequence[Term] | None,
    estimate: Callable[[int, tuple[int, ...]], float] | None = None,
) -> Maker:
    """Compile ``body`` (atoms read through ``slots``, one per literal, None for comparisons).

    With ``head``, the plan is ``run(emit, *entry)`` and calls ``emit(row)`` for each
    derivation; without, it is ``run(*entry)`` and answers whether one exists.
    ``estimate(i, columns)``, when given, says how many rows literal ``i`` yields with
    ``columns`` bound: the join takes the fewest first.

    >>> from privilog.dsl.ir import Atom, Var
    >>> edge = Relation("edge", 2, [("a", "b"), ("b", "c")])
    >>> x, y, z = Var("X"), Var("Y"), Var("Z")
    >>> make = compile_conjunction([Atom("edge", (x, y)), Atom("edge", (y, z))], [Slot(0), Slot(0)], ["X"], [x, z])
    >>> found = []
    >>> make([edge])(found.append, "a")
    >>> found
    [('a', 'c')]
    """
    writer = _Writer()
    entry_names = [writer.var(name) for name in entry]
    positives = [i for i, lit in enumerate(body) if isinstance(lit, Atom) and not lit.negated]
    filters = [i for i in range(len(body)) if i not in positives]
    mentioned = {v for i in positives for v in body[i].variables} | set(entry)
    if head is not None:
        mentioned |= {t.name for t in head if isinstance(t, Var)}
    prologue: list[str] = []
    bound = set(entry)
    pending = list(positives)

    def place_filters() -> None:
        for i in list(filters):
            literal = body[i]
            needed = {v for v in literal.variables if v in mentioned}
            if needed <= bound:
                filters.remove(i)
                _filter(writer, prologue, literal, slots[i], i, bound)

    place_filters()
    while pending:
        best = max(pending, key=lambda i: _score(body[i], slots[i], bound, i, estimate))  # type: ignore[arg-type]
        pending.remove(best)
        _atom(writer, prologue, body[best], slots[best], best, bound)  # type: ignore[arg-type]
        bound |= set(body[best].variables)
        place_filters()
    if filters:  # dsl.check's safety pass rules this out; never evaluate an unsafe body
        raise ValueError("unsafe rule body: a negation or comparison has an unbound variable")
    if head is not None:
        terms = ", ".join(writer.term(t) for t in head)
        writer.line(f"emit(({terms},))" if terms else "emit(())")  # a relation without columns: p() :- ...
        signature = ", ".join(["emit", *entry_names])
        ending: list[str] = []
    else:
        writer.line("return True")
        signature = ", ".join(entry_names)
        ending = ["        return False"]
    source = "\n".join(
        ["def make(S, K, E, chain):", *("    " + p for p in prologue), f"    def run({signature}):"]
        + (writer.lines or ["        pass"])
        + ending
        + ["    return run"]
    )
    namespace: dict[str, Any] = {}
    exec(compile(source, "<privilog plan>", "exec"), namespace)
    build = namespace["make"]
    constants = tuple(writer.constants)
    return lambda sources: build(sources, constants, EMPTY, chain)


def repeated_free(atom: Atom, columns: Sequence[int]) -> list[str]:
    """Tests that a row ``t`` agrees where an unbound variable appears twice in ``atom``.

    >>> from privilog.dsl.ir import Atom, Var
    >>> repeated_free(Atom("edge", (Var("X"), Var("Y"), Var("X"))), [1])
    ['t[2] == t[0]']
    """
    first: dict[str, int] = {}
    same = []
    for position, term in enumerate(atom.terms):
        if position not in columns and isinstance(term, Var):
            if term.name in first:
                same.append(f"t[{position}] == t[{first[term.name]}]")
            first.setdefault(term.name, position)
    return same


def _score(
    atom: Atom, slot: Slot, bound: set[str], i: int, estimate: Callable[[int, tuple[int, ...]], float] | None
) -> tuple[bool, float, int]:
    columns = tuple(_columns(atom, bound))
    if estimate is not None and not slot.small:
        rows = 0.0 if len(columns) == len(atom.terms) else estimate(i, columns)
        return (False, -rows, len(columns))
    return (slot.small, len(columns), -len(atom.terms))


def _columns(atom: Atom, bound: set[str]) -> list[int]:
    return [i for i, t in enumerate(atom.terms) if isinstance(t, Const) or t.name in bound]


def _key(writer: _Writer, atom: Atom, columns: list[int]) -> str:
    """An index key (a value, or a tuple of several); a whole row is always a tuple."""
    parts = [writer.term(atom.terms[c]) for c in columns]
    whole = len(columns) == len(atom.terms)
    if not parts:
        return "()"  # the one row of a relation without columns
    return parts[0] if len(parts) == 1 and not whole else "(" + ", ".join(parts) + ",)"


def _reader(prologue: list[str], name: str, source: int, columns: list[int], arity: int) -> None:
    if 0 < len(columns) < arity:
        prologue.append(f"{name} = S[{source}].index({tuple(columns)!r})")
    else:
        prologue.append(f"{name} = S[{source}].rows")


def _atom(writer: _Writer, prologue: list[str], atom: Atom, slot: Slot, i: int, bound: set[str]) -> None:
    columns = _columns(atom, bound)
    arity = len(atom.terms)
    _reader(prologue, f"x{i}", slot.source, columns, arity)
    if slot.union is not None:
        _reader(prologue, f"u{i}", slot.union, columns, arity)
    if len(columns) == arity:
        key = _key(writer, atom, columns)
        test = f"{key} in x{i}" + (f" or {key} in u{i}" if slot.union is not None else "")
        writer.line(f"if {test}:")
        writer.depth += 1
        return
    if not columns:
        rows = f"chain(x{i}, u{i})" if slot.union is not None else f"x{i}"
    else:
        key = _key(writer, atom, columns)
        rows = f"chain(x{i}.get({key}, E), u{i}.get({key}, E))" if slot.union is not None else f"x{i}.get({key}, E)"
    writer.line(f"for t{i} in {rows}:")
    writer.depth += 1
    seen: dict[str, int] = {}
    checks = []
    for position, term in enumerate(atom.terms):
        if position in columns:
            continue
        assert isinstance(term, Var)
        if term.name in seen:
            checks.append(f"t{i}[{position}] == t{i}[{seen[term.name]}]")
            continue
        seen[term.name] = position
        writer.line(f"{writer.var(term.name)} = t{i}[{position}]")
    if checks:
        writer.line(f"if {' and '.join(checks)}:")
        writer.depth += 1


def _filter(
    writer: _Writer, prologue: list[str], literal: Literal, slot: Slot | None, i: int, bound: set[str]
) -> None:
    if isinstance(literal, Comparison):
        op = OPERATORS[literal.operator]
        writer.line(f"if {writer.term(literal.left)} {op} {writer.term(literal.right)}:")
        writer.depth += 1
        return
    assert isinstance(literal, Atom) and slot is not None
    columns = _columns(literal, bound)
    arity = len(literal.terms)
    _reader(prologue, f"x{i}", slot.source, columns, arity)
    same = repeated_free(literal, columns)
    if same:  # an unbound variable twice inside the negation: only rows where the two agree count
        rows = f"x{i}.get({_key(writer, literal, columns)}, E)" if columns else f"x{i}"
        writer.line(f"if not any({' and '.join(same)} for t in {rows}):")
    elif len(columns) == arity:
        writer.line(f"if {_key(writer, literal, columns)} not in x{i}:")
    elif columns:
        writer.line(f"if not x{i}.get({_key(writer, literal, columns)}):")
    else:
        writer.line(f"if not x{i}:")
    writer.depth += 1
