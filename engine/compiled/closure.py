"""A transitive closure answered by walking its edges when asked, instead of materialized.

The prelude's ``ancestor`` and ``descendant`` are the transitive closure of ``child_of`` (one
upward, one downward). Materialized, they are most of a large world's rows (about four
million at a million grants) and most of its load. But a lookup with one end bound is a short
walk over ``child_of``'s indexes: up an entity's chain (at most four steps in CDAP's
hierarchy), or down a subtree (as long as the rows a materialized index would hand back). So
a component that is exactly a transitive closure of one relation,

    r(X, Y) :- e(X, Y).            (or e(Y, X): the closure of the reversed edges)
    r(X, Y) :- r(X, M), e(M, Y).   (or e(X, M), r(M, Y); the edges oriented as above)

is kept as a :class:`Closure`, which reads ``e`` live: a change of ``e`` (an entity created,
one placed for a moment by a create's decision) is seen by the next lookup, with nothing to
maintain. The backend does this only for a component no maintained component reads (nothing
needs its changes as deltas); one that comes to be read so (an auxiliary join of a decision
plan) is materialized first (``CompiledBackend.solidify``).

A :class:`Closure` offers what plans read of a :class:`Relation`: ``rows`` (membership,
iteration, size, truth) and ``index(columns)`` (``get`` a key's rows). Sizes are estimates for
join ordering; truth is exact.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any

from privilog.dsl.ir import Atom, Rule, Var
from privilog.engine.analysis import Component
from privilog.engine.compiled.relation import Index, Relation, Row


def closure_edge(component: Component) -> tuple[str, bool] | None:
    """``(edge relation, reversed)`` if ``component`` is exactly the transitive closure of one
    binary relation (the two rules above, in either order, any variable names), else None.

    >>> from privilog import dsl
    >>> from privilog.engine.analysis import analyse
    >>> from privilog.engine.program import compile_policy
    >>> found = {c.relations: closure_edge(c) for c in analyse(compile_policy(dsl.load_policy("cdap"))).components}
    >>> found[frozenset({"ancestor"})], found[frozenset({"descendant"})], found[frozenset({"holds"})]
    (('child_of', False), ('child_of', True), None)
    """
    if len(component.relations) != 1 or len(component.rules) != 2 or component.negated:
        return None
    (name,) = component.relations
    base = [r for r in component.rules if len(r.body) == 1]
    step = [r for r in component.rules if len(r.body) == 2]
    if len(base) != 1 or len(step) != 1:
        return None
    found = _base_edge(base[0], name)
    if found is None:
        return None
    edge, reversed_ = found
    return (edge, reversed_) if _is_step(step[0], name, edge, reversed_) else None


def _vars(atom: object) -> tuple[str, ...] | None:
    """The variable names of a positive binary atom, or None (a constant, a negation, a comparison)."""
    if not isinstance(atom, Atom) or atom.negated or len(atom.terms) != 2:
        return None
    if not all(isinstance(t, Var) for t in atom.terms):
        return None
    return tuple(t.name for t in atom.terms)  # type: ignore[union-attr]


def _base_edge(rule: Rule, name: str) -> tuple[str, bool] | None:
    head, body = _vars(rule.head), _vars(rule.body[0])
    atom = rule.body[0]
    if head is None or body is None or head[0] == head[1] or not isinstance(atom, Atom) or atom.predicate == name:
        return None
    if body == head:
        return atom.predicate, False
    if body == (head[1], head[0]):
        return atom.predicate, True
    return None


def _is_step(rule: Rule, name: str, edge: str, reversed_: bool) -> bool:
    head = _vars(rule.head)
    atoms = [a for a in rule.body if isinstance(a, Atom)]
    if head is None or len(atoms) != 2 or head[0] == head[1]:
        return False
    x, y = head
    own = [a for a in atoms if a.predicate == name]
    other = [a for a in atoms if a.predicate == edge]
    if len(own) != 1 or len(other) != 1:
        return False
    r, e = _vars(own[0]), _vars(other[0])
    if r is None or e is None:
        return False

    def edge_from(a: str, b: str) -> tuple[str, str]:  # an edge a -> b as the edge relation's row
        return (b, a) if reversed_ else (a, b)

    m = r[1] if r[0] == x else r[0]
    if m in (x, y) or len(set(r)) != 2:
        return False
    if r == (x, m):  # r(X, M), e(M -> Y)
        return e == edge_from(m, y)
    if r == (m, y):  # e(X -> M), r(M, Y)
        return e == edge_from(x, m)
    return False


def _walk(start: str, following: Callable[[str], Iterable[str]]) -> Iterator[str]:
    """Every node reachable from ``start`` by one or more steps, breadth first, each once:
    ``following(node)`` gives the nodes one step from it."""
    seen: set[str] = set()
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for other in following(node):
                if other not in seen:
                    seen.add(other)
                    nxt.append(other)
                    yield other
        frontier = nxt


class Closure:
    """The transitive closure of ``edges`` (reversed: of its rows turned around), walked when asked."""

    __slots__ = ("_way", "arity", "edges", "indexes", "name", "reversed")

    def __init__(self, name: str, edges: Relation, reversed_: bool):
        self.name = name
        self.arity = 2
        self.edges = edges
        self.reversed = reversed_
        self.indexes: dict[tuple[int, ...], Any] = {}  # none materialized: lookups walk (estimates read this)
        self._way: tuple[int, bool, Index, int] = (-1, True, {}, 0)  # holds' walk: (edges' generation, ...)

    def __repr__(self) -> str:
        return f"Closure({self.name}: {'reversed ' if self.reversed else ''}{self.edges.name})"

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def rows(self) -> _Rows:
        return _Rows(self)

    def estimate(self, columns: tuple[int, ...]) -> float:
        """Rows expected for one lookup by one end: the rows (an estimate) over the nodes with an
        edge on that side, as a materialized index would have its keys. Never a walk of its rows."""
        return len(self.rows) / max(len(self.index(columns)), 1)

    def index(self, columns: tuple[int, ...]) -> _Index:
        if columns not in ((0,), (1,)):
            raise ValueError(f"a closure is looked up by one end, not by columns {columns}")
        return _Index(self, columns[0])

    def add(self, rows: object) -> set[Row]:
        """Nothing to add: its rows follow its edges (``retract`` puts the edges back, and so these)."""
        return set()

    remove = add

    def delta(self, added: set[Row], removed: set[Row]) -> tuple[set[Row], set[Row]]:
        """The rows gained and lost when the edges gained ``added`` and lost ``removed`` rows (the
        edges hold the state after). A pair is lost when the old edges reached it and the new do
        not; gained when the new reach it and the old did not. Only pairs through a changed edge
        can change: (what reaches its start, or it) x (what its end reaches, or it)."""
        after = self._after_changes()
        gained: set[Row] = set()
        lost: set[Row] = set()
        if removed:
            old = _Overlay(self, plus=removed, minus=added)
            for a, b in map(self._oriented, removed):
                for pair in old.through(a, b):
                    if not self.holds(*pair):
                        lost.add(pair)
        if added:
            old = _Overlay(self, plus=removed, minus=added)
            for a, b in map(self._oriented, added):
                for pair in after.through(a, b):
                    if not old.holds(*pair):
                        gained.add(pair)
        return gained, lost

    def _oriented(self, row: Row) -> tuple[str, str]:
        """An edge row as the step it is: (from, to)."""
        return (row[1], row[0]) if self.reversed else (row[0], row[1])

    def _after_changes(self) -> _Overlay:
        return _Overlay(self, plus=set(), minus=set())

    # ---- walking -------------------------------------------------------------------

    def _step(self, forward: bool) -> Index:
        """The edges' index to follow one step: forward (from a node to where its edges lead) or back."""
        # an edge a -> b is the row (a, b), or (b, a) when reversed; forward from a reads column 0
        # of (a, b) or column 1 of (b, a)
        return self.edges.index((0,) if forward != self.reversed else (1,))

    def reach(self, start: str, forward: bool) -> set[str]:
        """Every node reachable from ``start`` by one or more edges (forward), or reaching it (back)."""
        return set(_walk(start, self._following(forward)))

    def _following(self, forward: bool) -> Callable[[str], Iterator[str]]:
        """The nodes one edge from a node: forward (where its edges lead) or back (where they come from)."""
        step = self._step(forward)
        far = 1 if forward != self.reversed else 0  # the column of an edge row holding the next node

        def following(node: str) -> Iterator[str]:
            return (row[far] for row in step.get(node, ()))

        return following

    def holds(self, a: str, b: str) -> bool:
        """Whether (a, b) is a row: b reachable from a. Walks from the end with fewer edges a node
        (up an entity's chain, not down a namespace), and stops where it finds the other."""
        generation = self.edges.generation
        if self._way[0] != generation:  # which end to walk from, chosen again when the edges change
            forward = self._fanout(True) <= self._fanout(False)
            self._way = (generation, forward, self._step(forward), 1 if forward != self.reversed else 0)
        _, forward, step, far = self._way
        start, goal = (a, b) if forward else (b, a)
        if step.get(start) is None:
            return False
        # written out, not through _walk: a decision's hot path (measured: twice the time of namespace.delete)
        seen: set[str] = set()
        frontier = [start]
        while frontier:
            nxt = []
            for node in frontier:
                for row in step.get(node, ()):
                    other = row[far]
                    if other == goal:
                        return True
                    if other not in seen:
                        seen.add(other)
                        nxt.append(other)
            frontier = nxt
        return False

    def _fanout(self, forward: bool) -> float:
        step = self._step(forward)
        return len(self.edges.rows) / max(len(step), 1)


class _Overlay:
    """The closure's edges with some rows added (``plus``) and some taken away (``minus``): the
    edges before a change."""

    def __init__(self, closure: Closure, plus: set[Row], minus: set[Row]):
        self.closure = closure
        self.minus = {closure._oriented(r) for r in minus}
        self.forward: dict[str, set[str]] = {}
        self.back: dict[str, set[str]] = {}
        for row in plus:
            a, b = closure._oriented(row)
            self.forward.setdefault(a, set()).add(b)
            self.back.setdefault(b, set()).add(a)

    def _next(self, node: str, forward: bool) -> Iterator[str]:
        closure = self.closure
        far = 1 if forward != closure.reversed else 0
        for row in closure._step(forward).get(node, ()):
            other = row[far]
            edge = (node, other) if forward else (other, node)
            if edge not in self.minus:
                yield other
        yield from (self.forward if forward else self.back).get(node, ())

    def reach(self, start: str, forward: bool) -> set[str]:
        return set(_walk(start, lambda node: self._next(node, forward)))

    def holds(self, a: str, b: str) -> bool:
        if self.closure._fanout(True) <= self.closure._fanout(False):
            return b in self.reach(a, True)
        return a in self.reach(b, False)

    def through(self, a: str, b: str) -> Iterator[Row]:
        """Every pair joined by a path through the edge a -> b."""
        ends = self.reach(b, True) | {b}
        for start in self.reach(a, False) | {a}:
            for end in ends:
                yield (start, end)


class _Rows:
    """A closure's rows as plans read them: ``in``, iteration, ``len`` (an estimate), truth (exact)."""

    __slots__ = ("closure",)

    def __init__(self, closure: Closure):
        self.closure = closure

    def __contains__(self, row: object) -> bool:
        if not isinstance(row, tuple) or len(row) != 2:
            return False
        return self.closure.holds(row[0], row[1])

    def __iter__(self) -> Iterator[Row]:
        closure = self.closure
        starts = closure._step(True)
        for node in list(starts):
            for other in sorted(closure.reach(node, True)):
                yield (node, other)

    def __len__(self) -> int:
        # an estimate for join ordering: each edge and a step beyond (the depth of a shallow tree);
        # zero exactly when there are no edges, so truth is exact
        return 2 * len(self.closure.edges.rows)

    def __bool__(self) -> bool:
        return bool(self.closure.edges.rows)

    def sample(self, n: int) -> list[Row]:
        return list(islice(self, n))


class _Index:
    """One end of a closure bound: ``get(node)`` the rows with that node there."""

    __slots__ = ("closure", "column")

    def __init__(self, closure: Closure, column: int):
        self.closure = closure
        self.column = column

    def get(self, node: str, default: Any = None) -> Any:
        forward = self.column == 0
        if not self.closure._step(forward).get(node):  # no edge from it: no row (a walk would find none)
            return default
        return _Walk(self.closure, node, forward)

    def __len__(self) -> int:
        # the nodes with an edge on this side: the keys a materialized index would have
        return len(self.closure._step(self.column == 0))


class _Walk:
    """A node's rows in a closure, walked as they are read: a plan that stops at its first row
    (a denial of "every descendant" at the first one lacking) walks no further. Made only for a
    node with an edge, so it is never empty."""

    __slots__ = ("closure", "forward", "node")

    def __init__(self, closure: Closure, node: str, forward: bool):
        self.closure = closure
        self.node = node
        self.forward = forward

    def __bool__(self) -> bool:
        return True

    def __iter__(self) -> Iterator[Row]:
        node, forward = self.node, self.forward
        for other in _walk(node, self.closure._following(forward)):
            yield (node, other) if forward else (other, node)
