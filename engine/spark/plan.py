"""One rule's body as a DataFrame plan: joins in a greedy order, filters, anti-joins.

Longer than 600 lines: it is one class, the planner of a rule body, whose steps (read,
estimate, join, project, negate, compare) share one plan's state.

A relation is a DataFrame of long columns ``c0 .. cN-1`` (values encoded by
:mod:`engine.spark.encoding`) with a size estimate. A rule body is planned the
way a data engineer would write the query:

* each positive atom is its relation filtered by its constants and repeated
  variables, projected to the variables some other literal or the head needs;
* the two plans whose join is estimated cheapest are joined first, on their
  shared variables (greedy operator ordering), until one plan is left; a side
  that adds no variable anyone needs becomes a semi-join, which also keeps
  duplicates out;
* a negated atom is a left-anti join and a comparison a filter, each applied as
  soon as its variables are bound.

Where the rows go matters more than how many there are. A relation may be
*partitioned* by one of its columns (hash-partitioned, like every other relation
partitioned by the same variable): joins on that variable between two such
relations need no shuffle, nor does a ``distinct``, and the planner keeps it so by
broadcasting the other side of a join whenever its size is bounded below the
broadcast limit. A join that would shuffle a partitioned side is chosen last. When
two unpartitioned relations are joined in a rule that also reads a partitioned one,
their join is materialised and counted first, so that it too can be broadcast.

Relations whose rows are known on the driver (``Relation.local``: the policy's
tables and what derives from them alone) are filtered, projected and joined on
the driver; Spark sees the result as a small local table, broadcast without a
job of its own.

Estimates follow the textbook: |A ⋈ B| = |A|·|B| / Π max(ndv) over the join
columns, distinct values capped by rows. They only steer the plan; every plan
computes the same rows.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from privilog.dsl.ir import Atom, Comparison, Const, Literal, Rule, Term, Var
from privilog.engine.spark.encoding import xxhash64

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


ORDERED = {"<": "__lt__", "<=": "__le__", ">": "__gt__", ">=": "__ge__"}
LOCAL_ROWS = 50_000  # the most rows a plan folded on the driver may hold

LocalRows = frozenset[tuple[int, ...]]
# A condition of an atom: its column equals a constant (the code) or another of its columns.
Condition = tuple[int, "int | tuple[str, int]"]


@dataclass(frozen=True)
class Size:
    """What is known of a relation's size: expected rows, an upper bound, distinct values per column."""

    rows: float
    bound: float
    ndv: tuple[float, ...]

    @classmethod
    def exact(cls, rows: int, ndv: Sequence[float]) -> Size:
        return cls(float(rows), float(rows), tuple(float(min(n, rows)) for n in ndv))

    @classmethod
    def unknown(cls, arity: int) -> Size:
        return cls(1e6, math.inf, (1e6,) * arity)

    @classmethod
    def of(cls, rows: LocalRows, arity: int) -> Size:
        return cls.exact(len(rows), [len({r[i] for r in rows}) for i in range(arity)])


@dataclass(frozen=True)
class Relation:
    """A relation's rows (long columns ``c0 ..``) and what is known of them.

    ``local`` holds the encoded rows themselves when they are few and known on the
    driver; ``partitioned`` is the column the rows are hash-partitioned by, if any.
    """

    df: DataFrame
    size: Size
    local: LocalRows | None = None
    partitioned: int | None = None

    @property
    def arity(self) -> int:
        return len(self.size.ndv)


def column(index: int) -> str:
    """The name of a relation's ``index``-th column."""
    return f"c{index}"


def constant(value: str) -> Column:
    """A constant of the policy, encoded."""
    from pyspark.sql import functions as F

    return F.lit(xxhash64(value))


def _literal(value: int) -> str:
    # the smallest long has no positive counterpart to negate
    return "(-9223372036854775807L - 1L)" if value == -(1 << 63) else f"{value}L"


def local_frame(spark: SparkSession, rows: Iterable[tuple[int, ...]], columns: Sequence[str]) -> DataFrame:
    """Encoded rows as a local table (a VALUES list: Spark folds and broadcasts it without a job)."""
    rows = sorted(rows)
    names = ", ".join(columns)
    if not columns:
        return spark.sql("SELECT 1 AS one WHERE " + ("true" if rows else "false")).drop("one")
    if not rows:
        zeros = ", ".join("0L" for _ in columns)
        return spark.sql(f"SELECT * FROM VALUES ({zeros}) AS t({names}) WHERE false")
    values = ", ".join("(" + ", ".join(_literal(v) for v in row) + ")" for row in rows)
    return spark.sql(f"SELECT * FROM VALUES {values} AS t({names})")


def local_relation(spark: SparkSession, rows: Iterable[tuple[int, ...]], arity: int) -> Relation:
    """A relation known on the driver."""
    kept = frozenset(rows)
    return Relation(local_frame(spark, kept, [column(i) for i in range(arity)]), Size.of(kept, arity), kept)


@dataclass
class _Plan:
    """A partial plan: one column per variable (named by the planner), estimates, the variable it
    is partitioned by, and, when it is folded on the driver, its rows (in the order of ``variables``)."""

    variables: tuple[str, ...]
    rows: float
    bound: float
    ndv: dict[str, float]
    df: DataFrame | None = None
    local: set[tuple[int, ...]] | None = None
    partitioned: str | None = None
    atoms: frozenset[int] = field(default_factory=frozenset)


@dataclass(frozen=True)
class Settings:
    """Knobs of the planner."""

    broadcast_rows: float = 5e6  # broadcast a side whose size is bounded by this many rows
    trace: Callable[[str], None] | None = None  # told each join as it is planned


# Materialise a DataFrame and count its rows (the engine's, so it can cache and release it).
Materialise = Callable[["DataFrame"], tuple["DataFrame", int]]


class RulePlanner:
    """Plans one rule body; ``relation(position, atom)`` says which relation each atom reads
    (``position`` is -1 for a negated atom)."""

    def __init__(
        self,
        rule: Rule,
        relation: Callable[[int, Atom], Relation],
        spark: SparkSession,
        settings: Settings,
        materialise: Materialise | None = None,
        dictionary: DataFrame | None = None,
    ):
        self.rule = rule
        self.relation = relation
        self.spark = spark
        self.settings = settings
        self.materialise = materialise
        self.dictionary = dictionary
        names: dict[str, str] = {}
        for literal in (rule.head, *rule.body):
            for term in _terms(literal):
                if isinstance(term, Var) and term.name not in names:
                    names[term.name] = f"v{len(names)}"
        self.names = names
        self.positive = [(i, b) for i, b in enumerate(rule.body) if isinstance(b, Atom) and not b.negated]
        self.bound_vars = {v for _, a in self.positive for v in a.variables}
        self.head_vars = {t.name for t in rule.head.terms if isinstance(t, Var)}

    # ---- the result ---------------------------------------------------------------

    def plan(self) -> Relation:
        """The rows of the rule's head (columns ``c0 ..``), duplicates possible."""
        pending: list[Literal] = [b for b in self.rule.body if not (isinstance(b, Atom) and not b.negated)]
        plans = [self._atom(i, a, pending) for i, a in self.positive]
        if not plans:  # a body of negations and comparisons of constants: one row, no variables, to filter
            plans = [_Plan((), 1.0, 1.0, {}, local={()})]
        for index, plan in enumerate(plans):
            plans[index] = self._apply(plan, pending, plans[:index] + plans[index + 1 :])
        while len(plans) > 1:
            plans = self._join_best(plans, pending)
        (plan,) = plans
        plan = self._apply(plan, pending, [])
        if pending:
            raise AssertionError(f"literals left unplanned in {self.rule.head.predicate}: {pending}")
        return self._head(plan)

    def _head(self, plan: _Plan) -> Relation:
        from pyspark.sql import functions as F

        ndv: list[float] = []
        for term in self.rule.head.terms:
            ndv.append(plan.ndv.get(term.name, plan.rows) if isinstance(term, Var) else 1.0)
        if plan.local is not None:
            position = {v: i for i, v in enumerate(plan.variables)}
            picks = [
                (position[t.name], 0) if isinstance(t, Var) else (-1, xxhash64(t.value)) for t in self.rule.head.terms
            ]
            rows = frozenset(tuple(row[i] if i >= 0 else c for i, c in picks) for row in plan.local)
            return local_relation(self.spark, rows, len(picks))
        out: list[Column] = []
        partitioned = None
        for index, term in enumerate(self.rule.head.terms):
            if isinstance(term, Var):
                out.append(F.col(self.names[term.name]).alias(column(index)))
                if term.name == plan.partitioned and partitioned is None:
                    partitioned = index
            else:
                out.append(constant(term.value).alias(column(index)))
        size = Size(plan.rows, plan.bound, tuple(min(n, plan.rows) for n in ndv))
        return Relation(self._frame(plan).select(*out), size, partitioned=partitioned)

    def _frame(self, plan: _Plan) -> DataFrame:
        if plan.df is None:
            assert plan.local is not None
            plan.df = local_frame(self.spark, plan.local, [self.names[v] for v in plan.variables])
        return plan.df

    # ---- atoms --------------------------------------------------------------------

    def _needed(self, pending: Sequence[Literal], others: Sequence[_Plan], position: int | None = None) -> set[str]:
        """Variables that the head, a pending literal or another plan still needs."""
        needed = set(self.head_vars)
        for literal in pending:
            needed.update(self._vars(literal))
        for plan in others:
            needed.update(plan.variables)
        if position is not None:
            for i, atom in self.positive:
                if i != position:
                    needed.update(atom.variables)
        return needed

    def _select(self, atom: Atom, keep_if: Callable[[str], bool]) -> tuple[list[Condition], list[str], dict[str, int]]:
        """An atom's constant and repeated-variable conditions, and the variables it keeps."""
        conditions: list[Condition] = []
        first: dict[str, int] = {}
        for index, term in enumerate(atom.terms):
            if isinstance(term, Const):
                conditions.append((index, xxhash64(term.value)))
            elif term.name in first:
                conditions.append((index, ("column", first[term.name])))
            else:
                first[term.name] = index
        keep = [name for name in first if keep_if(name)]
        return conditions, keep, first

    def _atom(self, position: int, atom: Atom, pending: Sequence[Literal]) -> _Plan:
        relation = self.relation(position, atom)
        needed = self._needed(pending, [], position)
        conditions, keep, first = self._select(atom, lambda name: name in needed)
        return self._read(relation, conditions, keep, first, frozenset({position}))

    def _read(
        self,
        relation: Relation,
        conditions: list[Condition],
        keep: list[str],
        first: dict[str, int],
        atoms: frozenset[int],
    ) -> _Plan:
        from pyspark.sql import functions as F

        size = relation.size
        if relation.local is not None:
            rows = {
                tuple(row[first[name]] for name in keep)
                for row in relation.local
                if all(row[i] == (row[c[1]] if isinstance(c, tuple) else c) for i, c in conditions)
            }
            ndv = {name: float(len({r[k] for r in rows})) for k, name in enumerate(keep)}
            return _Plan(tuple(keep), float(len(rows)), float(len(rows)), ndv, local=rows, atoms=atoms)
        df, rows_estimate = relation.df, size.rows
        for index, condition in conditions:
            if isinstance(condition, tuple):
                df = df.where(F.col(column(index)) == F.col(column(condition[1])))
                rows_estimate /= max(size.ndv[index], size.ndv[condition[1]], 1.0)
            else:
                df = df.where(F.col(column(index)) == F.lit(condition))
                rows_estimate /= max(size.ndv[index], 1.0)
        df = df.select(*(F.col(column(first[name])).alias(self.names[name]) for name in keep))
        rows_estimate = max(rows_estimate, 1.0)
        ndv = {name: min(size.ndv[first[name]], rows_estimate) for name in keep}
        partitioned = next((n for n in keep if first[n] == relation.partitioned), None)
        return _Plan(tuple(keep), rows_estimate, size.bound, ndv, df=df, partitioned=partitioned, atoms=atoms)

    # ---- joins --------------------------------------------------------------------

    def _estimate(self, a: _Plan, b: _Plan) -> float:
        keys = set(a.variables) & set(b.variables)
        divisor = math.prod(max(a.ndv.get(k, 1.0), b.ndv.get(k, 1.0), 1.0) for k in keys)
        return a.rows * b.rows / divisor

    def _broadcastable(self, plan: _Plan) -> bool:
        return plan.local is not None or plan.bound <= self.settings.broadcast_rows

    def _copartitioned(self, a: _Plan, b: _Plan) -> bool:
        keys = set(a.variables) & set(b.variables)
        return a.partitioned is not None and a.partitioned == b.partitioned and a.partitioned in keys

    def _keeps(self, a: _Plan, b: _Plan) -> bool:
        """Whether joining ``a`` and ``b`` leaves every partitioned side where it is."""
        if a.partitioned is None and b.partitioned is None:
            return True
        if self._copartitioned(a, b):
            return True
        if a.partitioned is not None and b.partitioned is not None:
            return False
        other = b if a.partitioned is not None else a
        return self._broadcastable(other)

    def _join_best(self, plans: list[_Plan], pending: list[Literal]) -> list[_Plan]:
        pairs = list(itertools.combinations(range(len(plans)), 2))
        connected = [(i, j) for i, j in pairs if set(plans[i].variables) & set(plans[j].variables)]

        def cost(pair: tuple[int, int]) -> tuple[bool, bool, float, int]:
            a, b = plans[pair[0]], plans[pair[1]]
            both_local = a.local is not None and b.local is not None
            shared = len(set(a.variables) & set(b.variables))
            return (not both_local, not self._keeps(a, b), self._estimate(a, b), -shared)

        i, j = min(connected or pairs, key=cost)
        rest = [p for k, p in enumerate(plans) if k not in (i, j)]
        joined = self._join(plans[i], plans[j], self._needed(pending, rest))
        joined = self._apply(joined, pending, rest)
        if (
            self.materialise is not None
            and joined.local is None
            and joined.partitioned is None
            and not self._broadcastable(joined)
            and any(p.partitioned is not None for p in rest)
        ):
            joined = self._materialised(joined)
        return [*rest, joined]

    def _materialised(self, plan: _Plan) -> _Plan:
        """Count a join of unpartitioned relations, so a partitioned plan can broadcast it."""
        assert self.materialise is not None
        df, rows = self.materialise(self._frame(plan))
        ndv = {v: min(n, float(rows)) for v, n in plan.ndv.items()}
        return _Plan(plan.variables, float(max(rows, 1)), float(rows), ndv, df=df, atoms=plan.atoms)

    def _describe(self, plan: _Plan) -> str:
        body = [self.rule.body[i] for i in sorted(plan.atoms)]
        atoms = ",".join(literal.predicate for literal in body if isinstance(literal, Atom))
        where = "local" if plan.local is not None else f"by {plan.partitioned}" if plan.partitioned else "spread"
        return f"{atoms}[{plan.rows:.3g}≤{plan.bound:.3g}, {where}]"

    def _join(self, a: _Plan, b: _Plan, needed: set[str]) -> _Plan:
        from pyspark.sql import functions as F

        if self.settings.trace is not None:
            how = "co-partitioned" if self._copartitioned(a, b) else "keeps" if self._keeps(a, b) else "shuffles"
            self.settings.trace(
                f"{self.rule.head.predicate}: {self._describe(a)} ⋈ {self._describe(b)} {how}, "
                f"~{self._estimate(a, b):.3g} rows"
            )
        keys = sorted(set(a.variables) & set(b.variables))
        adds_b = (set(b.variables) - set(a.variables)) & needed
        adds_a = (set(a.variables) - set(b.variables)) & needed
        if not adds_b or not adds_a:
            left, right = (a, b) if not adds_b else (b, a)
            if not adds_a and not adds_b and _weight(b) > _weight(a):
                left, right = b, a
            return self._project(self._semi(left, right, keys), needed)
        if a.local is not None and b.local is not None:
            joined = self._local_join(a, b, keys)
            if joined is not None:
                return self._project(joined, needed)
        rows = max(self._estimate(a, b), 1.0)
        key_columns = [self.names[k] for k in keys]
        if not keys:
            df, partitioned = self._frame(a).crossJoin(self._frame(b)), None
        elif self._copartitioned(a, b):
            df, partitioned = self._frame(a).join(self._frame(b), on=key_columns, how="inner"), a.partitioned
        else:
            stream, build = (a, b) if _weight(a) >= _weight(b) else (b, a)
            if stream.partitioned is not None and not self._broadcastable(build):
                stream, build = build, stream
            if self._broadcastable(build):
                df = self._frame(stream).join(F.broadcast(self._frame(build)), on=key_columns, how="inner")
                partitioned = stream.partitioned
            else:
                df = self._frame(stream).join(self._frame(build), on=key_columns, how="inner")
                partitioned = keys[0] if len(keys) == 1 else None
        ndv = {v: min(n, rows) for v, n in {**a.ndv, **b.ndv}.items()}
        for k in keys:
            ndv[k] = min(a.ndv.get(k, rows), b.ndv.get(k, rows), rows)
        variables = tuple(dict.fromkeys([*keys, *a.variables, *b.variables]))
        joined = _Plan(variables, rows, a.bound * b.bound, ndv, df=df, partitioned=partitioned, atoms=a.atoms | b.atoms)
        return self._project(joined, needed)

    def _local_join(self, a: _Plan, b: _Plan, keys: list[str]) -> _Plan | None:
        assert a.local is not None and b.local is not None
        a_keys = [a.variables.index(k) for k in keys]
        b_keys = [b.variables.index(k) for k in keys]
        b_rest = [i for i, v in enumerate(b.variables) if v not in keys]
        index: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
        for row in b.local:
            index.setdefault(tuple(row[i] for i in b_keys), []).append(tuple(row[i] for i in b_rest))
        rows: set[tuple[int, ...]] = set()
        for row in a.local:
            for extra in index.get(tuple(row[i] for i in a_keys), ()):
                rows.add(row + extra)
                if len(rows) > LOCAL_ROWS:
                    return None
        variables = (*a.variables, *(b.variables[i] for i in b_rest))
        ndv = {v: float(len({r[k] for r in rows})) for k, v in enumerate(variables)}
        return _Plan(variables, float(len(rows)), float(len(rows)), ndv, local=rows, atoms=a.atoms | b.atoms)

    def _filtered(self, left: _Plan, right: _Plan, keys: list[str], how: str) -> DataFrame:
        """``left`` semi- or anti-joined with ``right``, keeping ``left`` where it is when possible."""
        from pyspark.sql import functions as F

        frame = self._frame(left)
        if left.local is None and (self._copartitioned(left, right) or not self._broadcastable(right)):
            other = self._frame(right)
        else:
            other = F.broadcast(self._frame(right))
        columns = [self.names[k] for k in keys]
        return frame.join(other, on=columns, how=how) if keys else frame.join(other, how=how)

    def _semi(self, left: _Plan, right: _Plan, keys: list[str]) -> _Plan:
        """``left``'s rows that have a match in ``right``."""
        atoms = left.atoms | right.atoms
        if left.local is not None and right.local is not None:
            right_keys = {tuple(r[right.variables.index(k)] for k in keys) for r in right.local}
            rows = {r for r in left.local if tuple(r[left.variables.index(k)] for k in keys) in right_keys}
            ndv = {v: float(len({r[k] for r in rows})) for k, v in enumerate(left.variables)}
            return _Plan(left.variables, float(len(rows)), float(len(rows)), ndv, local=rows, atoms=atoms)
        ratio = math.prod(min(1.0, right.ndv.get(k, 1.0) / max(left.ndv.get(k, 1.0), 1.0)) for k in keys)
        df = self._filtered(left, right, keys, "left_semi")
        partitioned = self._kept_partitioning(left, right, keys)
        return _Plan(
            left.variables,
            max(left.rows * ratio, 1.0),
            left.bound,
            dict(left.ndv),
            df=df,
            partitioned=partitioned,
            atoms=atoms,
        )

    def _kept_partitioning(self, left: _Plan, right: _Plan, keys: list[str]) -> str | None:
        if left.local is not None:
            return None
        if self._copartitioned(left, right) or self._broadcastable(right):
            return left.partitioned
        return keys[0] if len(keys) == 1 else None

    def _project(self, plan: _Plan, needed: set[str]) -> _Plan:
        keep = tuple(v for v in plan.variables if v in needed)
        if len(keep) == len(plan.variables):
            return plan
        ndv = {v: plan.ndv[v] for v in keep}
        if plan.local is not None:
            positions = [plan.variables.index(v) for v in keep]
            rows = {tuple(r[i] for i in positions) for r in plan.local}
            return _Plan(keep, float(len(rows)), float(len(rows)), ndv, local=rows, atoms=plan.atoms)
        df = self._frame(plan).select(*(self.names[v] for v in keep))
        partitioned = plan.partitioned if plan.partitioned in keep else None
        return _Plan(keep, plan.rows, plan.bound, ndv, df=df, partitioned=partitioned, atoms=plan.atoms)

    # ---- negations and comparisons ------------------------------------------------

    def _vars(self, literal: Literal) -> set[str]:
        """The variables a pending literal needs bound (a negation's others are existential)."""
        if isinstance(literal, Comparison):
            return set(literal.variables)
        return {v for v in literal.variables if v in self.bound_vars}

    def _apply(self, plan: _Plan, pending: list[Literal], others: Sequence[_Plan]) -> _Plan:
        """Apply every pending literal whose variables ``plan`` binds."""
        for literal in list(pending):
            if not self._vars(literal) <= set(plan.variables):
                continue
            pending.remove(literal)
            plan = self._compare(plan, literal) if isinstance(literal, Comparison) else self._negate(plan, literal)
        return self._project(plan, self._needed(pending, others))

    def _negate(self, plan: _Plan, atom: Atom) -> _Plan:
        conditions, keep, first = self._select(atom, lambda name: name in self.bound_vars)
        negated = self._read(self.relation(-1, atom), conditions, keep, first, frozenset())
        keys = list(negated.variables)
        if plan.local is not None and negated.local is not None:
            out = {tuple(r[negated.variables.index(k)] for k in keys) for r in negated.local}
            rows = {r for r in plan.local if tuple(r[plan.variables.index(k)] for k in keys) not in out}
            ndv = {v: float(len({r[k] for r in rows})) for k, v in enumerate(plan.variables)}
            return _Plan(plan.variables, float(len(rows)), float(len(rows)), ndv, local=rows, atoms=plan.atoms)
        df = self._filtered(plan, negated, keys, "left_anti")
        partitioned = self._kept_partitioning(plan, negated, keys)
        return _Plan(
            plan.variables,
            max(plan.rows * 0.5, 1.0),
            plan.bound,
            dict(plan.ndv),
            df=df,
            partitioned=partitioned,
            atoms=plan.atoms,
        )

    def _term(self, term: Term) -> Column:
        from pyspark.sql import functions as F

        return F.col(self.names[term.name]) if isinstance(term, Var) else constant(term.value)

    def _compare(self, plan: _Plan, comparison: Comparison) -> _Plan:
        from pyspark.sql import functions as F

        op = comparison.operator
        if op in ("==", "!="):
            if plan.local is not None:
                return self._compare_local(plan, comparison)
            left, right = self._term(comparison.left), self._term(comparison.right)
            condition = left == right if op == "==" else left != right
            rows = plan.rows / max(plan.ndv.get(_name(comparison.left), 1.0), 1.0) if op == "==" else plan.rows
            df = self._frame(plan).where(condition)
            return _Plan(
                plan.variables,
                max(rows, 1.0),
                plan.bound,
                plan.ndv,
                df=df,
                partitioned=plan.partitioned,
                atoms=plan.atoms,
            )
        df = self._frame(plan)
        texts: list[Column] = []
        for side, term in enumerate((comparison.left, comparison.right)):
            if isinstance(term, Const):
                texts.append(F.lit(term.value))
                continue
            if self.dictionary is None:
                raise ValueError(f"`{op}` compares values as text: evaluate with a dictionary of the values")
            text, code = f"t{side}", self.names[term.name]
            lookup = self.dictionary.select(F.col("code").alias(code), F.col("value").alias(text))
            df = df.join(lookup, on=[code], how="inner")
            texts.append(F.col(text))
        condition = getattr(texts[0], ORDERED[op])(texts[1])
        df = df.where(condition).select(*(self.names[v] for v in plan.variables))
        return _Plan(plan.variables, max(plan.rows / 2, 1.0), plan.bound, plan.ndv, df=df, atoms=plan.atoms)

    def _compare_local(self, plan: _Plan, comparison: Comparison) -> _Plan:
        assert plan.local is not None

        def value(row: tuple[int, ...], term: Term) -> int:
            return row[plan.variables.index(term.name)] if isinstance(term, Var) else xxhash64(term.value)

        equal = comparison.operator == "=="
        rows = {r for r in plan.local if (value(r, comparison.left) == value(r, comparison.right)) == equal}
        ndv = {v: float(len({r[k] for r in rows})) for k, v in enumerate(plan.variables)}
        return _Plan(plan.variables, float(len(rows)), float(len(rows)), ndv, local=rows, atoms=plan.atoms)


def _weight(plan: _Plan) -> tuple[bool, float]:
    """Which side of a join stays put: a partitioned one, else the larger."""
    return (plan.partitioned is not None, plan.rows)


def _terms(literal: Literal) -> tuple[Term, ...]:
    if isinstance(literal, Comparison):
        return (literal.left, literal.right)
    return literal.terms


def _name(term: Term) -> str:
    return term.name if isinstance(term, Var) else ""


def plan_rule(
    rule: Rule,
    relation: Callable[[int, Atom], Relation],
    spark: SparkSession,
    settings: Settings | None = None,
    materialise: Materialise | None = None,
    dictionary: DataFrame | None = None,
) -> Relation:
    """The head rows a rule derives, reading each body atom from ``relation(position, atom)``
    (``position`` -1 for a negated atom)."""
    return RulePlanner(rule, relation, spark, settings or Settings(), materialise, dictionary).plan()


def union(spark: SparkSession, relations: Sequence[Relation], arity: int) -> Relation:
    """All rows of several relations of one arity (duplicates possible unless all are local).

    The union is partitioned when every part is partitioned by the same column.
    """
    if all(r.local is not None for r in relations):
        return local_relation(spark, frozenset().union(*(r.local or frozenset() for r in relations)), arity)
    parts = [r for r in relations if r.local is None or r.local]
    df = parts[0].df
    for other in parts[1:]:
        df = df.union(other.df)
    rows = sum(r.size.rows for r in parts)
    bound = sum(r.size.bound for r in parts)
    ndv = tuple(min(rows, sum(r.size.ndv[i] for r in parts)) for i in range(arity))
    columns = {r.partitioned for r in parts}
    partitioned = columns.pop() if len(columns) == 1 else None
    return Relation(df, Size(rows, bound, ndv), partitioned=partitioned)


def distinct(relation: Relation) -> Relation:
    """The relation without duplicate rows (no shuffle when it is partitioned)."""
    if relation.local is not None:
        return relation
    size = relation.size
    rows = min(size.rows, math.prod(size.ndv)) if size.ndv else min(size.rows, 1.0)
    return Relation(relation.df.distinct(), Size(rows, size.bound, size.ndv), partitioned=relation.partitioned)
