"""Requests decided by the Spark engine, and visibility, over a deployment's tables.

The tables become the base relations ``grant``, ``member_of``, ``child_of``,
``is_a``, ``request`` and ``request_arg``, ids encoded as 64-bit hashes (checked
for collisions), and the decisions are read back from the relations the reference
authorizer reads (``allowed``, ``applies``, ``met``, ``lacking``).

Decisions are made in one pass by the fused plans (:mod:`engine.spark.fused`), the
hierarchy computed from the ids for the inventory and for the entities requests
create (:func:`hierarchy`); a policy outside what they fuse is evaluated generically,
rule by rule, in rounds that place created entities (:func:`plan_rounds`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from privilog.dsl.format import format_alternatives
from privilog.dsl.ir import Const, Operation, Scope, Verb
from privilog.engine.denial import DENIED_BY, denial_places
from privilog.engine.program import Program, by_rule_names, reads
from privilog.engine.spark.deployment import Deployment
from privilog.engine.spark.encoding import relation_columns

if TYPE_CHECKING:
    from privilog.engine.spark.evaluate import Evaluation, Progress, SparkEngine
    from pyspark.sql import Column, DataFrame, SparkSession


class Requests(Protocol):
    """The requests to decide, checked: the good ones (rid, principal, operation, entity, and what else
    the log holds) and their arguments (rid, name, value)."""

    @property
    def good(self) -> DataFrame: ...

    @property
    def args(self) -> DataFrame: ...


# The relations the reference authorizer reads back (engine.authorizer.Authorizer._evaluate).
DECIDE_OUTPUTS = ("allowed", "applies", "met", "lacking")
# A policy with `by NAME` options: the requirements its rules meet, which no `met` row says.
BY_RULES_OUTPUT = "satisfied"
BYPASS_OUTPUT = "bypass"  # bypass(R, WHY): what let an allowed request through whatever it lacks
# The type of the allowed_by column _allowed_by builds: `pipeline decide --no-allowed-by` writes it null.
ALLOWED_BY_TYPE = "array<struct<requirement:string,principal:string,action:string,entity:string>>"
# And what least privilege reads besides (engine.justify): an "every" requirement's covered entities, held.
JUSTIFY_OUTPUTS = (*DECIDE_OUTPUTS, "covered", "held")
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


def _requirements(spark: SparkSession, program: Program) -> DataFrame:
    """Each requirement of the policy: code, id, text, and whether an option is "every"."""
    from privilog.engine.spark.encoding import xxhash64

    rows = []
    for rid, (_op, requirement) in program.requirements.items():
        text = format_alternatives(requirement.options)
        if requirement.condition is not None:
            text += f" if {requirement.condition}"
        every = any(t.every for o in requirement.options for t in o.targets)
        rows.append((xxhash64(rid), rid, text, every))
    return spark.createDataFrame(rows, "i long, requirement string, text string, every boolean")


def decisions(
    spark: SparkSession,
    program: Program,
    evaluation: Evaluation,
    requests: DataFrame,
    dictionary: DataFrame,
    witnesses: bool = True,
    reasons: Mapping[int, str] | None = None,
    typed: DataFrame | None = None,
    carry: Sequence[str] = (),
) -> DataFrame:
    """Per request of a round: rid, decision, unmet (requirement, text, lacking entities), bypass
    (the reasons of the bypasses that let it through: with ``reasons``, from the ``bypass``
    relation; else none), denied_by (for a denied request, the places, FILE:LINE, of the policy's
    own `denied` rules that hold for it, sorted: from the ``denied@by`` relation of a program
    :func:`engine.denial.with_denied_by` extended; else none), and with
    ``witnesses``, allowed_by: for an allowed request, a grant meeting each requirement that applies
    and is met by a grant (requirement, and the grant: principal, action, entity).

    Assembled as engine.authorizer.Authorizer._decision does: a requirement is unmet
    when it applies, no grant meets it, and it is not an "every" requirement that
    lacks nothing. Every relation here is partitioned by request, so the joins and
    groupings by request need no shuffle.

    The decision is the ``allowed`` relation's; or, given ``typed`` (the rid of each request on
    an entity of its operation's type) for a program whose ``allowed`` is the prelude's
    (:func:`engine.spark.fused.allowed_from_unmet`), it is read from the unmet requirements
    assembled here: a typed request with none is allowed, and one a bypass lets through.

    ``carry``: columns of ``requests`` that each decision carries after ``rid``, so that the caller
    need not join the decisions back to the requests (a second copy of the log, and a sort of both).
    """
    from privilog.engine.spark.session import persist
    from pyspark.sql import functions as F

    applies = evaluation.relation("applies").select(F.col("c0").alias("rid"), F.col("c1").alias("i")).distinct()
    met = evaluation.relation("met").select(F.col("c0").alias("rid"), F.col("c1").alias("i"))
    meta = F.broadcast(_requirements(spark, program))
    unmet = applies.join(met, on=["rid", "i"], how="left_anti").join(meta, on="i")
    if has_by_rules(program):  # met by the policy's rules, with no grant: no `met` row says so
        by = evaluation.relation(BY_RULES_OUTPUT).select(F.col("c0").alias("rid"), F.col("c1").alias("i"))
        unmet = unmet.join(by, on=["rid", "i"], how="left_anti")
    lacking = evaluation.cache(
        "lacking",
        evaluation.relation("lacking").select(
            F.col("c0").alias("rid"), F.col("c1").alias("i"), F.col("c2").alias("code")
        ),
    )
    empty = F.array().cast("array<string>")
    nothing_lacks = lacking.isEmpty()
    if nothing_lacks:
        unmet = unmet.where(~F.col("every"))
    else:
        lacks = lacking.select("rid", "i").distinct().withColumn("lacks", F.lit(True))
        unmet = unmet.join(lacks, on=["rid", "i"], how="left").where(~F.col("every") | F.col("lacks").isNotNull())
    # Kept: the decision, the unmet requirements and the grants that allow all read it (Spark would
    # otherwise join `applies` and `met` again for each), before the lacking entities' names are
    # joined (not needed to decide).
    unmet = persist(unmet)
    denied = unmet.select("rid")
    if nothing_lacks:
        unmet = unmet.withColumn("lacking", empty)
    else:
        partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or 4)
        # "every" requirements of wide deletes can lack millions of entities: never broadcast them
        names = (
            lacking.join(dictionary, on="code")
            .groupBy("rid", "i")
            .agg(F.sort_array(F.collect_set("value")).alias("lacking"))
            .repartition(partitions, "rid")
        )
        unmet = unmet.join(names, on=["rid", "i"], how="left")
    if typed is None:
        allowed = evaluation.relation("allowed").select(F.col("c0").alias("rid"))
    else:
        allowed = typed.join(denied, on="rid", how="left_anti")
        if reasons:
            passed = evaluation.relation(BYPASS_OUTPUT).select(F.col("c0").alias("rid"))
            allowed = allowed.union(typed.join(passed, on="rid", how="left_semi"))
    allowed = persist(allowed.distinct().withColumn("ok", F.lit(True)))  # read twice: the decision, allowed_by
    unmet = unmet.select(
        "rid",
        F.struct(F.col("requirement"), F.col("text"), F.coalesce(F.col("lacking"), empty).alias("lacking")).alias(
            "unmet"
        ),
    )
    per_request = unmet.groupBy("rid").agg(F.sort_array(F.collect_list("unmet")).alias("unmet"))
    out = (
        requests.select("rid", *carry)
        .join(allowed, on="rid", how="left")
        .join(per_request, on="rid", how="left")
        .select(
            "rid",
            *carry,
            F.when(F.col("ok").isNotNull(), F.lit("allow")).otherwise(F.lit("deny")).alias("decision"),
            F.coalesce(F.col("unmet"), F.array().cast(per_request.schema["unmet"].dataType)).alias("unmet"),
        )
    )
    if reasons:
        why = F.create_map(*(F.lit(x) for code, text in reasons.items() for x in (code, text)))
        passed = (
            evaluation.relation(BYPASS_OUTPUT)
            .select(F.col("c0").alias("rid"), F.try_element_at(why, F.col("c1")).alias("reason"))
            .groupBy("rid")
            .agg(F.sort_array(F.collect_set("reason")).alias("bypass"))
        )
        out = out.join(passed, on="rid", how="left").withColumn("bypass", F.coalesce(F.col("bypass"), empty))
    else:
        out = out.withColumn("bypass", empty)
    places = denial_codes(program)
    if places:  # as engine.authorizer: a denied request names the rules that deny it, an allowed one none
        where = F.create_map(*(F.lit(x) for code, place in places.items() for x in (code, place)))
        denying = (
            evaluation.relation(DENIED_BY)
            .select(F.col("c0").alias("rid"), F.try_element_at(where, F.col("c1")).alias("place"))
            .groupBy("rid")
            .agg(F.sort_array(F.collect_set("place")).alias("denied_by"))
        )
        out = out.join(denying, on="rid", how="left").withColumn(
            "denied_by", F.when(F.col("decision") == "deny", F.coalesce(F.col("denied_by"), empty)).otherwise(empty)
        )
    else:
        out = out.withColumn("denied_by", empty)
    if not witnesses:
        return out
    grants = _allowed_by(evaluation, allowed, applies, meta, dictionary)
    none = F.array().cast(grants.schema["allowed_by"].dataType)
    return out.join(grants, on="rid", how="left").select(
        "rid",
        *carry,
        "decision",
        "unmet",
        "bypass",
        "denied_by",
        F.coalesce(F.col("allowed_by"), none).alias("allowed_by"),
    )


def _allowed_by(
    evaluation: Evaluation, allowed: DataFrame, applies: DataFrame, meta: DataFrame, dictionary: DataFrame
) -> DataFrame:
    """Per allowed request (rid), allowed_by: for each requirement that applies and a grant meets,
    one such grant (the least by code: any one justifies it), decoded; a group's grant names the
    group. Its codes are decoded in one join with the dictionary, not one per column."""
    from pyspark.sql import functions as F

    met = evaluation.relation("met").select(
        F.col("c0").alias("rid"), F.col("c1").alias("i"), F.array("c4", "c2", "c3").alias("grant")
    )
    chosen = (
        met.join(allowed.select("rid"), on="rid", how="left_semi")
        .join(applies, on=["rid", "i"], how="left_semi")
        .groupBy("rid", "i")
        .agg(F.min("grant").alias("grant"))
    )
    cells = chosen.select("rid", "i", F.posexplode("grant").alias("slot", "code"))
    named = (
        cells.join(dictionary, on="code")
        .groupBy("rid", "i")
        .agg(F.map_from_entries(F.collect_list(F.struct("slot", "value"))).alias("m"))
        .join(meta.select("i", "requirement"), on="i")
    )
    grant = F.struct(
        F.col("requirement"),
        F.col("m")[0].alias("principal"),
        F.col("m")[1].alias("action"),
        F.col("m")[2].alias("entity"),
    )
    return named.groupBy("rid").agg(F.sort_array(F.collect_list(grant)).alias("allowed_by"))


def needs_of(
    spark: SparkSession, program: Program, evaluation: Evaluation, only: DataFrame, world: Mapping[str, DataFrame]
) -> DataFrame:
    """The needs of the allowed requests among ``only`` (rid), as engine.justify reads them, a row per
    grant of a need: rid, i (the requirement), c (the covered entity, for a requirement on every
    entity inside; else null) and the grant's holder, action and entity (p, a, e; encoded). A need
    is the rows of one (rid, i, c): keep one of them.

    A requirement on one target each is one need: the grants behind its ``met`` rows. One on
    every entity inside is a need per covered entity: its ``met`` grants and that entity's
    ``held`` ones (covering nothing, it needs nothing).

    Rows, not an array per need: a need for "any on self or descendant" of a namespace holds every
    grant its principal and their groups hold inside, and at 10^6 requests arrays of them did not
    fit in an aggregation's memory. ``only`` is one copy of each distinct request (copies need the
    same grants).

    A holding through a wildcard grant (``matches`` in ``world``) is the grant that names the
    wildcard: each (p, a, e) row is also read as (p, a, W) for every wildcard W that matches e,
    and only the rows that are grants of ``world`` are kept."""
    from pyspark.sql import functions as F

    allowed = (
        evaluation.relation("allowed").select(F.col("c0").alias("rid")).join(only, on="rid", how="left_semi").distinct()
    )
    applies = evaluation.relation("applies").select(F.col("c0").alias("rid"), F.col("c1").alias("i")).distinct()
    every = F.broadcast(_requirements(spark, program).where(F.col("every")).select("i"))
    met = (
        evaluation.relation("met")
        .select(*(F.col(c).alias(n) for c, n in (("c0", "rid"), ("c1", "i"), ("c4", "p"), ("c2", "a"), ("c3", "e"))))
        .join(allowed, on="rid", how="left_semi")
        .join(applies, on=["rid", "i"], how="left_semi")
    )
    nothing = F.lit(None).cast("long").alias("c")
    single = met.join(every, on="i", how="left_anti").select("rid", "i", nothing, "p", "a", "e")
    covered = (
        evaluation.relation("covered")
        .select(F.col("c0").alias("rid"), F.col("c1").alias("i"), F.col("c2").alias("c"))
        .join(allowed, on="rid", how="left_semi")
        .join(applies, on=["rid", "i"], how="left_semi")
        .join(every, on="i", how="left_semi")
        .distinct()
    )
    held = evaluation.relation("held").select(
        F.col("c0").alias("rid"), F.col("c1").alias("i"), F.col("c2").alias("c"),
        F.col("c4").alias("p"), F.col("c3").alias("a"), F.col("c2").alias("e"),
    )  # fmt: skip
    inside = (
        covered.join(met, on=["rid", "i"])
        .select("rid", "i", "c", "p", "a", "e")
        .unionByName(covered.join(held, on=["rid", "i", "c"]).select("rid", "i", "c", "p", "a", "e"))
    )
    found = single.unionByName(inside)
    if "matches" in world:
        wildcard = world["matches"].select(F.col("c0").alias("e"), F.col("c1").alias("w"))
        through = found.join(wildcard, on="e").select("rid", "i", "c", "p", "a", F.col("w").alias("e"))
        grants = world["grant"].select(F.col("c0").alias("p"), F.col("c1").alias("a"), F.col("c2").alias("e"))
        found = found.unionByName(through).join(grants, on=["p", "a", "e"], how="left_semi")
    return found.distinct()


@dataclass
class Decided:
    """Every good request of the log with its decision, and the count of each."""

    table: DataFrame  # rid, principal, operation, entity, args, timestamp, decision, unmet, ...: persisted
    rounds: int = 0
    cached: list[DataFrame] = field(default_factory=list)
    needs: DataFrame | None = None  # with needs_for: rid, i, c, p, a, e (needs_of), persisted (plan cut)


def entity_chains(deployment: Deployment, requests: DataFrame) -> DataFrame:
    """Each entity the requests act on, once, with its chain (the entity and what encloses it,
    nearest first): cut from the ids once for the encoding, the hierarchy and the new entities,
    rather than from every request for each."""
    from pyspark.sql import functions as F

    distinct = requests.select("entity").distinct()
    return distinct.select("entity", deployment.vocabulary.chain(F.col("entity")).alias("chain"))


def hierarchy(deployment: Deployment, chains: DataFrame) -> dict[str, DataFrame]:
    """``child_of``, ``is_a``, ``ancestor`` and ``descendant`` from the ids, in one pass, over the
    inventory and the entities the requests create (``w``: the created entity a row is about);
    ``chains``: the requests' entities with their chains (:func:`entity_chains`)."""
    from privilog.engine.spark.session import persist
    from pyspark.sql import functions as F

    vocabulary = deployment.vocabulary
    created = (
        chains.select(F.explode("chain").alias("entity"))
        .distinct()
        .join(deployment.existing, on="entity", how="left_anti")
    )
    nodes = deployment.existing.select("entity", F.lit(None).cast("long").alias("w")).union(
        created.select("entity", F.xxhash64("entity").alias("w"))
    )
    links = nodes.select(
        F.xxhash64("entity").alias("c0"),
        "w",
        F.xxhash64(vocabulary.entity_type(F.col("entity"))).alias("type"),
        F.transform(
            F.slice(vocabulary.chain(F.col("entity")), 2, max(vocabulary.depth, 1)), lambda x: F.xxhash64(x)
        ).alias("up"),
    ).transform(persist)
    above = links.select("c0", "w", F.explode("up").alias("c1"))
    tables = {
        "child_of": links.where(F.size("up") > 0).select("c0", F.element_at("up", 1).alias("c1"), "w"),
        "is_a": links.select("c0", F.col("type").alias("c1"), "w"),
        "ancestor": above.select("c0", "c1", "w"),
        "descendant": above.select(F.col("c1").alias("c0"), F.col("c0").alias("c1"), "w"),
    }
    return {name: df.transform(persist) for name, df in tables.items()}


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


def bypass_reasons(program: Program, deployment: Deployment) -> dict[int, str]:
    """Each reason a bypass rule that can fire here names, by its code (none: no column to fill).

    The prelude's superuser bypass reads the settings: without --config it cannot fire, and the
    policies that add none of their own decide as before."""
    from privilog.engine.spark.encoding import xxhash64

    settings = "config" in deployment.relations
    rules = [r for r in program.rules if r.head.predicate == BYPASS_OUTPUT]
    live = [r for r in rules if settings or not reads([r], "config")]
    reasons = {str(r.head.terms[1]) for r in live if isinstance(r.head.terms[1], Const)}
    return {xxhash64(reason): reason for reason in sorted(reasons)}


def denial_codes(program: Program) -> dict[int, str]:
    """Each place (FILE:LINE) a ``denied@by`` rule names, by its code (none: the policy has no deny
    rule of its own, or its program was not extended by :func:`engine.denial.with_denied_by`)."""
    from privilog.engine.spark.encoding import xxhash64

    return {xxhash64(place): place for place in denial_places(program)}


def has_by_rules(program: Program) -> bool:
    """Whether a requirement of the policy has a `by NAME` option."""
    return bool(by_rule_names(program.policy))


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


# ---- visibility -----------------------------------------------------------------------


def _needs_a_grant(op: Operation) -> bool:
    """Whether some requirement always applies and can be met only through a grant."""
    return any(r.condition is None and all(not t.every for o in r.options for t in o.targets) for r in op.requirements)


def _asked_by_grant(op: Operation) -> bool:
    """Whether a listing's candidates are what the principals' grants reach: it needs a grant, met
    on a target its scope says (a `by` rule may read anything: it is asked of every entity)."""
    return _needs_a_grant(op) and Scope.RULE not in _scopes(op)


def _scopes(op: Operation) -> set[Scope]:
    """The scopes of the first requirement that always needs a grant: candidates must meet it."""
    for r in op.requirements:
        if r.condition is None and all(not t.every for o in r.options for t in o.targets):
            return {t.scope for o in r.options for t in o.targets}
    return set()


def visibility(spark: SparkSession, engine: SparkEngine, deployment: Deployment, progress: Progress) -> DataFrame:
    """For every principal, each entity a listing shows it, with the grant that shows it.

    A listing request is made for each principal and each entity of a listable type
    that a grant of the principal (or of a group it is in) could show, judged by the
    scopes of the listing's requirement: the granted entity itself, what encloses it
    (self or descendant; self or within, by id too), or what it encloses (parent, an
    enclosing type). A listing that needs no grant, or that the policy's own rule may
    meet (`by NAME`), is asked for every principal and every entity of its type.
    """
    from privilog.engine.spark.encoding import xxhash64
    from privilog.engine.spark.session import persist
    from pyspark.sql import functions as F

    listings = [op for op in engine.program.policy.operations if op.verb is Verb.SHOWS]
    deployment = deployment.with_named(deployment.existing.select("entity"))  # matches, names, within
    base = dict(deployment.relations)
    world = engine.evaluate(base, outputs=["holds", "ancestor"])
    held = world.relation("holds").select(F.col("c0").alias("p"), F.col("c2").alias("e")).distinct()
    ancestor = world.relation("ancestor").select(F.col("c0").alias("below"), F.col("c1").alias("above"))
    types = spark.createDataFrame(
        [(xxhash64(op.entity_type), xxhash64(op.qualified), op.entity_type) for op in listings],
        "t long, o long, type string",
    )
    is_a = deployment.relations["is_a"].select(F.col("c0").alias("e"), F.col("c1").alias("t"))
    parts = []
    scopes = set().union(*(_scopes(op) for op in listings if _asked_by_grant(op)))
    if scopes & {Scope.SELF, Scope.SELF_OR_DESCENDANT, Scope.SELF_OR_WITHIN}:
        parts.append(held)
    if scopes & {Scope.SELF_OR_DESCENDANT, Scope.SELF_OR_WITHIN}:
        parts.append(held.join(ancestor.withColumnRenamed("below", "e"), on="e").select("p", F.col("above").alias("e")))
    if Scope.SELF_OR_WITHIN in scopes and "within" in base:  # what encloses a granted id, existing or not
        within = base["within"].select(F.col("c0").alias("e"), F.col("c1").alias("above"))
        parts.append(held.join(within, on="e").select("p", F.col("above").alias("e")))
    if scopes & {Scope.PARENT, Scope.ANCESTOR}:
        parts.append(held.join(ancestor.withColumnRenamed("above", "e"), on="e").select("p", F.col("below").alias("e")))
    candidates = spark.createDataFrame([], "p long, e long")
    for part in parts:
        candidates = candidates.union(part)
    granted = [op for op in listings if _asked_by_grant(op)]
    candidates = (
        candidates.distinct()
        .join(is_a, on="e")
        .join(F.broadcast(types.where(F.col("type").isin(*(op.entity_type for op in granted)))), on="t")
    )
    free = [op.entity_type for op in listings if not _asked_by_grant(op)]
    if free:
        everyone = deployment.principals.select(F.xxhash64("principal").alias("p"))
        open_entities = is_a.join(F.broadcast(types.where(F.col("type").isin(*free))), on="t")
        candidates = candidates.unionByName(everyone.crossJoin(open_entities))
    asked = candidates.select("p", "o", "e").withColumn("rid", F.monotonically_increasing_id()).transform(persist)
    progress(f"visibility: {asked.count():,} listing requests to decide")
    base["request"] = asked.select(
        F.col("rid").alias("c0"), F.col("p").alias("c1"), F.col("o").alias("c2"), F.col("e").alias("c3")
    )
    evaluation = engine.evaluate(base, outputs=["allowed", "met"], partition=BY_REQUEST)
    allowed = evaluation.relation("allowed").select(F.col("c0").alias("rid")).distinct()
    met = evaluation.relation("met").select(
        F.col("c0").alias("rid"), F.col("c2").alias("a"), F.col("c3").alias("g"), F.col("c4").alias("v")
    )
    table = dictionary(spark, engine, deployment, None)
    names = table.withColumnRenamed("code", "k")
    witnesses = (
        met.join(allowed, on="rid", how="left_semi")
        .join(names.withColumnRenamed("k", "a").withColumnRenamed("value", "action"), on="a")
        .join(names.withColumnRenamed("k", "g").withColumnRenamed("value", "granted"), on="g")
        .join(names.withColumnRenamed("k", "v").withColumnRenamed("value", "holder"), on="v")
        .groupBy("rid")
        .agg(F.min(F.struct("action", "granted", "holder")).alias("w"))
    )
    shown = (
        asked.join(allowed, on="rid", how="left_semi")
        .join(witnesses, on="rid", how="left")
        .join(names.withColumnRenamed("k", "p").withColumnRenamed("value", "principal"), on="p")
        .join(names.withColumnRenamed("k", "e").withColumnRenamed("value", "entity"), on="e")
    )
    return shown.select(
        "principal",
        "entity",
        deployment.vocabulary.entity_type(F.col("entity")).alias("type"),
        F.col("w.action").alias("action"),
        F.col("w.granted").alias("granted_entity"),
        F.col("w.holder").alias("holder"),
    )
