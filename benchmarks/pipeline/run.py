"""``privilog pipeline decide`` against a hand-written Spark SQL query, at sizes up to 10^7 requests.

    python3 -m benchmarks.pipeline.run [--sizes 1e5,1e6,1e7] [--data /tmp/privilog-pipeline-bench]
                                       [--out benchmarks/pipeline/results.json] [--seed 1]

A size is ``REQUESTS`` (with a tenth as many entities and grants) or
``REQUESTSxENTITIES`` (as many grants as entities), e.g. ``1e5`` or ``1e4x2e3``;
``small`` is ``1e4x2e3``, a run of a few minutes that checks the harness end to end.

For each size the deployment is generated once (``privilog generate``, Parquet,
cached under ``--data``, keyed by size and seed) and then, each in a fresh process
(so its JVM's memory is its own):

1. ``privilog pipeline decide`` (the generic engine);
2. ``benchmarks.pipeline.handwritten decide`` (the same decisions, written by hand
   for cdap.policy, in a session made the same way: local[*], 4 shuffle partitions,
   the same driver memory: ``--driver-memory``, or the pipeline's default);
3. ``benchmarks.pipeline.handwritten compare``: the requests the two decide
   differently (on the decision, the unmet requirement ids, or the whole unmet list);
4. ``privilog pipeline unused`` (least privilege over the same inputs; ``--no-unused``
   leaves it out): its wall next to decide's, and the grants it found unused and
   recommends removing, with the share of all grants each is.

Each run is timed from launch to exit. Its resident memory is the sum over its
process tree (the Python driver and the JVM it starts), read from /proc every half
second; the JVM's own high-water mark (VmHWM) is kept too. Its progress lines
(``[  12.3s] ...``) are kept in a log file and timed as they arrive, which splits
the wall time into phases: Spark start-up (launch to the first line after the
session is up), reading, checking and encoding, the engine's recursion, deciding,
writing. Ratios are given with and without start-up.

Progress goes to stderr, a markdown table to stdout, every figure (with the
machine, the date and the load average) to ``--out``, one entry per size, replaced
when the size is run again. Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
# Benchmark the tree this file is in, not whatever is installed (as benchmarks/run.py does).
sys.path[:0] = [str(ROOT)]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
NAMED_SIZES = {"small": "1e4x2e3"}
LINE = re.compile(r"^\[\s*(\d+(?:\.\d+)?)s\] (.*)$")
START = time.monotonic()


def progress(message: str) -> None:
    print(f"[{time.monotonic() - START:8.1f}s] {message}", file=sys.stderr, flush=True)


# ---- sizes ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Size:
    """One point: requests, and the deployment they are decided over."""

    requests: int
    entities: int
    grants: int

    @classmethod
    def parse(cls, text: str) -> Size:
        """``1e5`` (a tenth as many entities and grants) or ``1e4x2e3``.

        >>> Size.parse("1e5"), Size.parse("small").key
        (Size(requests=100000, entities=10000, grants=10000), 'r1e4-e2e3-g2e3')
        """
        text = NAMED_SIZES.get(text.strip(), text.strip())
        requests, _, entities = text.lower().partition("x")
        r = int(float(requests))
        e = int(float(entities)) if entities else max(1, r // 10)
        return cls(r, e, e)

    @property
    def key(self) -> str:
        return f"r{_short(self.requests)}-e{_short(self.entities)}-g{_short(self.grants)}"


def _short(n: int) -> str:
    """1e5 for 100000, 2e3 for 2000, the digits otherwise."""
    digits = str(n).rstrip("0")
    zeros = len(str(n)) - len(digits)
    return f"{digits}e{zeros}" if zeros >= 2 and len(digits) == 1 else str(n)


# ---- the machine ----------------------------------------------------------------------


def _first(path: str, prefix: str) -> str | None:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(prefix):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def loadavg() -> list[float]:
    """The 1, 5 and 15 minute load averages: how busy the (shared) machine was."""
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []


def machine_info() -> dict[str, Any]:
    """What the figures were measured on."""
    memory = _first("/proc/meminfo", "MemTotal")
    try:
        java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    except (OSError, IndexError):
        java = "unknown"
    try:
        from importlib.metadata import version

        pyspark = version("pyspark")
    except Exception:  # informational only
        pyspark = "unknown"
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "dsl", "engine", "privilog", "rules", "benchmarks/pipeline",
             ":!benchmarks/pipeline/results.json"],  # written by the run's own earlier sizes
            cwd=ROOT, capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        commit += " (tree modified)" if dirty else ""
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return {
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cpu_model": _first("/proc/cpuinfo", "model name") or "unknown",
        "nproc": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gib": round(int(memory.split()[0]) / 1024 / 1024, 1) if memory else None,
        "java": java,
        "pyspark": pyspark,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "privilog_commit": commit,
    }


# ---- one process, timed ---------------------------------------------------------------


def _children() -> dict[int, list[int]]:
    """Every process's children, from /proc."""
    tree: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(parent, []).append(int(entry.name))
    return tree


def _status(pid: int) -> dict[str, str]:
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


def _spawning(pid: int, parent: int) -> bool:
    """Whether ``pid`` is a process its parent is starting and that has not yet run a program of its
    own: it is the parent's image (the same executable), its memory the parent's. The JVM starts
    Hadoop's shell commands so, from a task's thread (named after it, ``Executor task l``); summed,
    a sample taken then counted the JVM's memory twice (issue 15's 10^5 and 10^6 runs: a 4.3 GiB
    JVM read as a 7.6 GiB tree)."""
    try:
        return os.readlink(f"/proc/{pid}/exe") == os.readlink(f"/proc/{parent}/exe")
    except OSError:
        return False


@dataclass
class Memory:
    """The resident memory of a process tree, sampled: the peak of the sum, and each process's peak."""

    peak_tree_mib: float = 0.0
    peak_by_process: dict[str, float] = field(default_factory=dict)  # "name pid" -> VmHWM, MiB
    samples: int = 0

    def sample(self, root: int) -> None:
        tree, pids, total = _children(), [root], 0.0
        parents: dict[int, int] = {}
        for pid in pids:
            for child in tree.get(pid, []):
                parents[child] = pid
                pids.append(child)
        for pid in pids:
            status = _status(pid)
            if "VmRSS" not in status:
                continue  # exited, or a kernel thread
            if pid in parents and _spawning(pid, parents[pid]):
                continue  # the JVM's memory again, not more of it
            total += int(status["VmRSS"].split()[0]) / 1024
            name = f"{status.get('Name', '?')} {pid}"
            hwm = int(status.get("VmHWM", "0 kB").split()[0]) / 1024
            self.peak_by_process[name] = max(self.peak_by_process.get(name, 0.0), hwm)
        self.peak_tree_mib = max(self.peak_tree_mib, total)
        self.samples += 1

    @property
    def peak_jvm_mib(self) -> float:
        return max((v for k, v in self.peak_by_process.items() if k.startswith("java ")), default=0.0)


@dataclass
class Line:
    """A progress line: when the harness saw it, when the process stamped it, and what it says."""

    at: float  # seconds since launch, harness clock
    stamped: float | None  # the process's own ``[  12.3s]``
    text: str


@dataclass
class Run:
    """One timed process: its exit, wall time, memory, progress lines and standard output."""

    command: list[str]
    returncode: int
    wall: float
    memory: Memory
    lines: list[Line]
    stdout: str
    log: Path

    def to_json(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "returncode": self.returncode,
            "wall_s": round(self.wall, 2),
            "peak_tree_rss_mib": round(self.memory.peak_tree_mib),
            "peak_jvm_rss_mib": round(self.memory.peak_jvm_mib),
            "peak_rss_by_process_mib": {k: round(v) for k, v in sorted(self.memory.peak_by_process.items())},
            "memory_samples": self.memory.samples,
            "lines": [[round(x.at, 2), x.stamped, x.text] for x in self.lines],
            "stdout": self.stdout.strip(),
            "log": str(self.log),
        }


def timed(command: list[str], log: Path, label: str, timeout: float | None = None) -> Run:
    """Run ``command`` in a new session; time it, sample its tree's memory, keep its output in ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    lines: list[Line] = []
    stdout: list[str] = []
    memory = Memory()
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as out:
        out.write("$ " + " ".join(command) + "\n")
        child = subprocess.Popen(
            command, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,  # its own process group, so a time-out stops the JVM too
        )  # fmt: skip
        assert child.stdout is not None and child.stderr is not None

        def read(stream: IO[str], keep: list[str] | None) -> None:
            for raw in stream:
                at = time.monotonic() - started
                text = raw.rstrip("\n")
                out.write(f"{at:9.2f} {text}\n")
                out.flush()
                if keep is not None:
                    keep.append(raw)
                match = LINE.match(text)
                if match:
                    lines.append(Line(at, float(match.group(1)), match.group(2)))
                    progress(f"  {label}: {match.group(2)}")
                elif text.startswith("generate: "):
                    progress(f"  {text}")

        readers = [
            threading.Thread(target=read, args=(child.stderr, None), daemon=True),
            threading.Thread(target=read, args=(child.stdout, stdout), daemon=True),
        ]
        for thread in readers:
            thread.start()
        try:
            while child.poll() is None:
                memory.sample(child.pid)
                if timeout is not None and time.monotonic() - started > timeout:
                    progress(f"  {label}: over {timeout:.0f}s, stopping it")
                    os.killpg(child.pid, signal.SIGTERM)
                    child.wait(30)
                    break
                time.sleep(0.5)
        except BaseException:
            os.killpg(child.pid, signal.SIGTERM)
            raise
        wall = time.monotonic() - started
        for thread in readers:
            thread.join(10)
        out.write(f"exit {child.returncode} after {wall:.2f}s\n")
    return Run(command, child.wait(), wall, memory, lines, "".join(stdout), log)


# ---- phases ---------------------------------------------------------------------------

# Which phase the time up to a progress line belongs to, by the line's text.
PHASES: tuple[tuple[str, str], ...] = (
    (r"^starting Spark", "Python start, imports, policy"),
    (r"^reading ", "read tables (schemas)"),
    (r"^checked the encoding", "check rows, dictionary, encoding"),
    (r"^measured base relations", "materialise + measure base relations"),
    (r"^recursion round", "recursion (ancestor, descendant, groups)"),
    (r"requests name entities not in the inventory", "plan rounds (new entities)"),
    (r"^round \d+: decided", "evaluate rules, assemble decisions"),
    (r"^wrote the decisions", "the query, writing the decisions (one job)"),
    (r"^(rejected|done)", "write the output, count it"),
    (r"^checking the encoding", "check every request"),
    (r"^world and hierarchy tables", "world and hierarchy tables, measured"),
    (r"^fused plans for", "plan the fused decisions (driver)"),
    (r"^ran the fused plans", "the fused plans run, each output kept"),
    (r"^decided$", "assemble the decisions"),
    (r"^writing rejects", "write decisions"),
    (r"^counting decisions by operation", "write rejects"),
    (r"^counting the input rows", "count decisions by operation"),
    (r"^moving the run", "the rows-in check"),
)
START_UP = "Spark start-up"
EXIT = "JVM shut-down, exit"


def phases(run: Run) -> dict[str, float]:
    """Seconds per phase: each stretch between progress lines goes to the phase of the line ending it."""
    out: dict[str, float] = {}
    previous, spark_started = 0.0, False
    for line in run.lines:
        if line.text.startswith("still at it"):
            continue  # a heartbeat: its stretch belongs to the line that ends the phase
        name = next((n for pattern, n in PHASES if re.search(pattern, line.text)), "other")
        if spark_started and line.text.startswith("reading "):
            name, spark_started = START_UP, False
        if line.text.startswith("starting Spark"):
            spark_started = True
        out[name] = out.get(name, 0.0) + line.at - previous
        previous = line.at
    out[EXIT] = run.wall - previous
    return {k: round(v, 2) for k, v in out.items()}


def rounds(lines: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    """The pipeline's rounds (requests decided together): each one's requests and seconds, from
    the end of the encoding or of the round before to ``round N: decided``. Lines as results.json
    holds them: ``[seconds, stamp, text]``."""
    out: list[dict[str, Any]] = []
    begin, requests = None, None
    for at, _stamp, text in lines:
        if text.startswith("checked the encoding"):
            begin = at
        counted = re.search(r"base relations .*\brequest ([\d,]+)", text)
        if counted and requests is None:
            requests = int(counted.group(1).replace(",", ""))
        decided = re.match(r"round (\d+): decided", text)
        if decided and begin is not None:
            out.append({"round": int(decided.group(1)), "requests": requests, "seconds": round(at - begin, 1)})
            begin, requests = at, None
    return out


def startup(run: Run) -> float:
    """Launch to the first line after Spark came up (Python start and imports included)."""
    for before, after in zip(run.lines, run.lines[1:], strict=False):
        if before.text.startswith("starting Spark"):
            return after.at
    return float("nan")


# ---- one size -------------------------------------------------------------------------


def deployment(size: Size, seed: int, data: Path, timeout: float | None) -> tuple[Path, dict[str, Any]]:
    """The generated tables for a size, generated once (into a staging folder, then renamed)."""
    folder = data / f"{size.key}-s{seed}"
    done = folder / "generated.json"
    if done.exists():
        progress(f"{size.key}: deployment cached in {folder}")
        return folder, json.loads(done.read_text())
    staging = data / f".{folder.name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    command = [
        sys.executable, "-m", "privilog", "generate", "--out", str(staging), "--format", "parquet",
        "--entities", str(size.entities), "--grants", str(size.grants), "--requests", str(size.requests),
        "--seed", str(seed),
    ]  # fmt: skip
    progress(f"{size.key}: generating the deployment")
    run = timed(command, data / "logs" / f"{folder.name}-generate.log", "generate", timeout)
    if run.returncode != 0:
        raise SystemExit(f"generate failed (exit {run.returncode}): see {run.log}")
    info = {"seconds": round(run.wall, 1), "summary": run.stdout.strip(), "seed": seed}
    (staging / "generated.json").write_text(json.dumps(info, indent=2) + "\n")
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)
    progress(f"{size.key}: {run.stdout.strip()}")
    return folder, info


def summarise(run: Run, requests: int) -> dict[str, Any]:
    """A run's figures: wall, start-up, rows per second (with and without start-up), memory, phases."""
    start = startup(run)
    figures = run.to_json()
    figures.update(
        startup_s=round(start, 2),
        rows_per_s=round(requests / run.wall),
        rows_per_s_after_startup=round(requests / (run.wall - start)) if run.wall > start else None,
        phases_s=phases(run),
    )
    if any(x.text.startswith("round ") for x in run.lines):
        figures["rounds"] = rounds(figures["lines"])
    return figures


def measure(size: Size, args: argparse.Namespace) -> dict[str, Any]:
    """Generate (or reuse) a size's deployment, decide it both ways, compare; the entry for results.json."""
    tables, generated = deployment(size, args.seed, Path(args.data), args.timeout)
    runs = Path(args.data) / "runs" / f"{size.key}-s{args.seed}"
    shutil.rmtree(runs / "pipeline", ignore_errors=True)
    shutil.rmtree(runs / "handwritten", ignore_errors=True)
    inputs = [f"--{t}={tables / t}" for t in ("entities", "grants", "members", "requests")]
    spark = [
        f"--partitions={args.partitions}",
        *([f"--driver-memory={args.driver_memory}"] if args.driver_memory else []),
    ]
    entry: dict[str, Any] = {
        "size": {"requests": size.requests, "entities": size.entities, "grants": size.grants, "seed": args.seed},
        "machine": machine_info(),
        "loadavg_start": loadavg(),
        "generated": generated,
        "spark": {"driver_memory": args.driver_memory or _default_driver_memory(), "partitions": args.partitions},
    }
    progress(f"{size.key}: privilog pipeline decide")
    pipeline = timed(
        [sys.executable, "-m", "privilog", "pipeline", "decide", *inputs, f"--out={runs / 'pipeline'}", *spark],
        runs / "pipeline.log",
        "pipeline",
        args.timeout,
    )
    entry["pipeline"] = summarise(pipeline, size.requests)
    progress(f"{size.key}: pipeline {pipeline.wall:.1f}s, exit {pipeline.returncode}; {pipeline.stdout.strip()}")
    if args.no_allowed_by:  # the hand-written query's columns: decisions and unmet requirements, no grants named
        progress(f"{size.key}: privilog pipeline decide --no-allowed-by")
        shutil.rmtree(runs / "lean", ignore_errors=True)
        lean = timed(
            [sys.executable, "-m", "privilog", "pipeline", "decide", *inputs, f"--out={runs / 'lean'}", *spark,
             "--no-allowed-by"],
            runs / "lean.log",
            "no allowed_by",
            args.timeout,
        )  # fmt: skip
        entry["no_allowed_by"] = summarise(lean, size.requests)
        progress(f"{size.key}: pipeline --no-allowed-by {lean.wall:.1f}s, exit {lean.returncode}")
        shutil.rmtree(runs / "lean", ignore_errors=True)
    if not args.no_handwritten:
        progress(f"{size.key}: the hand-written query")
        handwritten = timed(
            [
                sys.executable, "-m", "benchmarks.pipeline.handwritten", "decide", *inputs,
                f"--out={runs / 'handwritten'}", *spark, *(["--adaptive"] if args.handwritten_adaptive else []),
            ],
            runs / "handwritten.log",
            "handwritten",
            args.timeout,
        )  # fmt: skip
        entry["handwritten"] = summarise(handwritten, size.requests)
        entry["handwritten"]["adaptive"] = args.handwritten_adaptive
        progress(f"{size.key}: handwritten {handwritten.wall:.1f}s, exit {handwritten.returncode}")
        if pipeline.returncode == 0 and handwritten.returncode == 0:
            entry["ratio"] = ratios(entry["pipeline"], entry["handwritten"])
            if entry.get("no_allowed_by", {}).get("returncode") == 0:
                entry["ratio_no_allowed_by"] = ratios(entry["no_allowed_by"], entry["handwritten"])
            # more partitions than the runs: the comparison shuffles both whole tables
            partitions = max(args.partitions, size.requests // 250_000)
            entry["agreement"] = agreement(runs, args.driver_memory, partitions, args.timeout)
    if not args.no_unused:
        entry["unused"] = least_privilege(size, inputs, spark, runs, args.timeout)
        if entry["unused"]["returncode"] == 0 and pipeline.returncode == 0:
            entry["unused"]["ratio_to_decide"] = round(entry["unused"]["wall_s"] / entry["pipeline"]["wall_s"], 2)
        entry["unused"]["decide_wall_s"] = entry["pipeline"]["wall_s"]
    entry["loadavg_end"] = loadavg()
    if not args.keep:
        shutil.rmtree(runs / "pipeline", ignore_errors=True)
        shutil.rmtree(runs / "handwritten", ignore_errors=True)
        shutil.rmtree(runs / "unused", ignore_errors=True)
    return entry


SUMMARY = re.compile(
    r"^grants: ([\d,]+): ([\d,]+) used, ([\d,]+) unused, ([\d,]+) sole; ([\d,]+) can be removed together \((.*)\)$"
)


def least_privilege(
    size: Size, inputs: list[str], spark: list[str], runs: Path, timeout: float | None
) -> dict[str, Any]:
    """``privilog pipeline unused`` over the same inputs, timed; its summary line read back."""
    progress(f"{size.key}: privilog pipeline unused")
    shutil.rmtree(runs / "unused", ignore_errors=True)
    run = timed(
        [sys.executable, "-m", "privilog", "pipeline", "unused", *inputs, f"--out={runs / 'unused'}", *spark],
        runs / "unused.log",
        "unused",
        timeout,
    )
    figures = summarise(run, size.requests)
    found = next((m for line in run.stdout.splitlines() if (m := SUMMARY.match(line))), None)
    if found is not None:
        grants, used, unused, sole, removals = (int(g.replace(",", "")) for g in found.groups()[:5])
        figures.update(grants=grants, used=used, unused=unused, sole=sole, removals=removals, method=found[6])
    progress(f"{size.key}: unused {run.wall:.1f}s, exit {run.returncode}; {found[0] if found else 'no summary'}")
    return figures


def _default_driver_memory() -> str:
    """What the pipeline's session gives the driver when not told (engine.spark.session)."""
    from privilog.engine.spark.session import local_driver_memory

    return local_driver_memory()


def ratios(pipeline: dict[str, Any], handwritten: dict[str, Any]) -> dict[str, float]:
    """Pipeline over hand-written: wall, and wall less each one's start-up."""
    return {
        "wall": round(pipeline["wall_s"] / handwritten["wall_s"], 2),
        "after_startup": round(
            (pipeline["wall_s"] - pipeline["startup_s"]) / (handwritten["wall_s"] - handwritten["startup_s"]), 2
        ),
    }


def agreement(runs: Path, driver_memory: str | None, partitions: int, timeout: float | None) -> dict[str, Any]:
    """The two decision tables compared, in a Spark process of its own (not timed as part of either)."""
    progress("  comparing the two decision tables")
    report = runs / "compare.json"
    report.unlink(missing_ok=True)
    run = timed(
        [
            sys.executable, "-m", "benchmarks.pipeline.handwritten", "compare",
            f"--pipeline={runs / 'pipeline' / 'decisions'}", f"--handwritten={runs / 'handwritten' / 'decisions'}",
            f"--out={report}", f"--partitions={partitions}",
            *([f"--driver-memory={driver_memory}"] if driver_memory else []),
        ],
        runs / "compare.log",
        "compare",
        timeout,
    )  # fmt: skip
    if not report.exists():
        return {"error": f"compare failed (exit {run.returncode}): see {run.log}"}
    result: dict[str, Any] = json.loads(report.read_text())
    progress(
        f"  {result['differing']:,} requests decided differently (rows: pipeline {result['pipeline_rows']:,}, "
        f"hand-written {result['handwritten_rows']:,}, joined {result['joined_rows']:,})"
    )
    for example in result["examples"]:
        progress(f"    {json.dumps(example, default=str)}")
    return result


# ---- results --------------------------------------------------------------------------


def record(path: Path, key: str, entry: dict[str, Any]) -> None:
    """Replace the entry for ``key`` in the results file (created if absent).

    A run with ``--no-unused`` keeps the earlier entry's ``unused`` (it carries the wall time of the
    ``decide`` it was measured beside, ``decide_wall_s``), so that timing one side does not erase the other."""
    results: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {"runs": {}}
    earlier = results["runs"].get(key, {})
    if "unused" not in entry and "unused" in earlier:
        entry["unused"] = {"decide_wall_s": earlier["pipeline"]["wall_s"], **earlier["unused"]}
    results["runs"][key] = entry
    results["runs"] = dict(sorted(results["runs"].items(), key=lambda kv: _order(kv[1])))
    path.write_text(json.dumps(results, indent=1) + "\n")


def _order(entry: dict[str, Any]) -> tuple[int, int]:
    return entry["size"]["requests"], entry["size"]["entities"]


def _mib(value: float) -> str:
    return f"{value / 1024:.1f} GiB" if value >= 1024 else f"{value:.0f} MiB"


def _share(n: int, total: int) -> str:
    return f"{n:,} ({100 * n / total:.0f}%)" if total else "–"


def _disagreements(agreement: dict[str, Any]) -> str:
    if "differing" not in agreement:
        return str(agreement.get("error", "–"))
    return f"{agreement['differing']:,}" + ("" if agreement.get("agree", True) else " (rows differ)")


def table(entries: Sequence[dict[str, Any]]) -> str:
    """A markdown table of the entries (load: the 1-minute load average at the start), then each
    one's phases, largest first, and the pipeline's rounds."""
    out = [
        "| requests | entities / grants | pipeline wall | of which start-up | rows/s | peak RSS (JVM) | hand-written "
        "wall | of which start-up | peak RSS (JVM) | ratio | ratio w/o start-up | disagreements | load |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lean = [e for e in entries if "no_allowed_by" in e]
    for e in entries:
        p, h = e["pipeline"], e.get("handwritten")
        size = e["size"]
        cells = [
            f"{size['requests']:,}",
            f"{size['entities']:,} / {size['grants']:,}",
            f"{p['wall_s']:.1f} s" + ("" if p["returncode"] == 0 else f" (exit {p['returncode']})"),
            f"{p['startup_s']:.1f} s",
            f"{p['rows_per_s']:,}",
            f"{_mib(p['peak_tree_rss_mib'])} ({_mib(p['peak_jvm_rss_mib'])})",
        ]
        if h is not None:
            ratio, agree = e.get("ratio", {}), e.get("agreement", {})
            cells += [
                f"{h['wall_s']:.1f} s" + ("" if h["returncode"] == 0 else f" (exit {h['returncode']})"),
                f"{h['startup_s']:.1f} s",
                f"{_mib(h['peak_tree_rss_mib'])} ({_mib(h['peak_jvm_rss_mib'])})",
                f"{ratio['wall']:.2f}×" if ratio else "–",
                f"{ratio['after_startup']:.2f}×" if ratio else "–",
                _disagreements(agree),
            ]
        else:
            cells += ["–"] * 6
        cells.append(f"{e['loadavg_start'][0]:.1f}" if e.get("loadavg_start") else "–")
        out.append("| " + " | ".join(cells) + " |")
    if lean:
        out += [
            "",
            "| requests | pipeline wall | --no-allowed-by wall | hand-written wall | ratio | ratio, --no-allowed-by |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for e in lean:
            p, n, h = e["pipeline"], e["no_allowed_by"], e.get("handwritten")
            ratio, slim = e.get("ratio", {}), e.get("ratio_no_allowed_by", {})
            out.append(
                "| " + " | ".join([
                    f"{e['size']['requests']:,}",
                    f"{p['wall_s']:.1f} s",
                    f"{n['wall_s']:.1f} s" + ("" if n["returncode"] == 0 else f" (exit {n['returncode']})"),
                    f"{h['wall_s']:.1f} s" if h else "–",
                    f"{ratio['wall']:.2f}×" if ratio else "–",
                    f"{slim['wall']:.2f}×" if slim else "–",
                ]) + " |"
            )  # fmt: skip
    lp = [e for e in entries if "unused" in e]
    if lp:
        out += [
            "",
            "| requests | decide wall | unused wall | unused / decide | peak RSS (JVM) | grants | unused | "
            "recommended for removal | sole | method |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for e in lp:
            u, grants = e["unused"], e["unused"].get("grants") or 0
            out.append(
                "| " + " | ".join([
                    f"{e['size']['requests']:,}",
                    f"{u.get('decide_wall_s', e['pipeline']['wall_s']):.1f} s",
                    f"{u['wall_s']:.1f} s" + ("" if u["returncode"] == 0 else f" (exit {u['returncode']})"),
                    f"{u['ratio_to_decide']:.2f}×" if "ratio_to_decide" in u else "–",
                    f"{_mib(u['peak_tree_rss_mib'])} ({_mib(u['peak_jvm_rss_mib'])})",
                    f"{grants:,}",
                    _share(u.get("unused", 0), grants),
                    _share(u.get("removals", 0), grants),
                    _share(u.get("sole", 0), grants),
                    str(u.get("method", "–")),
                ]) + " |"
            )  # fmt: skip
    for e in entries:
        for side in ("pipeline", "no_allowed_by", "handwritten", "unused"):
            if side not in e:
                continue
            spent = sorted(e[side]["phases_s"].items(), key=lambda kv: -kv[1])
            wall = e[side]["wall_s"]
            described = ", ".join(f"{name} {s:.1f} s ({100 * s / wall:.0f}%)" for name, s in spent if s >= 0.05)
            out.append(f"\n{e['size']['requests']:,} requests, {side}: {described}")
            if side == "pipeline":
                described = ", ".join(
                    f"{r['round']} ({r['requests'] or 0:,} requests) {r['seconds']:.1f} s"
                    for r in rounds(e[side]["lines"])
                )
                out.append(f"\n{e['size']['requests']:,} requests, pipeline rounds: {described}")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m benchmarks.pipeline.run", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--sizes", default="1e5,1e6,1e7", help="REQUESTS or REQUESTSxENTITIES, comma-separated; "
                        "'small' is 1e4x2e3 (default 1e5,1e6,1e7)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=1, help="the deployment's seed (default 1)")
    parser.add_argument("--data", default="/tmp/privilog-pipeline-bench", help="where deployments and outputs go")
    parser.add_argument("--out", default=str(HERE / "results.json"), help="the results file (entries replaced)")
    parser.add_argument(
        "--driver-memory", help="Spark driver memory, both sides (default: the pipeline's, a quarter of the machine's)"
    )
    parser.add_argument("--partitions", type=int, default=4, help="Spark shuffle partitions, both sides (default 4)")
    parser.add_argument("--timeout", type=float, default=None, help="stop any one process after this many seconds")
    parser.add_argument("--no-handwritten", action="store_true", help="time the pipeline only")
    parser.add_argument(
        "--handwritten-adaptive", action="store_true", help="run the hand-written query with adaptive execution on"
    )
    parser.add_argument("--no-unused", action="store_true", help="leave out privilog pipeline unused")
    parser.add_argument(
        "--no-allowed-by",
        action="store_true",
        help="also time pipeline decide --no-allowed-by: the hand-written query's columns, no grant named per request",
    )
    parser.add_argument("--keep", action="store_true", help="keep both decision tables (under --data/runs)")
    parser.add_argument("--report", action="store_true", help="print the table of every entry in --out; run nothing")
    args = parser.parse_args(argv)
    if args.report:
        print(table(list(json.loads(Path(args.out).read_text())["runs"].values())))
        return 0
    sizes = [Size.parse(s) for s in args.sizes.split(",") if s.strip()]
    machine = machine_info()
    progress(
        f"{machine['cpu_model']}, {machine['nproc']} cores, {machine['memory_gib']} GiB, {machine['java']}, "
        f"pyspark {machine['pyspark']}; load {loadavg()}; free in {args.data}: {_free(Path(args.data))}"
    )
    entries = []
    for size in sizes:
        progress(f"{size.key}: {size.requests:,} requests, {size.entities:,} entities, {size.grants:,} grants")
        entry = measure(size, args)
        record(Path(args.out), f"{size.key}-s{args.seed}", entry)
        entries.append(entry)
        progress(f"{size.key}: recorded in {args.out}")
    print(table(entries))
    failed = any(
        e["pipeline"]["returncode"]
        or e.get("unused", {}).get("returncode")
        or not e.get("agreement", {}).get("agree", True)
        for e in entries
    )
    return 1 if failed else 0


def _free(folder: Path) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    return f"{shutil.disk_usage(folder).free / 2**30:.0f} GiB"


if __name__ == "__main__":
    sys.exit(main())
