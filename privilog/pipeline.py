"""``privilog pipeline``: a policy's answers over a whole deployment, on Apache Spark.

    privilog pipeline decide     --entities E --grants G [--members M] --requests R --out OUT
    privilog pipeline visibility --entities E --grants G [--members M] --out OUT
    privilog pipeline impact POLICY_A POLICY_B --entities E --grants G [--members M] --requests R --out OUT

Inputs are tables in Parquet, CSV (with a header) or JSON lines: ``entities``
(``entity``), ``grants`` (``principal, action, entity``; ``ALL`` is every action),
``members`` (``principal, group``) and ``requests`` (``principal, operation, entity``,
and optionally ``args``, a JSON object, and ``timestamp``). Outputs are Parquet.

Every input row is checked as the reference engine checks a world and a request
(CDAP's id forms, the policy's actions, operations and arguments). A row that
fails goes to ``OUT/rejects`` with its table, the row as JSON and the reason; none
is dropped silently, and the run reports how many there were.

The policy is evaluated by the generic Spark engine (:mod:`engine.spark`): the
tables become the base relations ``grant``, ``member_of``, ``child_of``, ``is_a``,
``request`` and ``request_arg``, ids encoded as 64-bit hashes (checked for
collisions), and the decisions are read back from the relations the reference
authorizer reads (``allowed``, ``applies``, ``met``, ``lacking``).

A request may name an entity the inventory does not hold (a create): its place in
the hierarchy comes from its id, for that request alone, as in the reference
engine. Requests are therefore decided in rounds: first every request whose
entity and enclosing entities exist, over the inventory alone; then the others
with their own not-yet-existing entities added, deferring to a later round any
request whose entity encloses another request's not-yet-existing entity, so that
no request sees an entity another request brought.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dsl
from dsl.errors import PrivilogError
from dsl.format import format_alternatives
from dsl.ir import Operation, Policy, Scope, Verb
from engine.authorizer import FALSE_WORDS, TRUE_WORDS, check_hierarchy
from engine.ids import _SHAPES, DEFAULT_INSTANCE, ENTITY_TYPES, PRINCIPAL_KINDS, parent_type
from engine.program import Program, compile_policy
from privilog.generate import FORMATS, TABLES

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from engine.spark.evaluate import Evaluation, SparkEngine

# The relations the reference authorizer reads back (engine.authorizer.Authorizer._evaluate).
DECIDE_OUTPUTS = ("allowed", "applies", "met", "lacking")
BY_REQUEST = {"request": 0, "request_arg": 0}  # relations keyed by the request id, partitioned by it
PRINCIPAL_NAME = r"[A-Za-z0-9_.@\-]+"  # engine.ids.parse_principal


class PipelineError(PrivilogError):
    """Input tables that cannot be read as the pipeline needs them."""


# ---- progress -------------------------------------------------------------------------


class Progress:
    """Timed progress lines on stderr (Spark's own progress bar is off)."""

    def __init__(self, quiet: bool = False, stream: Any = None):
        self.started = time.monotonic()
        self.quiet = quiet
        self.stream = stream or sys.stderr

    def __call__(self, line: str) -> None:
        if not self.quiet:
            print(f"[{time.monotonic() - self.started:7.1f}s] {line}", file=self.stream, flush=True)


# ---- Spark and tables -----------------------------------------------------------------


def spark_session(
    master: str | None = None, driver_memory: str | None = None, partitions: int | None = None
) -> SparkSession:
    """The pipeline's Spark session (see engine.spark.session).

    Spark's own choice of what to broadcast is off: it judges a cached table by its
    compressed size, and at 10^7 requests broadcast the decisions table it was about to
    write (out of memory). The engine and the pipeline say what to broadcast themselves.
    """
    from engine.spark.session import make_session

    session = make_session(master, driver_memory, partitions, app_name="privilog-pipeline")
    session.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    return session


def infer_format(path: Path) -> str:
    """A table's format from its name: ``.csv``, ``.json``/``.jsonl``, else Parquet."""
    name = path.name.lower()
    if name.endswith(".csv"):
        return "csv"
    if name.endswith((".json", ".jsonl", ".ndjson")):
        return "json"
    if path.is_dir():
        files = [p.name.lower() for p in path.iterdir() if not p.name.startswith((".", "_"))]
        for fmt, suffixes in (("csv", (".csv",)), ("json", (".json", ".jsonl"))):
            if files and all(f.endswith(suffixes) for f in files):
                return fmt
    return "parquet"


def read_table(spark: SparkSession, path: Path | str, fmt: str | None, table: str) -> DataFrame:
    """A table's columns as strings; ``args`` and ``timestamp`` of requests may be absent."""
    from pyspark.sql import functions as F

    path = Path(path)
    if not path.exists():
        raise PipelineError(f"{path}: no such file or folder (the {table} table)")
    fmt = fmt or infer_format(path)
    columns = TABLES[table]
    if fmt == "csv":
        df = spark.read.option("header", True).option("escape", '"').option("mode", "PERMISSIVE").csv(str(path))
    elif fmt == "json":
        # columns inferred (as strings), so that a missing one is reported rather than read as nulls
        df = spark.read.option("primitivesAsString", True).option("mode", "PERMISSIVE").json(str(path))
    elif fmt == "parquet":
        df = spark.read.parquet(str(path))
    else:
        raise PipelineError(f"unknown format `{fmt}`: formats are {', '.join(FORMATS)}")
    optional = ("args", "timestamp") if table == "requests" else ()
    missing = [c for c in columns if c not in df.columns and c not in optional]
    if missing:
        raise PipelineError(
            f"{path}: the {table} table needs the columns {', '.join(columns)}; "
            f"missing {', '.join(missing)} (found {', '.join(df.columns) or 'none'})"
        )
    # Where each row was read, for its reject: the file, the split of it, and an id that grows
    # with the row within the split (see _located).
    source = (
        F.col("_metadata.file_path").alias("_file"),
        F.col("_metadata.file_block_start").alias("_block"),
        F.monotonically_increasing_id().alias("_mid"),
    )
    present = (F.col(c).cast("string").alias(c) if c in df.columns else None for c in columns)
    return df.select(
        *(c if c is not None else F.lit(None).cast("string").alias(n) for c, n in zip(present, columns, strict=True)),
        *source,
    )


SOURCE = ("_file", "_block", "_mid")  # the columns read_table adds to say where a row was read
REJECT_SCHEMA = "table string, row string, reason string, file string, row_number long"


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


def write_table(df: DataFrame, path: Path) -> None:
    df.write.mode("overwrite").parquet(str(path))


# ---- what a valid row is --------------------------------------------------------------


def _java(pattern: str) -> str:
    """A whole-string Java regular expression."""
    return "^(?:" + pattern + r")\z"


class Vocabulary:
    """A policy's and CDAP's id scheme's checks and hierarchy, as Spark column expressions.

    Each ``*_problem`` is null for a good value and otherwise the reason, worded as
    the reference engine words it (engine.ids, engine.authorizer). Validity is one
    regular expression per check, so the generated code stays small.
    """

    def __init__(self, policy: Policy, instance: str = DEFAULT_INSTANCE):
        check_hierarchy(policy)
        self.policy = policy
        self.instance = instance
        self.types = [t.name for t in policy.entity_types]
        self.operations: dict[str, Operation] = {op.qualified: op for op in policy.operations}
        self.above: dict[str, list[str]] = {}  # each type's enclosing types, nearest first
        for name in ENTITY_TYPES:
            chain, current = [], parent_type(name)
            while current is not None:
                chain.append(current)
                current = parent_type(current)
            self.above[name] = chain
        self.depth = max(len(chain) for chain in self.above.values())

    @staticmethod
    def _ids(types: Iterable[str]) -> str:
        return _java("|".join(f"{t}:(?:{_SHAPES[t].pattern})" for t in types))

    @staticmethod
    def entity_type(value: Column) -> Column:
        from pyspark.sql import functions as F

        return F.substring_index(value, ":", 1)

    @staticmethod
    def _name(value: Column) -> Column:
        from pyspark.sql import functions as F

        return F.regexp_extract(value, r"(?s)^[^:]*:(.*)$", 1)

    def entity_problem(self, value: Column, in_policy: bool) -> Column:
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
                ~value.rlike(self._ids(ENTITY_TYPES)),
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
        valid = self._ids(self.types if in_policy else ENTITY_TYPES)
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

    def _enclosing(self, value: Column, above: str) -> Column:
        """The id of the entity of type ``above`` that encloses ``value``, from the id alone."""
        from pyspark.sql import functions as F

        if above == "instance":
            return F.lit(f"instance:{self.instance}")
        if above == "namespace":
            return F.concat(F.lit("namespace:"), F.substring_index(self._name(value), ".", 1))
        if above == "application":
            return F.concat(F.lit("application:"), F.substring_index(self._name(value), ".", 2))
        raise PipelineError(f"no id form for an enclosing `{above}`")

    def enclosing(self, value: Column, kind: Column) -> Column:
        """The id of the entity of type ``kind`` (a column) that encloses ``value``, or null."""
        from pyspark.sql import functions as F

        own = self.entity_type(value)
        out = F.lit(None).cast("string")
        for above in sorted({a for chain in self.above.values() for a in chain}):
            types = [t for t, chain in self.above.items() if above in chain]
            out = F.when((kind == above) & own.isin(*types), self._enclosing(value, above)).otherwise(out)
        return out

    def parent(self, value: Column) -> Column:
        """The id of the entity ``value`` sits in (engine.ids.EntityId.parent), or null at the top."""
        from pyspark.sql import functions as F

        kind = self.entity_type(value)
        out = F.lit(None).cast("string")
        for above in {chain[0] for chain in self.above.values() if chain}:
            types = [t for t, chain in self.above.items() if chain and chain[0] == above]
            out = F.when(kind.isin(*types), self._enclosing(value, above)).otherwise(out)
        return out

    def chain(self, value: Column) -> Column:
        """An array of the entity and every entity enclosing it, nearest first."""
        from pyspark.sql import functions as F

        kind = self.entity_type(value)
        levels: list[Column] = [value]
        for depth in range(self.depth):
            found = F.lit(None).cast("string")
            for above in {chain[depth] for chain in self.above.values() if len(chain) > depth}:
                types = [t for t, chain in self.above.items() if len(chain) > depth and chain[depth] == above]
                found = F.when(kind.isin(*types), self._enclosing(value, above)).otherwise(found)
            levels.append(found)
        return F.filter(F.array(*levels), lambda x: x.isNotNull())


def _row_json(df: DataFrame, columns: Sequence[str]) -> Column:
    from pyspark.sql import functions as F

    return F.to_json(F.struct(*(F.col(c) for c in columns)))


def _rejects(df: DataFrame, table: str, problem: Column) -> tuple[DataFrame, DataFrame]:
    """Split a table into its good rows and its rejects (table, row as JSON, reason)."""
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


def _encoded(*columns: str) -> list[Column]:
    from pyspark.sql import functions as F

    return [F.xxhash64(F.col(c)).alias(f"c{i}") for i, c in enumerate(columns)]


def load_deployment(
    spark: SparkSession,
    vocabulary: Vocabulary,
    entities: DataFrame,
    grants: DataFrame,
    members: DataFrame | None,
) -> Deployment:
    """Check the world's tables and turn them into base relations."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    good_entities, bad_entities = _rejects(entities, "entities", vocabulary.entity_problem(F.col("entity"), False))
    existing = (
        good_entities.select(F.explode(vocabulary.chain(F.col("entity"))).alias("entity"))
        .distinct()
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    grant_problem = F.coalesce(
        vocabulary.principal_problem(F.col("principal")),
        vocabulary.action_problem(F.col("action")),
        vocabulary.entity_problem(F.col("entity"), False),
    )
    good_grants, bad_grants = _rejects(grants, "grants", grant_problem)
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
        "grant": grant_rows.select(*_encoded("principal", "action", "entity")),
        "member_of": good_members.select(*_encoded("principal", "group")),
        "child_of": parents.where(F.col("parent").isNotNull()).select(*_encoded("entity", "parent")),
        "is_a": existing.select(*_encoded("entity"), F.xxhash64(vocabulary.entity_type(F.col("entity"))).alias("c1")),
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
    return Deployment(
        vocabulary, relations, existing, values, principals, bad_entities.union(bad_grants).union(bad_members)
    )


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
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    policy = vocabulary.policy
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or 4)
    log = numbered.repartition(partitions, "rid")
    operation = F.col("operation")
    op_type = _lookup({op.qualified: op.entity_type for op in policy.operations}, F.coalesce(operation, F.lit("")))
    kind = vocabulary.entity_type(F.col("entity"))
    has_args = F.col("args").isNotNull() & (F.trim(F.col("args")) != "")
    arguments = log.where(has_args).select("rid", "operation", "entity", _json_object(F.col("args")).alias("map"))
    entries = _check_arguments(vocabulary, arguments)
    first_problem = (
        entries.where(F.col("problem").isNotNull())
        .groupBy("rid")
        .agg(F.min_by(F.col("problem"), F.col("position")).alias("_arg_problem"))
    )
    not_json = arguments.where(F.col("map").isNull()).select("rid", F.lit(True).alias("_not_json"))
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
        F.when(F.col("_not_json").isNotNull(), _message("args `", F.col("args"), "` is not a JSON object")),
        F.col("_arg_problem"),
    )
    original = ["principal", "operation", "entity", "args", "timestamp"]
    source = [c for c in SOURCE if c in log.columns]
    checked = (
        log.join(not_json, on="rid", how="left")
        .join(first_problem, on="rid", how="left")
        .select("rid", *original, *source, problem.alias("_problem"))
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    good = checked.where(F.col("_problem").isNull()).drop("_problem", *source)
    bad = checked.where(F.col("_problem").isNotNull()).withColumn("_table", F.lit("requests"))
    rejects = _located(checked, bad, original)
    args = (
        entries.where(F.col("keep")).join(good.select("rid"), on="rid", how="left_semi").select("rid", "name", "value")
    )
    return Requests(good, args, rejects)


def _json_object(text: Column) -> Column:
    """A JSON object as a map of strings, null if it is not one; a key given twice keeps its last
    value, as Python's json reads it (from_json keeps both; map_from_entries applies LAST_WIN)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    return F.map_from_entries(F.map_entries(F.from_json(text, T.MapType(T.StringType(), T.StringType()))))


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
        "rid", "operation", "entity", F.posexplode("map").alias("position", "key", "raw")
    )
    operation = F.col("operation")
    name = F.regexp_replace(F.col("key"), r"^\$+", "")
    value = F.coalesce(F.col("raw"), F.lit("None"))
    key = F.concat(operation, F.lit("|"), name)
    wanted = _lookup({k: p.type for k, p in params.items()}, key)
    within = _lookup({k: p.within for k, p in params.items() if p.within}, key)
    mine, theirs = vocabulary.enclosing(F.col("entity"), within), vocabulary.enclosing(value, within)
    word = F.lower(F.regexp_replace(value, r"(?U)^\s+|\s+$", ""))  # as Python's str.strip()
    problem = (
        F.when(wanted.isNull(), _message("`", operation, "` takes ", _lookup(takes, operation), "; not `$", name, "`"))
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


# ---- evaluation -----------------------------------------------------------------------


@dataclass
class Round:
    """The requests decided together, and the not-yet-existing entities their ids place."""

    requests: DataFrame  # rid, principal, operation, entity
    transient: DataFrame | None  # entity, parent (strings) not in the inventory


def plan_rounds(deployment: Deployment, requests: DataFrame, progress: Progress) -> Iterable[Round]:
    """Rounds in which no request sees another request's not-yet-existing entity below its own."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    vocabulary = deployment.vocabulary
    chains = (
        requests.select("entity")
        .distinct()
        .select("entity", F.explode(vocabulary.chain(F.col("entity"))).alias("member"))
    )
    transient = chains.join(
        deployment.existing.select(F.col("entity").alias("member")), on="member", how="left_anti"
    ).persist(StorageLevel.MEMORY_AND_DISK)
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
        deferred = remaining.join(enclosing.distinct(), on="entity", how="left_semi").persist(
            StorageLevel.MEMORY_AND_DISK
        )
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
        added["child_of"] = links.where(F.col("parent").isNotNull()).select(*_encoded("entity", "parent"))
        added["is_a"] = links.select(*_encoded("entity"), F.xxhash64(kind).alias("c1"))
    return relations, added


def dictionary(
    spark: SparkSession, engine: SparkEngine, deployment: Deployment, requests: Requests | None
) -> DataFrame:
    """Every string the evaluation may hold, with its code (code, value); raises on a collision."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from engine.spark.encoding import EncodingError

    policy_values = spark.createDataFrame([(v,) for v in engine.dictionary.values()], "value string")
    values = deployment.values.union(policy_values)
    if requests is not None:
        values = (
            values.union(requests.good.select(F.col("principal").alias("value")))
            .union(requests.good.select(F.col("operation").alias("value")))
            .union(requests.good.select(F.explode(deployment.vocabulary.chain(F.col("entity"))).alias("value")))
            .union(requests.good.select(deployment.vocabulary.entity_type(F.col("entity")).alias("value")))
            .union(requests.args.select(F.col("name").alias("value")))
            .union(requests.args.select(F.col("value")))
        )
    # One aggregation both checks the encoding and makes the dictionary: two strings that
    # share a code give that code a different least and greatest string.
    table = (
        values.where(F.col("value").isNotNull())
        .groupBy(F.xxhash64("value").alias("code"))
        .agg(F.min("value").alias("value"), F.max("value").alias("other"))
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    found = table.where(F.col("value") != F.col("other")).first()
    if found is not None:
        raise EncodingError(
            f"`{found['value']}` and `{found['other']}` share the code {found['code']}; cannot evaluate them"
        )
    return table.select("code", "value")


def _requirements(spark: SparkSession, program: Program) -> DataFrame:
    """Each requirement of the policy: code, id, text, and whether an option is "every"."""
    from engine.spark.encoding import xxhash64

    rows = []
    for rid, (_op, requirement) in program.requirements.items():
        text = format_alternatives(requirement.options)
        if requirement.condition is not None:
            text += f" if {requirement.condition}"
        every = any(t.scope is Scope.EVERY for o in requirement.options for t in o.targets)
        rows.append((xxhash64(rid), rid, text, every))
    return spark.createDataFrame(rows, "i long, requirement string, text string, every boolean")


def decisions(
    spark: SparkSession, program: Program, evaluation: Evaluation, requests: DataFrame, dictionary: DataFrame
) -> DataFrame:
    """Per request of a round: rid, decision, unmet (requirement, text, lacking entities).

    Assembled as engine.authorizer.Authorizer._decision does: a requirement is unmet
    when it applies, no grant meets it, and it is not an "every" requirement that
    lacks nothing. Every relation here is partitioned by request, so the joins and
    groupings by request need no shuffle.
    """
    from pyspark.sql import functions as F

    allowed = evaluation.relation("allowed").select(F.col("c0").alias("rid")).distinct().withColumn("ok", F.lit(True))
    applies = evaluation.relation("applies").select(F.col("c0").alias("rid"), F.col("c1").alias("i")).distinct()
    met = evaluation.relation("met").select(F.col("c0").alias("rid"), F.col("c1").alias("i"))
    meta = F.broadcast(_requirements(spark, program))
    unmet = applies.join(met, on=["rid", "i"], how="left_anti").join(meta, on="i")
    lacking = evaluation.cache(
        "lacking",
        evaluation.relation("lacking").select(
            F.col("c0").alias("rid"), F.col("c1").alias("i"), F.col("c2").alias("code")
        ),
    )
    empty = F.array().cast("array<string>")
    if lacking.isEmpty():
        unmet = unmet.where(~F.col("every")).withColumn("lacking", empty)
    else:
        lacks = lacking.select("rid", "i").distinct().withColumn("lacks", F.lit(True))
        unmet = unmet.join(lacks, on=["rid", "i"], how="left").where(~F.col("every") | F.col("lacks").isNotNull())
        partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or 4)
        # "every" requirements of wide deletes can lack millions of entities: never broadcast them
        names = (
            lacking.join(dictionary, on="code")
            .groupBy("rid", "i")
            .agg(F.sort_array(F.collect_set("value")).alias("lacking"))
            .repartition(partitions, "rid")
        )
        unmet = unmet.join(names, on=["rid", "i"], how="left")
    unmet = unmet.select(
        "rid",
        F.struct(F.col("requirement"), F.col("text"), F.coalesce(F.col("lacking"), empty).alias("lacking")).alias(
            "unmet"
        ),
    )
    per_request = unmet.groupBy("rid").agg(F.sort_array(F.collect_list("unmet")).alias("unmet"))
    return (
        requests.select("rid")
        .join(allowed, on="rid", how="left")
        .join(per_request, on="rid", how="left")
        .select(
            "rid",
            F.when(F.col("ok").isNotNull(), F.lit("allow")).otherwise(F.lit("deny")).alias("decision"),
            F.coalesce(F.col("unmet"), F.array().cast(per_request.schema["unmet"].dataType)).alias("unmet"),
        )
    )


@dataclass
class Decided:
    """Every good request of the log with its decision, and the count of each."""

    table: DataFrame  # rid, principal, operation, entity, args, timestamp, decision, unmet
    rounds: int = 0
    cached: list[DataFrame] = field(default_factory=list)


def decide_all(
    spark: SparkSession,
    engine: SparkEngine,
    deployment: Deployment,
    requests: Requests,
    progress: Progress,
) -> Decided:
    """Decide every good request, round by round."""
    from pyspark import StorageLevel

    table = dictionary(spark, engine, deployment, requests)
    progress("checked the encoding: no two values share a code")
    parts = []
    rounds = 0
    for round_ in plan_rounds(deployment, requests.good, progress):
        rounds += 1
        base, added = base_relations(deployment, round_, requests.args)
        evaluation = engine.evaluate(base, outputs=DECIDE_OUTPUTS, added=added, partition=BY_REQUEST)
        part = decisions(spark, engine.program, evaluation, round_.requests, table)
        parts.append(part.persist(StorageLevel.MEMORY_AND_DISK))
        parts[-1].count()  # decide this round before the next replaces the facts
        evaluation.release()
        progress(f"round {rounds}: decided")
    combined = parts[0]
    for part in parts[1:]:
        combined = combined.union(part)
    out = requests.good.join(combined, on="rid", how="inner")
    return Decided(out, rounds, [table, *parts])


# ---- visibility -----------------------------------------------------------------------


def _needs_a_grant(op: Operation) -> bool:
    """Whether some requirement always applies and can be met only through a grant."""
    return any(
        r.condition is None and all(t.scope is not Scope.EVERY for o in r.options for t in o.targets)
        for r in op.requirements
    )


def _scopes(op: Operation) -> set[Scope]:
    """The scopes of the first requirement that always needs a grant: candidates must meet it."""
    for r in op.requirements:
        if r.condition is None and all(t.scope is not Scope.EVERY for o in r.options for t in o.targets):
            return {t.scope for o in r.options for t in o.targets}
    return set()


def visibility(spark: SparkSession, engine: SparkEngine, deployment: Deployment, progress: Progress) -> DataFrame:
    """For every principal, each entity a listing shows it, with the grant that shows it.

    A listing request is made for each principal and each entity of a listable type
    that a grant of the principal (or of a group it is in) could show, judged by the
    scopes of the listing's requirement: the granted entity itself, what encloses it
    (self or descendant), or what it encloses (parent, an enclosing type). A listing
    that needs no grant is asked for every principal and every entity of its type.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from engine.spark.encoding import xxhash64

    listings = [op for op in engine.program.policy.operations if op.verb is Verb.SHOWS]
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
    scopes = set().union(*(_scopes(op) for op in listings if _needs_a_grant(op)))
    if scopes & {Scope.SELF, Scope.SELF_OR_DESCENDANT}:
        parts.append(held)
    if Scope.SELF_OR_DESCENDANT in scopes:
        parts.append(held.join(ancestor.withColumnRenamed("below", "e"), on="e").select("p", F.col("above").alias("e")))
    if scopes & {Scope.PARENT, Scope.ANCESTOR}:
        parts.append(held.join(ancestor.withColumnRenamed("above", "e"), on="e").select("p", F.col("below").alias("e")))
    candidates = spark.createDataFrame([], "p long, e long")
    for part in parts:
        candidates = candidates.union(part)
    granted = [op for op in listings if _needs_a_grant(op)]
    candidates = (
        candidates.distinct()
        .join(is_a, on="e")
        .join(F.broadcast(types.where(F.col("type").isin(*(op.entity_type for op in granted)))), on="t")
    )
    free = [op.entity_type for op in listings if not _needs_a_grant(op)]
    if free:
        everyone = deployment.principals.select(F.xxhash64("principal").alias("p"))
        open_entities = is_a.join(F.broadcast(types.where(F.col("type").isin(*free))), on="t")
        candidates = candidates.unionByName(everyone.crossJoin(open_entities))
    asked = (
        candidates.select("p", "o", "e")
        .withColumn("rid", F.monotonically_increasing_id())
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
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


# ---- commands -------------------------------------------------------------------------


@dataclass
class Context:
    """One run: its session, policy, progress and output folder."""

    spark: SparkSession
    progress: Progress
    out: Path
    instance: str
    fmt: str | None
    local_rows: int | None = None
    trace: bool = False
    rejects: list[DataFrame] = field(default_factory=list)

    def table(self, path: str | None, table: str) -> DataFrame | None:
        if path is None:
            return None
        df = read_table(self.spark, path, self.fmt, table)
        self.progress(f"reading {table} from {path}")
        return df

    def engine(self, policy: Policy) -> SparkEngine:
        from engine.spark.evaluate import EngineSettings, SparkEngine
        from engine.spark.plan import Settings

        settings = EngineSettings(planner=Settings(trace=self.progress if self.trace else None))
        if self.local_rows is not None:
            settings = replace(settings, local_rows=self.local_rows, local_base_rows=self.local_rows)
        return SparkEngine(compile_policy(policy), self.spark, settings, progress=self.progress)

    def write_rejects(self) -> int:
        from pyspark.sql import functions as F

        combined = self.spark.createDataFrame([], REJECT_SCHEMA)
        for part in self.rejects:
            combined = combined.union(part)
        target = self.out / "rejects"
        write_table(combined.coalesce(1), target)
        rows = self.spark.read.parquet(str(target)).groupBy("table").agg(F.count("*").alias("n")).collect()
        counts = {r["table"]: int(r["n"]) for r in rows}
        total = sum(counts.values())
        if total:
            described = ", ".join(f"{n:,} {t}" for t, n in sorted(counts.items()))
            self.progress(f"rejected {total:,} rows ({described}): see {target}")
        return total


def _context(args: argparse.Namespace) -> Context:
    progress = Progress(quiet=getattr(args, "quiet", False))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    progress(f"starting Spark ({args.master or 'local[*]'})")
    spark = spark_session(args.master, args.driver_memory, args.partitions)
    return Context(spark, progress, out, args.instance, args.format, args.local_rows, args.trace)


def _world(context: Context, vocabulary: Vocabulary, args: argparse.Namespace, report: bool = True) -> Deployment:
    """The deployment's tables, checked; ``report`` adds its bad rows to the run's rejects."""
    entities = context.table(args.entities, "entities")
    grants = context.table(args.grants, "grants")
    assert entities is not None and grants is not None
    deployment = load_deployment(context.spark, vocabulary, entities, grants, context.table(args.members, "members"))
    if report:
        context.rejects.append(deployment.rejects)
    return deployment


def cmd_decide(args: argparse.Namespace) -> int:
    policy = dsl.load_policy(args.policy)
    context = _context(args)
    vocabulary = Vocabulary(policy, context.instance)
    engine = context.engine(policy)
    deployment = _world(context, vocabulary, args)
    raw = context.table(args.requests, "requests")
    assert raw is not None
    requests = check_requests(context.spark, vocabulary, number_requests(raw))
    context.rejects.append(requests.rejects)
    decided = decide_all(context.spark, engine, deployment, requests, context.progress)
    target = context.out / "decisions"
    write_table(decided.table.drop("rid"), target)
    summary = _decision_counts(context.spark, target)
    rejected = context.write_rejects()
    context.progress("done")
    print(
        f"decided {summary.get('allow', 0) + summary.get('deny', 0):,} requests: {summary.get('allow', 0):,} allowed, "
        f"{summary.get('deny', 0):,} denied; {rejected:,} rows rejected; wrote {target} and {context.out / 'rejects'}"
    )
    return 0


def _decision_counts(spark: SparkSession, path: Path) -> dict[str, int]:
    from pyspark.sql import functions as F

    rows = spark.read.parquet(str(path)).groupBy("decision").agg(F.count("*").alias("n")).collect()
    return {r["decision"]: int(r["n"]) for r in rows}


def cmd_visibility(args: argparse.Namespace) -> int:
    policy = dsl.load_policy(args.policy)
    context = _context(args)
    vocabulary = Vocabulary(policy, context.instance)
    engine = context.engine(policy)
    deployment = _world(context, vocabulary, args)
    shown = visibility(context.spark, engine, deployment, context.progress)
    target = context.out / "visibility"
    write_table(shown, target)
    rows = context.spark.read.parquet(str(target)).count()
    rejected = context.write_rejects()
    context.progress("done")
    print(f"{rows:,} (principal, entity) pairs visible; {rejected:,} rows rejected; wrote {target}")
    return 0


def cmd_impact(args: argparse.Namespace) -> int:
    from pyspark.sql import functions as F

    left, right = dsl.load_policy(args.left), dsl.load_policy(args.right)
    context = _context(args)
    raw = context.table(args.requests, "requests")
    assert raw is not None
    numbered = number_requests(raw)
    decided: list[DataFrame] = []
    for name, policy in ((args.left, left), (args.right, right)):
        context.progress(f"deciding under {name}")
        vocabulary = Vocabulary(policy, context.instance)
        # the world's rows are checked by CDAP's id forms and actions alone: report its bad rows once
        deployment = _world(context, vocabulary, args, report=name == args.left)
        requests = check_requests(context.spark, vocabulary, numbered)
        context.rejects.append(requests.rejects.withColumn("reason", F.concat(F.lit(f"{name}: "), F.col("reason"))))
        result = decide_all(context.spark, context.engine(policy), deployment, requests, context.progress)
        decided.append(result.table)
    a = decided[0].select(
        "rid",
        "principal",
        "operation",
        "entity",
        "args",
        F.col("decision").alias("decision_a"),
        F.col("unmet").alias("unmet_a"),
    )
    b = decided[1].select("rid", F.col("decision").alias("decision_b"), F.col("unmet").alias("unmet_b"))
    both = a.join(b, on="rid")
    changed = both.where(F.col("decision_a") != F.col("decision_b"))
    keys = ["principal", "operation", "entity", "args"]
    changes = changed.groupBy(*keys).agg(
        F.count("*").alias("requests"),
        F.first("decision_a").alias("decision_a"),
        F.first("decision_b").alias("decision_b"),
        F.first("unmet_a").alias("unmet_a"),
        F.first("unmet_b").alias("unmet_b"),
    )
    target = context.out / "changes"
    write_table(changes, target)
    written = context.spark.read.parquet(str(target))
    by_operation = written.groupBy("operation").agg(
        F.sum(F.when(F.col("decision_a") == "allow", 1).otherwise(0)).alias("allow_to_deny"),
        F.sum(F.when(F.col("decision_a") == "deny", 1).otherwise(0)).alias("deny_to_allow"),
        F.sum("requests").alias("log_rows"),
    )
    compared = both.groupBy("operation").agg(F.count("*").alias("compared"))
    by_operation = compared.join(by_operation, on="operation", how="left").fillna(0).orderBy("operation")
    write_table(by_operation.coalesce(1), context.out / "by_operation")
    rows = context.spark.read.parquet(str(context.out / "by_operation")).collect()
    rejected = context.write_rejects()
    context.progress("done")
    print(f"{args.left} vs {args.right}: distinct requests whose decision changes, by operation")
    print(f"  {'operation':36} {'allow→deny':>11} {'deny→allow':>11} {'log rows':>10} {'compared':>10}")
    for row in rows:
        if row["allow_to_deny"] or row["deny_to_allow"]:
            print(
                f"  {row['operation']:36} {row['allow_to_deny']:>11,} {row['deny_to_allow']:>11,} "
                f"{row['log_rows']:>10,} {row['compared']:>10,}"
            )
    total = sum(int(r["allow_to_deny"]) + int(r["deny_to_allow"]) for r in rows)
    print(f"{total:,} changed; {rejected:,} rows rejected; wrote {target} and {context.out / 'by_operation'}")
    return 1 if total else 0


def spark_failure(error: Exception) -> str | None:
    """One line saying why a Spark job failed and what to change, or None if ``error`` is not Spark's."""
    if not type(error).__module__.startswith(("py4j", "pyspark")):
        return None
    from engine.spark.session import local_driver_memory

    text = str(error)
    # the JVM stopping mid-job is, on one machine, nearly always the heap running out
    if any(sign in text for sign in ("OutOfMemoryError", "not enough memory", "SparkContext was shut down")):
        return (
            "Spark ran out of memory; give it more with --driver-memory (default here "
            f"{local_driver_memory()}) or spread the work over more --partitions"
        )
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("at ")]
    cause = next((line for line in lines if "Exception:" in line or "Error:" in line), lines[0] if lines else text)
    return f"the Spark job failed: {cause[:300]}"


def _reported(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Run a pipeline command, turning a failed Spark job into one line (not a JVM stack trace)."""

    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except Exception as error:
            reason = spark_failure(error)
            if reason is None or os.environ.get("PRIVILOG_DEBUG"):
                raise
            raise PipelineError(reason) from None

    return run


def register(sub: Any) -> None:
    """Add ``privilog pipeline`` (decide, visibility, impact) and ``privilog generate``."""
    from privilog import generate

    p = sub.add_parser(
        "pipeline",
        help="a policy over a whole deployment, on Spark: decide, visibility, impact",
        description="Evaluate a policy over a deployment's tables on Apache Spark (local mode by default).",
    )
    commands = p.add_subparsers(dest="pipeline_command", required=True, parser_class=type(p))

    def common(q: argparse.ArgumentParser, requests: bool, policy: bool = True) -> None:
        q.add_argument("--entities", required=True, help="the inventory: a table with the column entity")
        q.add_argument("--grants", required=True, help="a table with the columns principal, action, entity")
        q.add_argument("--members", help="a table with the columns principal, group")
        if requests:
            q.add_argument(
                "--requests",
                required=True,
                help="the access log: principal, operation, entity, and optionally args (JSON) and timestamp",
            )
        q.add_argument("--out", required=True, help="the folder to write Parquet tables to")
        if policy:
            q.add_argument("--policy", default="cdap", help="a policy in rules/ (default cdap) or a path")
        q.add_argument("--format", choices=FORMATS, help="the input format (default: from each file's name)")
        q.add_argument("--master", help="Spark master URL (default local[*]; spark-submit sets its own)")
        q.add_argument("--driver-memory", help="Spark driver memory (default: half the machine's, 2g-16g)")
        q.add_argument("--partitions", type=int, default=None, help="Spark shuffle partitions (default 4)")
        q.add_argument("--instance", default=DEFAULT_INSTANCE, help="the CDAP instance name (default cdap)")
        q.add_argument(
            "--local-rows",
            type=int,
            default=None,
            metavar="N",
            help="relations of at most N rows are evaluated on the driver (default 10000; 0: all in Spark)",
        )
        q.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
        q.add_argument("--trace", action="store_true", help="also print each join as the engine plans it")

    q = commands.add_parser(
        "decide",
        help="decide every request of an access log",
        description="Decide every request: OUT/decisions (the request, allow or deny, and each unmet "
        "requirement with the entities it lacks) and OUT/rejects.",
    )
    common(q, requests=True)
    q.set_defaults(run=_reported(cmd_decide))
    q = commands.add_parser(
        "visibility",
        help="what every principal may see, and the grant that shows it",
        description="For every principal, each entity the policy's listings show it, with the grant that "
        "shows it: OUT/visibility and OUT/rejects.",
    )
    common(q, requests=False)
    q.set_defaults(run=_reported(cmd_visibility))
    q = commands.add_parser(
        "impact",
        help="the decisions of an access log that change between two policies",
        description="Every distinct (principal, operation, entity, args) request of the log that the two "
        "policies decide differently (OUT/changes), with counts by operation (OUT/by_operation). "
        "Exit 1 when some decision changes.",
    )
    q.add_argument("left", metavar="POLICY_A")
    q.add_argument("right", metavar="POLICY_B")
    common(q, requests=True, policy=False)
    q.set_defaults(run=_reported(cmd_impact))
    generate.register(sub)


def main(argv: Sequence[str] | None = None) -> int:
    """Run a pipeline command on its own (``spark-submit privilog/pipeline.py decide ...``)."""
    from privilog.cli import _Parser

    parser = _Parser(prog="privilog-pipeline")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    register(sub)
    args = parser.parse_args(["pipeline", *(argv if argv is not None else sys.argv[1:])])
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
