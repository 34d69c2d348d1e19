"""The grant store benchmark (issue 14): durable grants, replica lag, imports, on SQLite and PostgreSQL.

    python -m benchmarks.store [--grants 500] [--lags 300] [--sizes 100k,1M] [--out benchmarks/store/results.json]

* **grant, durable**: ``store.change(admin, "grant", [one new grant])`` until it
  returns, that is until the change is committed and synced (SQLite: WAL with
  ``synchronous=FULL``; PostgreSQL: the server's defaults, ``fsync=on``,
  ``synchronous_commit=on``), the admin checked in its transaction.
* **replica lag**: two deployments on one store, each with its own connection
  and following (``Deployment.start_following``); from the moment one store is
  asked for a change until the other deployment has replayed it (its authorizer
  answers with it).
* **import**: ``store.import_world`` of a generated world (``benchmarks/worldgen.py``)
  into a new store, and ``store.snapshot()`` of it (what a replica reads when it starts).

PostgreSQL is a server of its own, started for the run by ``tests/pg.py`` in a
temporary directory (``initdb``, ``pg_ctl``), on this machine, over TCP on 127.0.0.1.
Measurements, not tests: nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.engines.__main__ import size_arg
from benchmarks.engines.common import machine_info, percentile, progress
from benchmarks.worldgen import generate
from privilog import dsl
from privilog.store import open_store
from privilog.store.deployment import Deployment
from privilog.store.sql import SqlStore
from tests.pg import TemporaryPostgres

DEFAULT_OUT = Path(__file__).resolve().parent / "results.json"
ACTIONS = ("READ", "WRITE", "EXECUTE", "ADMIN")


def summary_ms(seconds: list[float]) -> dict[str, float]:
    return {"n": len(seconds), "p50_ms": round(percentile(seconds, 50) * 1000, 3),
            "p99_ms": round(percentile(seconds, 99) * 1000, 3), "max_ms": round(max(seconds) * 1000, 3)}


def new_store(kind: str, server: TemporaryPostgres, scratch: Path, name: str) -> SqlStore:
    url = server.create_database(name) if kind == "postgresql" else str(scratch / f"{name}.db")
    return open_store(url, ACTIONS)


def durable_grants(store: SqlStore, count: int) -> dict[str, float]:
    store.change("local:ops", "admin.add", ["user:root"], trusted=True)
    timings = []
    for i in range(count):
        started = time.perf_counter()
        store.change("user:root", "grant", [[f"user:u{i}", "READ", f"dataset:ns{i % 50}.d{i}"]])
        timings.append(time.perf_counter() - started)
    return summary_ms(timings)


def replica_lag(url: str, count: int) -> dict[str, float]:
    policy = dsl.load_policy("cdap")
    with open_store(url, ACTIONS) as first:
        first.change("local:ops", "admin.add", ["user:root"], trusted=True)
    writer = Deployment(open_store(url, ACTIONS), policy)
    reader = Deployment(open_store(url, ACTIONS), policy)
    reader.start_following()
    lags = []
    try:
        for i in range(count):
            started = time.perf_counter()
            entry = writer.store.change("user:root", "grant", [[f"user:u{i}", "ADMIN", f"namespace:ns{i}"]])
            while reader.seq < entry.seq:
                if time.perf_counter() - started > 30:
                    raise RuntimeError("the replica did not follow within 30 s")
                time.sleep(0.0002)
            lags.append(time.perf_counter() - started)
            time.sleep(0.005)  # changes apart, as admins make them
        assert reader.authorizer.allows(f"user:u{count - 1}", "namespace.update", f"namespace:ns{count - 1}")
    finally:
        reader.stop_following()
        writer.store.close()
        reader.store.close()
    return summary_ms(lags)


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = action()
    return round(time.perf_counter() - started, 2), result


def imports(kind: str, server: TemporaryPostgres, scratch: Path, size: int) -> dict[str, Any]:
    world = generate(size).world
    store = new_store(kind, server, scratch, f"import_{size}")
    try:
        seconds, counts = timed(lambda: store.import_world(world, "local:ops"))
        again, _ = timed(lambda: store.import_world(world, "local:ops"))
        read, (back, _) = timed(store.snapshot)
        assert back.grants == world.grants
    finally:
        store.close()
    return {"grants": len(world.grants), "entities": len(world.entities), "counts": counts,
            "import_s": seconds, "import_again_s": again, "snapshot_s": read}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.store", description=__doc__.split("\n\n")[0])
    parser.add_argument("--grants", type=int, default=500, help="durable grants timed per store")
    parser.add_argument("--lags", type=int, default=300, help="replica lags timed per store")
    parser.add_argument("--sizes", default="100k,1M", help="grants of the imported worlds")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"machine": machine_info(), "grant_durable": {}, "replica_lag": {}, "import": {}}
    with TemporaryPostgres() as server, tempfile.TemporaryDirectory() as scratch_dir:
        server.start()
        results["postgresql"] = _server_version(server)
        scratch = Path(scratch_dir)
        for kind in ("sqlite", "postgresql"):
            progress(f"{kind}: {args.grants} durable grants")
            with new_store(kind, server, scratch, "grants") as store:
                results["grant_durable"][kind] = durable_grants(store, args.grants)
            progress(f"{kind}: replica lag over {args.lags} changes")
            url = server.create_database("lag") if kind == "postgresql" else str(scratch / "lag.db")
            results["replica_lag"][kind] = replica_lag(url, args.lags)
        for size in (size_arg(s) for s in args.sizes.split(",")):
            for kind in ("sqlite", "postgresql"):
                progress(f"{kind}: import of {size} grants")
                results["import"].setdefault(str(size), {})[kind] = imports(kind, server, scratch, size)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(render(results))
    return 0


def _server_version(server: TemporaryPostgres) -> str:
    import psycopg

    with psycopg.connect(server.url("privilog")) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return str(row[0]) if row else "unknown"


def render(results: dict[str, Any]) -> str:
    lines = ["| figure | SQLite | PostgreSQL |", "|---|---|---|"]
    figures = (("grant acknowledged durably", "grant_durable"), ("change visible on a 2nd replica", "replica_lag"))
    for name, key in figures:
        cells = [f"p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms" for r in
                 (results[key]["sqlite"], results[key]["postgresql"])]
        lines.append(f"| {name} | {cells[0]} | {cells[1]} |")
    for size, by_kind in results["import"].items():
        cells = [f"{r['import_s']:.1f} s (again {r['import_again_s']:.1f} s; snapshot {r['snapshot_s']:.1f} s)"
                 for r in (by_kind["sqlite"], by_kind["postgresql"])]
        lines.append(f"| import of {int(size):,} grants | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
