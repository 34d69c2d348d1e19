"""The pipeline's commands (decide, visibility, impact; unused in :mod:`privilog.pipeline.unused`).

``register`` adds ``privilog pipeline`` and ``privilog generate`` to a command
line; ``main`` runs a pipeline command on its own (``spark-submit``,
``python -m privilog.pipeline``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from privilog import dsl
from privilog.engine.ids import DEFAULT_INSTANCE
from privilog.engine.spark import facade
from privilog.pipeline.catalog import MODES
from privilog.pipeline.context import WorldReading, load_inputs, load_world, running, world_counts
from privilog.pipeline.inputs import Vocabulary, check_requests, number_requests
from privilog.pipeline.show import render_summary
from privilog.pipeline.tables import (
    FORMATS,
    PipelineError,
    require_spark,
    spark_options,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


# ---- the commands ---------------------------------------------------------------------


def cmd_decide(args: argparse.Namespace) -> int:
    from pyspark.sql import functions as F

    policy = dsl.load_policy(args.policy)
    with running(args, "decide") as context:
        vocabulary = Vocabulary(policy, context.instance)
        engine = context.engine(policy)
        deployment, requests = load_inputs(context, vocabulary, args)
        witnesses = not args.no_allowed_by
        decided = facade.decide(context.spark, engine, deployment, requests, context.progress, witnesses=witnesses)
        table = decided.table.drop("rid")  # kept already: written, then counted
        if not witnesses:  # the same columns either way: a catalog table takes both runs' rows
            table = table.withColumn("allowed_by", F.lit(None).cast(facade.ALLOWED_BY_TYPE))
        written = context.write("decisions", table)
        rejects = context.write_rejects()
        context.progress("counting decisions by operation")
        summary = per_operation(table)
        used, rejected = world_counts(context, deployment, rejects)
        used["requests"] = written.rows
        rejected["requests"] = rejects.where(F.col("table") == "requests").count()
        inputs = context.balanced(used, rejected)
        context.finish([(args.policy, policy)], inputs, summary=summary, allowed_by=witnesses)
        context.progress("done")
    allowed, denied = sum(s["allowed"] for s in summary), sum(s["denied"] for s in summary)
    print(render_summary(summary))
    print(
        f"decided {allowed + denied:,} requests: {allowed:,} allowed, {denied:,} denied; "
        f"{context.run.outputs['rejects'].rows:,} rows rejected; {context.wrote_line(['decisions', 'rejects'])}"
    )
    return 0


def per_operation(table: DataFrame) -> list[dict[str, Any]]:
    """Per operation: requests allowed, denied, and the requirements most often unmet (at most 3).

    One job: a row per unmet requirement of a denied request (and one for a request with none),
    counted by operation, decision and requirement; the first row of each request counts it."""
    from pyspark.sql import functions as F

    rows = (
        table.select(
            "operation",
            "decision",
            F.posexplode_outer(F.when(F.col("decision") == "deny", F.col("unmet"))).alias("position", "u"),
        )
        .groupBy("operation", "decision", F.col("u.requirement").alias("requirement"), F.col("u.text").alias("text"))
        .agg(
            F.count("*").alias("count"),
            F.sum(F.when(F.coalesce(F.col("position"), F.lit(0)) == 0, 1).otherwise(0)).alias("requests"),
        )
        .collect()
    )
    counts: dict[str, dict[str, int]] = {}
    for row in rows:
        found = counts.setdefault(row["operation"], {"allow": 0, "deny": 0})
        found[row["decision"]] += int(row["requests"])
    unmet = [r for r in rows if r["decision"] == "deny" and r["requirement"] is not None]
    top: dict[str, list[dict[str, Any]]] = {}
    for row in sorted(unmet, key=lambda r: (-int(r["count"]), r["requirement"])):
        found_top = top.setdefault(row["operation"], [])
        if len(found_top) < TOP_UNMET:
            found_top.append({"requirement": row["requirement"], "text": row["text"], "requests": int(row["count"])})
    return [
        {"operation": op, "allowed": n["allow"], "denied": n["deny"], "unmet": top.get(op, [])}
        for op, n in sorted(counts.items())
    ]


TOP_UNMET = 3


def cmd_visibility(args: argparse.Namespace) -> int:
    policy = dsl.load_policy(args.policy)
    with running(args, "visibility") as context:
        vocabulary = Vocabulary(policy, context.instance)
        engine = context.engine(policy)
        deployment = load_world(context, vocabulary, args)
        shown = facade.visibility(context.spark, engine, deployment, context.progress)
        written = context.write("visibility", shown)
        rejects = context.write_rejects()
        used, rejected = world_counts(context, deployment, rejects)
        inputs = context.balanced(used, rejected)
        context.finish([(args.policy, policy)], inputs)
        context.progress("done")
    print(
        f"{written.rows:,} (principal, entity) pairs visible; {context.run.outputs['rejects'].rows:,} rows rejected; "
        f"{context.wrote_line(['visibility', 'rejects'])}"
    )
    return 0


def cmd_impact(args: argparse.Namespace) -> int:
    from pyspark.sql import functions as F

    left, right = dsl.load_policy(args.left), dsl.load_policy(args.right)
    with running(args, "impact") as context:
        raw = context.table(args.requests, "requests")
        assert raw is not None
        numbered = number_requests(raw)
        decided: list[DataFrame] = []
        deployments = []
        for name, policy in ((args.left, left), (args.right, right)):
            context.progress(f"deciding under {name}")
            vocabulary = Vocabulary(policy, context.instance)
            # the world's rows are checked by CDAP's id forms and actions alone: report its bad rows once
            deployment = load_world(context, vocabulary, args, report=name == args.left, name=name)
            deployments.append(deployment)
            requests = check_requests(context.spark, vocabulary, numbered)
            context.rejects.append(requests.rejects.withColumn("reason", F.concat(F.lit(f"{name}: "), F.col("reason"))))
            result = facade.decide(
                context.spark, context.engine(policy), deployment, requests, context.progress, witnesses=False
            )
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
        context.write("changes", changes)
        written = context.read_back("changes")
        by_operation = written.groupBy("operation").agg(
            F.sum(F.when(F.col("decision_a") == "allow", 1).otherwise(0)).alias("allow_to_deny"),
            F.sum(F.when(F.col("decision_a") == "deny", 1).otherwise(0)).alias("deny_to_allow"),
            F.sum(F.col("requests").cast("long")).alias("log_rows"),
        )
        compared = both.groupBy("operation").agg(F.count("*").alias("compared"))
        by_operation = compared.join(by_operation, on="operation", how="left").fillna(0).orderBy("operation")
        rows = by_operation.collect()
        context.write("by_operation", context.spark.createDataFrame(rows, by_operation.schema).coalesce(1))
        rejects = context.write_rejects()
        world_used, world_rejected = world_counts(context, deployments[0], rejects)
        used: dict[str, Any] = dict(world_used)
        rejected: dict[str, Any] = dict(world_rejected)
        context.progress("counting each policy's decisions (the rows-in check)")
        used["requests"] = {name: d.count() for name, d in zip((args.left, args.right), decided, strict=True)}
        rejected["requests"] = {
            name: rejects.where((F.col("table") == "requests") & F.col("reason").startswith(f"{name}: ")).count()
            for name in (args.left, args.right)
        }
        inputs = context.balanced(used, rejected)
        context.finish([(args.left, left), (args.right, right)], inputs)
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
    print(
        f"{total:,} changed; {context.run.outputs['rejects'].rows:,} rows rejected; "
        f"{context.wrote_line(['changes', 'by_operation', 'rejects'])}"
    )
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


def register(sub: Any, read_by: WorldReading | None = None) -> None:
    """Add ``privilog pipeline`` (decide, visibility, impact) and ``privilog generate``; ``read_by``: the
    world of ``--world`` as each policy reads it (the command line's: an imported Ranger world read as
    CDAP grants by a policy that does not read Ranger's facts; without it, the world as it is)."""
    from privilog.pipeline import generate, report, show, unused

    p = sub.add_parser(
        "pipeline",
        help="a policy over a whole deployment, on Spark: decide, visibility, impact; show and report a run",
        description="Evaluate a policy over a deployment's tables on Apache Spark (local mode by default), "
        "and print or report the tables of a run (show, report).",
    )
    p.set_defaults(read_by=read_by)
    commands = p.add_subparsers(dest="pipeline_command", required=True, parser_class=type(p))

    def common(q: argparse.ArgumentParser, requests: bool, policy: bool = True) -> None:
        q.add_argument(
            "--world",
            metavar="WORLD",
            help="the deployment as a world file (YAML or JSON) or a folder of tables, instead of --entities, "
            "--grants, --members, --config and --facts; a policy that does not read an imported Ranger world's "
            "facts decides on their allow items as CDAP grants, as `privilog diff` does",
        )
        q.add_argument("--entities", help="the inventory: a table with the column entity" + catalog_inputs)
        q.add_argument("--grants", help="a table with the columns principal, action, entity (with --entities)")
        q.add_argument("--members", help="a table with the columns principal, group")
        q.add_argument(
            "--config",
            metavar="FILE",
            help="the deployment's settings the policy reads (YAML or JSON: KEY: VALUE or a list), "
            "as a world's `config:`, such as `superusers: [user:ann]`",
        )
        q.add_argument(
            "--facts",
            metavar="FOLDER",
            help="rows of relations the policy declares as its own, as a world's `facts:`: a folder of "
            "RELATION.csv (no header) or RELATION.jsonl files (docs/worlds.md)",
        )
        if requests:
            q.add_argument(
                "--requests",
                required=True,
                help="the access log: principal, operation, entity, and optionally args (JSON) and timestamp",
            )
        q.add_argument(
            "--out",
            help="the run's folder: written beside it, then moved into place whole, with run.json",
        )
        q.add_argument("--out-format", choices=FORMATS, default="parquet", help="the tables' format (default parquet)")
        q.add_argument(
            "--out-table",
            metavar="DB.PREFIX",
            help="instead of --out: the run's tables in the catalog, DB.PREFIX_decisions, ..., and its manifest "
            "as a row of DB.PREFIX_runs",
        )
        q.add_argument(
            "--table-mode",
            choices=MODES,
            default="append",
            help="--out-table: add this run to the tables (each row with its run_id), or replace them (default append)",
        )
        if policy:
            q.add_argument("--policy", default="cdap", help="a policy in rules/ (default cdap) or a path")
        q.add_argument("--format", choices=FORMATS, help="the input format (default: from each file's name)")
        spark_options(q)
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

    catalog_inputs = "; any input may be table:NAME, a table of the session's catalog"
    q = commands.add_parser(
        "decide",
        help="decide every request of an access log",
        description="Decide every request: OUT/decisions (the request, allow or deny, each unmet "
        "requirement with the entities it lacks, and the policy's own deny rules that deny it, by FILE:LINE) "
        "and OUT/rejects.",
    )
    common(q, requests=True)
    q.add_argument(
        "--no-allowed-by",
        action="store_true",
        help="leave allowed_by empty (null): the decisions and unmet requirements alone, without finding and "
        "naming a grant behind each allowed request",
    )
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
    q = commands.add_parser(
        "show",
        help="print a run's tables (without Spark)",
        description="Print a pipeline run's tables, read with pyarrow, without starting Spark. Without TABLE: "
        "what the run read and wrote (its run.json) and the first rows of each table.",
    )
    q.add_argument("out", metavar="OUT", help="a run's folder (the --out of decide, visibility or impact)")
    q.add_argument("table", metavar="TABLE", nargs="?", help="one table of the run (default: all, in brief)")
    q.add_argument("--limit", type=int, default=None, metavar="N", help="rows to print per table (0: all)")
    q.add_argument("--json", action="store_true", help="rows as JSON lines (without TABLE: the manifest)")
    q.set_defaults(run=show.cmd_show)
    unused.register(commands, common, _reported)
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
