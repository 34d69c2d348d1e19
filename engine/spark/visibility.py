"""Visibility: for every principal, each entity a listing shows it, with the grant that shows it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from privilog.dsl.ir import Operation, Scope, Verb
from privilog.engine.spark.decide import BY_REQUEST, dictionary
from privilog.engine.spark.deployment import Deployment

if TYPE_CHECKING:
    from privilog.engine.spark.evaluate import Progress, SparkEngine
    from pyspark.sql import DataFrame, SparkSession


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
