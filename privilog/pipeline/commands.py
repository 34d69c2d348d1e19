"""The pipeline's commands (decide, visibility, impact): read, check, evaluate, write, report.

``register`` adds ``privilog pipeline`` and ``privilog generate`` to a command
line; ``main`` runs a pipeline command on its own (``spark-submit``,
``python -m privilog.pipeline``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privilog import dsl
from privilog.dsl.ir import Policy
from privilog.engine.ids import DEFAULT_INSTANCE
from privilog.engine.program import compile_policy
from privilog.pipeline.evaluate import decide_all, visibility
from privilog.pipeline.inputs import Deployment, Vocabulary, check_requests, load_deployment, number_requests
from privilog.pipeline.tables import (
    FORMATS,
    REJECT_SCHEMA,
    PipelineError,
    Progress,
    read_table,
    require_spark,
    spark_session,
    write_table,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from privilog.engine.spark.evaluate import SparkEngine


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
        from privilog.engine.spark.evaluate import EngineSettings, SparkEngine
        from privilog.engine.spark.plan import Settings

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
    from privilog.engine.spark.session import local_driver_memory

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
        require_spark()  # before any input is read: the one line naming the extra
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
    from privilog.pipeline import generate, report

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
    q.add_argument("left", metavar="POLICY_A", help="a policy in rules/ or a path: the one compared from")
    q.add_argument("right", metavar="POLICY_B", help="a policy in rules/ or a path: the one compared to")
    common(q, requests=True, policy=False)
    q.set_defaults(run=_reported(cmd_impact))
    report.register(commands)
    generate.register(sub)


def main(argv: Sequence[str] | None = None) -> int:
    """Run a pipeline command on its own (``spark-submit privilog/pipeline/__main__.py decide ...``)."""
    from privilog.usage import CommandParser

    parser = CommandParser(prog="privilog-pipeline")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    register(sub)
    args = parser.parse_args(["pipeline", *(argv if argv is not None else sys.argv[1:])])
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
