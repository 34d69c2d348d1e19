"""The decisions of ``cdap.policy`` as a data engineer would write them by hand, in Spark SQL.

This is the yardstick for ``privilog pipeline decide``: the same inputs, the same
output table (each request, allow or deny, each unmet requirement with the entities
it lacks), written for this one policy and this one data shape:

* ids stay strings; what encloses an entity is cut out of its id with string
  functions (CDAP's ids say it), so no closure is computed;
* group membership is two levels deep (users in groups, groups in roles), as the
  generated deployments have it, so the closure is one self-join;
* the requirement table is data, inline ``VALUES`` (typed in by hand, in effect;
  taken from the policy's tables here to save typing): operation, requirement,
  action, scope, parameter; the guards; each requirement's text;
* the inputs are assumed clean: no validation, no rejects.

It is checked against the pipeline's output in the benchmark (the same decisions,
request by request), so it is a fair yardstick, not a straw man.

Run on its own, in a process of its own, as the benchmark runs it::

    python3 -m benchmarks.pipeline.handwritten decide --entities E --grants G --members M --requests R --out OUT
    python3 -m benchmarks.pipeline.handwritten compare --pipeline A/decisions --handwritten B/decisions --out C.json

``decide`` reads the tables as the pipeline reads them, in a session made as the
pipeline makes it, and writes ``OUT/decisions``; ``compare`` counts the requests two
decision tables decide differently.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privilog.dsl.format import format_alternatives
from privilog.dsl.ir import Policy
from privilog.engine.program import table_facts

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TRUE_WORDS = "('true', 'yes', '1', 'on')"  # engine.authorizer.TRUE_WORDS

# What encloses an entity, cut from its id: `t` is its type, `n` its name (after the colon).
ENCLOSING = """filter(array(
    CASE WHEN t IN ('program', 'schedule') THEN concat('application:', substring_index(n, '.', 2)) END,
    CASE WHEN t NOT IN ('namespace', 'instance', 'kerberosprincipal') THEN concat('namespace:', substring_index(n, '.', 1)) END,
    CASE WHEN t NOT IN ('instance', 'kerberosprincipal') THEN 'instance:cdap' END), x -> x IS NOT NULL)"""  # noqa: E501

SQL = f"""
-- every entity that exists: those listed, and what encloses them
CREATE OR REPLACE TEMP VIEW existing AS
SELECT DISTINCT entity FROM (
  SELECT explode(array_union(array(entity), {ENCLOSING})) AS entity
  FROM (SELECT entity, substring_index(entity, ':', 1) AS t, substr(entity, instr(entity, ':') + 1) AS n
        FROM entities));

CREATE OR REPLACE TEMP VIEW descendants AS  -- (entity, something existing inside it, its type)
SELECT explode({ENCLOSING}) AS entity, entity AS inside, t AS type
FROM (SELECT entity, substring_index(entity, ':', 1) AS t, substr(entity, instr(entity, ':') + 1) AS n FROM existing);

-- what each principal holds, itself or through a group or a role (two levels)
CREATE OR REPLACE TEMP VIEW grant_rows AS
SELECT principal, explode(CASE WHEN action = 'ALL' THEN array('READ', 'WRITE', 'EXECUTE', 'ADMIN')
                               ELSE array(action) END) AS action, entity
FROM grants;

CREATE OR REPLACE TEMP VIEW memberships AS
SELECT principal, `group` FROM members
UNION
SELECT m1.principal, m2.`group` FROM members m1 JOIN members m2 ON m1.`group` = m2.principal;

CREATE OR REPLACE TEMP VIEW held AS
SELECT DISTINCT principal, action, entity FROM (
  SELECT principal, action, entity FROM grant_rows
  UNION ALL
  SELECT m.principal, g.action, g.entity FROM memberships m JOIN grant_rows g ON g.principal = m.`group`);

CREATE OR REPLACE TEMP VIEW held_below AS  -- a grant on something inside an entity
SELECT h.principal, h.action, d.entity FROM held h JOIN descendants d ON d.inside = h.entity;

CREATE OR REPLACE TEMP VIEW granted_within AS  -- (entity, an id a grant names inside it, existing or not)
SELECT explode({ENCLOSING}) AS entity, entity AS inside
FROM (SELECT DISTINCT entity, substring_index(entity, ':', 1) AS t, substr(entity, instr(entity, ':') + 1) AS n
      FROM grants);

CREATE OR REPLACE TEMP VIEW held_within AS  -- a grant on an id inside an entity, existing or not
SELECT h.principal, h.action, w.entity FROM held h JOIN granted_within w ON w.inside = h.entity;

-- each request with its arguments, and each option of each requirement it must meet
CREATE OR REPLACE TEMP VIEW req AS
SELECT rid, principal, operation, entity, substr(entity, instr(entity, ':') + 1) AS name,
       from_json(args, 'map<string,string>') AS arg
FROM requests;

CREATE OR REPLACE TEMP VIEW applying AS  -- the requirements that apply to each request
SELECT DISTINCT r.rid, q.requirement
FROM req r JOIN requirements q ON q.operation = r.operation
LEFT JOIN guards g ON g.requirement = q.requirement
WHERE g.requirement IS NULL
   OR (g.polarity = 'present') = (r.arg[g.argument] IS NOT NULL
                                  AND (NOT g.bool OR lower(trim(r.arg[g.argument])) IN {TRUE_WORDS}));

CREATE OR REPLACE TEMP VIEW options AS
SELECT r.rid, r.principal, r.entity, q.requirement, q.action, q.scope, q.param,
       CASE q.scope WHEN 'self' THEN r.entity
                    WHEN 'self_or_descendant' THEN r.entity
                    WHEN 'self_or_within' THEN r.entity
                    WHEN 'arg' THEN r.arg[q.param]
                    WHEN 'ancestor' THEN CASE q.param
                        WHEN 'application' THEN concat('application:', substring_index(r.name, '.', 2))
                        WHEN 'namespace' THEN concat('namespace:', substring_index(r.name, '.', 1)) END
       END AS target
FROM req r JOIN requirements q ON q.operation = r.operation;

CREATE OR REPLACE TEMP VIEW met AS
SELECT DISTINCT rid, requirement FROM (
  SELECT o.rid, o.requirement FROM options o
  JOIN held h ON h.principal = o.principal AND h.action = o.action AND h.entity = o.target
  WHERE o.scope <> 'every'
  UNION ALL
  SELECT o.rid, o.requirement FROM options o
  JOIN held_below b ON b.principal = o.principal AND b.action = o.action AND b.entity = o.target
  WHERE o.scope = 'self_or_descendant'
  UNION ALL
  SELECT o.rid, o.requirement FROM options o
  JOIN held_within w ON w.principal = o.principal AND w.action = o.action AND w.entity = o.target
  WHERE o.scope = 'self_or_within');

-- "every": each existing entity inside the request's entity (of a type) must be held
CREATE OR REPLACE TEMP VIEW covered AS
SELECT DISTINCT o.rid, o.principal, o.requirement, d.inside
FROM options o JOIN descendants d ON d.entity = o.entity
WHERE o.scope = 'every' AND (o.param = '*' OR d.type = o.param);

CREATE OR REPLACE TEMP VIEW covered_held AS
SELECT DISTINCT c.rid, c.requirement, c.inside
FROM covered c
JOIN options o ON o.rid = c.rid AND o.requirement = c.requirement AND o.scope = 'every'
JOIN held h ON h.principal = c.principal AND h.action = o.action AND h.entity = c.inside;

CREATE OR REPLACE TEMP VIEW lacking AS
SELECT c.rid, c.requirement, c.inside FROM covered c
LEFT ANTI JOIN covered_held k ON k.rid = c.rid AND k.requirement = c.requirement AND k.inside = c.inside;

CREATE OR REPLACE TEMP VIEW lacking_lists AS
SELECT rid, requirement, sort_array(collect_set(inside)) AS lacking FROM lacking GROUP BY rid, requirement;

CREATE OR REPLACE TEMP VIEW unmet AS  -- applies, not met, and not an "every" that lacks nothing
SELECT a.rid, a.requirement, t.text, coalesce(l.lacking, array()) AS lacking
FROM applying a JOIN requirement_text t ON t.requirement = a.requirement
LEFT ANTI JOIN met m ON m.rid = a.rid AND m.requirement = a.requirement
LEFT JOIN lacking_lists l ON l.rid = a.rid AND l.requirement = a.requirement
WHERE NOT t.every OR l.rid IS NOT NULL;

CREATE OR REPLACE TEMP VIEW unmet_rows AS
SELECT rid, sort_array(collect_list(struct(requirement, text, lacking))) AS unmet FROM unmet GROUP BY rid;

CREATE OR REPLACE TEMP VIEW handwritten_decisions AS
SELECT r.principal, r.operation, r.entity, r.args, r.timestamp,
       CASE WHEN u.rid IS NULL THEN 'allow' ELSE 'deny' END AS decision,
       coalesce(u.unmet, array()) AS unmet
FROM requests r LEFT JOIN unmet_rows u ON u.rid = r.rid;
"""


def _values(rows: Sequence[tuple[str | bool, ...]], columns: str) -> str:
    """Rows as an inline table, as one would type them into a query."""

    def literal(value: str | bool) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"

    body = ",\n  ".join("(" + ", ".join(literal(v) for v in row) + ")" for row in rows)
    return f"SELECT * FROM VALUES\n  {body}\nAS t({columns})"


def policy_tables(policy: Policy) -> dict[str, str]:
    """The policy's tables as inline ``VALUES``: what a data engineer would type in by hand.

    Taken from the compiled policy here to save typing; a literal table is small and
    known to be so, so Spark broadcasts it into every join.
    """
    facts, index = table_facts(policy)
    bools = {p.name for op in policy.operations for p in op.params if p.type == "bool"}
    texts = []
    for rid, (_op, requirement) in sorted(index.items()):
        text = format_alternatives(requirement.options)
        if requirement.condition is not None:
            text += f" if {requirement.condition}"
        every = any(t.every for o in requirement.options for t in o.targets)
        texts.append((rid, text, every))
    return {
        "requirements": _values(sorted(facts["requires"]), "operation, requirement, action, scope, param"),
        "guards": _values(
            [(*g, g[1] in bools) for g in sorted(facts["guard"])], "requirement, argument, polarity, bool"
        ),
        "requirement_text": _values(texts, "requirement, text, every"),
    }


def decide(spark: SparkSession, tables: dict[str, DataFrame], policy: Policy) -> DataFrame:
    """The decisions table, from tables named entities, grants, members and requests (with rid)."""
    for name, df in tables.items():
        df.createOrReplaceTempView(name)
    for name, query in policy_tables(policy).items():
        spark.sql(f"CREATE OR REPLACE TEMP VIEW {name} AS {query}")
    for statement in SQL.split(";"):
        if statement.strip():
            spark.sql(statement)
    return spark.table("handwritten_decisions")


# ---- command line ---------------------------------------------------------------------

KEY = ("principal", "operation", "entity", "args", "timestamp")  # a request (timestamps are unique)


def cmd_decide(args: argparse.Namespace) -> int:
    """Decide the requests with the hand-written query; progress lines as the pipeline prints them."""
    from privilog import dsl
    from privilog.pipeline.inputs import number_requests
    from privilog.pipeline.tables import Progress, read_table, spark_session

    policy = dsl.load_policy(args.policy)
    progress = Progress(quiet=args.quiet)
    progress("starting Spark (local[*])")
    spark = spark_session(None, args.driver_memory, args.partitions)
    if args.adaptive:
        spark.conf.set("spark.sql.adaptive.enabled", "true")
    tables: dict[str, DataFrame] = {}
    for table in ("entities", "grants", "members", "requests"):
        tables[table] = read_table(spark, getattr(args, table), None, table)
        progress(f"reading {table} from {getattr(args, table)}")
    tables["requests"] = number_requests(tables["requests"])
    target = Path(args.out) / "decisions"
    decide(spark, tables, policy).write.mode("overwrite").parquet(str(target))
    progress("wrote the decisions")
    counts = {
        r["decision"]: int(r["n"])
        for r in spark.read.parquet(str(target)).groupBy("decision").count().withColumnRenamed("count", "n").collect()
    }
    progress("done")
    print(
        f"decided {sum(counts.values()):,} requests: {counts.get('allow', 0):,} allowed, "
        f"{counts.get('deny', 0):,} denied; wrote {target}"
    )
    return 0


def compare(pipeline: DataFrame, handwritten: DataFrame, examples: int = 5) -> dict[str, Any]:
    """Counts of the requests two decision tables hold and decide differently, with a few examples.

    Requests are matched on all their columns (null-safe: ``args`` may be null). A
    request differs when one side lacks it, or on ``decision``, on the ids of its
    unmet requirements, or on the whole unmet list (texts and lacking entities too).
    A request held twice would join more rows than either side has: ``agree`` is
    false then too. One pass over the join, a second only to show examples.
    """
    from pyspark.sql import functions as F

    def side(df: DataFrame, name: str) -> DataFrame:
        return df.select(
            *KEY,
            F.col("decision").alias(f"{name}_decision"),
            F.array_sort(F.transform("unmet", lambda u: u["requirement"])).alias(f"{name}_ids"),
            F.to_json(F.col("unmet")).alias(f"{name}_unmet"),
            F.lit(True).alias(f"{name}_present"),
        )

    a, b = side(pipeline, "pipeline"), side(handwritten, "handwritten")
    condition = [a[c].eqNullSafe(b[c]) for c in KEY]
    both = a.join(b, condition, "full_outer").select(
        *(F.coalesce(a[c], b[c]).alias(c) for c in KEY), *(x for x in a.columns + b.columns if x not in KEY)
    )
    flags = {
        "only_pipeline": F.col("handwritten_present").isNull(),
        "only_handwritten": F.col("pipeline_present").isNull(),
        "decision_differs": F.col("pipeline_decision") != F.col("handwritten_decision"),
        "unmet_ids_differ": F.col("pipeline_ids") != F.col("handwritten_ids"),
        "unmet_differs": F.col("pipeline_unmet") != F.col("handwritten_unmet"),
    }
    differs = F.lit(False)
    for flag in flags.values():
        differs = differs | F.coalesce(flag, F.lit(False))
    flags["differing"] = differs
    row = both.agg(
        F.count("*").alias("joined_rows"),
        *(F.sum(F.when(flag, 1).otherwise(0)).alias(name) for name, flag in flags.items()),
    ).first()
    assert row is not None
    counts = {name: int(row[name] or 0) for name in ("joined_rows", *flags)}
    counts.update(pipeline_rows=pipeline.count(), handwritten_rows=handwritten.count())
    agree = counts["differing"] == 0 and counts["joined_rows"] == counts["pipeline_rows"] == counts["handwritten_rows"]
    shown = both.where(differs).limit(examples).collect() if counts["differing"] else []
    return {**counts, "agree": agree, "examples": [r.asDict() for r in shown]}


def cmd_compare(args: argparse.Namespace) -> int:
    """Compare two decision tables; the counts as JSON to ``--out`` (and stdout). Exit 1 unless they agree."""
    from privilog.pipeline.tables import Progress, spark_session

    progress = Progress(quiet=args.quiet)
    progress("starting Spark (local[*])")
    spark = spark_session(None, args.driver_memory, args.partitions)
    result = compare(spark.read.parquet(args.pipeline), spark.read.parquet(args.handwritten))
    text = json.dumps(result, indent=2, default=str)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text)
    progress("done")
    return 0 if result["agree"] else 1


def main(argv: Sequence[str] | None = None) -> int:
    """``decide`` or ``compare``, each in a Spark session of its own."""
    parser = argparse.ArgumentParser(prog="python3 -m benchmarks.pipeline.handwritten", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    q = commands.add_parser("decide", help="decide every request with the hand-written Spark SQL query")
    for table in ("entities", "grants", "members", "requests"):
        q.add_argument(f"--{table}", required=True, help=f"the {table} table (Parquet, CSV or JSON lines)")
    q.add_argument("--out", required=True, help="the folder to write OUT/decisions to")
    q.add_argument("--policy", default="cdap", help="the policy whose tables are typed in (default cdap)")
    q.add_argument("--adaptive", action="store_true", help="turn adaptive query execution back on")
    q.set_defaults(run=cmd_decide)
    c = commands.add_parser("compare", help="count the requests two decision tables decide differently")
    c.add_argument("--pipeline", required=True, help="the pipeline's decisions (Parquet)")
    c.add_argument("--handwritten", required=True, help="the hand-written query's decisions (Parquet)")
    c.add_argument("--out", help="write the counts and a few differing rows as JSON here")
    c.set_defaults(run=cmd_compare)
    for p in (q, c):
        p.add_argument("--driver-memory", default=None, help="Spark driver memory (default 4g)")
        p.add_argument("--partitions", type=int, default=None, help="Spark shuffle partitions (default 4)")
        p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
