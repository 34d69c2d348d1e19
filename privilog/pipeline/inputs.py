"""The pipeline's inputs: every row of the deployment's tables and of the access log checked.

A row is checked as the reference engine checks a world and a request (CDAP's id
forms, the policy's actions, operations and arguments), by Spark column
expressions; a row that fails goes to the rejects with its table, the row as JSON
and the reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

from privilog.dsl.limits import LIST_ARGUMENT, WILDCARDS, LimitError
from privilog.engine.authorizer import FALSE_WORDS, TRUE_WORDS
from privilog.engine.ids import ENTITY_TYPES, PRINCIPAL_KINDS, SHAPES
from privilog.engine.patterns import parse_pattern, policy_patterns, wild_shape
from privilog.engine.spark import facade
from privilog.pipeline.tables import SOURCE

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


PRINCIPAL_NAME = r"[A-Za-z0-9_.@\-]+"  # engine.ids.parse_principal


# ---- what a valid row is --------------------------------------------------------------


def _java(pattern: str) -> str:
    """A whole-string Java regular expression."""
    return "^(?:" + pattern + r")\z"


class Vocabulary(facade.IdForms):
    """A policy's and CDAP's id scheme's checks (and, from :class:`engine.spark.ids.IdForms`, its hierarchy), as Spark
    column expressions.

    Each ``*_problem`` is null for a good value and otherwise the reason, worded as
    the reference engine words it (engine.ids, engine.authorizer). Validity is one
    regular expression per check, so the generated code stays small.
    """

    @staticmethod
    def _ids(types: Iterable[str], wildcards: bool = False) -> str:
        def shape(t: str) -> str:
            return wild_shape(t) if wildcards else SHAPES[t].pattern

        return _java("|".join(f"{t}:(?:{shape(t)})" for t in types))

    def entity_problem(self, value: Column, in_policy: bool, wildcards: bool = False) -> Column:
        """Why ``value`` is no entity id (of the policy's types, with ``in_policy``; a grant's
        may be a wildcard pattern, with ``wildcards``), or null."""
        from pyspark.sql import functions as F

        kind = self.entity_type(value)
        examples = F.create_map(*(F.lit(x) for t, shape in SHAPES.items() for x in (t, shape.example)))
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
class CheckedDeployment(facade.Deployment):
    """The deployment as the engine reads it (:class:`engine.spark.deployment.Deployment`), and what
    checking its tables found: their rejects, and each table's good rows (for the rows-in check)."""

    rejects: DataFrame
    used: dict[str, DataFrame] = field(default_factory=dict)  # table -> its good rows


def load_deployment(
    spark: SparkSession,
    vocabulary: Vocabulary,
    entities: DataFrame,
    grants: DataFrame,
    members: DataFrame | None,
    config: Mapping[str, tuple[str, ...]] | None = None,
    facts: Mapping[str, frozenset[tuple[str, ...]]] | None = None,
    facts_from: str | None = None,
) -> CheckedDeployment:
    """Check the world's tables and turn them into base relations (``facts``: a world's ``facts:``,
    read from ``facts_from``, as the relations they are of; checked against the policy there)."""
    from pyspark.sql import functions as F

    good_entities, bad_entities = _rejects(entities, "entities", vocabulary.entity_problem(F.col("entity"), False))
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
    if members is None:
        members = spark.createDataFrame([], "principal string, group string")
    member_problem = F.coalesce(
        vocabulary.principal_problem(F.col("principal")), vocabulary.principal_problem(F.col("group"))
    )
    good_members, bad_members = _rejects(members, "members", member_problem)
    encoded = facade.deployment(
        spark, vocabulary, good_entities, good_grants, good_members, config or {}, patterns, facts, facts_from
    )
    used = {"entities": good_entities, "grants": good_grants, "members": good_members}
    rejects = bad_entities.union(bad_grants).union(bad_members)
    return CheckedDeployment(**{f.name: getattr(encoded, f.name) for f in fields(encoded)}, rejects=rejects, used=used)


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
