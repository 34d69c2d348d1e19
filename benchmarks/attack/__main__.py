"""The server under a denial-of-service attack (issue 33): throughput and tail while slow clients and
oversized tokens are connected, and memory after a flood of bogus tokens.

    python -m benchmarks.attack [--size 10k] [--duration 10] [--workers 2] [--serve-args "..."]
                                [--label latest] [--out benchmarks/attack/results.json]

One ``privilog serve --workers 2`` (plus ``--serve-args``, split as a shell
would: the hardening options of the day, such as a header cap or a per-client
connection cap) over a SQLite store of benchmarks/serve's world; wrk (``apt-get
install wrk``) drives it with benchmarks/serve's Lua script. In that order:

1. **Baseline**: single checks (``POST /v1/check``) and batches of 1,000
   (``POST /v1/check/batch``), each on 8 connections for ``--duration`` s:
   decisions/s, p50 and p99.
2. **Memory**: the workers' RSS (VmRSS of every child of the ``privilog serve``
   process, summed) before and after ``--tokens`` requests with distinct bogus
   tokens (half well-formed-looking ``plg_<16 hex>_<43 chars>``, half malformed
   of 1 KB to 64 KB, on 8 connections from 127.0.4.x), and ``--settle`` s after.
3. **Under attack**: ``benchmarks/attack/attackers.py`` in a process of its own
   (asyncio): ``--slow`` slow clients, each from its own loopback address,
   dribbling a 100,000-byte body one byte a second and reconnecting whenever
   they are cut, and one client sending distinct 1 MiB (and 100 KB) bogus
   tokens in a loop; the baseline's two wrk runs again while they are
   connected, then what the attackers saw (how long each slow connection
   lived, how many times each client was cut, the statuses, the resets).

The figures go into ``--out`` under ``runs[--label]`` (other labels are kept:
``before`` is the server as it was when this benchmark was written), with the
machine, the date, the commit and the server's options; the ratios of attacked
to baseline sit beside the targets (within 20%; RSS within 10 MB). A
measurement: nothing here asserts a figure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import secrets
import select
import shlex
import shutil
import string
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from benchmarks.attack.attackers import CHECK_BODY, exchange, failure, loopback, request
from benchmarks.engines.common import ROOT, machine_info, progress
from benchmarks.serve.__main__ import BATCH, _check_scripts, _serve, _store, _wrk, size_arg

DEFAULT_OUT = Path(__file__).resolve().parent / "results.json"
CONNECTIONS = 8
TARGETS = {
    "decisions_per_s_ratio_at_least": 0.8,
    "p99_ratio_at_most": 1.2,
    "rss_growth_mib_at_most": 10_000_000 / (1 << 20),  # "within 10 MB"
}


class Drain(threading.Thread):
    """Reads the server's stderr so that its logging never blocks it; counts the lines by their shape."""

    def __init__(self, stream: Any) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.shapes: Counter[str] = Counter()
        self.last: list[str] = []

    def run(self) -> None:
        for line in self.stream:
            shape = re.sub(r"\d+", "N", line.strip())[:100]
            self.shapes[shape] += 1
            self.last = [*self.last[-9:], line.rstrip()[:300]]


def children(pid: int) -> list[int]:
    """The server's worker processes: the children of ``pid`` (not multiprocessing's resource tracker)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and b"resource_tracker" not in cmdline:
            found.append(int(entry))
    return sorted(found)


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def cpu_s(pid: int) -> float:
    """The CPU seconds (user and system) ``pid`` has used so far; 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss(server: int) -> dict[str, Any]:
    """The workers' RSS now: each, and their sum, in MiB (and the supervisor's own)."""
    workers = {pid: rss_kib(pid) for pid in children(server)}
    return {
        "workers_mib": round(sum(kib or 0 for kib in workers.values()) / 1024, 1),
        "per_worker_mib": {str(pid): round((kib or 0) / 1024, 1) for pid, kib in workers.items()},
        "supervisor_mib": round((rss_kib(server) or 0) / 1024, 1),
    }


def bogus_tokens(count: int) -> list[str]:
    """``count`` distinct bogus tokens: even ones look well formed, odd ones are 1 KB to 64 KB of junk."""
    alphabet = string.ascii_letters + string.digits + "-._~+/"
    out = []
    for i in range(count):
        if i % 2 == 0:
            out.append(f"plg_{secrets.token_hex(8)}_{secrets.token_urlsafe(32)}")
        else:
            size = 1024 + secrets.randbelow(64 * 1024 - 1024 + 1)
            head = f"junk{i:x}."
            out.append(head + "".join(secrets.choice(alphabet) for _ in range(64)) * (size // 64) + "=" * (size % 64))
    return out


async def flood(url: str, tokens: list[str], connections: int) -> dict[str, Any]:
    """Each token once, in a ``POST /v1/check``, over ``connections`` connections: the outcomes."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    queue = list(reversed(tokens))
    outcomes: Counter[str] = Counter()
    opened = 0

    async def one(n: int) -> None:
        nonlocal opened
        reader = writer = None
        while queue:
            token = queue.pop()
            try:
                if writer is None:
                    reader, writer = await asyncio.wait_for(
                        asyncio.open_connection(host, port, local_addr=(loopback(4, n), 0)), 10)
                    opened += 1
                assert reader is not None and writer is not None
                status, close = await exchange(reader, writer, request(host, "/v1/check", token, CHECK_BODY))
                outcomes[str(status)] += 1
                if close:
                    writer.close()
                    reader = writer = None
            except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError, IndexError) as error:
                outcomes[failure(error)] += 1
                if writer is not None:
                    with contextlib.suppress(Exception):
                        writer.close()
                reader = writer = None
        if writer is not None:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(one(n) for n in range(connections)))
    return {"requests": len(tokens), "outcomes": dict(outcomes), "connections_opened": opened,
            "seconds": round(time.perf_counter() - started, 2)}


class Guard(threading.Thread):
    """Watches the workers' RSS during the attack: its peak; past ``limit`` MiB, pauses the oversized tokens
    (a server that keeps every token it refused would otherwise take the machine's memory)."""

    def __init__(self, server: int, limit: float, attackers: Any) -> None:
        super().__init__(daemon=True)
        self.server, self.limit, self.attackers = server, limit, attackers
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.peak = 0.0
        self.paused_after: float | None = None

    def run(self) -> None:
        started = time.monotonic()
        while not self.done.wait(0.25):
            now = rss(self.server)["workers_mib"]
            self.peak = max(self.peak, now)
            if now > self.limit and self.paused_after is None:
                self.paused_after = round(time.monotonic() - started, 1)
                progress(f"  the workers' RSS is {now:.0f} MiB, over {self.limit:g}: the oversized tokens paused")
                with self.lock, contextlib.suppress(OSError):
                    self.attackers.write("pause-oversized\n")
                    self.attackers.flush()


def alive(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def measure(url: str, check: Path, batch: Path, duration: int) -> dict[str, Any]:
    single = _wrk(url, "/v1/check", check, CONNECTIONS, duration)
    single["decisions_per_s"] = single["requests_per_s"]
    progress(f"  single checks: {single}")
    batches = _wrk(url, "/v1/check/batch", batch, CONNECTIONS, duration)
    batches["decisions_per_s"] = batches["requests_per_s"] * BATCH
    progress(f"  batches of {BATCH}: {batches}")
    return {"single_checks": single, "batch_checks": batches}


def ratios(attacked: dict[str, Any], baseline: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("single_checks", "batch_checks"):
        a, b = attacked[name], baseline[name]
        rate = a["decisions_per_s"] / b["decisions_per_s"] if b["decisions_per_s"] else None
        p99 = a["p99_ms"] / b["p99_ms"] if "p99_ms" in a and b.get("p99_ms") else None
        out[name] = {
            "decisions_per_s_ratio": None if rate is None else round(rate, 3),
            "p99_ratio": None if p99 is None else round(p99, 3),
            "met": rate is not None and p99 is not None
            and rate >= TARGETS["decisions_per_s_ratio_at_least"] and p99 <= TARGETS["p99_ratio_at_most"],
        }
    return out


def server_options() -> list[str]:
    """The options ``privilog serve`` has at this commit (which hardening knobs exist)."""
    text = subprocess.run([sys.executable, "-m", "privilog", "serve", "--help"], capture_output=True, text=True,
                          cwd=ROOT, check=False).stdout
    return sorted(set(re.findall(r"(--[a-z][a-z0-9-]+)", text)))


def git(*argv: str) -> str:
    done = subprocess.run(["git", *argv], cwd=ROOT, capture_output=True, text=True, check=False)
    return done.stdout.rstrip()


def attack_phase(url: str, check: Path, batch: Path, args: argparse.Namespace, server: int) -> dict[str, Any]:
    attackers = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.attack.attackers", "--url", url, "--slow", str(args.slow),
         "--oversized", str(args.oversized), "--reconnect-delay", str(args.reconnect_delay)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
        preexec_fn=(lambda: os.nice(args.attackers_nice)) if args.attackers_nice else None)
    assert attackers.stdin is not None and attackers.stdout is not None
    out: dict[str, Any] = {"attackers_nice": args.attackers_nice}
    guard = Guard(server, args.rss_limit, attackers.stdin)
    try:
        ready, _, _ = select.select([attackers.stdout], [], [], 60)
        line = attackers.stdout.readline() if ready else ""
        out["slow_clients_with_headers_sent_at_start"] = int(line.split()[1]) if line.startswith("ready") else None
        progress(f"attackers: {line.strip() or 'not ready in 60 s'}; the server answers /health: {alive(url)}")
        guard.start()
        time.sleep(2)  # the oversized tokens under way
        wall, attackers_cpu = time.monotonic(), cpu_s(attackers.pid)
        workers_cpu = sum(map(cpu_s, children(server)))
        out["rss_at_start"] = rss(server)
        out.update(measure(url, check, batch, args.duration))
        out["answers_health_at_end"] = alive(url)
        out["rss_at_end"] = rss(server)
        wall = time.monotonic() - wall
        out["cpu_while_measured"] = {  # in cores: the machine's are shared by wrk, the server and the attackers
            "seconds": round(wall, 1),
            "server_workers": round((sum(map(cpu_s, children(server))) - workers_cpu) / wall, 2),
            "attackers": round((cpu_s(attackers.pid) - attackers_cpu) / wall, 2),
            "cores": os.cpu_count(),
        }
        guard.done.set()
        guard.join()
        out["rss_peak_workers_mib"] = guard.peak
        out["rss_limit_mib"] = args.rss_limit
        out["oversized_paused_by_rss_limit_after_s"] = guard.paused_after
        with guard.lock:
            attackers.stdin.write("stop\n")
            attackers.stdin.flush()
        ready, _, _ = select.select([attackers.stdout], [], [], 60)
        figures = json.loads(attackers.stdout.readline()) if ready else {}
        out["attackers"] = figures
    finally:
        guard.done.set()
        with contextlib.suppress(OSError):
            attackers.stdin.close()
        try:
            attackers.wait(timeout=30)
        except subprocess.TimeoutExpired:
            attackers.kill()
            attackers.wait()
    return out


def from_source(rev: str, argv: list[str], out: Path) -> int:
    """Run this benchmark again, in a copy of commit ``rev`` with today's benchmarks/ laid over it."""
    commit = git("rev-parse", "--short", rev)
    if not commit:
        raise SystemExit(f"no commit {rev}")
    rest, skip = [], False
    for arg in argv:  # every option but --source and --out, given again below
        if skip:
            skip = False
        elif arg in ("--source", "--out"):
            skip = True
        elif not arg.startswith(("--source=", "--out=")):
            rest.append(arg)
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        tree.mkdir()
        archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        shutil.rmtree(tree / "benchmarks", ignore_errors=True)
        shutil.copytree(ROOT / "benchmarks", tree / "benchmarks", ignore=shutil.ignore_patterns("__pycache__"))
        for folder in ("dsl", "engine", "proofs", "rules"):  # pyproject's package-dir: privilog.engine is engine/
            if (tree / folder).is_dir() and not (tree / "privilog" / folder).exists():
                (tree / "privilog" / folder).symlink_to(Path("..") / folder)
        progress(f"measuring commit {commit} ({rev}) from {tree}")
        env = {**os.environ, "PYTHONPATH": str(tree)}  # ahead of the editable install's finder
        done = subprocess.run([sys.executable, "-m", "benchmarks.attack", *rest, "--out", str(out.resolve()),
                               "--commit", f"{commit} ({rev})"], cwd=tree, env=env, check=False)
        return done.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.attack", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=size_arg, default=10_000, help="grants in the world (default 10k)")
    parser.add_argument("--duration", type=int, default=10, help="seconds per wrk run (default 10)")
    parser.add_argument("--workers", type=int, default=2, help="the server's workers (default 2)")
    parser.add_argument("--serve-args", default="", help="more options for privilog serve, as one string")
    parser.add_argument("--slow", type=int, default=300, help="slow clients (default 300)")
    parser.add_argument("--oversized", type=int, default=1, help="clients sending oversized tokens (default 1)")
    parser.add_argument("--attackers-nice", type=int, default=0,
                        help="run the attackers' process at this niceness (default 0): on one machine, 19 stands "
                             "for an attack from elsewhere, whose own CPU is not the server's")
    parser.add_argument("--tokens", type=int, default=10_000, help="bogus tokens for the memory phase")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds before the last RSS reading")
    parser.add_argument("--reconnect-delay", type=float, default=0.0,
                        help="seconds a cut slow client waits before connecting again (default 0)")
    parser.add_argument("--rss-limit", type=float, default=4096,
                        help="MiB of the workers' RSS past which the oversized tokens stop (default 4096)")
    parser.add_argument("--label", default="latest", help="the key of this run in the results (default latest)")
    parser.add_argument("--source", metavar="REV",
                        help="measure the server of this commit (exported to a temporary folder) instead of the "
                             "working tree, which others may be editing")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--commit", help=argparse.SUPPRESS)  # set by --source for the run it starts
    args = parser.parse_args(argv)
    if args.source:
        return from_source(args.source, argv if argv is not None else sys.argv[1:], args.out)
    extra = shlex.split(args.serve_args)
    run: dict[str, Any] = {
        "machine": machine_info(),
        "commit": args.commit or git("rev-parse", "--short", "HEAD"),
        "modified_server_sources": [] if args.commit else git("status", "--porcelain", "--", "privilog").splitlines(),
        "size": args.size,
        "duration_s": args.duration,
        "connections": CONNECTIONS,
        "server": {"workers": args.workers, "serve_args": extra, "options_available": server_options()},
        "attack": {"slow_clients": args.slow, "oversized_token_clients": args.oversized,
                   "reconnect_delay_s": args.reconnect_delay},
    }
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        progress(f"building the world of {args.size} grants and its store")
        store, token, requests = _store(args.size, folder)
        check, batch = _check_scripts(folder, token, requests)
        tokens = bogus_tokens(args.tokens)
        process, url, start_s = _serve(store, args.workers, extra)
        drain = Drain(process.stderr)
        drain.start()
        server = process.pid
        run["server"]["start_s"] = round(start_s, 2)
        progress(f"serving at {url} after {start_s:.1f} s: workers {children(server)}")
        try:
            _wrk(url, "/v1/check", check, 16, 2)  # warm
            _wrk(url, "/v1/check/batch", batch, 8, 2)
            run["rss_at_start"] = rss(server)
            progress("baseline")
            run["baseline"] = measure(url, check, batch, args.duration)

            progress(f"memory: {args.tokens} bogus tokens")
            memory: dict[str, Any] = {"before": rss(server)}
            memory["flood"] = asyncio.run(flood(url, tokens, CONNECTIONS))
            memory["after"] = rss(server)
            time.sleep(args.settle)
            memory["after_settle"] = rss(server)
            memory["settle_s"] = args.settle
            memory["growth_mib"] = round(memory["after"]["workers_mib"] - memory["before"]["workers_mib"], 1)
            memory["growth_after_settle_mib"] = round(
                memory["after_settle"]["workers_mib"] - memory["before"]["workers_mib"], 1)
            memory["met"] = memory["growth_after_settle_mib"] <= TARGETS["rss_growth_mib_at_most"]
            memory["answers_health"] = alive(url)
            run["memory"] = memory
            progress(f"  {memory['flood']}; RSS {memory['before']['workers_mib']} -> {memory['after']['workers_mib']}"
                     f" -> {memory['after_settle']['workers_mib']} MiB")

            progress(f"under attack: {args.slow} slow clients, {args.oversized} sending oversized tokens")
            run["under_attack"] = attack_phase(url, check, batch, args, server)
            run["ratios"] = ratios(run["under_attack"], run["baseline"])
            time.sleep(args.settle)
            run["rss_after_attack_settle"] = rss(server)
            run["answers_health_after_attack"] = alive(url)
            run["server"]["workers_at_end"] = children(server)
            run["server"]["exited"] = process.poll()
        finally:
            process.terminate()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        drain.join(timeout=5)
        run["server"]["stderr_lines"] = dict(drain.shapes.most_common(20))
        run["server"]["stderr_last"] = drain.last
    run["machine"]["privilog_commit"] = run["commit"]
    run["machine"]["loadavg_after"] = list(os.getloadavg())
    run["wall_s"] = round(time.perf_counter() - started, 1)
    results: dict[str, Any] = {}
    if args.out.exists():
        with contextlib.suppress(ValueError):
            results = json.loads(args.out.read_text())
    results["issue"] = 33
    results["targets"] = TARGETS
    results.setdefault("runs", {})[args.label] = run
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(summary(args.label, run))
    return 0


def summary(label: str, run: dict[str, Any]) -> str:
    lines = [f"{label}: commit {run['commit']}, {run['size']} grants, --workers {run['server']['workers']} "
             f"{' '.join(run['server']['serve_args'])}".rstrip()]
    for name in ("single_checks", "batch_checks"):
        b, a, r = run["baseline"][name], run["under_attack"][name], run["ratios"][name]
        lines.append(
            f"  {name}: {b['decisions_per_s']:,.0f} decisions/s, p50 {b.get('p50_ms', 0):.2f} / p99 "
            f"{b.get('p99_ms', 0):.2f} ms; under attack {a['decisions_per_s']:,.0f}/s, p50 {a.get('p50_ms', 0):.2f}"
            f" / p99 {a.get('p99_ms', 0):.2f} ms (errors {a.get('socket_errors', {})}): ratios "
            f"{r['decisions_per_s_ratio']} and {r['p99_ratio']} (target >= 0.8 and <= 1.2: "
            f"{'met' if r['met'] else 'not met'})")
    slow = run["under_attack"].get("attackers", {}).get("slow_clients", {})
    big = run["under_attack"].get("attackers", {}).get("oversized_tokens", {})
    if slow:
        lines.append(f"  slow clients: {slow['connections_ended']} connections cut, ended by {slow['ended_by']}, "
                     f"statuses {slow['statuses']}; seconds alive {slow['connection_seconds']}; cuts per client "
                     f"{slow['cuts_per_client']}; open at the end {slow['open_at_end']} "
                     f"(age {slow['open_at_end_age_seconds']}, statuses {slow['open_at_end_statuses']})")
    if big:
        lines.append(f"  oversized tokens: {big['requests']} requests ({big['mib_sent']} MiB), outcomes "
                     f"{big['outcomes']}; paused by the RSS guard after {big['paused_after_s']} s")
    lines.append(f"  workers' RSS during the attack: {run['under_attack']['rss_at_start']['workers_mib']} MiB at "
                 f"the start, peak {run['under_attack']['rss_peak_workers_mib']}")
    m = run["memory"]
    lines.append(f"  memory: workers' RSS {m['before']['workers_mib']} MiB -> {m['after']['workers_mib']} after "
                 f"{m['flood']['requests']} bogus tokens ({m['flood']['outcomes']}) -> "
                 f"{m['after_settle']['workers_mib']} after {m['settle_s']:g} s: "
                 f"+{m['growth_after_settle_mib']} MiB (target <= 9.5 MiB: {'met' if m['met'] else 'not met'})")
    lines.append(f"  RSS after the attack: {run['rss_after_attack_settle']['workers_mib']} MiB; "
                 f"answers /health: {run['answers_health_after_attack']}; wall {run['wall_s']} s")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
