"""The server's start-up (issue 38): time to ready and memory per worker, from a store of 10^5 and 10^6 grants.

    python -m benchmarks.serve.startup [--sizes 100000,1000000] [--backends sqlite,postgresql]
        [--workers 1,2] [--stores /tmp/privilog-startup] [--out benchmarks/serve/results-startup.json]

The world is the engines benchmark's (benchmarks/engines/workload.py, seed 42): the file
``/tmp/s38/world-SIZE.json`` when it is there (``--worlds``), else generated and written there.
It is imported with ``privilog store import`` into a SQLite file kept in ``--stores`` (made once,
reused by the next run; delete it to make it again) and into a PostgreSQL database on a cluster
of the run's own (tests/pg.py's ``TemporaryPostgres``: initdb in a temporary folder, defaults,
fsync on), imported on each run. An admin token is added to each.

For each store and worker count, ``python -m privilog serve --store ... --workers N`` is started
and measured (with ``--snapshot``: twice, with ``privilog serve --snapshot FILE``, ``FILE`` in ``--stores``:
first absent, so the load is the ordinary one and writes it, ``snapshot: written``, with the write's seconds
and the file's bytes; then present, read instead of deriving, ``snapshot: read``):

* ``ready_s``: from the process's start until every worker has answered ``GET /ready`` (200, its
  pid in the answer; new connections until each worker's pid was seen), and ``first_check_s``: until
  a ``POST /v1/check`` answered after that;
* the load's phases, as the server prints them (``privilog serve: loaded ...``): the store opened,
  read (``store_read``), the authorizer built, the policy recorded, every decision plan compiled
  (``warm``), and, with workers, the collection and ``gc.freeze`` before the fork;
* each process's memory from ``/proc/PID/smaps_rollup`` (RSS, PSS, USS = private clean + dirty),
  after the first check and again after ``--checks`` more (spread over connections to every
  worker; ``namespace.get`` for the world's users, drawn from their grants, half allowed: see
  :func:`checks_of`): the parent (with workers: it holds the load and serves nothing) and each worker. With
  N workers, ``extra_share`` is what the processes hold together (the sum of their PSS) beyond one
  worker's server, as a share of that one server's: (PSS(N) - PSS(1)) / PSS(1), over N - 1 (a
  second worker's extra memory as a share of the first's; the target is <= 0.25). ``uss_share``:
  each worker's USS, what it alone holds, over the one-worker server's PSS.

One server at a time (a 10^6 load takes tens of seconds and gigabytes). Measurements, not tests:
nothing here asserts a figure. ``--sizes 1000000 --backends sqlite`` runs one case; results are
merged into ``--out`` by (size, backend, workers), so a re-run replaces only what it measured.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from benchmarks.engines.common import ROOT, machine_info, progress

DEFAULT_OUT = Path(__file__).resolve().parent / "results-startup.json"
CHECK = {"principal": "user:bench_admin", "operation": "namespace.get", "entity": "namespace:ns0000"}
WRITTEN = re.compile(r"privilog serve: snapshot written to .* in ([\d.]+) s")
LOADED = re.compile(r"privilog serve: loaded (\d+) grants at log entry (\d+) in ([\d.]+) s \((.*)\)")


def world_file(size: int, folder: Path) -> Path:
    """The engines benchmark's world of ``size`` grants as a JSON file (generated when missing)."""
    path = folder / f"world-{size}.json"
    if not path.exists():
        from benchmarks.engines import workload

        progress(f"generating the world of {size} grants into {path}")
        folder.mkdir(parents=True, exist_ok=True)
        generated = workload.build(size, 42, 400, 200, 200)
        path.write_text(json.dumps(generated.data))
    return path


def checks_of(world: Path, count: int) -> list[dict[str, Any]]:
    """``count`` checks drawn from the world's users' grants, spread evenly over them: ``namespace.get`` on the
    namespace of a grant's entity (allowed), and every other one on the namespace of another grant of the
    world (most denied): requests that walk the principal's grants and memberships, as real ones do."""
    grants = [g for g in json.loads(world.read_text())["grants"] if g[0].startswith("user:")]
    step = max(1, len(grants) // max(1, count))
    out = []
    for i in range(count):
        principal, _, entity = grants[(i * step) % len(grants)]
        if i % 2:
            entity = grants[(i * step * 7 + len(grants) // 2) % len(grants)][2]
        namespace = entity.split(":", 1)[1].split(".", 1)[0]
        out.append({"principal": principal, "operation": "namespace.get", "entity": f"namespace:{namespace}"})
    return out


def privilog(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "privilog", *args], capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"privilog {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stderr + done.stdout


def make_store(url: str, world: Path) -> tuple[str, float]:
    """Import ``world`` into the store at ``url`` (made new), add an admin; its token, and the import's seconds."""
    from privilog import dsl
    from privilog.store import open_store

    started = time.perf_counter()
    privilog("store", "init", "--store", url)
    privilog("store", "import", "--store", url, str(world))
    seconds = time.perf_counter() - started
    return admin_token(url, dsl.load_policy("cdap").actions, open_store), seconds


def admin_token(url: str, actions: Any, open_store: Any) -> str:
    with open_store(url, actions, create=False) as store:
        store.change("local:bench", "admin.add", ["user:bench_admin"], trusted=True)
        return str(store.create_token("user:bench_admin", "local:bench")[1])


def rollup(pid: int) -> dict[str, int]:
    """RSS, PSS and USS of ``pid`` in KiB, from /proc/PID/smaps_rollup."""
    figures = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value, *_ = line.split()
        figures[name.rstrip(":")] = int(value)
    return {
        "rss_kib": figures["Rss"],
        "pss_kib": figures["Pss"],
        "uss_kib": figures["Private_Clean"] + figures["Private_Dirty"],
        "shared_kib": figures["Shared_Clean"] + figures["Shared_Dirty"],
    }


def children(pid: int) -> list[int]:
    return sorted(int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split())


class Connection:
    def __init__(self, url: str, token: str):
        address = urlsplit(url)
        self.http = http.client.HTTPConnection(address.hostname or "", address.port, timeout=600)
        self.token = token

    def ask(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        self.http.request(method, path, None if body is None else json.dumps(body), headers)
        answer = self.http.getresponse()
        return answer.status, json.loads(answer.read())


def measure(
    store: str, token: str, workers: int, checks: list[dict[str, Any]], snapshot: Path | None = None
) -> dict[str, Any]:
    """Start ``privilog serve`` on ``store`` with ``workers`` (and ``--snapshot``); time it to ready and to a
    first check, and the memory of each of its processes; stop it."""
    started = time.perf_counter()
    extra = ["--snapshot", str(snapshot)] if snapshot is not None else []
    process = subprocess.Popen(
        [sys.executable, "-m", "privilog", "serve", "--store", store, "--port", "0", "--workers", str(workers),
         *extra],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, cwd=ROOT,
    )
    assert process.stderr is not None
    lines: list[str] = []
    url = ""
    while not url:
        ready, _, _ = select.select([process.stderr], [], [], 5)
        line = process.stderr.readline() if ready else ""
        if line:
            lines.append(line)
        if line.startswith("privilog serve: http://"):
            url = line.split()[2]
        elif not line and process.poll() is not None:
            raise SystemExit(f"the server exited {process.returncode}: {''.join(lines)}")
    announced = time.perf_counter() - started
    drain = threading.Thread(target=lambda: lines.extend(process.stderr or []), daemon=True)
    drain.start()
    try:
        seen: dict[int, Connection] = {}
        while len(seen) < workers:  # every worker serving: its pid seen on /ready
            connection = Connection(url, token)
            try:
                status, body = connection.ask("GET", "/ready")
            except OSError:
                connection.http.close()
                time.sleep(0.05)
                continue
            if status == 200 and body["pid"] not in seen:
                seen[body["pid"]] = connection
            else:
                connection.http.close()
            if process.poll() is not None:
                raise SystemExit(f"the server exited {process.returncode}: {''.join(lines)}")
        ready_s = time.perf_counter() - started
        status, decided = next(iter(seen.values())).ask("POST", "/v1/check", CHECK)
        first_check_s = time.perf_counter() - started
        assert status == 200, decided
        parent = process.pid
        pids = children(parent) if workers > 1 else [parent]
        after_first = {"parent": rollup(parent), "workers": [rollup(pid) for pid in pids]}
        allowed = 0
        for i, check in enumerate(checks):  # requests spread over every worker (one kept-alive connection each)
            connection = list(seen.values())[i % len(seen)]
            status, answer = connection.ask("POST", "/v1/check", check)
            assert status == 200, answer
            allowed += answer["decision"] == "allow"
        after_checks = {"parent": rollup(parent), "workers": [rollup(pid) for pid in pids]}
        for connection in seen.values():
            connection.http.close()
    finally:
        process.terminate()
        process.wait(timeout=120)
        drain.join(timeout=10)
    written = next((WRITTEN.search(line) for line in lines if WRITTEN.search(line)), None)
    loaded = next((LOADED.search(line) for line in lines if LOADED.search(line)), None)
    phases: dict[str, Any] = {}
    if loaded is not None:
        phases = {"grants": int(loaded.group(1)), "seq": int(loaded.group(2)), "load_s": float(loaded.group(3))}
        for part in loaded.group(4).split(", "):
            name, value, _ = part.rsplit(" ", 2)
            phases[name.replace(" ", "_") + "_s"] = float(value)
    case: dict[str, Any] = {}
    if snapshot is not None:
        case = {
            "snapshot": "read" if "snapshot_read_s" in phases and written is None else "written",
            "snapshot_bytes": snapshot.stat().st_size if snapshot.exists() else None,
            "snapshot_write_s": float(written.group(1)) if written else None,
            "snapshot_said": [line.strip() for line in lines if "snapshot" in line],
        }
    return {
        "workers": workers,
        **case,
        "announced_s": round(announced, 2),
        "ready_s": round(ready_s, 2),
        "first_check_s": round(first_check_s, 2),
        "first_check": decided["decision"],
        "phases": phases,
        "memory_after_first_check": after_first,
        "memory_after_checks": after_checks,
        "checks": len(checks),
        "checks_allowed": allowed,
    }


def total_pss(memory: dict[str, Any], workers: int) -> int:
    """What a server's processes hold together (KiB): the sum of their PSS (the parent's too, with workers)."""
    own = [memory["parent"]] if workers > 1 else []
    return sum(m["pss_kib"] for m in own + memory["workers"])


def shares(runs: list[dict[str, Any]]) -> None:
    """``extra_share`` and ``uss_share`` of each run with workers, against the one-worker run of its store."""
    for run in runs:
        if run["workers"] == 1:
            continue
        one = next((r for r in runs if r["workers"] == 1 and r["size"] == run["size"]
                    and r["backend"] == run["backend"] and r.get("snapshot") == run.get("snapshot")), None)
        if one is None:
            continue
        for when in ("memory_after_first_check", "memory_after_checks"):
            base = total_pss(one[when], 1)
            extra = (total_pss(run[when], run["workers"]) - base) / (run["workers"] - 1)
            run[when]["extra_share"] = round(extra / base, 3)
            run[when]["uss_share"] = [round(w["uss_kib"] / base, 3) for w in run[when]["workers"]]


def markdown(results: dict[str, Any]) -> str:
    """The results as the tables of benchmarks/README.md and docs/serve.md."""
    mib = 1024
    out = [
        "| grants, store | workers | snapshot | ready, s | first check, s "
        "| snapshot read / store read / authorizer / warm / freeze / snapshot write, s "
        "| PSS together, MiB | per worker RSS / PSS / USS, MiB | parent USS, MiB | extra share |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in results["runs"]:
        phases, memory = run["phases"], run["memory_after_checks"]
        parts = [phases.get(k) for k in ("snapshot_read_s", "store_read_s", "authorizer_build_s", "warm_s",
                                         "freeze_s", "snapshot_write_s")]
        workers = "; ".join(f"{w['rss_kib'] // mib:,} / {w['pss_kib'] // mib:,} / {w['uss_kib'] // mib:,}"
                            for w in memory["workers"])
        parent = f"{memory['parent']['uss_kib'] // mib:,}" if run["workers"] > 1 else ""
        share = memory.get("extra_share")
        out.append(
            f"| {run['size']:,}, {run['backend']} | {run['workers']} | {run.get('snapshot', '')} "
            f"| {run['ready_s']:.1f} "
            f"| {run['first_check_s']:.1f} "
            f"| {' / '.join('' if p is None else f'{p:.1f}' for p in parts)} "
            f"| {total_pss(memory, run['workers']) // mib:,} | {workers} | {parent} "
            f"| {'' if share is None else f'{share:.1%}'} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serve.startup", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000,1000000", help="grants (default 100000,1000000)")
    parser.add_argument("--backends", default="sqlite,postgresql", help="stores (default sqlite,postgresql)")
    parser.add_argument("--workers", default="1,2", help="worker counts (default 1,2)")
    parser.add_argument("--checks", type=int, default=2000, help="checks after the first, before memory is read again")
    parser.add_argument("--worlds", type=Path, default=Path("/tmp/s38"), help="where the world files are (or go)")
    parser.add_argument("--stores", type=Path, default=Path("/tmp/privilog-startup"), help="SQLite stores, kept")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--markdown", action="store_true", help="print --out's results as tables; measure nothing")
    parser.add_argument(
        "--snapshot", nargs="?", const="absent,present", metavar="CASES",
        help="with privilog serve --snapshot: each case twice, the file absent (the load writes it), then present "
        "(CASES: absent,present, the default; present alone reuses the file of an earlier run)",
    )
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(args.out.read_text())))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    backends = args.backends.split(",")
    counts = [int(w) for w in args.workers.split(",")]
    results: dict[str, Any] = json.loads(args.out.read_text()) if args.out.exists() else {"runs": []}
    results["machine"] = machine_info()
    measured: list[dict[str, Any]] = []
    postgres = None
    try:
        for size in sizes:
            world = world_file(size, args.worlds)
            checks = checks_of(world, args.checks)
            for backend in backends:
                if backend == "sqlite":
                    args.stores.mkdir(parents=True, exist_ok=True)
                    path = args.stores / f"sqlite-{size}.db"
                    if path.exists():
                        from privilog import dsl
                        from privilog.store import open_store

                        token, imported = admin_token(str(path), dsl.load_policy("cdap").actions, open_store), None
                    else:
                        progress(f"importing {world} into {path}")
                        token, imported = make_store(str(path), world)
                    store = str(path)
                elif backend == "postgresql":
                    if postgres is None:
                        from tests.pg import TemporaryPostgres

                        postgres = TemporaryPostgres()
                        postgres.start()
                    store = postgres.create_database(f"grants_{size}")
                    progress(f"importing {world} into {store}")
                    token, imported = make_store(store, world)
                else:
                    raise SystemExit(f"--backends: sqlite or postgresql, not {backend}")
                if imported is not None:
                    progress(f"  imported in {imported:.1f} s")
                modes = tuple(args.snapshot.split(",")) if args.snapshot else (None,)
                for workers, snapshot in [(w, m) for w in counts for m in modes]:
                    progress(f"{size} grants, {backend}, {workers} worker(s), snapshot {snapshot}: starting")
                    path = None
                    if snapshot is not None:
                        args.stores.mkdir(parents=True, exist_ok=True)
                        path = args.stores / f"{backend}-{size}.snapshot"
                        if snapshot == "absent":
                            path.unlink(missing_ok=True)
                    run = {"size": size, "backend": backend, **measure(store, token, workers, checks, path)}
                    run["date"], run["commit"] = results["machine"]["date"], results["machine"]["privilog_commit"]
                    run["loadavg_before"] = os.getloadavg()
                    run["import_s"] = None if imported is None else round(imported, 1)
                    measured.append(run)
                    memory = run["memory_after_checks"]
                    progress(f"  ready {run['ready_s']} s, first check {run['first_check_s']} s, "
                             f"phases {run['phases']}; parent {memory['parent']}, workers {memory['workers']}"
                             + (f"; {run['snapshot_said']}" if snapshot else ""))
    finally:
        if postgres is not None:
            postgres.stop()
    def case(r: dict[str, Any]) -> tuple[int, str, int, str]:
        return r["size"], r["backend"], r["workers"], r.get("snapshot", "")

    keys = {case(r) for r in measured}
    runs = [r for r in results["runs"] if case(r) not in keys] + measured
    runs.sort(key=case)
    shares(runs)
    results["runs"] = runs
    results["machine"]["loadavg_after"] = os.getloadavg()
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    for run in runs:
        memory = run["memory_after_checks"]
        print(f"{run['size']:>8} {run['backend']:<10} workers {run['workers']}: ready {run['ready_s']:6.1f} s, "
              f"first check {run['first_check_s']:6.1f} s; PSS together {total_pss(memory, run['workers']) >> 10} MiB"
              + (f", extra share {memory.get('extra_share')}" if run["workers"] > 1 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
