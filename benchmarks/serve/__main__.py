"""The server benchmark (issue 14): privilog serve under wrk on loopback, over a world of 100k grants.

    python -m benchmarks.serve [--size 100k] [--duration 10] [--workers 1,2] [--out benchmarks/serve/results.json]

The world is benchmarks/engines' (worldgen plus Kerberos owners), imported into
a SQLite store in a temporary folder; the requests are its requests (five
kinds, half drawn to be allowed). For each worker count, the server runs as
``python -m privilog serve`` and wrk (``apt-get install wrk``) drives it with a
Lua script for POST bodies:

* single checks: ``POST /v1/check``, one request per call (4 connections, then 16);
* batch checks: ``POST /v1/check/batch`` of 1,000 requests per call (4 connections, then 16);
* grants: ``POST /v1/changes`` granting a new READ each call, one connection
  (each answer waits for the commit on disk: the durable acknowledgement's latency), then 8.

``--decision-logs``: instead, the cost of a decision log (issue 36) on one worker, three ways in the
same run, in rounds (none, without reasons, with reasons; again), single and batch checks:
``--decision-log`` off, ``--decision-log-reasons off``, and on (the default); written to
benchmarks/serve/decision_logs.json.

wrk and the server share the machine's cores. Measurements, not tests:
nothing here asserts a figure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.engines.common import ROOT, machine_info, progress
from benchmarks.engines.workload import build

DEFAULT_OUT = Path(__file__).resolve().parent / "results.json"
BATCH = 1_000

LUA = """
local bodies = {}
local n = 0
for line in io.lines("%(bodies)s") do bodies[#bodies + 1] = line end
local headers = {["Authorization"] = "Bearer %(token)s", ["Content-Type"] = "application/json"}
local unique = %(unique)s
math.randomseed(os.time() + os.clock() * 1e6)
local tag = math.random(1, 1e9)
request = function()
  n = n + 1
  if unique then
    local body = string.format('{"kind":"grant","items":[["user:bench%%d_%%d","READ","dataset:ns0.bench"]]}', tag, n)
    return wrk.format("POST", "%(path)s", headers, body)
  end
  return wrk.format("POST", "%(path)s", headers, bodies[(n %% #bodies) + 1])
end
"""


def size_arg(text: str) -> int:
    text = text.strip().lower()
    return int(float(text[:-1]) * 1000) if text.endswith("k") else int(text)


def _store(size: int, folder: Path) -> tuple[str, str, list[dict[str, Any]]]:
    """A store holding the world of ``size`` grants, an admin's token, and the requests."""
    from privilog import dsl
    from privilog.store import open_store

    work = build(size)
    policy = dsl.load_policy("cdap")
    path = folder / "authz.db"
    with open_store(str(path), policy.actions) as store:
        store.import_world(work.world, "local:bench")
        store.change("local:bench", "admin.add", ["user:root"], trusted=True)
        _, token = store.create_token("user:root", "local:bench")
    requests = [{"principal": r.principal, "operation": r.operation, "entity": r.entity, "args": dict(r.args)}
                for kind in work.requests.values() for r in kind]
    return str(path), token, requests


def _serve(store: str, workers: int, extra: Sequence[str] = ()) -> tuple[subprocess.Popen[str], str, float]:
    """``privilog serve`` on ``store`` (``extra``: more of its options), once every worker answers /ready:
    the process, its URL and the seconds it took. Its stderr is a pipe the caller drains or leaves."""
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "privilog", "serve", "--store", store, "--port", "0",
                                "--workers", str(workers), *extra], stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert process.stderr is not None
    url = ""
    deadline = time.monotonic() + 600
    while not url and time.monotonic() < deadline:
        ready, _, _ = select.select([process.stderr], [], [], 5)
        line = process.stderr.readline() if ready else ""
        if line.startswith("privilog serve: http://"):
            url = line.split()[2]
        elif not line and process.poll() is not None:
            raise SystemExit(f"the server exited {process.returncode}")
    seen: set[int] = set()
    while len(seen) < workers and time.monotonic() < deadline:  # every worker loaded: its pid seen on /ready
        try:
            with urllib.request.urlopen(f"{url}/ready", timeout=5) as answer:
                seen.add(json.load(answer)["pid"])
        except OSError:
            time.sleep(0.1)
    return process, url, time.perf_counter() - started


def _wrk(url: str, path: str, lua: Path, connections: int, duration: int, threads: int = 1) -> dict[str, Any]:
    out = subprocess.run(["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration}s", "--latency", "-s", str(lua),
                          url + path], capture_output=True, text=True, check=True).stdout
    found = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if found is None:
        raise SystemExit(f"wrk said nothing of requests per second:\n{out}")
    rate = float(found.group(1))
    percentiles = {}
    for p, value, unit in re.findall(r"^\s+(50|75|90|99)%\s+([\d.]+)(us|ms|s)\s*$", out, re.M):
        percentiles[f"p{p}_ms"] = float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
    non200 = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    total = re.search(r"(\d+) requests in", out)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    names = ("connect", "read", "write", "timeout")
    socket_errors = dict(zip(names, map(int, errors.groups()), strict=True)) if errors else {}
    return {"requests_per_s": rate, **percentiles, "requests": int(total.group(1)) if total else None,
            "non_2xx": int(non200.group(1)) if non200 else 0, "connections": connections,
            **({"socket_errors": socket_errors} if socket_errors else {})}


def _script(folder: Path, name: str, token: str, path: str, bodies: list[str], unique: bool = False) -> Path:
    lines = folder / f"{name}.jsonl"
    lines.write_text("\n".join(bodies) + "\n")
    script = folder / f"{name}.lua"
    script.write_text(LUA % {"bodies": lines, "token": token, "path": path, "unique": "true" if unique else "false"})
    return script


def _check_scripts(folder: Path, token: str, requests: list[dict[str, Any]]) -> tuple[Path, Path]:
    """wrk's scripts of single checks (each request in turn) and of batches of ``BATCH`` of them."""
    singles = [json.dumps(r) for r in requests]
    batches = [json.dumps({"checks": [requests[(i * BATCH + j) % len(requests)] for j in range(BATCH)]})
               for i in range(8)]
    return (_script(folder, "check", token, "/v1/check", singles),
            _script(folder, "batch", token, "/v1/check/batch", batches))


LOG_MODES = {
    "no_log": (),
    "log_without_reasons": ("--decision-log", "{log}", "--decision-log-reasons", "off"),
    "log_with_reasons": ("--decision-log", "{log}"),
}


def _decision_logs(args: argparse.Namespace, folder: Path, store: str, check: Path, batch: Path) -> dict[str, Any]:
    """Decisions per second on one worker with no decision log, one without reasons and one with, in
    ``args.rounds`` rounds (the modes in turn, so that the machine's other load falls on each alike)."""
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in LOG_MODES}
    for round_ in range(args.rounds):
        for mode, extra in LOG_MODES.items():
            log = folder / f"{mode}.{round_}.log"
            process, url, _ = _serve(store, 1, [e.format(log=log) for e in extra])
            try:
                _wrk(url, "/v1/check", check, 4, 2)  # warm
                single = _wrk(url, "/v1/check", check, 4, args.duration)
                batched = _wrk(url, "/v1/check/batch", batch, 4, args.duration)
                batched["decisions_per_s"] = batched["requests_per_s"] * BATCH
            finally:
                process.terminate()
                process.wait(timeout=60)
            lines = sum(1 for _ in log.open()) if log.exists() else 0
            run = {"single_checks_per_s": single["requests_per_s"], "single_p99_ms": single.get("p99_ms"),
                   "batch_decisions_per_s": batched["decisions_per_s"], "batch_p99_ms": batched.get("p99_ms"),
                   "log_lines": lines, "log_bytes": log.stat().st_size if log.exists() else 0}
            runs[mode].append(run)
            progress(f"  round {round_ + 1}, {mode}: {run}")
    summary = {}
    for mode, measured in runs.items():
        summary[mode] = {key: round(sum(r[key] for r in measured) / len(measured), 1)
                         for key in ("single_checks_per_s", "batch_decisions_per_s")}
        lines = sum(r["log_lines"] for r in measured)
        summary[mode]["bytes_per_line"] = round(sum(r["log_bytes"] for r in measured) / lines) if lines else 0
    base = summary["log_without_reasons"]
    for key in ("single_checks_per_s", "batch_decisions_per_s"):
        summary["log_with_reasons"][f"{key}_vs_without_reasons"] = round(
            summary["log_with_reasons"][key] / base[key] - 1.0, 3)
    return {"runs": runs, "summary": summary}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serve", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=size_arg, default=100_000)
    parser.add_argument("--duration", type=int, default=10, help="seconds per wrk run (default 10)")
    parser.add_argument("--workers", default="1,2", help="worker counts to measure (default 1,2)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--decision-logs", action="store_true", help="the cost of a decision log, three ways")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of --decision-logs (default 2)")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"machine": machine_info(), "size": args.size, "runs": []}
    if args.decision_logs:
        with tempfile.TemporaryDirectory() as tmp:
            progress(f"building the world of {args.size} grants and its store")
            store, token, requests = _store(args.size, Path(tmp))
            check, batch = _check_scripts(Path(tmp), token, requests)
            results = {"machine": machine_info(), "size": args.size, "duration_s": args.duration,
                       **_decision_logs(args, Path(tmp), store, check, batch)}
        results["machine"]["loadavg_after"] = os.getloadavg()
        out = args.out or DEFAULT_OUT.with_name("decision_logs.json")
        out.write_text(json.dumps(results, indent=2) + "\n")
        print(json.dumps(results["summary"], indent=2))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        progress(f"building the world of {args.size} grants and its store")
        store, token, requests = _store(args.size, folder)
        check, batch = _check_scripts(folder, token, requests)
        grant = _script(folder, "grant", token, "/v1/changes", ["{}"], unique=True)
        for workers in [int(w) for w in args.workers.split(",")]:
            process, url, start_s = _serve(store, workers)
            progress(f"{workers} worker(s): serving at {url} after {start_s:.1f} s")
            try:
                run: dict[str, Any] = {"workers": workers, "start_s": round(start_s, 2)}
                _wrk(url, "/v1/check", check, 16, 2)  # warm: the ids and argument caches
                for connections in (4, 16):
                    run[f"single_checks_{connections}_connections"] = _wrk(url, "/v1/check", check, connections,
                                                                           args.duration)
                    progress(f"  single checks, {connections} connections: "
                             f"{run[f'single_checks_{connections}_connections']}")
                # 16 connections as well as 4: the workers share one socket, and the kernel hands a
                # few connections to one worker as readily as to several
                for connections in (4, 16):
                    name = "batch_checks" if connections == 4 else f"batch_checks_{connections}_connections"
                    run[name] = _wrk(url, "/v1/check/batch", batch, connections, args.duration)
                    run[name]["decisions_per_s"] = run[name]["requests_per_s"] * BATCH
                    progress(f"  batch checks, {connections} connections: {run[name]}")
                run["grants_one_connection"] = _wrk(url, "/v1/changes", grant, 1, args.duration)
                progress(f"  grants, one connection: {run['grants_one_connection']}")
                run["grants_8_connections"] = _wrk(url, "/v1/changes", grant, 8, args.duration)
                progress(f"  grants, 8 connections: {run['grants_8_connections']}")
                results["runs"].append(run)
            finally:
                process.terminate()
                process.wait(timeout=60)
    results["machine"]["loadavg_after"] = os.getloadavg()
    (args.out or DEFAULT_OUT).write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
