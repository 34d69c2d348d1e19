"""``privilog generate``: a synthetic CDAP deployment of any size, the same for the same seed.

A deployment is four tables, in the formats ``privilog pipeline`` reads:

* ``entities`` (``entity``): namespaces, each with applications (their programs and
  schedules), datasets (some with dotted names), streams, artifacts, dataset
  modules and types, and secure keys; namespace sizes vary tenfold;
* ``grants`` (``principal, action, entity``): principals drawn by a Zipf law (the
  busiest hold thousands of grants, most hold a few), users and groups alike; actions
  that fit the entity's type (`ALL` now and then); owners holding ADMIN on everything
  in a namespace, others on part of one; 1 % on entities that do not exist (pre-grants);
* ``members`` (``principal, group``): users in zero to three groups, groups in roles;
* ``requests`` (``principal, operation, entity, args, timestamp``): an access log.
  Users act mostly on what they or their groups were granted, so a realistic share
  is allowed; reads, writes and program runs dominate, with gets, lists, creates
  (many of entities not in the inventory yet), deploys with their arguments (a JSON
  object), and a few deletes.

``--bad-rows N`` adds N deliberately bad rows to each table (malformed ids, unknown
actions and operations, an entity of the wrong type, arguments that are not JSON),
which the pipeline must reject rather than drop.

Rows are written as they are drawn, so ten million requests need little memory.
"""

from __future__ import annotations

import argparse
import bisect
import csv
import datetime as dt
import functools
import itertools
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from privilog import dsl
from privilog.dsl.ir import Operation, Policy
from privilog.engine.ids import PROGRAM_KINDS
from privilog.pipeline.tables import FORMATS, TABLES

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ACTIONS = ("READ", "WRITE", "EXECUTE", "ADMIN")

# The action mix of a grant, by the type of entity it is on (READ, WRITE, EXECUTE, ADMIN).
ACTION_WEIGHTS: dict[str, tuple[int, int, int, int]] = {
    "namespace": (3, 1, 1, 3),
    "application": (3, 1, 2, 4),
    "program": (2, 1, 5, 2),
    "schedule": (2, 1, 3, 2),
    "dataset": (5, 3, 0, 2),
    "dataset_module": (3, 1, 0, 2),
    "dataset_type": (4, 1, 0, 1),
    "stream": (5, 3, 0, 2),
    "artifact": (5, 1, 1, 3),
    "securekey": (4, 0, 0, 2),
    "kerberosprincipal": (1, 0, 0, 3),
}

# How often each operation appears in the access log (others: 1).
OPERATION_WEIGHTS: dict[str, int] = {
    "dataset.read": 240,
    "dataset.write": 120,
    "stream.read": 70,
    "stream.write": 90,
    "program.start": 60,
    "program.stop": 40,
    "program.get_status": 80,
    "program.get_runtime_args": 20,
    "namespace.get": 40,
    "application.get": 30,
    "dataset.get": 40,
    "artifact.get": 10,
    "securekey.read": 20,
    "dataset.list": 15,
    "application.list": 10,
    "namespace.list": 8,
    "dataset.create": 15,
    "stream.create": 6,
    "application.deploy": 12,
    "namespace.create": 2,
    "artifact.add": 4,
    "securekey.create": 4,
    "schedule.resume": 6,
    "schedule.suspend": 4,
    "dataset.truncate": 3,
    "dataset.drop": 3,
    "application.delete": 2,
    "namespace.delete": 1,
}
CREATES = {"create", "deploy", "add"}  # operations that usually name an entity not there yet


class Zipf:
    """Draws items with probability proportional to 1 / rank ** s.

    >>> z = Zipf(["a", "b", "c"], 1.0, random.Random(1))
    >>> sorted({z.draw() for _ in range(50)})
    ['a', 'b', 'c']
    """

    def __init__(self, items: Sequence[str], s: float, rng: random.Random):
        self.items = list(items)
        self.cumulative = list(itertools.accumulate(1.0 / (r + 1) ** s for r in range(len(self.items))))
        self.rng = rng

    def draw(self) -> str:
        x = self.rng.random() * self.cumulative[-1]
        return self.items[min(bisect.bisect_left(self.cumulative, x), len(self.items) - 1)]


@dataclass
class Deployment:
    """The drawn inventory, with the indexes the access log is drawn from."""

    entities: list[str] = field(default_factory=list)
    by_type: dict[str, list[str]] = field(default_factory=dict)
    by_namespace: dict[str, list[str]] = field(default_factory=dict)
    by_place: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # (namespace, type) -> entities
    by_application: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # (application, type)
    users: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    members: list[tuple[str, str]] = field(default_factory=list)
    groups_of: dict[str, list[str]] = field(default_factory=dict)
    held: dict[str, list[str]] = field(default_factory=dict)  # principal -> entities it holds grants on
    kerberos: list[str] = field(default_factory=list)

    def add(self, entity: str) -> None:
        self.entities.append(entity)
        kind, _, name = entity.partition(":")
        self.by_type.setdefault(kind, []).append(entity)
        namespace = name.split(".")[0]
        self.by_namespace.setdefault(namespace, []).append(entity)
        self.by_place.setdefault((namespace, kind), []).append(entity)
        if kind in ("program", "schedule"):
            application = ".".join(name.split(".")[:2])
            self.by_application.setdefault((application, kind), []).append(entity)


def _namespace(rng: random.Random, deployment: Deployment, name: str, scale: float) -> None:
    deployment.add(f"namespace:{name}")

    def count(low: int, high: int) -> int:
        return max(1, round(rng.randint(low, high) * scale))

    for a in range(count(3, 8)):
        app = f"{name}.app{a:02d}"
        deployment.add(f"application:{app}")
        for p in range(rng.randint(1, 5)):
            deployment.add(f"program:{app}.{rng.choice(PROGRAM_KINDS)}.p{p}")
        for s in range(rng.randint(0, 2)):
            deployment.add(f"schedule:{app}.sch{s}")
    for d in range(count(20, 60)):
        # some dataset names carry dots: the id splits at the first dot only
        deployment.add(f"dataset:{name}.ds{d:03d}" + (f".v{d % 3}" if d % 7 == 0 else ""))
    for s in range(count(4, 15)):
        deployment.add(f"stream:{name}.st{s:02d}")
    for s in range(count(3, 10)):
        deployment.add(f"artifact:{name}.art{s:02d}")
    for s in range(count(1, 4)):
        deployment.add(f"dataset_module:{name}.mod{s}")
        deployment.add(f"dataset_type:{name}.type{s}")
    for s in range(count(1, 5)):
        deployment.add(f"securekey:{name}.key{s}")


def draw_inventory(rng: random.Random, entities: int, grants: int) -> Deployment:
    """Namespaces until there are ``entities`` entities; principals in proportion to ``grants``."""
    deployment = Deployment()
    index = 0
    while len(deployment.entities) < entities:
        scale = rng.choice((0.1, 0.3, 1.0, 1.0, 2.0))
        _namespace(rng, deployment, f"ns{index:05d}", scale)
        index += 1
    del deployment.entities[entities:]
    deployment.users = [f"user:u{i:06d}" for i in range(max(10, grants // 20))]
    plain = [f"group:g{i:05d}" for i in range(max(3, grants // 400))]
    roles = [f"role:r{i:03d}" for i in range(max(1, grants // 20000))]
    deployment.groups = plain + roles
    for user in deployment.users:
        for group in rng.sample(plain, min(len(plain), rng.choice((0, 1, 1, 1, 2, 2, 3)))):
            deployment.members.append((user, group))
            deployment.groups_of.setdefault(user, []).append(group)
    for group in plain:
        if rng.random() < 0.2:
            role = rng.choice(roles)
            deployment.members.append((group, role))
            deployment.groups_of.setdefault(group, []).append(role)
    deployment.kerberos = [f"kerberosprincipal:svc{i}@EXAMPLE.COM" for i in range(max(2, grants // 5000))]
    return deployment


def draw_grants(rng: random.Random, deployment: Deployment, grants: int) -> Iterator[tuple[str, str, str]]:
    """``grants`` grant rows; principals by a Zipf law over users and groups."""
    ranked = deployment.users + deployment.groups
    rng.shuffle(ranked)
    zipf = Zipf(ranked, 1.0, rng)
    namespaces = deployment.by_type["namespace"]
    emitted = 0

    def grant(principal: str, action: str, entity: str) -> tuple[str, str, str]:
        deployment.held.setdefault(principal, []).append(entity)
        return (principal, action, entity)

    # Owners: ADMIN on a small namespace and all of it, or on part of it.
    for ns in rng.sample(namespaces, max(1, min(len(namespaces), grants // 2000))):
        inside = deployment.by_namespace[ns.partition(":")[2]]
        owner = rng.choice(deployment.users)
        partial = rng.random() < 0.5
        for entity in inside[: max(1, len(inside) // 2)] if partial else inside:
            if emitted < grants // 4:
                yield grant(owner, "ADMIN", entity)
                emitted += 1
    while emitted < grants:
        principal = zipf.draw()
        roll = rng.random()
        if roll < 0.01:  # a pre-grant: the entity does not exist (yet)
            ns = rng.choice(namespaces).partition(":")[2]
            entity = f"dataset:{ns}.future{rng.randrange(10**6)}"
        elif roll < 0.02:
            entity = rng.choice(deployment.kerberos)
        else:
            entity = rng.choice(deployment.entities)
        kind = entity.partition(":")[0]
        action = "ALL" if rng.random() < 0.02 else rng.choices(ACTIONS, ACTION_WEIGHTS[kind])[0]
        yield grant(principal, action, entity)
        emitted += 1


class RequestDrawer:
    """Draws access-log rows for the operations of a policy."""

    def __init__(self, rng: random.Random, deployment: Deployment, policy: Policy):
        self.rng = rng
        self.deployment = deployment
        self.operations = [op for op in policy.operations if op.entity_type in deployment.by_type]
        weights = [OPERATION_WEIGHTS.get(op.qualified, 1) for op in self.operations]
        self.cumulative = list(itertools.accumulate(weights))
        self.users = Zipf(deployment.users, 0.8, rng)
        self.clock = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
        self.fresh = itertools.count()

    def _operation(self) -> Operation:
        x = self.rng.random() * self.cumulative[-1]
        return self.operations[min(bisect.bisect_left(self.cumulative, x), len(self.operations) - 1)]

    def _held(self, principal: str, kind: str) -> str | None:
        """An entity of ``kind`` the principal (or a group of it) holds a grant on, or inside one."""
        holders = [principal, *self.deployment.groups_of.get(principal, ())]
        holder = self.rng.choice(holders)
        held = self.deployment.held.get(holder)
        if not held:
            return None
        entity = self.rng.choice(held)
        if entity.startswith(kind + ":"):
            return entity
        if entity.startswith("kerberosprincipal:"):
            return None
        namespace = entity.partition(":")[2].split(".")[0]
        if kind == "namespace":
            return f"namespace:{namespace}"
        same = self.deployment.by_place.get((namespace, kind))
        return self.rng.choice(same) if same else None

    def _entity(self, principal: str, op: Operation) -> str:
        kind = op.entity_type
        if op.name in CREATES and self.rng.random() < 0.6:
            namespace = self.rng.choice(self.deployment.by_type["namespace"]).partition(":")[2]
            n = next(self.fresh)
            if kind == "namespace":
                return f"namespace:new{n}"
            if kind in ("program", "schedule"):
                app = self.rng.choice(self.deployment.by_type["application"]).partition(":")[2]
                return f"{kind}:{app}.{'service.' if kind == 'program' else ''}new{n}"
            return f"{kind}:{namespace}.new{n}"
        if self.rng.random() < 0.7:
            held = self._held(principal, kind)
            if held is not None:
                return held
        return self.rng.choice(self.deployment.by_type[kind])

    def _args(self, op: Operation, entity: str) -> str:
        if not op.params:
            return ""
        namespace = entity.partition(":")[2].split(".")[0]
        args: dict[str, str] = {}
        for param in op.params:
            if param.type == "bool":
                if self.rng.random() < 0.5:
                    args[param.name] = self.rng.choice(("true", "false"))
                continue
            if param.type == "kerberosprincipal":
                if self.rng.random() < 0.3:
                    args[param.name] = self.rng.choice(self.deployment.kerberos)
                continue
            if param.within == "application":
                application = ".".join(entity.partition(":")[2].split(".")[:2])
                pool = self.deployment.by_application.get((application, param.type), [])
            else:
                pool = self.deployment.by_place.get((namespace, param.type)) or self.deployment.by_type[param.type]
            if pool and self.rng.random() < 0.9:
                args[param.name] = self.rng.choice(pool)
        return json.dumps(args, sort_keys=True) if args else ""

    def draw(self) -> tuple[str, str, str, str, str]:
        principal = self.users.draw()
        op = self._operation()
        entity = self._entity(principal, op)
        self.clock += dt.timedelta(milliseconds=self.rng.randint(1, 2000))
        stamp = self.clock.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.clock.microsecond // 1000:03d}Z"
        return (principal, op.qualified, entity, self._args(op, entity), stamp)


def bad_rows(table: str, n: int, rng: random.Random) -> list[tuple[str, ...]]:
    """``n`` rows of ``table`` that the pipeline must reject, each bad in its own way."""
    shapes: dict[str, list[tuple[str, ...]]] = {
        "entities": [("namespace:bad.name",), ("dataset:",), ("pipeline:ns1.x",), ("nocolon",)],
        "grants": [
            ("user:alice", "READS", "dataset:ns00000.ds000"),
            ("alice", "READ", "dataset:ns00000.ds000"),
            ("user:alice", "ADMIN", "program:ns00000.app00.p0"),
            ("group:eng", "", "namespace:ns00000"),
        ],
        "members": [("user:alice", "team:eng"), ("bob", "group:eng")],
        "requests": [
            ("user:alice", "dataset.reed", "dataset:ns00000.ds000", "", ""),
            ("user:alice", "dataset.read", "stream:ns00000.st00", "", ""),
            ("user:alice", "program.start", "program:ns00000.app00.p0", "", ""),
            ("nobody", "dataset.read", "dataset:ns00000.ds000", "", ""),
            ("user:alice", "dataset.create", "dataset:ns00000.newbad", "{not json", ""),
            ("user:alice", "dataset.create", "dataset:ns00000.newbad", '{"owner": "user:alice"}', ""),
            ("user:alice", "dataset.create", "dataset:ns00000.newbad", '{"colour": "blue"}', ""),
        ],
    }
    rows = shapes[table]
    return [rows[i % len(rows)] if i < len(rows) else rng.choice(rows) for i in range(n)]


# ---- writing --------------------------------------------------------------------------


class TableWriter:
    """Writes one table as CSV (with a header) or JSON lines."""

    def __init__(self, path: Path, columns: tuple[str, ...], fmt: str):
        self.columns = columns
        self.fmt = fmt
        self.file: IO[str] = path.open("w", encoding="utf-8", newline="")
        self.rows = 0
        self._csv = csv.writer(self.file) if fmt == "csv" else None
        if self._csv is not None:
            self._csv.writerow(columns)

    def write(self, row: Sequence[str]) -> None:
        if self._csv is not None:
            self._csv.writerow(row)
        else:
            self.file.write(json.dumps(dict(zip(self.columns, row, strict=True))) + "\n")
        self.rows += 1

    def close(self) -> None:
        self.file.close()


@dataclass(frozen=True)
class Summary:
    """What was written: rows per table (bad ones included) and where."""

    out: Path
    rows: dict[str, int]
    bad_rows: int
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {"out": str(self.out), "rows": self.rows, "bad_rows_per_table": self.bad_rows, "seconds": self.seconds}


def table_path(out: Path, table: str, fmt: str) -> Path:
    """Where ``generate`` writes a table: ``OUT/TABLE.csv``, ``.jsonl``, or a Parquet folder."""
    suffix = {"csv": ".csv", "json": ".jsonl", "parquet": ""}[fmt]
    return out / f"{table}{suffix}"


def generate(
    out: Path,
    entities: int,
    grants: int,
    requests: int,
    seed: int = 1,
    fmt: str = "csv",
    bad: int = 0,
    policy: Policy | None = None,
    progress: Callable[[str], None] = lambda _line: None,
    session: Callable[[], SparkSession] | None = None,
) -> Summary:
    """Write a deployment to ``out``; the same arguments always give the same files. A Parquet one is
    written through Spark: ``session``'s (default: a local one)."""
    started = time.monotonic()
    policy = policy or dsl.load_policy("cdap")
    rng = random.Random(f"privilog-generate-{seed}")
    out.mkdir(parents=True, exist_ok=True)
    text_format = "csv" if fmt == "parquet" else fmt
    staging = Path(tempfile.mkdtemp(prefix="generate-", dir=out)) if fmt == "parquet" else out
    writers = {t: TableWriter(table_path(staging, t, text_format), cols, text_format) for t, cols in TABLES.items()}
    try:
        deployment = draw_inventory(rng, entities, grants)
        for entity in deployment.entities:
            writers["entities"].write((entity,))
        for member in deployment.members:
            writers["members"].write(member)
        progress(
            f"generate: {len(deployment.entities):,} entities, {len(deployment.users):,} users, "
            f"{len(deployment.groups):,} groups and roles"
        )
        for row in draw_grants(rng, deployment, grants):
            writers["grants"].write(row)
        progress(f"generate: {grants:,} grants")
        drawer = RequestDrawer(rng, deployment, policy)
        step = max(1, requests // 10)
        for i in range(requests):
            writers["requests"].write(drawer.draw())
            if requests >= 100_000 and (i + 1) % step == 0:
                progress(f"generate: {i + 1:,} of {requests:,} requests ({time.monotonic() - started:.0f}s)")
        for table in TABLES:
            for bad_row in bad_rows(table, bad, rng):
                writers[table].write(bad_row)
    finally:
        for writer in writers.values():
            writer.close()
    rows = {t: w.rows for t, w in writers.items()}
    if fmt == "parquet":
        _to_parquet(staging, out, progress, session() if session is not None else None)
        shutil.rmtree(staging)
    return Summary(out, rows, bad, round(time.monotonic() - started, 1))


def _to_parquet(staging: Path, out: Path, progress: Callable[[str], None], spark: SparkSession | None = None) -> None:
    from privilog.pipeline.tables import read_table, spark_session

    spark = spark or spark_session()
    for table in TABLES:
        target = table_path(out, table, "parquet")
        read_table(spark, table_path(staging, table, "csv"), "csv", table).write.mode("overwrite").parquet(str(target))
        progress(f"generate: wrote {target}")


def to_catalog(spark: SparkSession, out: Path, fmt: str, prefix: str, progress: Callable[[str], None]) -> None:
    """The generated tables of ``out``, loaded into the catalog as ``PREFIX_entities``, ... (replacing them)."""
    from privilog.pipeline.catalog import write_catalog_tables
    from privilog.pipeline.tables import TABLES as COLUMNS
    from privilog.pipeline.tables import read_table

    for table in TABLES:
        df = read_table(spark, table_path(out, table, fmt), fmt, table).select(*COLUMNS[table])
        write_catalog_tables(spark, {table: df}, prefix, "replace")
        progress(f"generate: wrote the table {prefix}_{table}")


# ---- command line ---------------------------------------------------------------------


def register(sub: Any) -> None:
    """Add ``privilog generate`` to the command line."""
    p = sub.add_parser(
        "generate",
        help="write a synthetic CDAP deployment (entities, grants, members, requests)",
        description="Write a synthetic, realistic CDAP deployment, the same for the same seed: entities, "
        "grants (skewed), memberships and an access log, in the formats `privilog pipeline` reads.",
    )
    p.add_argument("--out", required=True, help="the folder to write the four tables to")
    p.add_argument("--entities", type=_count, default=1000, metavar="N", help="entities (default 1000)")
    p.add_argument("--grants", type=_count, default=1000, metavar="N", help="grant rows (default 1000)")
    p.add_argument("--requests", type=_count, default=10000, metavar="N", help="access-log rows (default 10000)")
    p.add_argument("--seed", type=int, default=1, help="the same seed gives the same deployment (default 1)")
    p.add_argument("--format", choices=FORMATS, default="csv", help="csv (default), json (lines) or parquet")
    p.add_argument("--bad-rows", type=_count, default=0, metavar="N", help="add N bad rows to each table")
    p.add_argument("--policy", default="cdap", help="draw operations from this policy (default cdap)")
    p.add_argument(
        "--out-table",
        metavar="DB.PREFIX",
        help="also load the four tables into the catalog as DB.PREFIX_entities, ... (replacing them), read "
        "from --out by Spark",
    )
    from privilog.pipeline.tables import spark_options

    spark_options(p)
    p.set_defaults(run=run)


def _count(text: str) -> int:
    value = int(float(text))  # accepts 1e6
    if value < 0:
        raise argparse.ArgumentTypeError(f"a count is 0 or more, not {text}")
    return value


def run(args: argparse.Namespace) -> int:
    from privilog.pipeline.catalog import require_catalog, table_name

    spark = args.format == "parquet" or args.out_table is not None
    if spark:  # written through Spark: say so, and refuse what cannot be, before writing anything
        from privilog.pipeline.tables import require_spark

        require_spark()
        if args.out_table is not None:
            table_name(args.out_table, "--out-table")
            require_catalog(args.remote or os.environ.get("SPARK_REMOTE"), args.warehouse)

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    @functools.cache
    def session() -> SparkSession:
        from privilog.pipeline.tables import spark_session

        return spark_session(args.master, args.driver_memory, None, remote=args.remote, warehouse=args.warehouse)

    summary = generate(
        Path(args.out),
        args.entities,
        args.grants,
        args.requests,
        args.seed,
        args.format,
        args.bad_rows,
        dsl.load_policy(args.policy),
        progress,
        session if spark else None,
    )
    if args.out_table is not None:
        to_catalog(session(), summary.out, args.format, args.out_table, progress)
    described = ", ".join(f"{rows:,} {table}" for table, rows in summary.rows.items())
    tables = f"; tables {args.out_table}_*" if args.out_table is not None else ""
    print(f"wrote {described} to {summary.out} ({args.format}, {summary.seconds:.1f}s){tables}")
    return 0
