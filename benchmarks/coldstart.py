"""How long one `privilog check` takes from nothing: a new process, its imports, the policy, the world.

    python -m benchmarks.coldstart [--runs 11] [--privilog PATH] [--cache on|off|both]

Runs ``privilog check user:alice namespace.get namespace:sales --world privilog/samples/world.yaml``
(allowed: exit 0) ``--runs`` times in a row after one untimed run (which fills the policy cache and the
page cache), and prints the median and the spread of the wall time and of the CPU time (user + system)
of the child. ``--privilog``: the console script to time (default: the one beside this Python), such
as a fresh venv's with the base install only (no extras). ``--cache``: with the user's policy cache
(the default, as a user runs it), without it (``PRIVILOG_CACHE=off``: every run parses the policy), or
both. The CPU time is the steadier figure on a shared machine: wall time also counts waiting for a core.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REQUEST = ["check", "user:alice", "namespace.get", "namespace:sales"]


def _once(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0 or not done.stdout.startswith("ALLOW"):
        raise SystemExit(f"{' '.join(command)}: exit {done.returncode}\n{done.stdout}{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(privilog: str, runs: int, cache: bool, cache_dir: str) -> dict[str, float]:
    world = str(ROOT / "privilog" / "samples" / "world.yaml")
    command = [privilog, *REQUEST, "--world", world]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env["PRIVILOG_CACHE_DIR"] = cache_dir
    if not cache:
        env["PRIVILOG_CACHE"] = "off"
    _once(command, env)  # untimed: fills the cache (when on) and the page cache
    walls, cpus = zip(*(_once(command, env) for _ in range(runs)), strict=True)
    return {
        "wall_median": statistics.median(walls),
        "wall_min": min(walls),
        "wall_max": max(walls),
        "cpu_median": statistics.median(cpus),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11, help="timed runs (default 11)")
    parser.add_argument("--privilog", default=str(Path(sys.executable).parent / "privilog"), help="the script")
    parser.add_argument("--cache", choices=("on", "off", "both"), default="both", help="the policy cache")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(f"{args.privilog}: {' '.join(REQUEST)} --world privilog/samples/world.yaml; {args.runs} runs; "
          f"{os.cpu_count()} cores, load average {load:.1f}")  # fmt: skip
    with tempfile.TemporaryDirectory() as cache_dir:
        for cache in {"on": [True], "off": [False], "both": [True, False]}[args.cache]:
            r = measure(args.privilog, args.runs, cache, cache_dir)
            print(
                f"policy cache {'on ' if cache else 'off'}: median {r['wall_median']:.3f} s wall "
                f"(min {r['wall_min']:.3f}, max {r['wall_max']:.3f}), median {r['cpu_median']:.3f} s CPU"
            )


if __name__ == "__main__":
    main()
