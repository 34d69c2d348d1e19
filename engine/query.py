"""Conjunctive Datalog queries over any backend: ``?- edge(X, Y), not blocked(Y).``

The backend answers one relation at a time with some columns bound; the query
joins those answers left to right, and negations and comparisons filter as soon
as their variables are bound. Queries are built from the IR, never from text
handed to an evaluator. The REPL's ``?-`` and ``privilog query`` both read a
query with :func:`parse_query` and answer it with :func:`answer`.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType

from privilog.dsl.errors import PolicyError, PolicyErrors, PrivilogError, did_you_mean, relocate_all
from privilog.dsl.ir import Atom, Comparison, Const, Literal, Var
from privilog.dsl.limits import ANSWER_ROWS, EVALUATION_MEGABYTES
from privilog.engine.program import Row

from privilog import dsl


class QueryError(PrivilogError):
    """A query that cannot be answered as written (an unsafe variable)."""


class QueryLimit(QueryError):
    """A query (or a rule being evaluated) that went past its time or row limit."""


Query = Callable[[str, Mapping[int, str] | None], set[Row]]

SECONDS_VAR = "PRIVILOG_QUERY_SECONDS"
ROWS_VAR = "PRIVILOG_QUERY_ROWS"
DEFAULT_SECONDS = 30.0
DEFAULT_ROWS = 5_000_000
EXAMPLE = '?- descendant(namespace:sales, D), is_a(D, "dataset").'
_HEAD = "query() :-\n"  # a query is parsed as the body of a rule with this head


def _env_number(variable: str, default: float) -> float:
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise PrivilogError(f"{variable} must be a positive number, not `{raw}`")
    return value


@dataclass
class Budget:
    """How long a query may run and how many rows it may look at, before it is stopped.

    The defaults (30 seconds, 5,000,000 rows) are changed with ``PRIVILOG_QUERY_SECONDS``
    and ``PRIVILOG_QUERY_ROWS``.
    """

    seconds: float = DEFAULT_SECONDS
    rows: int = DEFAULT_ROWS
    examined: int = 0
    deadline: float = field(default=0.0, repr=False)

    @classmethod
    def from_env(cls) -> Budget:
        return cls(_env_number(SECONDS_VAR, DEFAULT_SECONDS), int(_env_number(ROWS_VAR, DEFAULT_ROWS)))

    def start(self) -> Budget:
        self.examined = 0
        self.deadline = time.monotonic() + self.seconds
        return self

    def out_of_time(self) -> QueryLimit:
        return QueryLimit(
            f"stopped after {self.seconds:g} seconds: the query or rule takes too long "
            f"(join fewer unrelated literals, or set {SECONDS_VAR} to allow more)"
        )

    def spend(self, rows: int = 1) -> None:
        """Count rows looked at; :class:`QueryLimit` past the row limit or the deadline."""
        self.examined += rows
        if self.examined > self.rows:
            raise QueryLimit(
                f"stopped after looking at {self.rows} rows: the query or rule is too large "
                f"(join fewer unrelated literals, or set {ROWS_VAR} to allow more)"
            )
        if self.deadline and (self.examined & 0x3FF) == 0 and time.monotonic() > self.deadline:
            raise self.out_of_time()


class _Expired(BaseException):
    """Raised by the timer inside an evaluation; a BaseException, as KeyboardInterrupt is, so that
    no `except Exception` on the way (a fallback to another evaluation) takes it for a failure."""

    def __init__(self, limit: QueryLimit):
        super().__init__()
        self.limit = limit


def resident_bytes() -> int:
    """The process's resident memory now (Linux), or at its peak (elsewhere)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(peak) * (1 if sys.platform == "darwin" else 1024)


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_TICK = 0.1  # seconds between the timer's looks at the clock and the memory


def _in_a_callback(frame: FrameType) -> bool:
    """Whether ``frame`` runs where the interpreter ignores an exception: a garbage collector
    callback, a weak reference's callback, a finalizer."""
    code = frame.f_code
    if code.co_name == "__del__" or code.co_filename == weakref.__file__:
        return True
    return any(getattr(c, "__code__", None) is code for c in gc.callbacks)


@contextmanager
def time_limit(budget: Budget) -> Iterator[None]:
    """Stop what runs inside (an evaluation privilog does not step itself) at the budget's deadline.

    On the main thread of a Unix process a timer looks every tenth of a second at the clock
    and at the memory the process has taken since the start (``PRIVILOG_QUERY_MEGABYTES``), and
    stops it past either with :class:`QueryLimit`; elsewhere only :func:`solve`'s own counting
    stops a query.
    """
    budget.start()
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return
    megabytes = EVALUATION_MEGABYTES.value()
    ceiling = resident_bytes() + (megabytes << 20)

    def tick(signum: int, frame: FrameType | None) -> None:
        # Not inside a garbage collector callback, where an exception is ignored: the timer
        # fires again a tenth of a second later.
        if frame is not None and _in_a_callback(frame):
            return
        if time.monotonic() > budget.deadline:
            raise _Expired(budget.out_of_time())
        if resident_bytes() > ceiling:
            raise _Expired(QueryLimit(
                f"stopped after taking {megabytes} MB more memory: the query or rule is too large "
                f"(join fewer unrelated literals, or set {EVALUATION_MEGABYTES.variable} to allow more)"
            ))

    previous = signal.signal(signal.SIGALRM, tick)
    signal.setitimer(signal.ITIMER_REAL, min(_TICK, budget.seconds), _TICK)
    try:
        yield
    except _Expired as expired:
        signal.setitimer(signal.ITIMER_REAL, 0)
        raise expired.limit from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def solve(query: Query, body: Sequence[Literal], budget: Budget | None = None) -> Iterator[dict[str, str]]:
    """Every binding of the variables of ``body`` (a conjunction) that the relations hold.

    Positive literals are joined left to right, each asked of the backend with the columns
    bound so far; negations and comparisons filter as soon as their variables are bound.

    >>> facts = {"edge": {("a", "b"), ("b", "c")}}
    >>> def query(relation, bound=None):
    ...     return {r for r in facts[relation] if all(r[i] == v for i, v in (bound or {}).items())}
    >>> x, y, z = Var("X"), Var("Y"), Var("Z")
    >>> list(solve(query, [Atom("edge", (x, y)), Atom("edge", (y, z))]))
    [{'X': 'a', 'Y': 'b', 'Z': 'c'}]

    With a ``budget``, the rows looked at are counted and the query stops with
    :class:`QueryLimit` past its row limit or its deadline.
    """
    spend = budget.spend if budget is not None else None
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
            if spend is not None:
                spend()
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


@dataclass(frozen=True)
class Answer:
    """The bindings of a query's variables (named as written, ``_X`` left out), sorted.

    ``complete`` is false when collecting stopped at the limit of bindings. A query
    without variables answers yes (one empty row) or no (none).
    """

    variables: tuple[str, ...]
    rows: tuple[Row, ...]
    complete: bool = True

    def to_json(self) -> dict[str, object]:
        return {"variables": list(self.variables), "rows": [list(r) for r in self.rows], "complete": self.complete}


def parse_query(text: str, relations: Mapping[str, int]) -> tuple[Literal, ...]:
    """The literals of ``text`` (``LITERAL, ... .``; the ``?-`` and the final `.` may be left out),
    each atom checked against ``relations`` (name to arity).

    >>> parse_query("?- edge(X, b)", {"edge": 2})
    (Atom(predicate='edge', terms=(Var(name='X'), Const(value='b')), negated=False),)
    """
    text = text.strip().removeprefix("?-").strip()
    if not text:
        raise QueryError(f"a query is `?- LITERAL, ... .`, for example: {EXAMPLE}")
    if not text.endswith("."):
        text += "."
    try:
        parsed = dsl.parse_unchecked(_HEAD + text, "<query>")
    except (PolicyError, PolicyErrors) as error:
        raise relocate_all(error, 1, text, "<query>") from None
    if len(parsed.rules) != 1 or parsed.operations or parsed.relations:
        raise QueryError("a query is one list of literals separated by `,` and ended by one `.`")
    body = parsed.rules[0].body
    _check(body, relations)
    return body


def _check(body: Sequence[Literal], relations: Mapping[str, int]) -> None:
    for literal in body:
        if not isinstance(literal, Atom):
            continue
        arity = relations.get(literal.predicate)
        if arity is None:
            hint = did_you_mean(literal.predicate, relations) or "the relations are " + ", ".join(sorted(relations))
            raise QueryError(f"unknown relation `{literal.predicate}`: {hint}")
        if arity != len(literal.terms):
            raise QueryError(f"`{literal.predicate}` takes {arity} arguments, not {len(literal.terms)}")
    if not any(isinstance(lit, Atom) and not lit.negated for lit in body):
        raise QueryError("a query needs at least one literal that is not negated")


def answer(query: Query, body: Sequence[Literal], budget: Budget, limit: int | None = None) -> Answer:
    """Every binding of ``body``'s variables, up to ``limit`` (default ``PRIVILOG_QUERY_ANSWER_ROWS``),
    within ``budget`` (its deadline enforced by :func:`time_limit` around the whole evaluation).

    >>> facts = {"edge": {("a", "b"), ("b", "c")}}
    >>> def query(relation, bound=None):
    ...     return {r for r in facts[relation] if all(r[i] == v for i, v in (bound or {}).items())}
    >>> answer(query, parse_query("edge(X, _), not edge(_, X)", {"edge": 2}), Budget())
    Answer(variables=('X',), rows=(('a',),), complete=True)
    """
    names = tuple(dict.fromkeys(v for lit in body for v in lit.variables if not v.startswith("_")))
    limit = ANSWER_ROWS.value() if limit is None else limit
    rows: dict[Row, None] = {}
    complete = True
    with time_limit(budget):
        for binding in solve(query, body, budget):
            rows[tuple(binding[n] for n in names)] = None
            if len(rows) > limit:  # one more than the limit: the answer is cut, not merely full
                complete = False
                break
    return Answer(names, tuple(sorted(list(rows)[:limit])), complete)
