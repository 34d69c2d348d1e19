"""The decisions of requests, read from the relations the reference authorizer reads.

Per request: allow or deny, its unmet requirements (with the entities an "every" requirement
lacks), the bypasses that let it through, the policy's own deny rules that deny it, and the
grants that allow it (``allowed_by``), assembled from ``allowed``, ``applies``, ``met`` and
``lacking`` as engine.authorizer.Authorizer._decision assembles them; and the needs of allowed
requests (every grant that can meet each requirement), for least privilege.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from privilog.dsl.format import format_alternatives
from privilog.dsl.ir import Const
from privilog.engine.denial import DENIED_BY, denial_places
from privilog.engine.program import Program, by_rule_names, reads
from privilog.engine.spark.deployment import Deployment

if TYPE_CHECKING:
    from privilog.engine.spark.evaluate import Evaluation
    from pyspark.sql import DataFrame, SparkSession

# The relations the reference authorizer reads back (engine.authorizer.Authorizer._evaluate).
DECIDE_OUTPUTS = ("allowed", "applies", "met", "lacking")
# A policy with `by NAME` options: the requirements its rules meet, which no `met` row says.
BY_RULES_OUTPUT = "satisfied"
BYPASS_OUTPUT = "bypass"  # bypass(R, WHY): what let an allowed request through whatever it lacks
# The type of the allowed_by column _allowed_by builds: `pipeline decide --no-allowed-by` writes it null.
ALLOWED_BY_TYPE = "array<struct<requirement:string,principal:string,action:string,entity:string>>"
# And what least privilege reads besides (engine.justify): an "every" requirement's covered entities, held.
JUSTIFY_OUTPUTS = (*DECIDE_OUTPUTS, "covered", "held")


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
