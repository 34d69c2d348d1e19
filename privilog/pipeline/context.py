"""A pipeline run: its Spark session, staged output folder, progress and manifest (:class:`Context`).

Every pipeline command that reads a deployment (decide, visibility, impact, unused) runs inside
:func:`running`; :func:`load_world` reads and checks the deployment's tables.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privilog import dsl
from privilog.api import load_world_for
from privilog.dsl.ir import Policy
from privilog.engine.spark import facade
from privilog.engine.world import World, read_config, read_facts
from privilog.pipeline.catalog import CatalogRun, is_table, read_input, require_catalog, table_name
from privilog.pipeline.console import Heartbeat, quiet_jvm
from privilog.pipeline.inputs import (
    CheckedDeployment,
    Requests,
    Vocabulary,
    check_requests,
    load_deployment,
    number_requests,
)
from privilog.pipeline.runs import Output, Staging, balance, policy_record
from privilog.pipeline.tables import (
    REJECT_SCHEMA,
    PipelineError,
    Progress,
    infer_format,
    is_uri,
    read_written,
    spark_session,
    write_table,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from privilog.engine.spark.facade import SparkEngine


# ---- a run ----------------------------------------------------------------------------


@dataclass
class Context:
    """One run: its session, progress, staging folder, and what it read and wrote."""

    spark: SparkSession
    progress: Progress
    run: Staging | CatalogRun  # a folder (--out) or catalog tables (--out-table)
    instance: str
    fmt: str | None
    local_rows: int | None = None
    trace: bool = False
    rejects: list[DataFrame] = field(default_factory=list)
    inputs: dict[str, tuple[str, str, DataFrame]] = field(default_factory=dict)  # table -> path, format, rows
    _schemas: dict[str, StructType] = field(default_factory=dict)  # each table written, as it was written

    @property
    def out(self) -> Path | str:
        return self.run.out

    def table(self, path: str | None, table: str) -> DataFrame | None:
        if path is None:
            return None
        df = read_input(self.spark, path, self.fmt, table)
        if is_table(path):
            self.inputs[table] = (path, "table", df)
        elif is_uri(path):
            self.inputs[table] = (path, self.fmt or infer_format(Path(path.rstrip("/"))), df)
        else:
            self.inputs[table] = (os.path.abspath(path), self.fmt or infer_format(Path(path)), df)
        self.progress(f"reading {table} from {path}")
        return df

    def engine(self, policy: Policy) -> SparkEngine:
        """The Spark engine of ``policy``, with this run's --trace and --local-rows."""
        return facade.engine(policy, self.spark, self.progress, self.trace, self.local_rows)

    def write(self, name: str, df: DataFrame) -> Output:
        """Write a table of the run (into its staging folder, or the catalog), and count what was written."""
        if isinstance(self.run, CatalogRun):
            self.progress(f"writing {name} (table {self.run.path(name)}, {self.run.mode})")
            columns = self.run.write(name, df)
        else:
            path = self.run.table(name)
            self.progress(f"writing {name} ({self.run.format})")
            columns = write_table(df, path, self.run.format)
            self._schemas[name] = df.schema
        output = Output(name, self.run.format, columns, self.read_back(name).count())
        self.run.wrote(output)
        return output

    def read_back(self, name: str) -> DataFrame:
        """The table ``name`` as this run wrote it (a CSV's nested columns stay JSON text)."""
        if isinstance(self.run, CatalogRun):
            return self.run.read_back(name)
        return read_written(self.spark, self.run.path(name), self.run.format, self._schemas.get(name))

    def wrote_line(self, names: list[str]) -> str:
        """Where the run's tables went, for a command's last line."""
        if isinstance(self.run, CatalogRun):
            return f"{self.run.described(names)}"
        return f"wrote {self.out} ({self.run.format}: {', '.join(names)})"

    def rejects_at(self) -> str:
        """Where the run's rejects are, for a line pointing at them."""
        if isinstance(self.run, CatalogRun):
            return f"{self.run.path('rejects')} (run_id {self.run.id})"
        return str(Path(self.out) / "rejects")

    def write_rejects(self) -> DataFrame:
        """Write the rejects table; it, as written (for counting)."""
        combined = self.spark.createDataFrame([], REJECT_SCHEMA)
        for part in self.rejects:
            combined = combined.union(part)
        output = self.write("rejects", combined.coalesce(1))
        written = self.read_back("rejects")
        if output.rows:
            counts = {r["table"]: int(r["count"]) for r in written.groupBy("table").count().collect()}
            described = ", ".join(f"{n:,} {t}" for t, n in sorted(counts.items()))
            self.progress(f"rejected {output.rows:,} rows ({described}): see {self.rejects_at()}")
        return written

    def read_counts(self) -> dict[str, int]:
        """How many rows each input table holds, read again in one job."""
        from pyspark.sql import functions as F

        self.progress("counting the input rows (the rows-in check)")
        parts = [df.select(F.lit(table).alias("table")) for table, (_, _, df) in self.inputs.items()]
        combined = parts[0]
        for part in parts[1:]:
            combined = combined.union(part)
        return {r["table"]: int(r["count"]) for r in combined.groupBy("table").count().collect()}

    def balanced(self, used: dict[str, Any], rejected: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """The inputs as the manifest records them, after the rows-in check (which raises when it fails)."""
        read = self.read_counts()
        inputs = {
            table: {
                "path": path,
                "format": fmt,
                "rows": read.get(table, 0),
                "used": used[table],
                "rejected": rejected[table],
            }
            for table, (path, fmt, _) in self.inputs.items()
        }
        try:
            balance(inputs)
        except PipelineError as error:
            kept = self.run.keep()
            unchanged = "" if isinstance(self.run, CatalogRun) else f", and {self.out} is unchanged"
            raise PipelineError(f"{error}; the run's tables are left in {kept}{unchanged}") from None
        return inputs

    def finish(self, policies: list[tuple[str, Policy]], inputs: dict[str, Any], **fields: Any) -> None:
        """Write the manifest and move the run into place."""
        if isinstance(self.run, CatalogRun):
            self.progress(f"recording the run in {self.run.path('runs')}")
        else:
            self.progress(f"moving the run into {self.out}")
        self.run.publish(
            policies=[policy_record(name, policy_file(name)) for name, _ in policies],
            inputs=inputs,
            rows_in_check="passed: for every input, rows read = rows used + rows rejected",
            privilog=privilog_version(),
            spark=self.spark.version,
            **fields,
        )


def policy_file(name: str) -> Path:
    return dsl.resolve_policy_path(name)


def privilog_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("privilog")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


@contextlib.contextmanager
def running(args: argparse.Namespace, command: str) -> Iterator[Context]:
    """A run: a Spark session, its output folder staged and locked (or its catalog tables), a
    heartbeat while Spark works; what the run persisted is unpersisted when it ends (the session
    may outlive it)."""
    from pyspark.sql import SparkSession

    from privilog.engine.spark.session import released

    progress = Progress(quiet=getattr(args, "quiet", False))
    out, out_table = getattr(args, "out", None), getattr(args, "out_table", None)
    if (out is None) == (out_table is None):
        raise PipelineError("say where the run goes: --out FOLDER (its tables as files) or --out-table DB.PREFIX")
    if out_table is not None:
        table_name(out_table, "--out-table")  # refused before Spark starts
    remote = args.remote or os.environ.get("SPARK_REMOTE") or None
    check_deployment_options(args)
    check_catalog_use(args, remote)
    # the settings, read (and refused) before Spark starts
    args.settings = read_config(args.config) if getattr(args, "config", None) else {}
    args.given = read_facts(args.facts) if getattr(args, "facts", None) else {}  # a world's facts, the same way

    def session() -> SparkSession:
        if remote is not None:
            progress(f"connecting to Spark Connect at {remote}")
            return spark_session(args.master, args.driver_memory, args.partitions, remote, args.warehouse)
        progress(f"starting Spark ({args.master or 'local[*]'})")
        # a JVM started here has its own lines filtered (one already running keeps its stderr)
        with quiet_jvm() if SparkSession.getActiveSession() is None else contextlib.nullcontext():
            return spark_session(args.master, args.driver_memory, args.partitions, warehouse=args.warehouse)

    if out_table is not None:
        spark = session()
        sink: contextlib.AbstractContextManager[Staging | CatalogRun] = contextlib.nullcontext(
            CatalogRun(spark, out_table, command, args.table_mode)
        )
    else:
        assert out is not None
        sink = Staging(Path(out), command, args.out_format)
    with sink as run:
        if out_table is None:
            spark = session()
        context = Context(spark, progress, run, args.instance, args.format, args.local_rows, args.trace)
        with Heartbeat(spark, progress), released():  # the run's caches go with it
            yield context


TABLE_OPTIONS = ("entities", "grants", "members", "config", "facts")  # what --world stands in for


def check_deployment_options(args: argparse.Namespace) -> None:
    """The deployment is given once: --world, or its tables (--entities and --grants at least)."""
    world = getattr(args, "world", None)
    given = [f"--{t}" for t in TABLE_OPTIONS if getattr(args, t, None) is not None]
    if world is not None and given:
        raise PipelineError(
            f"--world and {given[0]} both give the deployment: the world file holds its entities, grants, "
            "members, config and facts; give --world alone, or the tables without it"
        )
    if world is None:
        missing = [f"--{t}" for t in ("entities", "grants") if getattr(args, t, None) is None]
        if missing:
            raise PipelineError(
                f"say what the deployment is: {' and '.join(missing)} (tables), or --world WORLD (a world file "
                "or a folder of tables)"
            )


def check_catalog_use(args: argparse.Namespace, remote: str | None) -> None:
    """Refuse, before Spark starts, catalog tables that a local session would have nowhere to keep."""
    names = [getattr(args, t, None) for t in ("entities", "grants", "members", "requests")]
    for option, value in zip(("--entities", "--grants", "--members", "--requests"), names, strict=True):
        if is_table(value):
            assert value is not None
            table_name(value[len("table:") :], option)
    if any(is_table(n) for n in names) or getattr(args, "out_table", None) is not None:
        require_catalog(remote, args.warehouse)


WorldReading = Callable[[Policy, str, World], World]  # the world as a policy, named, reads it


def load_world(
    context: Context, vocabulary: Vocabulary, args: argparse.Namespace, report: bool = True, name: str | None = None
) -> CheckedDeployment:
    """The deployment's tables, checked; ``report`` adds its bad rows to the run's rejects. With --world,
    the world file as the policy ``name`` reads it (:func:`world_deployment`)."""
    if getattr(args, "world", None) is not None:
        return world_deployment(context, vocabulary, args, report, name or args.policy)
    entities = context.table(args.entities, "entities")
    grants = context.table(args.grants, "grants")
    assert entities is not None and grants is not None
    config = getattr(args, "settings", None) or {}
    members = context.table(args.members, "members")
    facts = getattr(args, "given", None) or {}
    deployment = load_deployment(
        context.spark, vocabulary, entities, grants, members, config, facts, getattr(args, "facts", None)
    )
    if report:
        context.rejects.append(deployment.rejects)
    return deployment


def world_deployment(
    context: Context, vocabulary: Vocabulary, args: argparse.Namespace, report: bool, name: str
) -> CheckedDeployment:
    """The deployment of --world: the file read and checked for the policy (as `privilog check --world`
    reads it), then as the policy reads it (``args.read_by``: an imported Ranger world read as CDAP
    grants by a policy that does not read Ranger's facts); its entities, grants, members, config and
    facts become the tables --entities, --grants, --members, --config and --facts would give.

    The rows-in check counts the file's rows: each table of the file is an input, used whole (its
    rows were checked on reading; a row the pipeline's checks still refused would be counted twice,
    and the check would fail the run)."""
    policy = vocabulary.policy
    world = load_world_for(policy, args.world)
    # admins are who may change the world's grants: a decision reads them only if a rule does
    reads_admin = any(getattr(lit, "predicate", "") == "admin" for rule in policy.rules for lit in rule.body)
    if (world.admins and reads_admin) or world.owners:
        held = ", ".join(
            what for what, rows in (("admins", world.admins if reads_admin else ()), ("owners", world.owners)) if rows
        )
        raise PipelineError(
            f"{args.world}: the pipeline's deployment has no {held} (only entities, grants, members, config and "
            f"facts); decide this world in process (privilog decide), or remove its {held}"
        )
    if world.instance != vocabulary.instance:
        raise PipelineError(
            f"{args.world} is a world of the CDAP instance `{world.instance}`, not `{vocabulary.instance}`: "
            f"add --instance {world.instance}"
        )
    reader: WorldReading | None = getattr(args, "read_by", None)
    read = reader(policy, name, world) if reader is not None else world
    spark = context.spark
    path = os.path.abspath(args.world)
    tables = world_tables(spark, world)
    for table, df in tables.items():
        if table not in context.inputs:
            context.inputs[table] = (path, "world", df)
            context.progress(f"reading {table} from {args.world}")
    entities, grants, members = world_tables(spark, read).values() if read is not world else tables.values()
    deployment = load_deployment(
        spark, vocabulary, entities, grants, members, read.config, read.facts, args.world
    )
    deployment.used = dict(tables)
    if report:
        context.rejects.append(deployment.rejects)
    return deployment


def world_tables(spark: SparkSession, world: World) -> dict[str, DataFrame]:
    """A world's entities, grants and members as the pipeline's tables."""
    return {
        "entities": spark.createDataFrame([(str(e),) for e in sorted(world.entities)], "entity string"),
        "grants": spark.createDataFrame(
            sorted((g.principal, g.action, str(g.entity)) for g in world.grants),
            "principal string, action string, entity string",
        ),
        "members": spark.createDataFrame(sorted(world.members), "principal string, group string"),
    }


def load_inputs(
    context: Context, vocabulary: Vocabulary, args: argparse.Namespace
) -> tuple[CheckedDeployment, Requests]:
    """The deployment and the access log of ``args``, checked; their bad rows added to the run's rejects."""
    deployment = load_world(context, vocabulary, args)
    raw = context.table(args.requests, "requests")
    assert raw is not None
    requests = check_requests(context.spark, vocabulary, number_requests(raw))
    context.rejects.append(requests.rejects)
    return deployment, requests


def world_counts(
    context: Context, deployment: CheckedDeployment, rejects: DataFrame
) -> tuple[dict[str, int], dict[str, int]]:
    """Rows used and rows rejected of each world table, in two jobs."""
    from pyspark.sql import functions as F

    tables = [t for t in ("entities", "grants", "members") if t in context.inputs]
    parts = [deployment.used[t].select(F.lit(t).alias("table")) for t in tables]
    combined = parts[0]
    for part in parts[1:]:
        combined = combined.union(part)
    used = {r["table"]: int(r["count"]) for r in combined.groupBy("table").count().collect()}
    rejected = {r["table"]: int(r["count"]) for r in rejects.groupBy("table").count().collect()}
    return {t: used.get(t, 0) for t in tables}, {t: rejected.get(t, 0) for t in tables}
