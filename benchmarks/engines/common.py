"""Small helpers shared by the engines benchmark: progress, statistics, memory, the machine."""

from __future__ import annotations

import datetime as dt
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
START = time.perf_counter()


def progress(message: str) -> None:
    """One line on stderr, with the seconds since this process started."""
    print(f"[{time.perf_counter() - START:8.1f}s] {message}", file=sys.stderr, flush=True)


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100), linear between the closest ranks (numpy's default)."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary_us(nanoseconds: list[int]) -> dict[str, Any]:
    """n, p50, p99, mean, min and max of timings, in microseconds."""
    if not nanoseconds:
        return {"n": 0}
    us = [n / 1e3 for n in nanoseconds]
    return {
        "n": len(us),
        "p50_us": statistics.median(us),
        "p99_us": percentile(us, 99),
        "mean_us": statistics.fmean(us),
        "min_us": min(us),
        "max_us": max(us),
    }


def proc_status() -> dict[str, float]:
    """This process's resident memory now (rss) and its peak (hwm), in MiB, from /proc."""
    out: dict[str, float] = {}
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    out["rss_mib"] = int(line.split()[1]) / 1024
                elif line.startswith("VmHWM:"):
                    out["hwm_mib"] = int(line.split()[1]) / 1024
    except OSError:
        pass
    return out


def loadavg() -> list[float]:
    """The 1, 5 and 15 minute load averages: how busy the (shared) machine was."""
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []


def _version(name: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:
        return None


def commit() -> str:
    """The privilog commit measured, marked when the engine's sources differ from it."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "dsl", "engine", "privilog", "rules"],
            cwd=ROOT, capture_output=True, text=True, check=True,
        ).stdout.strip()
        return head + (" (engine tree modified)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def machine_info() -> dict[str, Any]:
    """The CPU model, cores, memory, software versions, date, load average and commit."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cpu_model": cpu,
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_gib": memory,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "pydatalog": _version("pyDatalog"),
        "regorus": _version("gordon-to-regorus"),
        "loadavg": loadavg(),
        "privilog_commit": commit(),
    }


def timer_overhead_ns(samples: int = 20000) -> float:
    """The median cost of two back-to-back ``perf_counter_ns`` calls: the floor of every figure."""
    clock = time.perf_counter_ns
    out = []
    for _ in range(samples):
        t0 = clock()
        t1 = clock()
        out.append(t1 - t0)
    return float(statistics.median(out))
