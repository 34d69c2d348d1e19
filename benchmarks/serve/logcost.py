"""The decision log's cost without HTTP (issue 36): the server's own handlers called in process.

    python -m benchmarks.serve.logcost [--size 100k] [--rounds 7] [--batches 100] [--forget] [--out FILE]

wrk on loopback (``python -m benchmarks.serve --decision-logs``) measures what a client sees, but on a
shared machine of two cores its figures move by tens of percent from one run to the next. Here the
same handlers (``routes.check_batch``, ``routes.check``) run on one event loop over a Service like
the server's (the store, the deployment, the decision log writing to a file), three ways (no log, a
log without reasons, a log with reasons) in turn, ``--rounds`` times; the median of each is kept.
Single checks run inline as the server runs them; batches of 1,000 in its thread pool. The requests
repeat (the workload's 2,000, in turn), so with a log most answers are remembered for the revision
(``Service.decide``); ``--forget`` measures the cost when none is.
Measurements, not tests: nothing here asserts a figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.engines.common import machine_info, progress
from benchmarks.serve.__main__ import BATCH, _store, size_arg

MODES = ("no_log", "log_without_reasons", "log_with_reasons")


def _service(store_path: str, mode: str, folder: Path) -> Any:
    from privilog import dsl
    from privilog.serve.decisionlog import KEY_NAME, DecisionLog
    from privilog.serve.service import Service
    from privilog.store import open_store
    from privilog.store.deployment import Deployment

    policy = dsl.load_policy("cdap")
    store = open_store(store_path, policy.actions, create=False)
    reasons = mode == "log_with_reasons"
    deployment = Deployment(store, policy, track_grants=reasons)
    deployment.record_policy("local:bench")
    log = None
    if mode != "no_log":
        log = DecisionLog.open(str(folder / f"{mode}.log"), store.secret(KEY_NAME).encode(), 1.0, reasons)
    service = Service(deployment, "cdap", None, log)
    service.warm()
    return service


async def _batches(service: Any, bodies: list[dict[str, Any]]) -> None:
    from privilog.serve import routes
    from privilog.serve.service import Call

    for body in bodies:
        await routes.check_batch(Call(service, None, "user:root", "bench", body, {}))  # type: ignore[arg-type]


async def _singles(service: Any, requests: list[dict[str, Any]]) -> None:
    from privilog.serve import routes
    from privilog.serve.service import Call

    for body in requests:
        await routes.check(Call(service, None, "user:root", "bench", body, {}))  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serve.logcost", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=size_arg, default=100_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batches", type=int, default=100, help="batches of 1,000 checks per round and way")
    parser.add_argument("--forget", action="store_true",
                        help="remember no decision between requests (the cost when every request is new)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.forget:
        from privilog.serve import service

        service.REMEMBERED = 0  # each answer forgotten as the next is remembered
    out = args.out or Path(__file__).resolve().parent / ("logcost_forget.json" if args.forget else "logcost.json")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        progress(f"building the world of {args.size} grants and its store")
        store, _, requests = _store(args.size, folder)
        bodies = [{"checks": [requests[(i * BATCH + j) % len(requests)] for j in range(BATCH)]}
                  for i in range(args.batches)]
        singles = [requests[i % len(requests)] for i in range(args.batches * BATCH // 4)]
        services = {mode: _service(store, mode, folder) for mode in MODES}
        for service in services.values():  # warm: plans, ids, the rows kept
            asyncio.run(_batches(service, bodies[: max(1, len(requests) // BATCH + 1)]))
            asyncio.run(_singles(service, singles[: len(requests)]))
        measured: dict[str, dict[str, list[float]]] = {m: {"batch": [], "single": []} for m in MODES}
        for round_ in range(args.rounds):
            for mode, service in services.items():
                started = time.perf_counter()
                asyncio.run(_batches(service, bodies))
                measured[mode]["batch"].append(len(bodies) * BATCH / (time.perf_counter() - started))
                started = time.perf_counter()
                asyncio.run(_singles(service, singles))
                measured[mode]["single"].append(len(singles) / (time.perf_counter() - started))
            progress(f"round {round_ + 1}: " + ", ".join(f"{m} {measured[m]['batch'][-1]:.0f}/s" for m in MODES))
    summary: dict[str, Any] = {}
    for mode in MODES:
        summary[mode] = {
            "batch_decisions_per_s": round(statistics.median(measured[mode]["batch"])),
            "single_checks_per_s": round(statistics.median(measured[mode]["single"])),
        }
    for key in ("batch_decisions_per_s", "single_checks_per_s"):
        summary["log_with_reasons"][f"{key}_vs_without_reasons"] = round(
            summary["log_with_reasons"][key] / summary["log_without_reasons"][key] - 1.0, 3)
    results = {"machine": machine_info(), "size": args.size, "forget": args.forget, "rounds": measured,
               "summary": summary}
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
