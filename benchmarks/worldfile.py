"""A world bound to its file: what one change costs, by the world's size (issue 17, item 2).

    python -m benchmarks.worldfile [--grants 10000,100000,1000000] [--changes 300] [--dir DIR]

For each size, a YAML world of that many grants (block list, flow entries, a comment every
thousand lines) is written, then timed in one process:

* **load**: ``load_world(path, actions, bind=True)``, the world alone (no authorizer);
* **change**: a grant or a revoke through the bound world, each a new fact: the lock taken,
  the file's identity and the log's size compared, the change appended to the log and
  fsynced (``--changes`` of them, alternating; p50, p99 and the slowest);
* **compaction**: ``World.save()``, the log written into the file in place (the edited text
  read back to check it) and removed; before the change log, every change cost this;
* **load with a log**: the same world read again by a reader that does not bind, with
  the changes in its log replayed.

Every figure is wall time on the machine it runs on; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import tempfile
import time
from pathlib import Path

from privilog.engine.ids import EntityId
from privilog.engine.world import Grant, load_world

ACTIONS = ("READ", "WRITE", "EXECUTE", "ADMIN")


def write_world(path: Path, grants: int) -> None:
    lines = ["# a generated world (benchmarks/worldfile.py)", "admins: [user:root]", "grants:"]
    for n in range(grants):
        if n % 1000 == 0:
            lines.append(f"  # block {n // 1000}")
        lines.append(f"  - [user:u{n % 5000}, {ACTIONS[n % 4]}, dataset:ns{n % 100}.d{n}]")
    path.write_text("\n".join(lines) + "\n")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def measure(folder: Path, grants: int, changes: int) -> dict[str, float]:
    path = folder / f"world-{grants}.yaml"
    write_world(path, grants)
    started = time.perf_counter()
    world = load_world(path, ACTIONS, bind=True)
    loaded = time.perf_counter() - started
    times = []
    for n in range(changes):
        grant = Grant(f"user:new{n // 2}", "READ", EntityId.parse(f"dataset:fresh.d{n // 2}"))
        started = time.perf_counter()
        if n % 2 == 0:
            world.grant("user:root", [grant])
        else:
            world.revoke("user:root", [grant])
        times.append(time.perf_counter() - started)
    log = path.with_name(path.name + ".log")
    log_bytes = log.stat().st_size if log.exists() else 0
    started = time.perf_counter()
    load_world(path, ACTIONS)
    reloaded = time.perf_counter() - started
    started = time.perf_counter()
    world.save()
    compacted = time.perf_counter() - started
    return {
        "grants": grants,
        "file MiB": path.stat().st_size / 2**20,
        "load s": loaded,
        "change p50 ms": statistics.median(times) * 1000,
        "change p99 ms": percentile(times, 0.99) * 1000,
        "change max ms": max(times) * 1000,
        "log KiB": log_bytes / 1024,
        "load with the log s": reloaded,
        "compaction s": compacted,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--grants", default="10000,100000,1000000", help="world sizes, comma-separated")
    parser.add_argument("--changes", type=int, default=300, help="changes timed at each size")
    parser.add_argument("--dir", help="where the worlds are written (default: a temporary folder)")
    args = parser.parse_args()
    print(f"{time.strftime('%Y-%m-%d')}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"CPython {platform.python_version()}, load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        rows = [measure(Path(folder), int(size), args.changes) for size in args.grants.split(",")]
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for row in rows:
        print("| " + " | ".join(f"{row[k]:,}" if isinstance(row[k], int) else f"{row[k]:.3g}" for k in keys) + " |")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
