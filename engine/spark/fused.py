"""Fused decision plans on Spark: each operation's rules unfolded into joins of the request table.

Longer than 600 lines: the unfolding of each operation's rules (:class:`FusedDecisions`) and the
joins of one conjunction (:class:`_Plan`) call each other (a negated goal inside a conjunction is
unfolded again), so they cannot be two modules without an import circle.

The request-derived rules are specialized per operation and unfolded into
conjunctions over world relations by the pass the compiled engine uses
(:mod:`engine.unfold`); each conjunction becomes a few DataFrame joins of that
operation's requests (``rid``, principal ``p``, entity ``e``) against the
materialized world relations, and each output the decisions read (``allowed``,
``applies``, ``met``, ``lacking``) is the union of its conjunctions' projections.
A negated request-derived literal (``not denied(R)``) is an anti-join against the
same unfolding of its goal. Operations no request names are never planned.

The hierarchy is given, not derived: ``child_of``, ``is_a``, ``ancestor`` and
``descendant`` as tables computed from the ids in one pass (by the caller, who
knows the id forms), over the inventory *and* the entities the requests create.
A row about a created entity carries that entity's code in a column ``w``: it
holds only for a request whose own entity's chain (``ec``, the codes of the entity
and everything enclosing it) holds it, so each request sees the inventory with
its own new entity placed in it, in one pass with every other request. Lookups
upwards from the request's entity read ``ec`` and ``et`` (its type) directly.

:func:`why_not` says when a program is outside this (its world relations other than
the closure read the hierarchy, the closure is not the prelude's, an ordered
comparison): the caller then evaluates generically, in rounds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import count
from typing import TYPE_CHECKING

from privilog.dsl.ir import Atom, Comparison, Const, Literal, Rule, Term, Var
from privilog.engine.analysis import Analysis, Kind, analyse
from privilog.engine.denial import DENIED_BY
from privilog.engine.unfold import ARG, ENTITY, PRINCIPAL, REQUEST_ID, NotCompiled, Unfolder, specialize

if TYPE_CHECKING:
    from privilog.engine.spark.evaluate import SparkEngine
    from pyspark.sql import Column, DataFrame

HIERARCHY = ("child_of", "is_a", "ancestor", "descendant")
# The closure as the prelude defines it: what the id-derived tables stand for.
CLOSURE = {
    "ancestor": {"ancestor(A,B)<-child_of(A,B)", "ancestor(A,B)<-ancestor(A,C);child_of(C,B)"},
    "descendant": {"descendant(A,B)<-child_of(B,A)", "descendant(A,B)<-descendant(A,C);child_of(B,C)"},
}
# What the decisions read, with the columns after the request id they keep (all of met's: the
# grant that meets a requirement is what an allowed request names as allowing it).
OUTPUTS = {"allowed": 0, "applies": 1, "met": 4, "lacking": 2}
# What least privilege reads besides (engine.justify): the entities an "every" requirement covers,
# and the grants that hold each of them.
JUSTIFY_OUTPUTS = {**OUTPUTS, "covered": 2, "held": 4}
ARITY = {
    "allowed": 1, "applies": 2, "met": 5, "lacking": 3, "covered": 3, "held": 5, "satisfied": 2, "bypass": 2,
    DENIED_BY: 2,  # the policy's own deny rules that hold, by place (engine.denial.with_denied_by)
}  # fmt: skip
# The prelude's decision, as its rules say it (canonical forms): a typed request is allowed when no
# requirement that applies is unmet, or a bypass lets it through. With exactly these rules, a
# caller that reads `applies`, `met` and `lacking` (and, with `by` options, `satisfied`) has what
# decides `allowed` already; unfolding `allowed` again through `not denied(R)` computes every
# requirement a second time (see allowed_from_unmet).
DECISION = {
    "allowed": {
        "allowed(A)<-request(A,B,C,D);operation(C,E);is_a(D,E);~denied(A)",
        "allowed(A)<-request(A,B,C,D);operation(C,E);is_a(D,E);bypass(A,F)",
    },
    "denied": {"denied(A)<-unmet(A,B)"},
    "unmet": {"unmet(A,B)<-applies(A,B);~satisfied(A,B)"},
    "some_lacking": {"some_lacking(A,B)<-lacking(A,B,C)"},
    "every_met": {
        "every_met(A,B)<-request(A,C,D,E);requires(D,B,F,'every',G);~some_lacking(A,B)",
        "every_met(A,B)<-request(A,C,D,E);requires(D,B,F,'every_arg',G);~some_lacking(A,B)",
    },
}
SATISFIED = {"satisfied(A,B)<-met(A,B,C,D,E)", "satisfied(A,B)<-every_met(A,B)"}
KEPT = "\x03\x06"  # the first character of a variable a goal keeps: never existential
PLACEHOLDER = "\x05"  # the first character of a variable standing for an operation's constant (union_of)
# Relations whose rows for one value of the first column are at most the hierarchy's depth: joined
# to a world relation on that column before the requests are (see _Plan._paired).
UPWARD = ("ancestor", "within")
PAIRED = "\x08"  # the first character of a world relation joined with an upward one
FRAME = ("rid", "o", "p", "e", "ec", "et")  # a request: id, operation, principal, entity, its chain's codes, its type


def _canonical(rule: Rule) -> str:
    names: dict[str, str] = {}

    def term(t: object) -> str:
        if isinstance(t, Const):
            return repr(t.value)
        assert isinstance(t, Var)
        return names.setdefault(t.name, "ABCDEFGH"[len(names)] if len(names) < 8 else f"V{len(names)}")

    head = f"{rule.head.predicate}({','.join(term(t) for t in rule.head.terms)})"
    body = ";".join(
        f"{'~' if b.negated else ''}{b.predicate}({','.join(term(t) for t in b.terms)})"
        for b in rule.body
        if isinstance(b, Atom)
    )
    return f"{head}<-{body}"


def why_not(engine: SparkEngine, analysis: Analysis | None = None) -> str | None:
    """Why the program's decisions cannot be fused, or None when they can."""
    import networkx as nx

    analysis = analysis or analyse(engine.program)
    rules = engine.rules
    for name, wanted in CLOSURE.items():
        if name in rules and {_canonical(r) for r in rules[name]} != wanted:
            return f"`{name}` is not the prelude's closure of child_of"
    if any(name in rules for name in ("child_of", "is_a")):
        return "child_of or is_a has rules"
    for name, kind in analysis.kinds.items():
        reads = set(nx.ancestors(engine.graph, name)) if name in engine.graph else set()
        if kind is Kind.WORLD and name not in CLOSURE and reads & set(HIERARCHY):
            return f"world relation `{name}` reads the hierarchy"
    for component in analysis.of_kind(Kind.REQUEST):
        if component.recursive:
            return "a request-derived relation is recursive"
        for rule in component.rules:
            for b in rule.body:
                if isinstance(b, Comparison) and b.operator not in ("==", "!="):
                    return "a comparison orders text"
    if "allowed" not in rules:
        return "no rule derives `allowed`"
    return None


def allowed_from_unmet(rules: Mapping[str, list[Rule]], by_rules: bool) -> bool:
    """Whether ``allowed`` is the prelude's: typed and nothing unmet, or a bypass with a named reason.

    Then the decisions read it from the unmet requirements they assemble anyway. Rules that
    compare, a policy's own deny rule, a bypass whose reason is not a constant, or (without `by`
    options, whose rows the caller reads as they are) any other way to be satisfied: no."""
    for name, wanted in DECISION.items():
        found = rules.get(name, [])
        if any(not isinstance(b, Atom) for r in found for b in r.body) or {_canonical(r) for r in found} != wanted:
            return False
    satisfied = rules.get("satisfied", [])
    if any(not isinstance(b, Atom) for r in satisfied for b in r.body):
        return False
    forms = {_canonical(r) for r in satisfied}
    if not forms >= SATISFIED or (forms != SATISFIED and not by_rules):
        return False
    return all(isinstance(r.head.terms[1], Const) for r in rules.get("bypass", []))


class FusedDecisions:
    """The fused plans of one program's operations, over given world and hierarchy tables."""

    def __init__(self, engine: SparkEngine):
        from privilog.engine.compiled.backend import CompiledBackend

        self.engine = engine
        self.program = engine.program
        self.analysis = analyse(self.program)
        static_world = CompiledBackend(self.program)  # the static relations, evaluated once in memory
        self._static = {n for n, k in self.analysis.kinds.items() if k is Kind.STATIC}
        self._static_rows = lambda name: static_world.evaluator.relation(name).rows
        requested = self.analysis.of_kind(Kind.REQUEST)
        self._generic = [r for c in requested for r in c.rules]
        self.derived = frozenset(n for n, k in self.analysis.kinds.items() if k is Kind.REQUEST and n != ARG)
        self._names = count()
        self._unfolders: dict[str, Unfolder] = {}

    def world_relations(self, operations: Iterable[str], outputs: Mapping[str, int] = OUTPUTS) -> set[str]:
        """The world-derived and base relations the plans of ``operations`` read."""
        out: set[str] = set()
        for operation in operations:
            unfolder = self.unfolder(operation)
            for goal, rigid in self._goals(outputs):
                for conjunction in unfolder.conjunctions(goal, rigid):
                    out |= self._reads(unfolder, conjunction, frozenset(rigid))
        return out

    def _reads(self, unfolder: Unfolder, conjunction: tuple[Literal, ...], rigid: frozenset[str]) -> set[str]:
        out: set[str] = set()
        for literal in conjunction:
            if not isinstance(literal, Atom) or literal.predicate == ARG:
                continue
            if literal.predicate in self.derived:
                params = frozenset(v for v in literal.variables) | {PRINCIPAL, ENTITY}
                goal = Atom(literal.predicate, literal.terms)
                for inner in unfolder.conjunctions(goal, params):
                    out |= self._reads(unfolder, inner, params)
            else:
                out.add(literal.predicate)
        return out

    def _unfolder(self, operation: str) -> Unfolder:
        rules: dict[str, list[Rule]] = {}
        for rule in specialize(self._generic, operation, self._static_rows, self._static):
            rules.setdefault(rule.head.predicate, []).append(rule)
        return Unfolder(rules, self.derived | {"request"}, operation)

    @staticmethod
    def _goals(outputs: Mapping[str, int] = OUTPUTS) -> list[tuple[Atom, frozenset[str]]]:
        """Each output as a goal about the one request, with the variables kept (rigid)."""
        request = Const(REQUEST_ID)
        base = {PRINCIPAL, ENTITY}
        kept = {name: [Var(f"\x03{name}{i}") for i in range(n)] for name, n in outputs.items()}
        goals = []
        for name, n in outputs.items():
            arity = ARITY[name]
            free = [Var(f"\x04{name}{i}") for i in range(arity - 1 - n)]
            atom = Atom(name, (request, *kept[name], *free))
            goals.append((atom, frozenset(base | {v.name for v in kept[name]})))
        return goals

    def decide(
        self,
        requests: DataFrame,
        args: DataFrame,
        world: Mapping[str, DataFrame],
        hierarchy: Mapping[str, DataFrame],
        operations: Iterable[str],
        small: Iterable[str] = (),
        outputs: Mapping[str, int] = OUTPUTS,
    ) -> dict[str, DataFrame]:
        """Per output (``outputs``: name -> columns kept), its rows (``c0`` the request id, then the columns kept).

        ``requests``: rid, o (the operation's code), p, e, ec, et; ``args``: rid, n, v;
        ``world``: relations with columns c0..; ``hierarchy``: c0, c1, w; ``small``: the
        world and hierarchy tables the caller measured and chose to broadcast. Raises
        :class:`NotCompiled` when an operation cannot be fused.
        """
        from pyspark.sql import functions as F

        plan = _Plan(self, args, world, hierarchy, frozenset(small))
        frame = requests.select(*FRAME)
        plan.frame, plan.operations = frame, sorted(operations)
        out = {}
        for goal, rigid in self._goals(outputs):
            kept = [t.name for t in goal.terms[1 : 1 + outputs[goal.predicate]]]  # type: ignore[union-attr]
            frames = []
            for df, names in self.union_of(plan, frame, goal, rigid, {PRINCIPAL: "p", ENTITY: "e"}, operations):
                if any(v not in names for v in kept):
                    raise NotCompiled
                frames.append(
                    df.select(
                        F.col("rid").alias("c0"), *(F.col(names[v]).alias(f"c{i}") for i, v in enumerate(kept, 1))
                    )
                )
            if not frames:
                arity = 1 + outputs[goal.predicate]
                out[goal.predicate] = self.engine.spark.createDataFrame(
                    [], ", ".join(f"c{i} long" for i in range(arity))
                )
                continue
            combined = frames[0]
            for more in frames[1:]:
                combined = combined.unionByName(more)
            out[goal.predicate] = combined.distinct()
        return out

    def union_of(
        self,
        plan: _Plan,
        frame: DataFrame,
        goal: Atom,
        rigid: frozenset[str],
        names: Mapping[str, str],
        operations: Iterable[str],
    ) -> list[tuple[DataFrame, dict[str, str]]]:
        """The ways ``goal`` holds for the requests of ``frame``: one plan per shape of conjunction.

        Conjunctions of any of the operations that differ only in their constants (the
        requirement id, the action, a type) share a plan: the constants become columns
        of a small table joined to the requests by operation, as a data engineer would
        join a requirements table.
        """
        from pyspark.sql import functions as F

        encode = self.engine.dictionary.encode
        prefix = f"{PLACEHOLDER}{next(self._names)}."  # apart from the placeholders of an enclosing call
        shapes: dict[tuple[Literal, ...], list[tuple[int, ...]]] = {}
        for operation in operations:
            for conjunction in self.unfolder(operation).conjunctions(goal, rigid):
                shape, values = _shape(conjunction, rigid, prefix)
                shapes.setdefault(shape, []).append((encode(operation), *(encode(v) for v in values)))
        out = []
        for shape, rows in shapes.items():
            width = len(rows[0]) - 1
            columns = [self.column() for _ in range(width)]
            table = self.engine.spark.createDataFrame(
                sorted(set(rows)), ", ".join(["o long", *(f"{c} long" for c in columns)])
            )
            inner = dict(names)
            inner.update({f"{prefix}{i}": c for i, c in enumerate(columns)})
            ops = [o for o in operations if encode(o) in {r[0] for r in rows}]
            df = frame.join(F.broadcast(table), on="o")
            out.append(plan.conjunction(df, shape, inner, ops))
        return out

    def unfolder(self, operation: str) -> Unfolder:
        found = self._unfolders.get(operation)
        if found is None:
            found = self._unfolders[operation] = self._unfolder(operation)
        return found

    def column(self) -> str:
        return f"x{next(self._names)}"


def _shape(
    conjunction: tuple[Literal, ...], rigid: frozenset[str], prefix: str
) -> tuple[tuple[Literal, ...], list[str]]:
    """The conjunction with its constants as placeholders (``prefix`` and a number) and its own variables
    named by first place; the constants, in order. The request's id stays a constant."""
    names: dict[str, Var] = {}
    values: list[str] = []

    def term(t: object) -> Term:
        if isinstance(t, Const):
            if t.value == REQUEST_ID:
                return t
            values.append(t.value)
            return Var(f"{prefix}{len(values) - 1}")
        assert isinstance(t, Var)
        if t.name in rigid:
            return t
        return names.setdefault(t.name, Var(f"\x02{len(names)}"))

    out: list[Literal] = []
    for literal in conjunction:
        if isinstance(literal, Atom):
            out.append(Atom(literal.predicate, tuple(term(t) for t in literal.terms), literal.negated))
        else:
            out.append(Comparison(term(literal.left), literal.operator, term(literal.right)))
    return tuple(out), values


class _Plan:
    """Conjunctions of one operation as joins of a frame of requests."""

    def __init__(
        self,
        fused: FusedDecisions,
        args: DataFrame,
        world: Mapping[str, DataFrame],
        hierarchy: Mapping[str, DataFrame],
        small: frozenset[str],
    ):
        self.fused = fused
        self.small = small
        self.args = args
        self.frame: DataFrame | None = None  # every request, set by decide
        self.operations: list[str] = []
        self.memo: dict[str, DataFrame | None] = {}
        self.cached: list[DataFrame] = []
        self.paired: dict[str, tuple[DataFrame, bool]] = {}
        self.world = world
        self.hierarchy = hierarchy
        self.encode = fused.engine.dictionary.encode

    def value(self, term: object, names: Mapping[str, str]) -> Column:
        from pyspark.sql import functions as F

        if isinstance(term, Const):
            return F.lit(self.encode(term.value))
        assert isinstance(term, Var)
        return F.col(names[term.name])

    @staticmethod
    def bound(term: object, names: Mapping[str, str]) -> bool:
        return isinstance(term, Const) or (isinstance(term, Var) and term.name in names)

    def conjunction(
        self, frame: DataFrame, conjunction: tuple[Literal, ...], names: dict[str, str], operations: list[str]
    ) -> tuple[DataFrame, dict[str, str]]:
        """The frame joined with every literal of ``conjunction``; the variables' columns."""
        names = dict(names)
        positives = [b for b in conjunction if isinstance(b, Atom) and not b.negated]
        filters = [b for b in conjunction if b not in positives]
        positives = self._paired(positives, names)
        mentioned = {v for b in positives for v in b.variables}
        df = frame
        while True:
            progress = True
            while progress:
                progress = False
                for f in list(filters):
                    if isinstance(f, Comparison):
                        left, right = self.bound(f.left, names), self.bound(f.right, names)
                        if left and right:
                            df = df.where(_compare(self.value(f.left, names), f.operator, self.value(f.right, names)))
                        elif f.operator == "==" and (left or right):
                            free, given = (f.right, f.left) if left else (f.left, f.right)
                            assert isinstance(free, Var)
                            names[free.name] = self.fused.column()
                            df = df.withColumn(names[free.name], self.value(given, names))
                        else:
                            continue
                    elif all(v in names for v in f.variables if v in mentioned or v[0] in KEPT):
                        df = self.negated(df, f, names, operations)
                    else:
                        continue
                    filters.remove(f)
                    progress = True
            if not positives:
                break
            best = max(positives, key=lambda a: self._score(a, names))
            positives.remove(best)
            df = self.atom(df, best, names)
        if filters:
            raise NotCompiled
        return df, names

    def _paired(self, positives: list[Atom], names: Mapping[str, str]) -> list[Atom]:
        """The positive literals, each ``U(D, X)`` of an upward relation (X bound by the request, D
        not) joined with the world literal that binds D and most of the request's own values.

        Joined request by request, the world literal comes first (it is bound by the principal)
        and brings every holding of the principal, each then tested against the request's entity:
        at 10^7 requests, "any on self or within" a namespace made 68 million rows to keep half a
        million. Joined first, world-side and once (a row for each holding and what encloses its
        entity: at most the hierarchy's depth), the requests are joined to it on every value they
        bind, and only what matches is made.
        """

        def own(atom: Atom) -> int:  # the request's own values it binds (not an operation's constants)
            return sum(
                isinstance(t, Var) and t.name in names and not t.name.startswith(PLACEHOLDER) for t in atom.terms
            )

        out = list(positives)
        for upward in positives:
            if upward.predicate not in UPWARD or upward not in out or len(upward.terms) != 2:
                continue
            d, x = upward.terms
            if not (isinstance(d, Var) and isinstance(x, Var) and x.name in names and d.name not in names):
                continue
            partners = [
                a
                for a in out
                if a is not upward
                and a.predicate in self.world
                and a.predicate not in self.fused.derived
                and any(isinstance(t, Var) and t.name == d.name for t in a.terms)
                and own(a) > 0
            ]
            if not partners:
                continue
            partner = max(partners, key=own)
            out.remove(partner)
            out.remove(upward)
            out.append(self._pair(partner, d, upward))
        return out

    def _pair(self, atom: Atom, d: Var, upward: Atom) -> Atom:
        """``atom`` and ``upward`` (``U(d, X)``) as one literal over their join on ``d``, kept:
        ``atom``'s terms, then X; with a hierarchy relation's witness ``w``."""
        from privilog.engine.spark.session import persist
        from pyspark.sql import functions as F

        i = next(n for n, t in enumerate(atom.terms) if isinstance(t, Var) and t.name == d.name)
        name = f"{PAIRED}{atom.predicate}.{i}.{upward.predicate}"
        if name not in self.paired:
            left = self.world[atom.predicate]
            witnessed = upward.predicate in HIERARCHY
            up = self.hierarchy[upward.predicate] if witnessed else self.world[upward.predicate]
            width = len(atom.terms)
            right = up.select(
                F.col("c0").alias("_d"), F.col("c1").alias(f"c{width}"), *([F.col("w")] if witnessed else [])
            )
            joined = left.select(*(f"c{n}" for n in range(width))).join(right, F.col(f"c{i}") == F.col("_d"))
            self.paired[name] = (persist(joined.drop("_d")), witnessed)
        return Atom(name, (*atom.terms, upward.terms[1]))

    def _score(self, atom: Atom, names: Mapping[str, str]) -> tuple[int, int]:
        if atom.predicate in HIERARCHY and self._from_entity(atom):
            return (3, 0)
        bound = sum(self.bound(t, names) for t in atom.terms)
        if atom.predicate == ARG:
            return (2 if self.bound(atom.terms[0], names) else 0, 0)
        return (1 if bound else 0, bound)

    @staticmethod
    def _from_entity(atom: Atom) -> bool:
        """Whether the atom looks upwards from the request's entity (answered from its chain)."""
        position = 1 if atom.predicate == "descendant" else 0
        term = atom.terms[position]
        return isinstance(term, Var) and term.name == ENTITY

    def _upward(self, df: DataFrame, atom: Atom, names: dict[str, str], negated: bool) -> DataFrame:
        from pyspark.sql import functions as F

        other = atom.terms[0 if atom.predicate == "descendant" else 1]
        if atom.predicate == "is_a":
            values, single = F.col("et"), True
        elif atom.predicate == "child_of":
            values, single = F.element_at(F.col("ec"), 2), True
        else:
            values, single = F.slice(F.col("ec"), 2, 1 << 16), False
        if self.bound(other, names):
            wanted = self.value(other, names)
            test = (values == wanted) if single else F.array_contains(values, wanted)
            test = F.coalesce(test, F.lit(False))
            return df.where(~test if negated else test)
        assert isinstance(other, Var)
        if negated:
            present = values.isNotNull() if single else F.size(values) > 0
            return df.where(~present)
        names[other.name] = self.fused.column()
        if single:
            return df.withColumn(names[other.name], values).where(F.col(names[other.name]).isNotNull())
        return df.withColumn(names[other.name], F.explode(values))

    def _table(self, atom: Atom) -> tuple[DataFrame, bool]:
        """The rows of a world or base relation; whether they carry a witness ``w``."""
        from pyspark.sql import functions as F

        if atom.predicate in self.paired:
            return self.paired[atom.predicate]
        if atom.predicate in HIERARCHY:
            table, witnessed = self.hierarchy[atom.predicate], True
        elif atom.predicate in self.world:
            table, witnessed = self.world[atom.predicate], False
        else:
            table, witnessed = None, False
        if table is not None:
            return (F.broadcast(table) if atom.predicate in self.small else table), witnessed
        arity = len(atom.terms)
        empty = self.fused.engine.spark.createDataFrame([], ", ".join(f"c{i} long" for i in range(arity)))
        return empty, False

    def _lined_up(
        self, atom: Atom, names: Mapping[str, str]
    ) -> tuple[DataFrame, list[tuple[str, str]], dict[str, str], bool]:
        """The atom's table filtered by its constants and repeated variables; join keys; new columns."""
        from pyspark.sql import functions as F

        table, witnessed = self._table(atom)
        if atom.predicate == ARG:
            table = self.args.select(F.col("rid").alias("r"), F.col("n").alias("c0"), F.col("v").alias("c1"))
            keys = [("rid", "r")]
            prefix = ["r"]
        else:
            keys, prefix = [], []
        first: dict[str, str] = {}
        new: dict[str, str] = {}
        selected = list(prefix)
        for i, term in enumerate(atom.terms):
            col = f"c{i}"
            if isinstance(term, Const):
                table = table.where(F.col(col) == F.lit(self.encode(term.value)))
            elif term.name in first:
                table = table.where(F.col(col) == F.col(first[term.name]))
            else:
                first[term.name] = col
                selected.append(col)
                if term.name in names:
                    keys.append((names[term.name], col))
                else:
                    new[term.name] = col
        if witnessed:
            selected.append("w")
        table = table.select(*selected)
        renamed = {}
        for frame_col, table_col in keys:
            renamed[table_col] = f"k_{frame_col}"
        for table_col in new.values():
            renamed[table_col] = self.fused.column()
        table = table.select(*(F.col(c).alias(renamed.get(c, c)) for c in table.columns))
        return table, [(f, renamed[t]) for f, t in keys], {v: renamed[c] for v, c in new.items()}, witnessed

    def atom(self, df: DataFrame, atom: Atom, names: dict[str, str]) -> DataFrame:
        from pyspark.sql import functions as F

        if atom.predicate in HIERARCHY and self._from_entity(atom):
            return self._upward(df, atom, names, negated=False)
        table, keys, new, witnessed = self._lined_up(atom, names)
        condition = [df[f] == table[t] for f, t in keys]
        joined = df.join(table, on=condition, how="inner") if condition else df.crossJoin(table)
        if witnessed:
            joined = joined.where(F.col("w").isNull() | F.array_contains(F.col("ec"), F.col("w")))
        names.update(new)
        return joined.select(*df.columns, *new.values())

    def negated(self, df: DataFrame, literal: Literal, names: dict[str, str], operations: list[str]) -> DataFrame:
        from pyspark.sql import functions as F

        assert isinstance(literal, Atom)
        if literal.predicate in self.fused.derived:
            return self._call(df, literal, names, operations)
        if literal.predicate in HIERARCHY and self._from_entity(literal):
            return self._upward(df, literal, names, negated=True)
        table, keys, _new, witnessed = self._lined_up(literal, names)
        condition = [df[f] == table[t] for f, t in keys]
        if witnessed:
            condition.append(table["w"].isNull() | F.array_contains(df["ec"], table["w"]))
        if not condition:
            return df if table.isEmpty() else df.limit(0)
        joined = condition[0]
        for c in condition[1:]:
            joined = joined & c
        return df.join(table, on=joined, how="left_anti")

    def _call(self, df: DataFrame, literal: Atom, names: dict[str, str], operations: list[str]) -> DataFrame:
        """``not goal(...)``: an anti-join against the goal's rows for every request, computed once
        (memoised by the goal's pattern) with the values bound here as columns; or, when the
        goal cannot bind them itself, unfolded for the values bound here."""
        params = [v for v in dict.fromkeys(literal.variables) if v in names and v not in (PRINCIPAL, ENTITY)]
        try:
            rows = self._goal_rows(literal, params)
        except NotCompiled:
            rows = self._local_rows(df, literal, names, params, operations)
        if rows is None:
            return df
        condition = df["rid"] == rows["k_rid"]
        for i, v in enumerate(params):
            condition = condition & (df[names[v]] == rows[f"k_{i}"])
        return df.join(rows, on=condition, how="left_anti")

    def _goal_rows(self, literal: Atom, params: list[str]) -> DataFrame | None:
        """The rows (k_rid, k_0..) of ``literal``'s goal for every request, the params as columns."""
        from privilog.engine.spark.session import persist
        from pyspark.sql import functions as F

        kept = {v: Var(f"\x06{i}") for i, v in enumerate(params)}
        terms = []
        for i, t in enumerate(literal.terms):
            if isinstance(t, Var):
                t = kept.get(t.name, Var(f"\x07{i}"))
            terms.append(t)
        goal = Atom(literal.predicate, tuple(terms))
        key = repr(goal)
        if key in self.memo:
            return self.memo[key]
        rigid = frozenset((PRINCIPAL, ENTITY, *(k.name for k in kept.values())))
        assert self.frame is not None
        found = []
        start = {PRINCIPAL: "p", ENTITY: "e"}
        for holds, bound in self.fused.union_of(self, self.frame, goal, rigid, start, self.operations):
            if any(k.name not in bound for k in kept.values()):
                raise NotCompiled  # the goal does not bind a value the caller gives: ask per caller
            found.append(
                holds.select(
                    F.col("rid").alias("k_rid"),
                    *(F.col(bound[k.name]).alias(f"k_{i}") for i, k in enumerate(kept.values())),
                )
            )
        rows = None
        if found:
            rows = found[0]
            for more in found[1:]:
                rows = rows.unionByName(more)
            rows = rows.distinct().transform(persist)
            self.cached.append(rows)
        self.memo[key] = rows
        return rows

    def _local_rows(
        self, df: DataFrame, literal: Atom, names: dict[str, str], params: list[str], operations: list[str]
    ) -> DataFrame | None:
        from pyspark.sql import functions as F

        rigid = frozenset((PRINCIPAL, ENTITY, *params))
        inner = {PRINCIPAL: "p", ENTITY: "e", **{v: names[v] for v in params}}
        start = df.select(*FRAME, *(names[v] for v in params)).distinct()
        goal = Atom(literal.predicate, literal.terms)
        found = []
        for holds, _ in self.fused.union_of(self, start, goal, rigid, inner, operations):
            found.append(
                holds.select(
                    F.col("rid").alias("k_rid"), *(F.col(names[v]).alias(f"k_{i}") for i, v in enumerate(params))
                )
            )
        if not found:
            return None
        combined = found[0]
        for more in found[1:]:
            combined = combined.unionByName(more)
        return combined.distinct()


def _compare(left: Column, operator: str, right: Column) -> Column:
    if operator == "==":
        return left == right
    if operator == "!=":
        return left != right
    raise NotCompiled  # ordering needs the strings: left to the generic evaluation
