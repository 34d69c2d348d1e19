"""The pipeline's inputs: every row of the deployment's tables and of the access log checked.

A row is checked as the reference engine checks a world and a request (CDAP's id
forms, the policy's actions, operations and arguments), by Spark column
expressions; a row that fails goes to the rejects with its table, the row as JSON
and the reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from privilog.dsl.limits import LIST_ARGUMENT, WILDCARDS, LimitError
from privilog.engine.authorizer import FALSE_WORDS, TRUE_WORDS
from privilog.engine.ids import _SHAPES, ENTITY_TYPES, PRINCIPAL_KINDS, EntityId
from privilog.engine.patterns import java_regex, parse_pattern, policy_patterns, wild_shape
from privilog.engine.program import compile_policy, reads
from privilog.engine.spark.ids import IdForms
from privilog.pipeline.tables import SOURCE

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


PRINCIPAL_NAME = r"[A-Za-z0-9_.@\-]+"  # engine.ids.parse_principal


# ---- what a valid row is --------------------------------------------------------------


def _java(pattern: str) -> str:
    """A whole-string Java regular expression."""
    return "^(?:" + pattern + r")\z"


class Vocabulary(IdForms):
    """A policy's and CDAP's id scheme's checks (and, from :class:`IdForms`, its hierarchy), as Spark
    column expressions.

    Each ``*_problem`` is null for a good value and otherwise the reason, worded as
    the reference engine words it (engine.ids, engine.authorizer). Validity is one
    regular expression per check, so the generated code stays small.
    """

    @staticmethod
    def _ids(types: Iterable[str], wildcards: bool = False) -> str:
        def shape(t: str) -> str:
            return wild_shape(t) if wildcards else _SHAPES[t].pattern

        return _java("|".join(f"{t}:(?:{shape(t)})" for t in types))

    def entity_problem(self, value: Column, in_policy: bool, wildcards: bool = False) -> Column:
        """Why ``value`` is no entity id (of the policy's types, with ``in_policy``; a grant's
        may be a wildcard pattern, with ``wildcards``), or null."""
        from pyspark.sql import functions as F

        kind = self.entity_type(value)
        examples = F.create_map(*(F.lit(x) for t, shape in _SHAPES.items() for x in (t, shape.example)))
        problem = (
            F.when(value.isNull() | (value == ""), F.lit("missing entity id"))
            .when(
                ~value.contains(":"),
                F.concat(
                    F.lit("malformed entity id `"), value, F.lit("`: expected TYPE:NAME, such as `namespace:ns1`")
                ),
            )
            .when(
                ~kind.isin(*ENTITY_TYPES),
                F.concat(F.lit("unknown entity type `"), kind, F.lit("` in `"), value, F.lit("`")),
            )
            .when(
                ~value.rlike(self._ids(ENTITY_TYPES, wildcards)),
                F.concat(
                    F.lit("malformed "),
                    kind,
                    F.lit(" id `"),
                    value,
                    F.lit("`: expected the form `"),
                    F.try_element_at(examples, kind),
                    F.lit("`"),
                ),
            )
        )
        if in_policy:
            problem = problem.when(
                ~kind.isin(*self.types),
                F.concat(F.lit(f"policy {self.policy.name} has no entity type `"), kind, F.lit("`")),
            )
        valid = self._ids(self.types if in_policy else ENTITY_TYPES, wildcards)
        return F.when(value.isNotNull() & value.rlike(valid), F.lit(None).cast("string")).otherwise(problem)

    def principal_problem(self, value: Column) -> Column:
        from pyspark.sql import functions as F

        kind = F.substring_index(value, ":", 1)
        valid = _java(f"(?:{'|'.join(PRINCIPAL_KINDS)}):{PRINCIPAL_NAME}")
        problem = (
            F.when(value.isNull() | (value == ""), F.lit("missing principal"))
            .when(
                ~value.contains(":") | ~kind.isin(*PRINCIPAL_KINDS),
                F.concat(
                    F.lit("malformed principal `"), value, F.lit("`: expected user:NAME, group:NAME or role:NAME")
                ),
            )
            .otherwise(
                F.concat(F.lit("malformed principal `"), value, F.lit("`: a name is letters, digits and `_ . @ -`"))
            )
        )
        return F.when(value.isNotNull() & value.rlike(valid), F.lit(None).cast("string")).otherwise(problem)

    def action_problem(self, value: Column) -> Column:
        from pyspark.sql import functions as F

        known = ", ".join(self.policy.actions)
        return F.when(value.isNull() | (value == ""), F.lit(f"missing action: actions are {known} and ALL")).when(
            ~value.isin(*self.policy.actions, "ALL"),
            F.concat(F.lit("unknown action `"), value, F.lit(f"`: actions are {known} and ALL")),
        )


def _row_json(df: DataFrame, columns: Sequence[str]) -> Column:
    from pyspark.sql import functions as F

    return F.to_json(F.struct(*(F.col(c) for c in columns)))


def _located(df: DataFrame, bad: DataFrame, columns: Sequence[str]) -> DataFrame:
    """The rejects ``bad`` (rows of ``df`` with ``_problem``) as table rows with the file each was
    read from and its row number there (1 for the first row of data; a CSV header is not counted).

    A row's number is the rows of the splits of its file before its own, plus its place in
    its split (ids grow by one a row within a split); only the splits' counts are gathered,
    the rows themselves are not shuffled. Tables made otherwise than by read_table have neither.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    row = _row_json(bad, columns).alias("row")
    reason = F.col("_problem").alias("reason")
    if not set(SOURCE) <= set(df.columns):
        return bad.select(
            F.col("_table").alias("table"), row, reason,
            F.lit(None).cast("string").alias("file"), F.lit(None).cast("long").alias("row_number"),
        )  # fmt: skip
    splits = df.groupBy("_file", "_block").agg(F.count("*").alias("_n"), F.min("_mid").alias("_first"))
    before = Window.partitionBy("_file").orderBy("_block").rowsBetween(Window.unboundedPreceding, -1)
    splits = splits.withColumn("_offset", F.coalesce(F.sum("_n").over(before), F.lit(0)))
    placed = bad.join(F.broadcast(splits), on=["_file", "_block"], how="left")
    return placed.select(
        F.col("_table").alias("table"),
        row,
        reason,
        F.col("_file").alias("file"),
        (F.col("_offset") + F.col("_mid") - F.col("_first") + 1).cast("long").alias("row_number"),
    )


def _rejects(df: DataFrame, table: str, problem: Column) -> tuple[DataFrame, DataFrame]:
    """Split a table into its good rows and its rejects (table, row as JSON, reason, file, row number)."""
    from pyspark.sql import functions as F

    checked = df.withColumn("_problem", problem)
    good = checked.where(F.col("_problem").isNull()).drop("_problem", *SOURCE)
    bad = checked.where(F.col("_problem").isNotNull()).withColumn("_table", F.lit(table))
    return good, _located(df, bad, [c for c in df.columns if c not in SOURCE])


# ---- the deployment -------------------------------------------------------------------


@dataclass
class Deployment:
    """The inventory, grants and memberships, checked, as encoded base relations."""

    vocabulary: Vocabulary
    relations: dict[str, DataFrame]  # grant, member_of, child_of, is_a: encoded
    existing: DataFrame  # entity (strings), persisted
    values: DataFrame  # every string the relations hold (one column, value)
    principals: DataFrame  # every principal the grants and memberships name (principal)
    rejects: DataFrame
    grants: DataFrame  # principal, action, entity (strings): the good grants, each action of ALL its own
    used: dict[str, DataFrame] = field(default_factory=dict)  # table -> its good rows (for the rows-in check)
    patterns: list[EntityId] = field(default_factory=list)  # the wildcards the grants name (engine.patterns)

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
        if reads(program.rules, "name_of", program.facts):
            ids = (
                self.existing.select(F.col("entity").alias("id"))
                .union(named.select(F.col("entity").alias("id")))
                .union(self.grants.select(F.col("entity").alias("id")))
                .union(self.principals.select(F.col("principal").alias("id")))
            )
            if principals is not None:
                ids = ids.union(principals.select(F.col("principal").alias("id")))
            names = ids.distinct().select("id", F.expr("substring(id, instr(id, ':') + 1)").alias("name"))
            relations["name_of"] = names.select(*encoded("id", "name"))
            values = values.union(names.select(F.col("name").alias("value")))  # their codes are checked too
        if reads(program.rules, "within", program.facts):
            granted = self.grants.select("entity").distinct().where(~F.col("entity").rlike(r"[*?]"))
            chains = granted.select("entity", F.explode(self.vocabulary.chain(F.col("entity"))).alias("up"))
            relations["within"] = chains.where(F.col("up") != F.col("entity")).select(*encoded("entity", "up"))
        if relations == self.relations:
            return self
        return replace(self, relations=relations, values=values)


def matches_frame(deployment: Deployment, entities: DataFrame) -> DataFrame:
    """``matches`` (entity, pattern), encoded: each entity against the granted wildcards of its type.

    The patterns are few (each distinct wildcard of the grants, read on the driver) and are
    broadcast; an entity is tried only against those of its own type.
    """
    from pyspark.sql import functions as F

    from privilog.engine.spark.session import persist

    spark = entities.sparkSession
    if not deployment.patterns:
        return spark.createDataFrame([], "c0 long, c1 long")
    rows = [(p.type, str(p), java_regex(p)) for p in deployment.patterns]
    patterns = F.broadcast(spark.createDataFrame(rows, "type string, pattern string, regex string"))
    kind = deployment.vocabulary.entity_type(F.col("entity"))
    named = entities.select("entity", kind.alias("type"), deployment.vocabulary.name(F.col("entity")).alias("name"))
    found = named.join(patterns, on="type").where(F.expr("name rlike regex"))
    return found.select(F.xxhash64("entity").alias("c0"), F.xxhash64("pattern").alias("c1")).transform(persist)


def encoded(*columns: str) -> list[Column]:
    """The columns as the engine's 64-bit ids, named ``c0``, ``c1``, ... as in the base relations."""
    from pyspark.sql import functions as F

    return [F.xxhash64(F.col(c)).alias(f"c{i}") for i, c in enumerate(columns)]


def load_deployment(
    spark: SparkSession,
    vocabulary: Vocabulary,
    entities: DataFrame,
    grants: DataFrame,
    members: DataFrame | None,
    config: Mapping[str, tuple[str, ...]] | None = None,
) -> Deployment:
    """Check the world's tables and turn them into base relations."""
    from pyspark.sql import functions as F

    from privilog.engine.spark.session import persist

    good_entities, bad_entities = _rejects(entities, "entities", vocabulary.entity_problem(F.col("entity"), False))
    existing = (
        good_entities.select(F.explode(vocabulary.chain(F.col("entity"))).alias("entity")).distinct().transform(persist)
    )
    grant_problem = F.coalesce(
        vocabulary.principal_problem(F.col("principal")),
        vocabulary.action_problem(F.col("action")),
        vocabulary.entity_problem(F.col("entity"), False, wildcards=True),
    )
    good_grants, bad_grants = _rejects(grants, "grants", grant_problem)
    wild = good_grants.where(F.col("entity").contains("*") | F.col("entity").contains("?")).select("entity").distinct()
    found = wild.limit(WILDCARDS.value() + 1).collect()
    if len(found) > WILDCARDS.value():
        raise LimitError(WILDCARDS.refusal("the grants", WILDCARDS.value() + 1).replace(" has ", " have at least "))
    named = policy_patterns(vocabulary.policy.rules)  # those the policy's rules name
    patterns = sorted({parse_pattern(r["entity"]) for r in found} | set(named))
    actions = F.array(*(F.lit(a) for a in vocabulary.policy.actions))
    grant_rows = good_grants.select(
        "principal",
        F.explode(F.when(F.col("action") == "ALL", actions).otherwise(F.array(F.col("action")))).alias("action"),
        "entity",
    )
    if members is None:
        members = spark.createDataFrame([], "principal string, group string")
    member_problem = F.coalesce(
        vocabulary.principal_problem(F.col("principal")), vocabulary.principal_problem(F.col("group"))
    )
    good_members, bad_members = _rejects(members, "members", member_problem)
    parents = existing.select("entity", vocabulary.parent(F.col("entity")).alias("parent"))
    relations = {
        "grant": grant_rows.select(*encoded("principal", "action", "entity")),
        "member_of": good_members.select(*encoded("principal", "group")),
        "child_of": parents.where(F.col("parent").isNotNull()).select(*encoded("entity", "parent")),
        "is_a": existing.select(*encoded("entity"), F.xxhash64(vocabulary.entity_type(F.col("entity"))).alias("c1")),
    }
    principals = (
        good_grants.select("principal")
        .union(good_members.select("principal"))
        .union(good_members.select(F.col("group").alias("principal")))
        .distinct()
    )
    values = (
        existing.select(F.col("entity").alias("value"))
        .union(existing.select(vocabulary.entity_type(F.col("entity")).alias("value")))
        .union(good_grants.select(F.col("entity").alias("value")))
        .union(grant_rows.select(F.col("action").alias("value")))
        .union(principals.select(F.col("principal").alias("value")))
    )
    settings = sorted({(key, value) for key, values in (config or {}).items() for value in values})
    if settings:
        rows = spark.createDataFrame(settings, "key string, value string")
        relations["config"] = rows.select(*encoded("key", "value"))
        values = values.union(rows.select("key")).union(rows.select("value"))
    used = {"entities": good_entities, "grants": good_grants, "members": good_members}
    rejects = bad_entities.union(bad_grants).union(bad_members)
    deployment = Deployment(vocabulary, relations, existing, values, principals, rejects, grant_rows, used, patterns)
    deployment.relations["matches"] = matches_frame(deployment, existing)
    return deployment


# ---- requests -------------------------------------------------------------------------


@dataclass
class Requests:
    """The access log checked against a policy: good requests (with ``rid``) and their arguments."""

    good: DataFrame  # rid, principal, operation, entity, args, timestamp (persisted)
    args: DataFrame  # rid, name, value: the normalised arguments of good requests
    rejects: DataFrame


def number_requests(requests: DataFrame) -> DataFrame:
    """The access log with a row id ``rid`` (the same each time the same files are read)."""
    from pyspark.sql import functions as F

    return requests.withColumn("rid", F.monotonically_increasing_id())


def _message(*parts: str | Column) -> Column:
    """A reason built of literal text and columns."""
    from pyspark.sql import functions as F

    return F.concat(*(F.lit(p) if isinstance(p, str) else p for p in parts))


def check_requests(spark: SparkSession, vocabulary: Vocabulary, numbered: DataFrame) -> Requests:
    """Check each request as engine.authorizer.Authorizer.request does; normalise its arguments.

    The log is partitioned by request id first; the few requests with arguments have
    them checked one per row and joined back by request id, with no further shuffle
    (one expression checking every argument of every row would be too large to compile).
    """
    from pyspark.sql import functions as F

    from privilog.engine.spark.session import persist

    policy = vocabulary.policy
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or 4)
    log = numbered.repartition(partitions, "rid")
    operation = F.col("operation")
    op_type = _lookup({op.qualified: op.entity_type for op in policy.operations}, F.coalesce(operation, F.lit("")))
    kind = vocabulary.entity_type(F.col("entity"))
    has_args = F.col("args").isNotNull() & (F.trim(F.col("args")) != "")
    arguments = log.where(has_args).select(
        "rid", "operation", "entity", _json_object(F.col("args")).alias("map"), F.col("args").alias("text")
    )
    entries = _check_arguments(vocabulary, arguments)
    # What is wrong with a request's arguments: not a JSON object, or its first bad argument. Joined
    # back by hashing it, both sides partitioned by rid: a sort-merge join sorted every request of
    # the log to add these few rows to it.
    first_problem = (
        entries.where(F.col("problem").isNotNull())
        .groupBy("rid")
        .agg(F.min_by(F.col("problem"), F.col("position")).alias("_arg_problem"))
        .withColumn("_not_json", F.lit(False))
    )
    not_json = arguments.where(F.col("map").isNull()).select(
        "rid", F.lit(None).cast("string").alias("_arg_problem"), F.lit(True).alias("_not_json")
    )
    bad_args = first_problem.unionByName(not_json).hint("shuffle_hash")
    problem = F.coalesce(
        vocabulary.principal_problem(F.col("principal")),
        F.when(
            op_type.isNull(),
            _message("unknown operation `", F.coalesce(operation, F.lit("")), f"` in policy {policy.name}"),
        ),
        vocabulary.entity_problem(F.col("entity"), True),
        F.when(
            kind != op_type,
            _message("`", operation, "` acts on a ", op_type, ", but `", F.col("entity"), "` is a ", kind),
        ),
        F.when(F.col("_not_json"), _message("args `", F.col("args"), "` is not a JSON object")),
        F.col("_arg_problem"),
    )
    original = ["principal", "operation", "entity", "args", "timestamp"]
    source = [c for c in SOURCE if c in log.columns]
    checked = (
        log.join(bad_args, on="rid", how="left")
        .select("rid", *original, *source, problem.alias("_problem"))
        .transform(persist)
    )
    good = checked.where(F.col("_problem").isNull()).drop("_problem", *source)
    bad = checked.where(F.col("_problem").isNotNull()).withColumn("_table", F.lit("requests"))
    rejects = _located(checked, bad, original)
    args = (
        entries.where(F.col("keep")).join(good.select("rid"), on="rid", how="left_semi").select("rid", "name", "value")
    )
    return Requests(good, args, rejects)


def _json_object(text: Column, values: str = "string") -> Column:
    """A JSON object as a map of strings (or of ``values``), null if it is not one; a key given twice
    keeps its last value, as Python's json reads it (from_json keeps both; map_from_entries applies
    LAST_WIN)."""
    from pyspark.sql import functions as F

    return F.map_from_entries(F.map_entries(F.from_json(text, f"map<string, {values}>")))


def _lookup(pairs: Mapping[str, str], key: Column) -> Column:
    """The value for ``key`` in a small literal map, or null."""
    from pyspark.sql import functions as F

    if not pairs:
        return F.lit(None).cast("string")
    return F.try_element_at(F.create_map(*(F.lit(x) for pair in pairs.items() for x in pair)), key)


def _check_arguments(vocabulary: Vocabulary, arguments: DataFrame) -> DataFrame:
    """One row per request argument: rid, position, its problem (or null), and, normalised,
    its name and value, and whether the reference engine keeps it as a fact."""
    from pyspark.sql import functions as F

    policy = vocabulary.policy
    params = {f"{op.qualified}|{p.name}": p for op in policy.operations for p in op.params}
    takes = {op.qualified: ", ".join(f"${p.name}" for p in op.params) or "no arguments" for op in policy.operations}
    entries = arguments.where(F.col("map").isNotNull()).select(
        "rid", "operation", "entity", "text", F.posexplode("map").alias("position", "key", "raw")
    )
    operation = F.col("operation")
    name = F.regexp_replace(F.col("key"), r"^\$+", "")
    key = F.concat(operation, F.lit("|"), name)
    entries = _list_items(entries, _lookup({k: "1" for k, p in params.items() if p.many}, key).isNotNull())
    value = F.coalesce(F.col("raw"), F.lit("None"))
    wanted = _lookup({k: p.type for k, p in params.items()}, key)
    within = _lookup({k: p.within for k, p in params.items() if p.within}, key)
    mine, theirs = vocabulary.enclosing(F.col("entity"), within), vocabulary.enclosing(value, within)
    word = F.lower(F.regexp_replace(value, r"(?U)^\s+|\s+$", ""))  # as Python's str.strip()
    problem = (
        F.when(wanted.isNull(), _message("`", operation, "` takes ", _lookup(takes, operation), "; not `$", name, "`"))
        .when(
            F.col("_list_problem").isNotNull(),
            _message("`$", name, "` of `", operation, "` ", F.col("_list_problem")),
        )
        .when((wanted == "bool") & (word == ""), _message("`$", name, "` is true or false, not an empty value"))
        .when(
            (wanted == "bool") & ~word.isin(*TRUE_WORDS, *FALSE_WORDS),
            _message("`$", name, "` is true or false, not `", value, "`"),
        )
        .when(
            wanted != "bool",
            F.coalesce(
                vocabulary.entity_problem(value, True),
                F.when(
                    vocabulary.entity_type(value) != wanted,
                    _message("`$", name, "` of `", operation, "` names a ", wanted, ", not `", value, "`"),
                ),
                F.when(
                    within.isNotNull() & ~mine.eqNullSafe(theirs),
                    _message(
                        "`$", name, "` of `", operation, "` must be a ", vocabulary.entity_type(value), " in ",
                        F.coalesce(mine, within), ", not `", value, "`",
                    ),
                ),
            ),
        )
    )  # fmt: skip
    # A true boolean becomes "true"; a false one is left out, as the reference engine does.
    keep = (wanted != "bool") | word.isin(*TRUE_WORDS)
    normal = F.when(wanted == "bool", F.lit("true")).otherwise(value)
    return entries.select(
        "rid", "position", problem.alias("problem"), name.alias("name"), normal.alias("value"), keep.alias("keep")
    )


def _list_items(entries: DataFrame, many: Column) -> DataFrame:
    """A list argument's entry (``many``) as one row an entity it names, each checked as a single
    argument is, at the entry's position (``item`` after it); a text is a list of one, as the
    reference engine reads it. What is no list of ids, or a list over PRIVILOG_MAX_LIST_ARGUMENT,
    gets ``_list_problem``. Other entries pass as they are."""
    from pyspark.sql import functions as F

    limit = LIST_ARGUMENT.value()
    raw = F.element_at(_json_object(F.col("text"), "variant"), F.col("key"))
    kind = F.expr("schema_of_variant(_raw)")
    items = F.expr("try_variant_get(_raw, '$', 'array<string>')")
    ids = kind.isin("ARRAY<STRING>", "ARRAY<VOID>") & ~F.exists(items, lambda x: x.isNull())
    problem = (
        F.when(~many | (kind == "STRING"), F.lit(None).cast("string"))
        .when(~ids, F.lit("is a list of entity ids"))
        .when(
            F.size(items) > limit,
            _message(
                "has ",
                F.size(items).cast("string"),
                f" entities; the limit is {limit} (set {LIST_ARGUMENT.variable} to raise it)",
            ),
        )
    )
    listed = entries.withColumn("_raw", raw).withColumn("_list_problem", problem)
    spread = many & (kind != "STRING") & F.col("_list_problem").isNull()
    exploded = F.when(spread, F.array_distinct(items)).otherwise(F.array(F.col("raw")))
    return (
        listed.select("*", F.posexplode(exploded).alias("item", "_item"))
        .withColumn("raw", F.col("_item"))
        .withColumn("position", F.col("position").cast("long") * F.lit(limit + 1) + F.col("item"))
        .drop("_raw", "_item", "item")
    )
