"""The engines benchmark (issue 11): privilog, Rego through regorus, and a hand-coded index, side by side.

    python -m benchmarks.engines [--sizes 100k,1M,10M] [--engines floor,regorus,...]
                                 [--pydatalog-max 10k] [--per-kind 400] [--rounds 5] [--budget 20]
                                 [--memory-limit GIB] [--keep-going]
                                 [--out benchmarks/engines/results.json] [--report]

Each size runs in a child process of its own (``child.py``), and each
engine's load from the world file in a fresh process of its own (``load.py``)
for clean load times and peak memory; a load that passes ``--memory-limit``
or ``--load-timeout`` is stopped and the engine recorded as skipped, with the
memory and time it had reached. Progress goes to stderr, the table to stdout,
every figure with the machine, date, load average and commit to ``--out``.

The run stops at the first disagreement between an engine and the reference
(exit 3): the request, every engine's answer and the grants that bear on it
are printed and written to ``--out``; ``--keep-going`` records every
disagreement and times the engines anyway (then exits 3 at the end).
Measurements, not tests: nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.engines.adapters import ALL_ENGINES
from benchmarks.engines.common import ROOT, machine_info, progress
from benchmarks.engines.report import render, targets

DEFAULT_OUT = Path(__file__).resolve().parent / "results.json"


DISAGREED = 3  # the exit status of a run that found engines disagreeing


def available_mib() -> float:
    """The memory available now (MemAvailable), in MiB; 0 when unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0


def size_arg(text: str) -> int:
    text = text.strip().lower().replace("_", "").replace(",", "")
    for suffix, factor in (("k", 1_000), ("m", 1_000_000)):
        if text.endswith(suffix):
            return int(float(text[:-1]) * factor)
    return int(float(text))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.engines", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100k,1M,10M", help="grants per world (default 100k,1M,10M: issue 38's)")
    parser.add_argument("--engines", default=",".join(ALL_ENGINES), help=f"default {','.join(ALL_ENGINES)}")
    parser.add_argument("--pydatalog-max", type=size_arg, default=10_000,
                        help="largest world the reference backend runs on (default 10k)")
    parser.add_argument("--per-kind", type=int, default=400, help="requests of each kind (half drawn from grants)")
    parser.add_argument("--rounds", type=int, default=5, help="times each request is timed")
    parser.add_argument("--visible", type=int, default=200, help="visible calls")
    parser.add_argument("--visible-rounds", type=int, default=3)
    parser.add_argument("--why", type=int, default=100, help="explanations timed, of each kind")
    parser.add_argument("--changes", type=int, default=200, help="grants added then revoked")
    parser.add_argument("--budget", type=float, default=20.0,
                        help="seconds of timed calls per engine and figure; a slower engine is cut short")
    parser.add_argument("--load-timeout", type=float, default=900.0, help="seconds for one engine's load")
    parser.add_argument("--size-timeout", type=float, default=3600.0, help="seconds for one size")
    parser.add_argument("--memory-limit", type=float, default=None, metavar="GIB",
                        help="resident memory a load may reach before it is stopped (and the engine skipped); "
                             "default 80%% of the memory available at the start")
    parser.add_argument("--keep-going", action="store_true",
                        help="on a disagreement, record it and go on timing (default: stop at the first)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--report", action="store_true", help="print the table of --out and stop")
    args = parser.parse_args(argv)

    if args.report:
        print(render(json.loads(args.out.read_text(encoding="utf-8"))))
        return 0

    sizes = [size_arg(s) for s in args.sizes.split(",") if s.strip()]
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = [e for e in engines if e not in ALL_ENGINES]
    if unknown:
        parser.error(f"unknown engine(s) {', '.join(unknown)}: the engines are {', '.join(ALL_ENGINES)}")
    limit_mib = args.memory_limit * 1024 if args.memory_limit is not None else 0.8 * available_mib()
    machine = machine_info()
    progress(f"{machine['cpu_model']}, {machine['cpu_count']} cores, {machine['memory_gib']} GiB, "
             f"load average {machine['loadavg']}, privilog {machine['privilog_commit']}")
    results: dict[str, Any] = {
        "machine": machine,
        "command": "python -m benchmarks.engines " + " ".join(sys.argv[1:] if argv is None else argv),
        "sizes": [],
        "memory_limit_mib": limit_mib,
    }
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    with tempfile.TemporaryDirectory(prefix="privilog-engines-") as workdir:
        for size in sizes:
            cfg = {
                "size": size, "seed": args.seed, "engines": engines, "per_kind": args.per_kind,
                "rounds": args.rounds, "visible": args.visible, "visible_rounds": args.visible_rounds,
                "why": args.why, "changes": args.changes, "budget": args.budget,
                "pydatalog_max": args.pydatalog_max, "load_timeout": args.load_timeout, "workdir": workdir,
                "memory_limit_mib": limit_mib, "keep_going": args.keep_going,
            }
            out = Path(workdir) / f"result-{size}.json"
            progress(f"== {size:,} grants: a child process")
            try:
                done = subprocess.run([sys.executable, "-m", "benchmarks.engines.child", json.dumps(cfg), str(out)],
                                      cwd=ROOT, env=env, timeout=args.size_timeout, check=False)
                finished = done.returncode in (0, DISAGREED) and out.exists()
                error = None if finished else f"child exited {done.returncode}"
            except subprocess.TimeoutExpired:
                error = f"did not finish within {args.size_timeout:g} s"
            if error:
                progress(f"== {size:,} grants: {error}")
                results["sizes"].append({"size": size, "error": error})
            else:
                results["sizes"].append(json.loads(out.read_text(encoding="utf-8")))
            results["targets"] = targets(results)
            args.out.write_text(json.dumps(results, indent=1, default=str) + "\n", encoding="utf-8")
            if results["sizes"][-1].get("disagreement"):
                progress(f"== {size:,} grants: the engines disagree; the run stops here (--keep-going to go on)")
                break
    results["machine"]["loadavg_end"] = machine_info()["loadavg"]
    args.out.write_text(json.dumps(results, indent=1, default=str) + "\n", encoding="utf-8")
    print(render(results))
    progress(f"results written to {args.out}")
    disagreed = any(s.get("disagreement") or s.get("agreement", {}).get("counts") for s in results["sizes"])
    return DISAGREED if disagreed else 0


if __name__ == "__main__":
    raise SystemExit(main())
