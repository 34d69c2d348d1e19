"""``privilog pipeline unused``: least privilege over a deployment's whole access log, on Spark.

The same analysis as ``privilog unused`` (:mod:`engine.leastprivilege`), fed from Spark:

1. every request is decided by the same plans as ``decide``; then one copy of each distinct allowed
   request goes through a fused plan of its own that keeps every grant that can meet each of its
   requirements (:func:`~privilog.engine.spark.decisions.needs_of`), a row per need and grant;
2. Spark reduces them to what the analysis reads (:class:`~privilog.engine.leastprivilege.Evidence`):
   the grants used, the requests each sole grant is the only way for (a count over every copy, and
   the first three), the requests of each principal, the log's window, and whole only the needs no
   sole grant meets (the rest cannot change the keep set);
3. the driver chooses the keep set from the distinct needs, exactly as in memory, so the two
   commands give the same answers (tests/spark/test_unused.py holds them to it);
4. ``--verify`` removes the recommended grants from the deployment and decides the whole log
   again: no request allowed before may be denied.

It writes ``unused``, ``sole``, ``removals``, ``principals`` and ``rejects`` (and run.json).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from privilog import dsl
from privilog.engine.accesslog import Rejected
from privilog.engine.decision import Request
from privilog.engine.ids import EntityId
from privilog.engine.leastprivilege import EXACT_LIMIT, EXAMPLES, Evidence, Held, Report, report
from privilog.engine.spark import facade
from privilog.engine.world import Grant
from privilog.pipeline.context import Context, load_inputs, running, world_counts
from privilog.pipeline.inputs import CheckedDeployment, Requests, Vocabulary
from privilog.pipeline.tables import Progress
from privilog.usage import EXIT_DENY, EXIT_OK, add_least_privilege_options

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from privilog.engine.spark.facade import SparkEngine

SHOWN = 20  # requests listed when --verify finds some denied (there should be none)

DESCRIPTION = (
    "Least privilege over a deployment's access log, on Spark: OUT/unused (grants no allowed request "
    "could have used, with the log's window), OUT/sole (grants some allowed request cannot do without: how "
    "many, and examples), OUT/removals (a set of grants that can all be removed together while every "
    "request allowed in the log stays allowed; exact, or greedy with its bound on large parts), "
    "OUT/principals (grants held, used and unused by each user, group and role, and who made no request) "
    "and OUT/rejects. The same answers as `privilog unused`. Denied requests are counted, never used to keep "
    "a grant. Exit 0 once answered, 1 when --verify finds a request the removals would deny."
)


def register(commands: Any, common: Any, reported: Any) -> None:
    """Add ``privilog pipeline unused`` (``common`` adds the options every pipeline command shares)."""
    q = commands.add_parser(
        "unused",
        help="least privilege: grants the log never used, and which can all be removed together",
        description=DESCRIPTION,
    )
    common(q, requests=True)
    add_least_privilege_options(
        q, "remove the recommended grants from the deployment and decide the whole log again", EXACT_LIMIT
    )
    q.set_defaults(run=reported(cmd_unused))


def cmd_unused(args: argparse.Namespace) -> int:
    from pyspark.sql import functions as F

    from privilog.engine.spark.session import persist
    from privilog.render.unused import render_unused, unused_json

    policy = dsl.load_policy(args.policy)
    with running(args, "unused") as context:
        vocabulary = Vocabulary(policy, context.instance)
        engine = context.engine(policy)
        deployment, requests = load_inputs(context, vocabulary, args)
        distinct = _distinct(requests).transform(persist)
        decided = facade.decide(
            context.spark,
            engine,
            deployment,
            requests,
            context.progress,
            witnesses=False,
            needs_for=distinct.select("rid"),
        )
        table = persist(decided.table)
        assert decided.needs is not None
        context.progress("gathering what the log says of the grants: used grants, sole grants, requests made")
        holdings, grants = _holdings(deployment)
        evidence, window = _evidence(table, decided.needs, distinct, grants, requests, context.progress)
        context.progress(f"choosing the grants to keep among {len(evidence.needs):,} distinct needs")
        found = report(holdings, evidence, args.exact_limit)
        found.window = window
        verified: tuple[int, list[Request]] | None = None
        if args.verify:
            verified = _verify(context, engine, deployment, requests, table, found.removals)
        _write(context, found)
        rejects = context.write_rejects()
        of_log = rejects.where(F.col("table") == "requests")
        found.rejected = of_log.count()
        rejected = [
            Rejected(f"{_path(r['file'])}:{r['row_number']}", r["reason"])
            for r in of_log.orderBy("file", "row_number").limit(SHOWN).collect()
        ]
        used, refused = world_counts(context, deployment, rejects)
        used["requests"] = found.requests
        refused["requests"] = found.rejected
        inputs = context.balanced(used, refused)
        summary = found.summary()
        context.finish(
            [(args.policy, policy)],
            inputs,
            least_privilege={
                **summary,
                "window": list(window) if window else None,
                "verify": None if verified is None else {"changed": verified[0]},
            },
        )
        context.progress("done")
    changed, shown = verified if verified is not None else (None, None)
    if args.json:
        print(json.dumps(unused_json(found, rejected, shown)))
    else:
        print(render_unused(found, rejected, shown, changed, rejects_in=f"{context.rejects_at()} has every one"))
        print(context.wrote_line(["unused", "sole", "removals", "principals", "rejects"]))
    if verified and verified[0]:
        print(f"privilog: unused: {verified[0]:,} allowed requests would be denied: please report it", file=sys.stderr)
        return EXIT_DENY
    return EXIT_OK


def _path(file: str | None) -> str:
    """A reject's file as a path (Spark names it by URI)."""
    return (file or "?").removeprefix("file://").removeprefix("file:")


def _holdings(deployment: CheckedDeployment) -> tuple[Held, dict[tuple[int, int, int], Grant]]:
    """The deployment's grants (each action of ALL its own), and every principal it names; the grants by code."""
    rows = deployment.grant_codes().collect()
    grants = {
        (r["k0"], r["k1"], r["k2"]): Grant(r["principal"], r["action"], EntityId.parse(r["entity"])) for r in rows
    }
    named = frozenset(r["principal"] for r in deployment.principals.collect())
    return Held(frozenset(grants.values()), named), grants


def _distinct(requests: Requests) -> DataFrame:
    """One row per distinct request of the log (principal, operation, entity and arguments as written):
    ``rid``, its first copy's; ``copies``; ``first``, the rids of its first copies (at most
    ``EXAMPLES``). Copies need the same grants, so the needs are gathered for the first copy alone."""
    from pyspark.sql import functions as F

    return (
        requests.good.groupBy("principal", "operation", "entity", F.coalesce(F.col("args"), F.lit("")).alias("text"))
        .agg(
            F.min("rid").alias("rid"),
            F.count("*").alias("copies"),
            F.slice(F.array_sort(F.collect_list("rid")), 1, EXAMPLES).alias("first"),
        )
        .select("rid", "copies", "first")
    )


def _evidence(
    table: DataFrame,
    needs: DataFrame,
    distinct: DataFrame,
    grants: dict[tuple[int, int, int], Grant],
    requests: Requests,
    progress: Progress,
) -> tuple[Evidence, tuple[str, str] | None]:
    """What the log says of the grants, reduced on Spark; the log's first and last timestamp.

    ``needs`` are a row per grant of each need (:func:`~privilog.engine.spark.decisions.needs_of`) of
    each distinct request's first copy (``distinct``): a sole grant's count adds up the copies, and
    its examples are the first rids of all of them. Only the needs no sole grant meets are gathered
    whole to the driver (:class:`Evidence`: they are all the keep set can choose among); the grants
    used are the distinct grants of every need, counted on Spark."""
    from pyspark.sql import functions as F

    from privilog.engine.spark.session import persist

    def grant(struct: Any) -> Grant:
        try:
            return grants[(struct["p"], struct["a"], struct["e"])]
        except KeyError:  # a need is made of the deployment's grants: anything else is a bug
            raise AssertionError(f"a need names a grant the deployment does not hold: {struct}") from None

    evidence = Evidence()
    counts = table.agg(
        F.count("*").alias("requests"),
        F.sum(F.when(F.col("decision") == "allow", 1).otherwise(0)).alias("allowed"),
        F.min(F.when(F.col("timestamp") != "", F.col("timestamp"))).alias("first"),
        F.max(F.when(F.col("timestamp") != "", F.col("timestamp"))).alias("last"),
    ).collect()[0]
    evidence.requests, evidence.allowed = int(counts["requests"]), int(counts["allowed"] or 0)
    for row in table.groupBy("principal").count().collect():
        evidence.made[row["principal"]] = int(row["count"])
    need = ["rid", "i", "c"]
    code = ["p", "a", "e"]
    evidence.used = {grant(row) for row in needs.select(*code).distinct().collect()}
    sizes = needs.groupBy(*need).agg(F.count("*").alias("n"), *(F.first(c).alias(c) for c in code))
    sole = (
        sizes.where(F.col("n") == 1)
        .select("rid", *code)
        .distinct()
        .join(distinct, on="rid")
        .groupBy(*code)
        .agg(
            F.sum("copies").alias("count"),
            F.slice(F.array_sort(F.flatten(F.collect_list("first"))), 1, EXAMPLES).alias("first"),
        )
    ).transform(persist)
    counted = {grant(row): int(row["count"]) for row in sole.select(*code, "count").collect()}
    first = sole.select(*code, F.explode("first").alias("rid")).join(
        table.select("rid", "principal", "operation", "entity"), on="rid"
    )
    arguments = requests.args.groupBy("rid").agg(F.collect_list(F.struct("name", "value")).alias("args"))
    examples: dict[Grant, list[tuple[int, Request]]] = {}
    for row in first.join(arguments, on="rid", how="left").collect():
        request = Request(
            row["principal"],
            row["operation"],
            EntityId.parse(row["entity"]),
            tuple(sorted((a["name"], a["value"]) for a in row["args"] or ())),
        )
        examples.setdefault(grant(row), []).append((row["rid"], request))
    for mine, count in counted.items():
        evidence.sole[mine] = (count, tuple(r for _, r in sorted(examples[mine], key=lambda x: x[0])))
        evidence.needs.add(frozenset([mine]))
    progress(f"{len(evidence.used):,} grants used, {len(counted):,} sole; gathering the needs no sole grant meets")
    met = needs.join(F.broadcast(sole.select(*code)), on=code, how="left_semi").select(*need).distinct()
    rest = (
        needs.join(met, on=need, how="left_anti")
        .groupBy(*need)
        .agg(F.array_sort(F.collect_set(F.struct(*code))).alias("grants"))
        .select("grants")
        .distinct()
    )
    for row in rest.toLocalIterator():
        evidence.needs.add(frozenset(grant(g) for g in row["grants"]))
    sole.unpersist()
    window = (counts["first"], counts["last"]) if counts["first"] is not None else None
    return evidence, window


def _verify(
    context: Context,
    engine: SparkEngine,
    deployment: CheckedDeployment,
    requests: Requests,
    before: DataFrame,
    removals: list[Grant],
) -> tuple[int, list[Request]]:
    """Decide the log again without ``removals``: how many requests allowed before are denied, and some."""
    from pyspark.sql import functions as F

    context.progress(f"verifying: deciding the log again without the {len(removals):,} grants recommended")
    gone = context.spark.createDataFrame(
        [(g.principal, g.action, str(g.entity)) for g in removals], "principal string, action string, entity string"
    )
    after = facade.decide(context.spark, engine, deployment.without(gone), requests, context.progress, witnesses=False)
    denied = after.table.where(F.col("decision") == "deny").select("rid")
    changed = before.where(F.col("decision") == "allow").join(denied, on="rid", how="left_semi")
    count = changed.count()
    shown = [
        Request(r["principal"], r["operation"], EntityId.parse(r["entity"]))
        for r in changed.orderBy("rid").limit(SHOWN).collect()
    ]
    for df in after.cached:
        df.unpersist()
    context.progress(f"verified: {count:,} allowed requests denied without the removals")
    return count, shown


def _write(context: Context, found: Report) -> None:
    """The run's tables, from the report."""
    grant = "principal string, action string, entity string"
    start, end = found.window or (None, None)
    unused = set(found.unused)
    request = "struct<principal: string, operation: string, entity: string, args: map<string, string>>"
    tables: dict[str, tuple[str, list[tuple[object, ...]]]] = {
        "unused": (
            f"{grant}, window_start string, window_end string",
            [(g.principal, g.action, str(g.entity), start, end) for g in found.unused],
        ),
        "sole": (
            f"{grant}, requests long, examples array<{request}>",
            [
                (
                    *(s.grant.principal, s.grant.action, str(s.grant.entity), s.requests),
                    [(r.principal, r.operation, str(r.entity), dict(r.args)) for r in s.examples],
                )
                for s in found.sole
            ],
        ),
        "removals": (
            f"{grant}, used boolean",
            [(g.principal, g.action, str(g.entity), g not in unused) for g in found.removals],
        ),
        # active: a user made a request in the window (null for groups and roles, who make none)
        "principals": (
            "principal string, kind string, held long, used long, unused long, requests long, active boolean",
            [
                (
                    p.principal,
                    _kind(p.principal),
                    p.held,
                    p.used,
                    p.unused,
                    p.requests,
                    p.requests > 0 if _kind(p.principal) == "user" else None,
                )
                for p in found.principals
            ],
        ),
    }
    for name, (schema, rows) in tables.items():
        context.write(name, context.spark.createDataFrame(rows, schema).coalesce(1))


def _kind(principal: str) -> str:
    return principal.partition(":")[0]
