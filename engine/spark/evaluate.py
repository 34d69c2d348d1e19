"""A compiled :class:`~engine.program.Program` evaluated bottom-up as Spark DataFrame plans.

Longer than 600 lines: it is one class, :class:`SparkEngine`, whose stratified and semi-naive
evaluation, memo of world relations and materialising share one engine's state.

One relation per predicate. The caller gives the base relations as DataFrames of
encoded long columns ``c0 .. cN-1``; the program's own facts (its tables) are
added to them. Derived predicates are evaluated stratum by stratum
(:func:`dsl.check.strata`), and within a stratum component by component in
dependency order:

* a non-recursive predicate is the union of its rules' plans. It stays a lazy
  plan, cached when more than one rule reads it, so the non-recursive part of a
  program runs as the few Spark jobs that write the caller's answer;
* the recursive components that are ready at the same time are iterated together
  by semi-naive evaluation: each round joins only the previous round's new rows
  (the delta) with the rest, removes what is already known with an anti-join,
  and counts every component's delta in one job, until all are empty. The
  lineage is cut with ``localCheckpoint`` every few rounds;
* negation reads a relation of a lower stratum, complete by then, as a
  left-anti join.

Nothing here knows what the relations mean: any checked program is evaluated the
same way, and the reference backend (pyDatalog) gives the same answers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import networkx as nx
from privilog.dsl.check import dependency_graph
from privilog.dsl.ir import Atom, Comparison, Const, Rule, Var
from privilog.engine.analysis import written_apart
from privilog.engine.program import Program, Row
from privilog.engine.spark.encoding import Dictionary
from privilog.engine.spark.plan import (
    ORDERED,
    Relation,
    Settings,
    Size,
    column,
    distinct,
    local_relation,
    plan_rule,
    union,
)
from privilog.engine.spark.session import persist

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


Progress = Callable[[str], None]
Reader = Callable[[int, Atom], Relation]


@dataclass(frozen=True)
class EngineSettings:
    """How the engine evaluates: planner knobs, and how often recursion cuts its lineage."""

    planner: Settings = field(default_factory=Settings)
    checkpoint_every: int = 4  # rounds of semi-naive iteration between lineage cuts
    max_rounds: int = 10_000
    # A relation of at most this many rows is collected to the driver once and then folded
    # there and broadcast as a local table: each Spark stage costs a fraction of a second, a
    # local table nothing. ``local_base_rows`` is the same for the base relations given;
    # 0 keeps them all in Spark.
    local_rows: int = 10_000
    local_base_rows: int = 10_000


def schema(arity: int) -> StructType:
    """The schema of a relation of ``arity`` encoded columns."""
    from pyspark.sql.types import LongType, StructField, StructType

    return StructType([StructField(column(i), LongType(), nullable=False) for i in range(arity)])


@dataclass
class Evaluation:
    """The relations of one evaluation, as DataFrames; ``release()`` frees what it cached."""

    relations: dict[str, Relation]
    rounds: dict[str, int] = field(default_factory=dict)  # semi-naive rounds per recursive predicate
    cached: dict[str, list[DataFrame]] = field(default_factory=dict)  # per predicate

    def cache(self, name: str, df: DataFrame) -> DataFrame:
        """Persist ``df``, part of predicate ``name``, until release()."""
        stored = df.transform(persist)
        self.cached.setdefault(name, []).append(stored)
        return stored

    def relation(self, name: str) -> DataFrame:
        """The rows of ``name`` (columns ``c0 ..``); a derived relation may repeat rows."""
        return self.relations[name].df

    def collect(self, names: Iterable[str], dictionary: Dictionary) -> dict[str, set[Row]]:
        """Every row of several relations, decoded, in one Spark job."""
        from pyspark.sql import functions as F

        names = list(names)
        width = max((self.relations[n].arity for n in names), default=0)
        parts = []
        for name in names:
            relation = self.relations[name]
            padding = [F.lit(None).cast("long").alias(column(i)) for i in range(relation.arity, width)]
            parts.append(relation.df.select(F.lit(name).alias("relation"), *relation.df.columns, *padding))
        out: dict[str, set[Row]] = {name: set() for name in names}
        if not parts:
            return out
        combined = parts[0]
        for part in parts[1:]:
            combined = combined.union(part)
        for row in combined.collect():
            name = row["relation"]
            arity = self.relations[name].arity
            out[name].add(tuple(dictionary.decode(int(row[column(i)])) for i in range(arity)))
        return out

    def release(self) -> None:
        for frames in self.cached.values():
            for df in frames:
                df.unpersist()
        self.cached.clear()


class SparkEngine:
    """Evaluates one program; reusable across evaluations over different base relations."""

    def __init__(
        self,
        program: Program,
        spark: SparkSession,
        settings: EngineSettings | None = None,
        progress: Progress | None = None,
    ):
        program = written_apart(program)  # a relation is given or derived, never both
        self.program = program
        self.spark = spark
        self.settings = settings or EngineSettings()
        self.progress = progress or (lambda _line: None)
        self.rules: dict[str, list[Rule]] = {}
        for rule in program.rules:
            self.rules.setdefault(rule.head.predicate, []).append(rule)
        self.graph = dependency_graph(program.rules)
        self.dictionary = Dictionary(self._program_values())
        self._program_facts = {
            name: local_relation(spark, {self._encode(row) for row in rows}, self.arity(name))
            for name, rows in program.facts.items()
        }
        base = set(program.relations) - set(self.rules)
        self._depends = {
            name: tuple(sorted(b for b in nx.ancestors(self.graph, name) if b in base)) for name in self.rules
        }
        # Derived relations kept from earlier evaluations, with the base relations they were
        # computed from: a later evaluation given the very same base objects reuses them,
        # as it reuses the measurements of base relations it was given before.
        self._memo: dict[str, tuple[tuple[object, ...], Relation]] = {}
        self._memo_cached: list[DataFrame] = []
        self._measured: dict[int, tuple[DataFrame, Relation]] = {}
        self._partition: dict[str, int] = {}
        self._strings: DataFrame | None = None

    # ---- facts --------------------------------------------------------------------

    def _program_values(self) -> Iterable[str]:
        for rows in self.program.facts.values():
            for row in rows:
                yield from row
        for rule in self.program.rules:
            for literal in (rule.head, *rule.body):
                terms = literal.terms if isinstance(literal, Atom) else (literal.left, literal.right)
                yield from (t.value for t in terms if isinstance(t, Const))

    def _encode(self, row: Row) -> tuple[int, ...]:
        return tuple(self.dictionary.encode(v) for v in row)

    def arity(self, name: str) -> int:
        return self.program.relations[name]

    def empty(self, name: str) -> DataFrame:
        return self.spark.createDataFrame([], schema(self.arity(name)))

    def facts(self, name: str, rows: Iterable[Row]) -> Relation:
        """Rows of strings encoded on the driver (for tests and small worlds)."""
        encoded = [self._encode(row) for row in rows]
        arity = self.arity(name)
        if len(encoded) <= self.settings.local_base_rows:
            return local_relation(self.spark, encoded, arity)
        ndv = [len({r[i] for r in encoded}) for i in range(arity)]
        return Relation(self.spark.createDataFrame(encoded, schema(arity)), Size.exact(len(encoded), ndv))

    # ---- evaluation ---------------------------------------------------------------

    def needed(self, outputs: Iterable[str]) -> set[str]:
        """Every derived predicate that the outputs depend on."""
        out: set[str] = set()
        for name in outputs:
            if name in self.graph:
                out.add(name)
                out.update(nx.ancestors(self.graph, name))
        return {name for name in out if name in self.rules}

    def evaluate(
        self,
        base: Mapping[str, DataFrame | Relation],
        outputs: Iterable[str] | None = None,
        added: Mapping[str, DataFrame] | None = None,
        partition: Mapping[str, int] | None = None,
        strings: DataFrame | None = None,
    ) -> Evaluation:
        """Evaluate the program over ``base`` (a missing base relation is empty).

        ``outputs`` limits the work to the predicates they depend on (default: all).
        Base relations given as bare DataFrames are cached, and counted with their
        distinct values per column in one Spark job to steer the join order.

        A predicate computed by an earlier evaluation from the very same base objects
        is reused. ``added`` holds rows to add to some base relations: a remembered
        predicate that only grows with them (no negation on the way) is brought up to
        date from its remembered rows, by semi-naive evaluation of the new ones,
        instead of being computed again from scratch.

        ``partition`` names base relations to hash-partition by one of their columns
        (a request id, say): rules joining them on it then run without a shuffle.
        ``strings`` (columns ``code``, ``value``) decodes values for the comparisons
        that order text (``<``, ``<=``, ``>``, ``>=``); without it the engine's own
        dictionary (the policy's constants and facts given through :meth:`facts`) is used.
        """
        for name in [*base, *(added or {})]:
            if name not in self.program.relations or name in self.rules:
                raise KeyError(f"`{name}` is not a base relation of policy {self.program.policy.name}")
        self._partition = dict(partition or {})
        self._strings = strings
        relations = self._base(base)
        deltas: dict[str, Relation] = {}
        if added:
            arity = {name: self.arity(name) for name in added}
            measured = self._measure({n: df.toDF(*(column(i) for i in range(arity[n]))) for n, df in added.items()})
            for name, delta in self._localise(measured, self.settings.local_rows).items():
                deltas[name] = delta
                relations[name] = union(self.spark, [relations[name], delta], arity[name])
        evaluation = Evaluation(relations)
        given: dict[str, object] = {name: base.get(name, _DEFAULT) for name in self.program.relations}
        wanted = self.needed(outputs if outputs is not None else self.rules)
        condensed = nx.condensation(self.graph.subgraph(wanted))
        uses = self._uses(wanted)
        changed: set[str] = set(deltas)  # relations whose rows differ from what the memo was computed from
        strata = {name: level for level, names in enumerate(self.program.strata) for name in names}
        order = sorted(
            nx.topological_sort(condensed),
            key=lambda c: min(strata.get(m, 0) for m in condensed.nodes[c]["members"]),
        )
        done: set[int] = set()
        while len(done) < len(order):
            ready = [c for c in order if c not in done and all(p in done for p in condensed.predecessors(c))]
            computed = []
            for component in ready:
                members = condensed.nodes[component]["members"]
                remembered = self._recall(members, given)
                if remembered is None:
                    continue
                reads = self._reads(members)
                if not reads & changed:
                    relations.update(remembered)
                    done.add(component)
                elif self._grows(members, changed, deltas):
                    self._grow_from(sorted(members), remembered, relations, deltas, evaluation)
                    changed.update(members)
                    done.add(component)
            ready = [c for c in ready if c not in done]
            for component in ready:
                members = condensed.nodes[component]["members"]
                if not self._recursive(members):
                    (name,) = members
                    relations[name] = self._nonrecursive(name, relations, uses, evaluation)
                    computed.append(component)
            if ready and not computed:
                computed = ready
                self._recursion(sorted(p for c in ready for p in condensed.nodes[c]["members"]), relations, evaluation)
            for component in computed:
                members = condensed.nodes[component]["members"]
                if self._reads(members) & changed:
                    changed.update(members)
                else:
                    self._remember(members, given, relations, evaluation)
            done.update(computed)
        return evaluation

    def _reads(self, members: Iterable[str]) -> set[str]:
        """The predicates a component's rules read, its own members aside."""
        members = set(members)
        return {
            literal.predicate
            for name in members
            for rule in self.rules[name]
            for literal in rule.body
            if isinstance(literal, Atom) and literal.predicate not in members
        }

    def _grows(self, members: Iterable[str], changed: set[str], deltas: Mapping[str, Relation]) -> bool:
        """Whether a component only gains rows from what changed: read positively, with known new rows."""
        for name in members:
            for rule in self.rules[name]:
                for literal in rule.body:
                    if (
                        isinstance(literal, Atom)
                        and literal.predicate in changed
                        and (literal.negated or literal.predicate not in deltas)
                    ):
                        return False
        return True

    # ---- reuse across evaluations -------------------------------------------------

    def _key(self, name: str, given: Mapping[str, object]) -> tuple[object, ...]:
        return tuple(given.get(b) for b in self._depends[name])

    def _recall(self, members: Iterable[str], given: Mapping[str, object]) -> dict[str, Relation] | None:
        """A component computed by an earlier evaluation from the very same base relations, if any."""
        found: dict[str, Relation] = {}
        for name in members:
            memo = self._memo.get(name)
            key = self._key(name, given)
            if memo is None or len(memo[0]) != len(key) or any(a is not b for a, b in zip(memo[0], key, strict=True)):
                return None
            found[name] = memo[1]
        return found

    def _remember(
        self,
        members: Iterable[str],
        given: Mapping[str, object],
        relations: Mapping[str, Relation],
        evaluation: Evaluation,
    ) -> None:
        """Keep a component for later evaluations over the same base relations."""
        for name in members:
            self._memo[name] = (self._key(name, given), relations[name])
            self._memo_cached.extend(evaluation.cached.pop(name, []))

    def forget(self) -> None:
        """Drop what earlier evaluations kept for reuse, and free its cache."""
        self._memo.clear()
        self._measured.clear()
        for df in self._memo_cached:
            df.unpersist()
        self._memo_cached.clear()

    def _base(self, base: Mapping[str, DataFrame | Relation]) -> dict[str, Relation]:
        from pyspark.sql import DataFrame

        relations: dict[str, Relation] = {}
        unmeasured: dict[str, DataFrame] = {}
        for name, arity in self.program.relations.items():
            if name in self.rules:
                continue
            given = base.get(name)
            if given is None:
                relations[name] = self._program_facts.get(name) or local_relation(self.spark, (), arity)
            elif isinstance(given, Relation):
                relations[name] = self._with_facts(name, given)
            elif len(given.columns) != arity:
                raise ValueError(f"`{name}` has {arity} columns, not {len(given.columns)}")
            elif id(given) in self._measured and self._measured[id(given)][0] is given:
                relations[name] = self._with_facts(name, self._measured[id(given)][1])
            else:
                frame = given.toDF(*(column(i) for i in range(arity)))
                if name in self._partition:
                    frame = frame.repartition(self._partitions(), column(self._partition[name]))
                stored = frame.transform(persist)
                self._memo_cached.append(stored)
                unmeasured[name] = stored
        if unmeasured:
            measured = self._measure(unmeasured)
            for name, relation in self._localise(measured, self.settings.local_base_rows).items():
                original = base[name]
                assert isinstance(original, DataFrame)
                self._measured[id(original)] = (original, relation)
                relations[name] = self._with_facts(name, relation)
        return relations

    def _with_facts(self, name: str, relation: Relation) -> Relation:
        facts = self._program_facts.get(name)
        return relation if facts is None else union(self.spark, [relation, facts], self.arity(name))

    def _sizes(self, relations: Mapping[str, DataFrame]) -> dict[str, Size]:
        """Rows and distinct values per column of several relations, in one Spark job."""
        from pyspark.sql import functions as F

        width = max(len(df.columns) for df in relations.values())
        parts = []
        for name, df in relations.items():
            aggregates = [F.lit(name).alias("relation"), F.count(F.lit(1)).alias("rows")]
            for i in range(width):
                value = F.approx_count_distinct(column(i)) if i < len(df.columns) else F.lit(0).cast("long")
                aggregates.append(value.alias(f"ndv{i}"))
            parts.append(df.agg(*aggregates))
        combined = parts[0]
        for part in parts[1:]:
            combined = combined.unionByName(part)
        sizes = {}
        for row in combined.collect():
            arity = len(relations[row["relation"]].columns)
            sizes[row["relation"]] = Size.exact(int(row["rows"]), [float(row[f"ndv{i}"]) for i in range(arity)])
        return sizes

    def _measure(self, relations: Mapping[str, DataFrame]) -> dict[str, Relation]:
        started = time.monotonic()
        sizes = self._sizes(relations)
        described = ", ".join(f"{n} {int(s.rows):,}" for n, s in sorted(sizes.items()))
        self.progress(f"measured base relations in {time.monotonic() - started:.1f}s: {described}")
        return {
            name: Relation(relations[name], sizes[name], partitioned=self._partition.get(name)) for name in relations
        }

    def _partitions(self) -> int:
        return int(self.spark.conf.get("spark.sql.shuffle.partitions") or 4)

    def _localise(self, relations: Mapping[str, Relation], limit: int) -> dict[str, Relation]:
        """Collect the measured relations of at most ``limit`` rows to the driver, in one job."""
        from pyspark.sql import functions as F

        small = {n: r for n, r in relations.items() if r.local is None and r.size.rows <= limit}
        if not small:
            return dict(relations)
        width = max(r.arity for r in small.values())
        parts = []
        for name, relation in small.items():
            padding = [F.lit(None).cast("long").alias(column(i)) for i in range(relation.arity, width)]
            parts.append(relation.df.select(F.lit(name).alias("relation"), *relation.df.columns, *padding))
        combined = parts[0]
        for part in parts[1:]:
            combined = combined.union(part)
        rows: dict[str, set[tuple[int, ...]]] = {name: set() for name in small}
        for row in combined.collect():
            name = row["relation"]
            rows[name].add(tuple(int(row[column(i)]) for i in range(small[name].arity)))
        out = dict(relations)
        for name, found in rows.items():
            out[name] = local_relation(self.spark, found, small[name].arity)
        return out

    def _uses(self, wanted: set[str]) -> dict[str, int]:
        """How many positive body atoms of the wanted rules read each predicate."""
        uses: dict[str, int] = {}
        for name in wanted:
            for rule in self.rules[name]:
                for literal in rule.body:
                    if isinstance(literal, Atom) and not literal.negated:
                        uses[literal.predicate] = uses.get(literal.predicate, 0) + 1
        return uses

    def _recursive(self, members: set[str]) -> bool:
        if len(members) > 1:
            return True
        (name,) = members
        return bool(self.graph.has_edge(name, name))

    def _reader(self, relations: Mapping[str, Relation], override: Mapping[int, Relation] | None = None) -> Reader:
        def read(position: int, atom: Atom) -> Relation:
            if override is not None and position in override:
                return override[position]
            return relations[atom.predicate]

        return read

    def _plan(self, rule: Rule, reader: Reader, evaluation: Evaluation) -> Relation:
        def materialise(df: DataFrame) -> tuple[DataFrame, int]:
            stored = evaluation.cache(rule.head.predicate, df)
            return stored, stored.count()

        return plan_rule(rule, reader, self.spark, self.settings.planner, materialise, self._text())

    def _text(self) -> DataFrame | None:
        """Codes and their strings, for comparisons that order text (only when a rule has one)."""
        if not any(isinstance(b, Comparison) and b.operator in ORDERED for r in self.program.rules for b in r.body):
            return None
        if self._strings is not None:
            return self._strings
        rows = [(self.dictionary.encode(v), v) for v in self.dictionary.values()]
        return self.spark.createDataFrame(rows, "code long, value string")

    def _derive(self, name: str, rules: Iterable[Rule], reader: Reader, evaluation: Evaluation) -> Relation:
        planned = [self._plan(r, reader, evaluation) for r in rules]
        return union(self.spark, planned, self.arity(name))

    def _nonrecursive(
        self, name: str, relations: dict[str, Relation], uses: Mapping[str, int], evaluation: Evaluation
    ) -> Relation:
        result = self._with_facts(name, self._derive(name, self.rules[name], self._reader(relations), evaluation))
        if result.local is not None:
            return result
        if uses.get(name, 0) and any(_projects(r) for r in self.rules[name]):
            result = distinct(result)  # it feeds joins, where repeated rows would multiply
        if uses.get(name, 0) and not set(self._depends[name]) & set(self._partition):
            # Read by other rules and not partitioned: measure it, so that it can be broadcast.
            return self._materialise({name: result}, evaluation, cut=False)[name]
        if uses.get(name, 0) > 1:
            result = replace(result, df=evaluation.cache(name, result.df))
        return result

    # ---- recursion ----------------------------------------------------------------

    def _recursion(
        self,
        members: list[str],
        relations: dict[str, Relation],
        evaluation: Evaluation,
        start: Mapping[str, tuple[Relation, Relation]] | None = None,
    ) -> dict[str, Relation]:
        """Semi-naive evaluation of several recursive components, in lockstep.

        From scratch, the first delta is what the rules that read no member derive. With
        ``start`` (per member: the rows known already, and the first new rows), it goes on
        from there. Returns, per member, every row it added.
        """
        recursive = set(members)
        started = time.monotonic()
        if start is None:
            first: dict[str, Relation] = {}
            for name in members:
                exits = [r for r in self.rules[name] if not _reads(r, recursive)]
                derived = self._derive(name, exits, self._reader(relations), evaluation)
                first[name] = distinct(self._with_facts(name, derived))
            delta = self._materialise(first, evaluation, cut=False)
            full = dict(delta)
        else:
            delta = self._materialise({name: start[name][1] for name in members}, evaluation, cut=False)
            full = {name: self._grow(start[name][0], delta[name], cut=False) for name in members}
        added = {name: delta[name] for name in members}
        relations.update(full)
        rounds = 1
        described = ", ".join(f"{n} +{int(delta[n].size.rows):,}" for n in members)
        self.progress(f"recursion round 1: {described}")
        while any(delta[name].size.rows > 0 for name in members):
            if rounds >= self.settings.max_rounds:
                raise RuntimeError(f"recursion over {', '.join(members)} did not converge in {rounds} rounds")
            rounds += 1
            fresh = {name: self._round(name, recursive, relations, delta, full[name], evaluation) for name in members}
            cut = rounds % self.settings.checkpoint_every == 0
            delta = self._materialise(fresh, evaluation, cut=cut)
            for name in members:
                full[name] = self._grow(full[name], delta[name], cut)
                added[name] = self._grow(added[name], delta[name], cut=False)
                relations[name] = full[name]
            count = sum(int(d.size.rows) for d in delta.values())
            self.progress(f"recursion round {rounds}: +{count:,} rows ({time.monotonic() - started:.1f}s)")
        for name in members:
            evaluation.rounds[name] = rounds
        return added

    def _grow_from(
        self,
        members: list[str],
        remembered: Mapping[str, Relation],
        relations: dict[str, Relation],
        deltas: dict[str, Relation],
        evaluation: Evaluation,
    ) -> None:
        """Bring a remembered component up to date with the new rows of what it reads."""
        relations.update(remembered)
        inside = set(members)
        first: dict[str, Relation] = {}
        for name in members:
            planned = []
            for rule in self.rules[name]:
                for position, literal in enumerate(rule.body):
                    if isinstance(literal, Atom) and literal.predicate in deltas and literal.predicate not in inside:
                        reader = self._reader(relations, {position: deltas[literal.predicate]})
                        planned.append(self._plan(rule, reader, evaluation))
            found = distinct(union(self.spark, planned, self.arity(name)))
            first[name] = self._unknown(found, remembered[name])
        if self._recursive(inside):
            added = self._recursion(members, relations, evaluation, {n: (remembered[n], first[n]) for n in members})
        else:
            added = self._materialise(first, evaluation, cut=False)
            for name in members:
                relations[name] = self._grow(remembered[name], added[name], cut=False)
        deltas.update(added)

    def _unknown(self, found: Relation, known: Relation) -> Relation:
        """The rows of ``found`` that ``known`` lacks."""
        from pyspark.sql import functions as F

        if found.local is not None and known.local is not None:
            return local_relation(self.spark, found.local - known.local, found.arity)
        keys = [column(i) for i in range(found.arity)]
        together = found.partitioned is not None and found.partitioned == known.partitioned
        other = known.df if together or known.local is None else F.broadcast(known.df)
        kept = found.partitioned if together or known.local is not None else None
        # a relation of no columns: no key to join on, and none is needed (any row known is its one row)
        return Relation(found.df.join(other, on=keys or None, how="left_anti"), found.size, partitioned=kept)

    def _round(
        self,
        name: str,
        recursive: set[str],
        relations: Mapping[str, Relation],
        delta: Mapping[str, Relation],
        known: Relation,
        evaluation: Evaluation,
    ) -> Relation:
        """The new rows of ``name``: each rule with one recursive atom read from the last delta."""
        planned = []
        for rule in self.rules[name]:
            for position, literal in enumerate(rule.body):
                if isinstance(literal, Atom) and not literal.negated and literal.predicate in recursive:
                    reader = self._reader(relations, {position: delta[literal.predicate]})
                    planned.append(self._plan(rule, reader, evaluation))
        return self._unknown(distinct(union(self.spark, planned, self.arity(name))), known)

    def _materialise(self, relations: Mapping[str, Relation], evaluation: Evaluation, cut: bool) -> dict[str, Relation]:
        """Cache (or checkpoint) several relations and measure them all in one job; collect the small."""
        stored: dict[str, DataFrame] = {}
        out: dict[str, Relation] = {}
        for name, relation in relations.items():
            if relation.local is not None:
                out[name] = relation
            elif cut:
                stored[name] = relation.df.localCheckpoint(eager=False)
            else:
                stored[name] = evaluation.cache(name, relation.df)
        if stored:
            sizes = self._sizes(stored)
            measured = {
                name: Relation(stored[name], sizes[name], partitioned=relations[name].partitioned) for name in stored
            }
            out.update(self._localise(measured, self.settings.local_rows))
        return out

    def _grow(self, known: Relation, new: Relation, cut: bool) -> Relation:
        if known.local is not None and new.local is not None:
            return local_relation(self.spark, known.local | new.local, known.arity)
        df = known.df.union(new.df)
        if cut:
            df = df.localCheckpoint(eager=True)
        rows = known.size.rows + new.size.rows
        ndv = tuple(min(rows, a + b) for a, b in zip(known.size.ndv, new.size.ndv, strict=True))
        together = known.partitioned if known.partitioned == new.partitioned else None
        return Relation(df, Size(rows, rows, ndv), partitioned=together)


_DEFAULT = object()  # a base relation the caller did not give: empty, or the policy's own facts


def _reads(rule: Rule, predicates: set[str]) -> bool:
    return any(isinstance(b, Atom) and not b.negated and b.predicate in predicates for b in rule.body)


def _projects(rule: Rule) -> bool:
    """Whether the rule's head drops a variable its positive body binds (so rows may repeat)."""
    head = {t.name for t in rule.head.terms if isinstance(t, Var)}
    body = {v for b in rule.body if isinstance(b, Atom) and not b.negated for v in b.variables}
    return bool(body - head)
