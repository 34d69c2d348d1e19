"""Requests decided by the Spark engine over a deployment's tables: in one fused pass, or in rounds.

The tables become the base relations ``grant``, ``member_of``, ``child_of``,
``is_a``, ``request`` and ``request_arg``, ids encoded as 64-bit hashes (checked
for collisions), and the decisions are read back from the relations the reference
authorizer reads (``allowed``, ``applies``, ``met``, ``lacking``).

Decisions are made in one pass by the fused plans (:mod:`engine.spark.fused`), the
hierarchy computed from the ids for the inventory and for the entities requests
create (:func:`engine.spark.deployment.hierarchy`); a policy outside what they fuse is evaluated generically,
rule by rule, in rounds that place created entities (:func:`plan_rounds`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from privilog.engine.denial import DENIED_BY
from privilog.engine.spark.decisions import (
    BY_RULES_OUTPUT,
    BYPASS_OUTPUT,
    DECIDE_OUTPUTS,
    JUSTIFY_OUTPUTS,
    bypass_reasons,
    decisions,
    denial_codes,
    has_by_rules,
    needs_of,
)
from privilog.engine.spark.deployment import Deployment, entity_chains, hierarchy
from privilog.engine.spark.encoding import relation_columns

if TYPE_CHECKING:
    from privilog.engine.spark.evaluate import Progress, SparkEngine
    from pyspark.sql import Column, DataFrame, SparkSession


class Requests(Protocol):
    """The requests to decide, checked: the good ones (rid, principal, operation, entity, and what else
    the log holds) and their arguments (rid, name, value)."""

    @property
    def good(self) -> DataFrame: ...

    @property
    def args(self) -> DataFrame: ...


BY_REQUEST = {"request": 0, "request_arg": 0}  # relations keyed by the request id, partitioned by it
# A world or hierarchy table of at most this many rows is broadcast into the fused plans'
# joins (about 24 bytes a row, a copy per executor thread's hash table): the requests are
# never shuffled against it. Larger ones are joined by shuffling both sides.
BROADCAST_ROWS = 1_000_000


# ---- evaluation -----------------------------------------------------------------------


@dataclass
class Round:
    """The requests decided together, and the not-yet-existing entities their ids place."""

    requests: DataFrame  # rid, principal, operation, entity
    transient: DataFrame | None  # entity, parent (strings) not in the inventory


def plan_rounds(deployment: Deployment, requests: DataFrame, progress: Progress) -> Iterable[Round]:
    """Rounds in which no request sees another request's not-yet-existing entity below its own."""
    from privilog.engine.spark.session import persist
    from pyspark.sql import functions as F

    vocabulary = deployment.vocabulary
    chains = (
        requests.select("entity")
        .distinct()
        .select("entity", F.explode(vocabulary.chain(F.col("entity"))).alias("member"))
    )
    transient = chains.join(
        deployment.existing.select(F.col("entity").alias("member")), on="member", how="left_anti"
    ).transform(persist)
    # The entities of creates are few next to the log: broadcast, the log is not shuffled for them.
    brings = F.broadcast(transient.select("entity").distinct())
    yield Round(requests.join(brings, on="entity", how="left_anti"), None)
    remaining = requests.join(brings, on="entity", how="left_semi")
    number = 1
    while True:
        count = remaining.count()
        if count == 0:
            return
        number += 1
        members = transient.join(remaining.select("entity").distinct(), on="entity", how="left_semi")
        entities = members.select(F.col("member").alias("entity")).distinct()
        # every entity that strictly encloses one of this round's new entities
        enclosing = entities.select(
            F.explode(F.slice(vocabulary.chain(F.col("entity")), 2, vocabulary.depth)).alias("entity")
        )
        deferred = remaining.join(enclosing.distinct(), on="entity", how="left_semi").transform(persist)
        decided = remaining.join(deferred.select("rid"), on="rid", how="left_anti")
        links = entities.select("entity", vocabulary.parent(F.col("entity")).alias("parent"))
        progress(f"round {number}: {count:,} requests name entities not in the inventory")
        yield Round(decided, links)
        remaining = deferred


def base_relations(
    deployment: Deployment, round_: Round, args: DataFrame
) -> tuple[dict[str, DataFrame], dict[str, DataFrame]]:
    """The round's base relations (the deployment's and its requests), and the rows its new
    entities add to ``child_of`` and ``is_a`` (so the engine brings the hierarchy up to date
    rather than computing it again)."""
    from pyspark.sql import functions as F

    relations = dict(deployment.relations)
    requests = round_.requests.select(
        F.col("rid").alias("c0"),
        *(F.xxhash64(F.col(c)).alias(f"c{i}") for i, c in enumerate(("principal", "operation", "entity"), 1)),
    )
    relations["request"] = requests
    relations["request_arg"] = args.join(round_.requests.select("rid"), on="rid", how="left_semi").select(
        F.col("rid").alias("c0"), F.xxhash64("name").alias("c1"), F.xxhash64("value").alias("c2")
    )
    added: dict[str, DataFrame] = {}
    if round_.transient is not None:
        links = round_.transient
        kind = deployment.vocabulary.entity_type(F.col("entity"))
        added["child_of"] = links.where(F.col("parent").isNotNull()).select(*relation_columns("entity", "parent"))
        added["is_a"] = links.select(*relation_columns("entity"), F.xxhash64(kind).alias("c1"))
    return relations, added


def dictionary(
    spark: SparkSession,
    engine: SparkEngine,
    deployment: Deployment,
    requests: Requests | None,
    chains: DataFrame | None = None,
    code: Callable[[Column], Column] | None = None,
) -> DataFrame:
    """Every string the evaluation may hold, with its code (code, value); raises on a collision.

    ``chains`` (entity, chain: :func:`entity_chains`) has the requests' entities once each; without
    it they are read from the requests. ``code`` is the encoding (the engine's xxhash64; a test
    passes one that collides)."""
    from privilog.engine.spark.encoding import EncodingError
    from privilog.engine.spark.session import persist
    from pyspark.sql import functions as F

    vocabulary = deployment.vocabulary
    # The policy's constants, and what a good request can hold only from the policy: its
    # operation, the types of what its entity is in, its arguments' names (checked against the
    # operation's parameters). Read here, not from every request.
    known = {
        *engine.dictionary.values(),
        *vocabulary.operations,
        *vocabulary.above,  # every entity type
        *(p.name for op in vocabulary.policy.operations for p in op.params),
    }
    values = deployment.values.union(spark.createDataFrame([(v,) for v in sorted(known)], "value string"))
    if requests is not None:
        if chains is None:
            chains = entity_chains(deployment, requests.good)
        values = (
            values.union(requests.good.select(F.col("principal").alias("value")))
            .union(chains.select(F.explode("chain").alias("value")))
            .union(requests.args.select(F.col("value")))
        )
    # Each distinct string once (an aggregation keyed by the string, combined before the shuffle:
    # a log of 10^7 requests names far fewer principals), then its code: two strings that share a
    # code make it appear twice. Counting by code keeps the aggregation's buffer fixed-width; a
    # least and greatest string per code sorted every value of the run.
    table = (
        values.where(F.col("value").isNotNull())
        .distinct()
        .select((code or F.xxhash64)(F.col("value")).alias("code"), "value")
        .transform(persist)
    )
    clash = table.groupBy("code").count().where(F.col("count") > 1).first()
    if clash is not None:
        found = sorted(r["value"] for r in table.where(F.col("code") == clash["code"]).collect())
        raise EncodingError(f"`{found[0]}` and `{found[1]}` share the code {clash['code']}; cannot evaluate them")
    return table


@dataclass
class Decided:
    """Every good request of the log with its decision, and the count of each."""

    table: DataFrame  # rid, principal, operation, entity, args, timestamp, decision, unmet, ...: persisted
    rounds: int = 0
    cached: list[DataFrame] = field(default_factory=list)
    needs: DataFrame | None = None  # with needs_for: rid, i, c, p, a, e (needs_of), persisted (plan cut)


def decide_fused(
    spark: SparkSession,
    engine: SparkEngine,
    deployment: Deployment,
    requests: Requests,
    table: DataFrame,
    progress: Progress,
    chains: DataFrame,
    witnesses: bool = True,
    needs_for: DataFrame | None = None,
) -> Decided | None:
    """Decide every good request in one pass with the fused plans (engine.spark.fused); None
    when the policy is outside what they fuse (then the caller decides in rounds). ``chains``:
    the requests' entities with their chains (:func:`entity_chains`)."""
    from privilog.engine.spark.encoding import xxhash64
    from privilog.engine.spark.evaluate import Evaluation
    from privilog.engine.spark.fused import (
        HIERARCHY,
        JUSTIFY_OUTPUTS,
        OUTPUTS,
        FusedDecisions,
        allowed_from_unmet,
        why_not,
    )
    from privilog.engine.spark.plan import Relation, Size
    from privilog.engine.spark.session import persist
    from privilog.engine.unfold import NotCompiled
    from pyspark.sql import functions as F

    reason = why_not(engine)
    if reason is not None:
        progress(f"not fused ({reason}): deciding by generic evaluation, in rounds")
        return None
    fused = FusedDecisions(engine)
    operations = sorted(r["operation"] for r in requests.good.select("operation").distinct().collect())
    outputs = JUSTIFY_OUTPUTS if needs_for is not None else OUTPUTS
    decide_outputs = {**OUTPUTS, BY_RULES_OUTPUT: 1} if has_by_rules(engine.program) else dict(OUTPUTS)
    reasons = bypass_reasons(engine.program, deployment)
    if reasons:
        decide_outputs[BYPASS_OUTPUT] = 1
    if denial_codes(engine.program):
        decide_outputs[DENIED_BY] = 1
    outputs = {**outputs, **decide_outputs}
    # `allowed` read from the unmet requirements the decisions assemble anyway, not unfolded again
    shortcut = allowed_from_unmet(engine.rules, has_by_rules(engine.program))
    if shortcut:
        del decide_outputs["allowed"], outputs["allowed"]
    try:
        reads = fused.world_relations(operations, outputs)
    except NotCompiled:
        progress("not fused (an operation's rules do not unfold): deciding by generic evaluation, in rounds")
        return None
    derived = sorted(n for n in reads if n in engine.rules and n not in HIERARCHY)
    world: dict[str, DataFrame] = {n: deployment.relations[n] for n in reads if n in deployment.relations}
    if derived:
        evaluation = engine.evaluate(deployment.relations, outputs=derived)
        for name in derived:
            world[name] = evaluation.relation(name).distinct().transform(persist)
    vocabulary = deployment.vocabulary
    frame = requests.good.select(
        "rid",
        F.xxhash64("operation").alias("o"),
        F.xxhash64("principal").alias("p"),
        F.xxhash64("entity").alias("e"),
        F.transform(vocabulary.chain(F.col("entity")), lambda x: F.xxhash64(x)).alias("ec"),
        F.xxhash64(vocabulary.entity_type(F.col("entity"))).alias("et"),
    )
    args = requests.args.select("rid", F.xxhash64("name").alias("n"), F.xxhash64("value").alias("v"))
    frame = frame.transform(persist)
    tables = hierarchy(deployment, chains)
    sizes = {name: df.count() for name, df in [*world.items(), *tables.items()]}
    small = {name for name, rows in sizes.items() if rows <= BROADCAST_ROWS}
    progress(
        "world and hierarchy tables (rows; * broadcast): "
        + ", ".join(f"{n} {rows:,}{'*' if n in small else ''}" for n, rows in sorted(sizes.items()))
    )
    progress(f"planning the fused decisions of {len(operations)} operations")
    try:
        found = fused.decide(frame, args, world, tables, operations, small, decide_outputs)
    except NotCompiled:
        progress("not fused (an operation's plan does not compile): deciding by generic evaluation, in rounds")
        return None
    progress(f"fused plans for {len(operations)} operations: one pass, no rounds; running them")
    # Each output computed once and kept: the decisions read `applies` and `met` more than once
    # (the unmet requirements, the grants that allow), and Spark ran their plans again for each
    # (at 10^6 requests the fused job took 46 s; kept, 22 s).
    found = {name: persist(df) for name, df in found.items()}
    progress("ran the fused plans, each output kept; assembling the decisions")
    relations = {name: Relation(df, Size.unknown(len(df.columns))) for name, df in found.items()}
    # Decided here, in a job of its own: a caller that joins two policies' decisions (impact)
    # would otherwise run both fused plans in one stage, each operator of both holding memory.
    typed = None
    if shortcut:
        kinds = spark.createDataFrame(
            [(xxhash64(op.qualified), xxhash64(op.entity_type)) for op in engine.program.policy.operations],
            "o long, t long",
        )
        typed = frame.join(F.broadcast(kinds), on="o").where(F.col("et") == F.col("t")).select("rid")
    carry = [c for c in requests.good.columns if c != "rid"]
    part = decisions(
        spark, engine.program, Evaluation(relations), requests.good, table, witnesses, reasons, typed, carry
    )
    part = part.transform(persist)  # computed now (a local checkpoint): each request with its decision
    progress("decided")
    needs = None
    if needs_for is not None:
        # A plan of its own over the allowed requests of needs_for alone (a fraction of the log): the
        # needs of every request, read through the decisions' plan, ran out of memory at 10^6 in
        # one stage of dozens of chained sorts. Each output is computed apart, and kept.
        chosen = part.where(F.col("decision") == "allow").select("rid").join(needs_for, on="rid", how="left_semi")
        few = persist(frame.join(chosen, on="rid", how="left_semi"))
        progress(f"gathering the grants that can justify each of {few.count():,} distinct allowed requests")
        justify = {name: n for name, n in JUSTIFY_OUTPUTS.items() if name != "allowed"}
        try:
            kept = fused.decide(
                few, args.join(few.select("rid"), on="rid", how="left_semi"), world, tables, operations, small, justify
            )
        except NotCompiled:
            progress("not fused (the grants behind a decision do not compile): deciding by generic evaluation")
            return None
        kept["allowed"] = few.select(F.col("rid").alias("c0"))
        gathered = {name: Relation(persist(df), Size.unknown(len(df.columns))) for name, df in kept.items()}
        needs = persist(needs_of(spark, engine.program, Evaluation(gathered), few.select("rid"), deployment.relations))
        progress(f"gathered {needs.count():,} (need, grant) rows")
    return Decided(part, 1, [table, part], needs)


def named_entities(deployment: Deployment, requests: Requests) -> DataFrame:
    """Every entity the good requests act on (and what encloses it) or name in an argument."""
    from pyspark.sql import functions as F

    chains = requests.good.select(F.explode(deployment.vocabulary.chain(F.col("entity"))).alias("entity"))
    args = requests.args.where(F.col("value").contains(":")).select(F.col("value").alias("entity"))
    return chains.union(args).distinct()


def decide_all(
    spark: SparkSession,
    engine: SparkEngine,
    deployment: Deployment,
    requests: Requests,
    progress: Progress,
    fused: bool = True,
    witnesses: bool = True,
    needs_for: DataFrame | None = None,
) -> Decided:
    """Decide every good request: in one pass with fused plans when the policy allows, else round by round.

    With ``witnesses``, allowed requests name the grants that allow them (:func:`decisions`); with
    ``needs_for`` (rid), the result's ``needs`` has every grant that can, for those (:func:`needs_of`)."""
    from privilog.engine.spark.session import persist

    deployment = deployment.with_named(named_entities(deployment, requests), requests.good.select("principal"))
    progress("checking the encoding: every value of the run hashed, looking for two that share a code")
    chains = persist(entity_chains(deployment, requests.good))
    table = dictionary(spark, engine, deployment, requests, chains)
    progress("checked the encoding: no two values share a code")
    reasons = bypass_reasons(engine.program, deployment)
    if fused:
        found = decide_fused(spark, engine, deployment, requests, table, progress, chains, witnesses, needs_for)
        if found is not None:
            return found
    parts, needs = [], []
    rounds = 0
    for round_ in plan_rounds(deployment, requests.good, progress):
        rounds += 1
        base, added = base_relations(deployment, round_, requests.args)
        outputs = JUSTIFY_OUTPUTS if needs_for is not None else DECIDE_OUTPUTS
        if has_by_rules(engine.program):
            outputs = (*outputs, BY_RULES_OUTPUT)
        if reasons:
            outputs = (*outputs, BYPASS_OUTPUT)
        if denial_codes(engine.program):
            outputs = (*outputs, DENIED_BY)
        evaluation = engine.evaluate(base, outputs=outputs, added=added, partition=BY_REQUEST)
        part = decisions(spark, engine.program, evaluation, round_.requests, table, witnesses, reasons)
        parts.append(part.transform(persist))
        parts[-1].count()  # decide this round before the next replaces the facts
        if needs_for is not None:
            needs.append(persist(needs_of(spark, engine.program, evaluation, needs_for, deployment.relations)))
        evaluation.release()
        progress(f"round {rounds}: decided")
    combined = parts[0]
    for part in parts[1:]:
        combined = combined.union(part)
    out = requests.good.join(combined, on="rid", how="inner").transform(persist)
    gathered = None
    for more in needs:
        gathered = more if gathered is None else gathered.unionByName(more)
    return Decided(out, rounds, [table, *parts, *needs], gathered)
