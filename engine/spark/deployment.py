"""A deployment as the engine reads it: its checked tables as encoded base relations.

The inventory (every entity and what encloses it), the grants (each action of ``ALL``
its own), the memberships and the settings become ``child_of``, ``is_a``, ``grant``,
``member_of``, ``config`` and ``matches`` (each entity against the granted wildcards of
its type, and those among a world's facts), and a world's ``facts:`` the relations they
are of, their strings encoded by :mod:`engine.spark.encoding`; every string they
hold is kept (``values``) for the check that no two share a code. The rows given here
are good rows: checking them is the caller's (privilog.pipeline.inputs).

The fused plans read the hierarchy as tables cut from the ids (:func:`hierarchy`), over the
inventory and the entities the requests create.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from privilog.engine.facts import check_facts, given_patterns
from privilog.engine.ids import EntityId
from privilog.engine.patterns import java_regex
from privilog.engine.program import compile_policy, reads
from privilog.engine.spark.encoding import relation_columns
from privilog.engine.spark.ids import IdForms
from privilog.engine.world import World

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass
class Deployment:
    """The inventory, grants and memberships, checked, as encoded base relations."""

    vocabulary: IdForms
    relations: dict[str, DataFrame]  # grant, member_of, child_of, is_a: encoded
    existing: DataFrame  # entity (strings), persisted
    values: DataFrame  # every string the relations hold (one column, value)
    principals: DataFrame  # every principal the grants and memberships name (principal)
    grants: DataFrame  # principal, action, entity (strings): the good grants, each action of ALL its own
    patterns: list[EntityId]  # the wildcards the grants name (engine.patterns)

    def with_named(self, named: DataFrame, principals: DataFrame | None = None) -> Deployment:
        """This deployment, its ``matches`` over the inventory and these entities (one column,
        ``entity``: what requests act on and name) too, when a grant names a wildcard; and when
        the policy reads ``name_of``, the name of every id it holds, these entities' and these
        principals' (one column, ``principal``: who the requests are by)."""
        from dataclasses import replace

        from pyspark.sql import functions as F

        relations, values = dict(self.relations), self.values
        if self.patterns:
            universe = self.existing.select("entity").union(named.select("entity")).distinct()
            relations["matches"] = matches_frame(self, universe)
        program = compile_policy(self.vocabulary.policy)
        if any(reads(program.rules, r, program.facts) for r in ("name_of", "last_name_of")):
            ids = (
                self.existing.select(F.col("entity").alias("id"))
                .union(named.select(F.col("entity").alias("id")))
                .union(self.grants.select(F.col("entity").alias("id")))
                .union(self.principals.select(F.col("principal").alias("id")))
            )
            if principals is not None:
                ids = ids.union(principals.select(F.col("principal").alias("id")))
            names = ids.distinct().select("id", F.expr("substring(id, instr(id, ':') + 1)").alias("name"))
            relations["name_of"] = names.select(*relation_columns("id", "name"))
            values = values.union(names.select(F.col("name").alias("value")))  # their codes are checked too
            last = ids.distinct().select("id", self.vocabulary.last_name(F.col("id")).alias("name"))
            last = last.where(F.col("name").isNotNull() & (F.col("name") != ""))
            relations["last_name_of"] = last.select(*relation_columns("id", "name"))
            values = values.union(last.select(F.col("name").alias("value")))
        if reads(program.rules, "within", program.facts):
            granted = self.grants.select("entity").distinct().where(~F.col("entity").rlike(r"[*?]"))
            chains = granted.select("entity", F.explode(self.vocabulary.chain(F.col("entity"))).alias("up"))
            relations["within"] = chains.where(F.col("up") != F.col("entity")).select(*relation_columns("entity", "up"))
        if relations == self.relations:
            return self
        return replace(self, relations=relations, values=values)

    def without(self, grants: DataFrame) -> Deployment:
        """This deployment without ``grants`` (principal, action, entity: strings) among its ``grant`` facts."""
        from dataclasses import replace

        gone = grants.select(*relation_columns("principal", "action", "entity"))
        kept = self.relations["grant"].join(gone, on=["c0", "c1", "c2"], how="left_anti")
        return replace(self, relations={**self.relations, "grant": kept})

    def grant_codes(self) -> DataFrame:
        """Each grant (principal, action, entity), once, with the codes of its three strings (k0, k1, k2)."""
        from pyspark.sql import functions as F

        codes = (F.xxhash64(c).alias(f"k{i}") for i, c in enumerate(("principal", "action", "entity")))
        return self.grants.select("principal", "action", "entity", *codes).distinct()


def matches_frame(deployment: Deployment, entities: DataFrame) -> DataFrame:
    """``matches`` (entity, pattern), encoded: each entity against the granted wildcards of its type.

    The patterns are few (each distinct wildcard of the grants, read on the driver) and are
    broadcast; an entity is tried only against those of its own type.
    """
    from privilog.engine.spark.session import persist
    from pyspark.sql import functions as F

    spark = entities.sparkSession
    if not deployment.patterns:
        return spark.createDataFrame([], "c0 long, c1 long")
    rows = [(p.type, str(p), java_regex(p)) for p in deployment.patterns]
    patterns = F.broadcast(spark.createDataFrame(rows, "type string, pattern string, regex string"))
    kind = deployment.vocabulary.entity_type(F.col("entity"))
    named = entities.select("entity", kind.alias("type"), deployment.vocabulary.name(F.col("entity")).alias("name"))
    found = named.join(patterns, on="type").where(F.expr("name rlike regex"))
    return found.select(F.xxhash64("entity").alias("c0"), F.xxhash64("pattern").alias("c1")).transform(persist)


def encode_deployment(
    spark: SparkSession,
    vocabulary: IdForms,
    entities: DataFrame,
    grants: DataFrame,
    members: DataFrame,
    config: Mapping[str, tuple[str, ...]],
    patterns: list[EntityId],
    facts: Mapping[str, Iterable[tuple[str, ...]]] | None = None,
    facts_from: str | None = None,
) -> Deployment:
    """The base relations of a deployment's good rows: ``entities`` (entity), ``grants`` (principal,
    action, entity; ``ALL`` is every action), ``members`` (principal, group), the settings, the
    wildcards ``patterns`` (those the grants and the policy name), and a world's ``facts``
    (checked against the policy: ``engine.facts.check_facts``), whose wildcard values are
    patterns too (``engine.facts.fact_patterns``), checked against the policy here
    (``engine.facts.check_facts``; ``facts_from``: where they were read, for its message)."""
    from privilog.engine.spark.session import persist
    from pyspark.sql import functions as F

    existing = (
        entities.select(F.explode(vocabulary.chain(F.col("entity"))).alias("entity")).distinct().transform(persist)
    )
    actions = F.array(*(F.lit(a) for a in vocabulary.policy.actions))
    grant_rows = grants.select(
        "principal",
        F.explode(F.when(F.col("action") == "ALL", actions).otherwise(F.array(F.col("action")))).alias("action"),
        "entity",
    )
    parents = existing.select("entity", vocabulary.parent(F.col("entity")).alias("parent"))
    relations = {
        "grant": grant_rows.select(*relation_columns("principal", "action", "entity")),
        "member_of": members.select(*relation_columns("principal", "group")),
        "child_of": parents.where(F.col("parent").isNotNull()).select(*relation_columns("entity", "parent")),
        "is_a": existing.select(
            *relation_columns("entity"), F.xxhash64(vocabulary.entity_type(F.col("entity"))).alias("c1")
        ),
    }
    principals = (
        grants.select("principal")
        .union(members.select("principal"))
        .union(members.select(F.col("group").alias("principal")))
        .distinct()
    )
    values = (
        existing.select(F.col("entity").alias("value"))
        .union(existing.select(vocabulary.entity_type(F.col("entity")).alias("value")))
        .union(grants.select(F.col("entity").alias("value")))
        .union(grant_rows.select(F.col("action").alias("value")))
        .union(principals.select(F.col("principal").alias("value")))
    )
    settings = sorted({(key, value) for key, values in config.items() for value in values})
    if settings:
        rows = spark.createDataFrame(settings, "key string, value string")
        relations["config"] = rows.select(*relation_columns("key", "value"))
        values = values.union(rows.select("key")).union(rows.select("value"))
    if facts:
        given_world = World(facts={r: frozenset(map(tuple, rows)) for r, rows in facts.items()}, origin=facts_from)
        check_facts(compile_policy(vocabulary.policy), given_world)
    for relation, given in sorted((facts or {}).items()):
        listed = sorted(set(given))
        declared = next((r.arity for r in vocabulary.policy.relations if r.name == relation), 0)
        arity = len(listed[0]) if listed else declared
        if arity == 0:
            relations[relation] = spark.range(len(listed[:1])).select()
            continue
        columns = [f"v{i}" for i in range(arity)]
        frame = spark.createDataFrame(listed, ", ".join(f"{c} string" for c in columns))
        relations[relation] = frame.select(*relation_columns(*columns))
        for column in columns:
            values = values.union(frame.select(F.col(column).alias("value")))
    named = [*patterns, *(p for p in given_patterns(facts or {}) if p not in patterns)]
    deployment = Deployment(vocabulary, relations, existing, values, principals, grant_rows, named)
    deployment.relations["matches"] = matches_frame(deployment, existing)
    return deployment


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
