"""``privilog decide`` (issue 35): a file of requests decided in process, against the compiled
engine's per-check figure and the Spark pipeline's recorded times.

    python -m benchmarks.decide [--sizes 1e4,1e5,1e6] [--data /tmp/privilog-decide-bench]
                                [--out benchmarks/decide/results.json]
    python -m benchmarks.decide --report      # the table again, from results.json

The deployment is ``privilog generate --format csv --entities 100000 --grants 100000
--requests 1000000 --seed 1`` (pure Python, about 20 s, cached under ``--data``): the same
deployment and log as the pipeline benchmark's 10^6 run (``benchmarks/pipeline``, which
writes it as Parquet). Each size is the first N requests of the log.

For each size, in a fresh process (``python -m privilog decide REQUESTS --world DIR --out
FILE.csv``): the wall and CPU time from launch to exit, and the peak resident memory; the
same with no requests at all (start-up: the world loaded), and decisions a second as N over
the time beyond start-up, by wall and by CPU. Then, in this process, the compiled engine on
the same world: ``Authorizer.allows`` (allow or deny only: what ``privilog serve`` answers)
and ``Authorizer.tabled`` (the row ``decide`` writes) per request, the median over the first
20,000 requests of the log after one warm-up pass; the first pass's time is the plans'
compiling. The crossover with the pipeline is read from ``benchmarks/pipeline/results.json``
(its wall time at 10^5 and 10^6 requests): the size beyond which a pipeline run is shorter,
if the two lines cross. Results, with the machine, date and load average, go to ``--out``.
Nothing here asserts a figure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.engines.common import ROOT, machine_info, progress

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results.json"
PIPELINE = ROOT / "benchmarks" / "pipeline" / "results.json"
ENTITIES = GRANTS = 100_000
REQUESTS = 1_000_000
SEED = 1
SAMPLE = 20_000  # requests timed one by one in this process
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}


def deployment(data: Path) -> Path:
    """The generated deployment (CSV), made once."""
    folder = data / f"r{REQUESTS:.0e}-e{ENTITIES:.0e}-g{GRANTS:.0e}-s{SEED}".replace("+0", "").replace("+", "")
    if (folder / "requests.csv").exists():
        return folder
    progress(f"generating {folder} (about 20 s)")
    data.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "privilog", "generate", "--out", str(folder), "--format", "csv"]
    argv += ["--entities", str(ENTITIES), "--grants", str(GRANTS), "--requests", str(REQUESTS), "--seed", str(SEED)]
    subprocess.run(argv, check=True, env=ENV)
    return folder


def head(folder: Path, n: int) -> Path:
    """The first ``n`` requests of the log, as a file of their own (made once)."""
    path = folder.parent / f"{folder.name}-requests-{n}.csv"
    if n == REQUESTS:
        return folder / "requests.csv"
    if not path.exists():
        with (folder / "requests.csv").open(encoding="utf-8") as source, path.open("w", encoding="utf-8") as out:
            for i, line in enumerate(source):
                if i > n:
                    break
                out.write(line)
    return path


def timed(argv: list[str]) -> dict[str, Any]:
    """One run in a fresh process: wall and CPU seconds, peak resident memory, and its summary line."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    assert process.stderr is not None
    lines = process.stderr.read().splitlines()
    process.wait()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {lines[-3:]}")
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "peak_rss_mib": round(usage.ru_maxrss / 1024),
        "summary": lines[-1] if lines else "",
    }


def decide_run(folder: Path, requests: Path, out: Path) -> dict[str, Any]:
    argv = [sys.executable, "-m", "privilog", "decide", str(requests), "--world", str(folder), "--out", str(out)]
    return timed(argv)


def in_process(folder: Path) -> dict[str, Any]:
    """The compiled engine on the same world, per request: allows and tabled (median µs)."""
    import csv
    import json as js

    from privilog.engine.authorizer import RequestError

    import privilog

    started = time.perf_counter()
    authz = privilog.load("cdap", str(folder), bind=False)
    loaded = time.perf_counter() - started
    with (folder / "requests.csv").open(encoding="utf-8", newline="") as f:
        rows = []
        for i, row in enumerate(csv.DictReader(f)):
            if i >= SAMPLE:
                break
            args = js.loads(row["args"]) if row["args"] else None
            rows.append((row["principal"], row["operation"], row["entity"], args))
    out: dict[str, Any] = {"load_s": round(loaded, 2), "sample": len(rows)}
    for name in ("allows", "tabled"):
        call = getattr(authz, name)
        first = time.perf_counter()
        for row in rows:  # the first pass compiles each operation's plans
            with contextlib.suppress(RequestError):
                call(*row)
        out[f"{name}_first_pass_s"] = round(time.perf_counter() - first, 2)
        timings = []
        clock = time.perf_counter_ns
        for row in rows:
            t0 = clock()
            with contextlib.suppress(RequestError):
                call(*row)
            timings.append(clock() - t0)
        out[f"{name}_p50_us"] = round(statistics.median(timings) / 1000, 2)
        out[f"{name}_mean_us"] = round(statistics.fmean(timings) / 1000, 2)
    return out


def pipeline_walls() -> dict[int, float]:
    """The pipeline's recorded wall time by requests (its 10^5 and 10^6 runs), if recorded."""
    try:
        runs = json.loads(PIPELINE.read_text())["runs"]
    except (OSError, ValueError, KeyError):
        return {}
    return {int(r["size"]["requests"]): float(r["pipeline"]["wall_s"]) for r in runs.values() if "pipeline" in r}


def crossover(startup: float, rate: float, pipeline: dict[int, float]) -> dict[str, Any]:
    """Where ``decide`` (its fixed cost, ``startup``, plus N over its steady rate) and the pipeline (a
    line through its 10^5 and 10^6 walls) cross: the size beyond which the pipeline is the shorter,
    or None if they do not."""
    if 100_000 not in pipeline or 1_000_000 not in pipeline or rate <= 0:
        return {"requests": None, "why": "no pipeline figures at 10^5 and 10^6"}
    slope = (pipeline[1_000_000] - pipeline[100_000]) / 900_000  # seconds a request, at the margin
    fixed = pipeline[100_000] - slope * 100_000
    mine = 1 / rate
    if mine <= slope:
        return {
            "requests": None,
            "why": "decide's time a request is below the pipeline's: the lines do not cross",
            "pipeline_s_per_1e6": round(slope * 1e6, 1),
            "decide_s_per_1e6": round(mine * 1e6, 1),
        }
    at = (fixed - startup) / (mine - slope)
    return {
        "requests": round(at),
        "pipeline_s_per_1e6": round(slope * 1e6, 1),
        "decide_s_per_1e6": round(mine * 1e6, 1),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.decide", description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1e4,1e5,1e6", help="requests per run, up to 1e6 (default 1e4,1e5,1e6)")
    p.add_argument("--data", type=Path, default=Path("/tmp/privilog-decide-bench"))
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--report", action="store_true", help="print the table from --out and stop")
    args = p.parse_args(argv)
    if args.report:
        print(report(json.loads(args.out.read_text())))
        return 0
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    folder = deployment(args.data)
    world = {"entities": ENTITIES, "grants": GRANTS}
    result: dict[str, Any] = {"machine": machine_info(), "world": world, "runs": []}
    progress("start-up: no requests")
    empty = head(folder, 0)
    result["startup"] = decide_run(folder, empty, args.data / "decisions-0.csv")
    for n in sizes:
        progress(f"privilog decide: {n:,} requests")
        run = decide_run(folder, head(folder, n), args.data / f"decisions-{n}.csv")
        run["requests"] = n
        beyond_wall = max(run["wall_s"] - result["startup"]["wall_s"], 1e-9)
        beyond_cpu = max(run["cpu_s"] - result["startup"]["cpu_s"], 1e-9)
        run["per_s_wall"] = round(n / beyond_wall)
        run["per_s_cpu"] = round(n / beyond_cpu)
        run["per_s_overall"] = round(n / run["wall_s"])
        result["runs"].append(run)
        progress(f"  {run}")
    runs = result["runs"]
    if len(runs) > 1:  # between the two largest runs: neither start-up nor the plans' compiling (done early)
        a, b = runs[-2], runs[-1]
        n = b["requests"] - a["requests"]
        result["marginal"] = {
            "between": [a["requests"], b["requests"]],
            "per_s_wall": round(n / max(b["wall_s"] - a["wall_s"], 1e-9)),
            "per_s_cpu": round(n / max(b["cpu_s"] - a["cpu_s"], 1e-9)),
        }
    progress("in process: allows and tabled per request")
    result["engine"] = in_process(folder)
    largest = result["runs"][-1]
    result["pipeline_wall_s"] = {str(k): v for k, v in sorted(pipeline_walls().items())}
    rate = result.get("marginal", largest)["per_s_wall"]
    fixed = largest["wall_s"] - largest["requests"] / rate  # start-up and plans, as the largest run paid them
    result["crossover"] = crossover(fixed, rate, pipeline_walls())
    result["machine"]["loadavg_end"] = os.getloadavg()
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(report(result))
    return 0


def report(result: dict[str, Any]) -> str:
    m = result["machine"]
    lines = [
        f"{m.get('date', '?')}, {m.get('cpu_model', '?')}, {m.get('cpu_count', '?')} cores, "
        f"load average {m.get('loadavg', '?')} at the start, {m.get('loadavg_end', '?')} at the end",
        "",
        "| requests | wall | CPU | peak RSS | decisions/s (beyond start-up, wall) | (CPU) | overall |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    s = result["startup"]
    lines.append(f"| 0 (start-up) | {s['wall_s']} s | {s['cpu_s']} s | {s['peak_rss_mib']} MiB | | | |")
    for r in result["runs"]:
        lines.append(
            f"| {r['requests']:,} | {r['wall_s']} s | {r['cpu_s']} s | {r['peak_rss_mib']} MiB | "
            f"{r['per_s_wall']:,} | {r['per_s_cpu']:,} | {r['per_s_overall']:,} |"
        )
    if "marginal" in result:
        g = result["marginal"]
        lines += ["", f"steady state, from {g['between'][0]:,} to {g['between'][1]:,} requests (no start-up, plans "
                  f"compiled): {g['per_s_wall']:,} decisions/s by wall, {g['per_s_cpu']:,} by CPU"]  # fmt: skip
    e = result["engine"]
    lines += [
        "",
        f"compiled engine, in process, per request (median of {e['sample']:,}, after a first pass): "
        f"allows {e['allows_p50_us']} µs (mean {e['allows_mean_us']}), tabled {e['tabled_p50_us']} µs "
        f"(mean {e['tabled_mean_us']}); first pass (plans compiled): allows {e['allows_first_pass_s']} s, "
        f"tabled {e['tabled_first_pass_s']} s; world loaded in {e['load_s']} s",
        f"pipeline (recorded): {result.get('pipeline_wall_s')}; crossover: {result['crossover']}",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
