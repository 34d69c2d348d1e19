"""privilog's first benchmark: load time, check latency, visibility, CLI start-up.

    python benchmarks/run.py [--sizes 1000,10000,100000] [--checks N] [--out benchmarks/results.json]

For each size (a number of grants) a deterministic CDAP-shaped world is
generated (benchmarks/worldgen.py) and measured in a fresh child process, so
sizes do not share pyDatalog state, memory or garbage-collector history:

* load: policy parse and check, compile and backend set-up (rules and table
  facts), deriving the world's facts, and asserting them into pyDatalog;
* checks: ``authorizer.check(authorizer.request(...))`` of a mix of six
  operations, each call timed on its own with ``time.perf_counter_ns`` after
  a warm-up, split into allowed and denied, and into the engine's evaluation
  (assert the request, query, retract) and the rest (building the decision,
  the fixes of a denial);
* ``authorizer.visible(principal, "dataset", namespace)``.

Then ``privilog check`` is timed as a user runs it, a new process each time
(median of --cli-runs), with no world, the bundled sample world, and a
generated 10,000-grant world written to a temporary YAML file.

Progress goes to stderr; a table to stdout at the end; every figure, with
the machine it was measured on, to the JSON file. Nothing here asserts a
timing: these are measurements, not tests.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import platform
import random
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# Benchmark the tree this file is in (a snapshot of it too), not whatever is installed.
sys.path[:0] = [str(ROOT), str(HERE)]
os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])

import worldgen  # noqa: E402

START = time.perf_counter()


def progress(message: str) -> None:
    print(f"[{time.perf_counter() - START:8.1f}s] {message}", file=sys.stderr, flush=True)


# ---- statistics ---------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100), linear between the closest ranks (as numpy's default)."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary_ms(nanoseconds: list[int]) -> dict[str, Any]:
    """n, median, p99, mean, min, max of timings, in milliseconds."""
    if not nanoseconds:
        return {"n": 0}
    ms = [n / 1e6 for n in nanoseconds]
    return {
        "n": len(ms),
        "median_ms": statistics.median(ms),
        "p99_ms": percentile(ms, 99),
        "mean_ms": statistics.fmean(ms),
        "min_ms": min(ms),
        "max_ms": max(ms),
    }


def rss_mib() -> float:
    """This process's resident memory now."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def loadavg() -> list[float]:
    """The 1, 5 and 15 minute load averages: how busy the (shared) machine was."""
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---- the machine --------------------------------------------------------------------


def machine_info() -> dict[str, Any]:
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
    try:
        from importlib.metadata import version

        pydatalog = version("pyDatalog")
    except Exception:  # pragma: no cover - informational only
        pydatalog = "unknown"
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "dsl", "engine", "privilog", "rules"],
            cwd=ROOT, capture_output=True, text=True, check=True,
        ).stdout.strip()
        commit += " (engine tree modified)" if dirty else ""
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return {
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cpu_model": cpu,
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_gib": memory,
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "pydatalog": pydatalog,
        "loadavg": loadavg(),
        "privilog_commit": commit,
    }


# ---- requests -----------------------------------------------------------------------

OPERATIONS = (
    "dataset.read",
    "program.start",
    "namespace.get",
    "application.deploy",
    "namespace.delete",
    "dataset.list",
)


@dataclass(frozen=True)
class Spec:
    """One request to time, and whether it was drawn to be allowed (the decision says if it is)."""

    principal: str
    operation: str
    entity: str
    args: tuple[tuple[str, str], ...] = ()
    intent: str = "deny"


@dataclass
class Indexes:
    """What the request generator draws from."""

    gen: worldgen.Generated
    existing: set[Any] = field(default_factory=set)
    by_action_type: dict[tuple[str, str], list[Any]] = field(default_factory=dict)
    members_of: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def build(cls, gen: worldgen.Generated) -> Indexes:
        out = cls(gen, gen.world.existing())
        for grant in sorted(gen.world.grants):
            if grant.entity in out.existing:
                out.by_action_type.setdefault((grant.action, grant.entity.type), []).append(grant)
                out.by_action_type.setdefault(("*", grant.entity.type), []).append(grant)
        for member, group in sorted(gen.world.members):
            out.members_of.setdefault(group, []).append(member)
        return out

    def requester(self, rng: random.Random, holder: str) -> str:
        """A user who holds through ``holder``: itself, or a member (of a member) of the group."""
        current = holder
        for _ in range(4):
            if current.startswith("user:"):
                return current
            members = self.members_of.get(current)
            if not members:
                return current  # a group with no members asks for itself
            current = rng.choice(members)
        return current

    def held(self, rng: random.Random, action: str, entity_type: str) -> tuple[str, Any]:
        grant = rng.choice(self.by_action_type[(action, entity_type)])
        return self.requester(rng, grant.principal), grant.entity


def make_requests(idx: Indexes, count: int, rng: random.Random) -> list[Spec]:
    """``count`` requests: the six operations in turn, half drawn from grants (mostly allowed)."""
    gen = idx.gen
    by_type = gen.by_type
    users = gen.users

    def namespace_of(entity: Any) -> Any:
        return entity if entity.type == "namespace" else next(a for a in entity.ancestors() if a.type == "namespace")

    # Principals (as users) holding ADMIN on an application and any privilege on an artifact.
    admin_apps: dict[str, list[Any]] = defaultdict(list)
    arts: dict[str, list[Any]] = defaultdict(list)
    for g in idx.by_action_type.get(("ADMIN", "application"), []):
        admin_apps[g.principal].append(g.entity)
    for g in idx.by_action_type.get(("*", "artifact"), []):
        arts[g.principal].append(g.entity)
    deployers = sorted(set(admin_apps) & set(arts))

    def one(op: str, allow: bool) -> Spec:
        intent = "allow" if allow else "deny"
        if op == "dataset.read":
            if allow:
                who, what = idx.held(rng, "READ", "dataset")
            else:
                who, what = rng.choice(users), rng.choice(by_type["dataset"])
            return Spec(who, op, str(what), (), intent)
        if op == "program.start":
            if allow:
                who, what = idx.held(rng, "EXECUTE", "program")
            else:
                who, what = rng.choice(users), rng.choice(by_type["program"])
            return Spec(who, op, str(what), (), intent)
        if op == "namespace.get":
            if allow:
                grant = rng.choice(idx.by_action_type[("*", rng.choice(("dataset", "program", "stream")))])
                return Spec(idx.requester(rng, grant.principal), op, str(namespace_of(grant.entity)), (), intent)
            return Spec(rng.choice(users), op, str(rng.choice(by_type["namespace"])), (), intent)
        if op == "application.deploy":
            new = rng.random() < 0.25
            if allow and deployers:
                holder = rng.choice(deployers)
                app, art = rng.choice(admin_apps[holder]), rng.choice(arts[holder])
                who = idx.requester(rng, holder)
            else:
                who, app, art = rng.choice(users), rng.choice(by_type["application"]), rng.choice(by_type["artifact"])
            args = (("artifact", str(art)),) + ((("new_artifact", "true"),) if new else ())
            return Spec(who, op, str(app), args, intent)
        if op == "namespace.delete":
            ns, full, partial = rng.choice(gen.small_owners)
            who = full if allow else rng.choice((partial, rng.choice(users)))
            return Spec(who, op, str(ns), (), intent)
        if op == "dataset.list":
            if allow:
                who, what = idx.held(rng, "*", "dataset")
            else:
                who, what = rng.choice(users), rng.choice(by_type["dataset"])
            return Spec(who, op, str(what), (), intent)
        raise AssertionError(op)

    specs = [one(OPERATIONS[i % len(OPERATIONS)], (i // len(OPERATIONS)) % 2 == 0) for i in range(count)]
    rng.shuffle(specs)
    return specs


# ---- instrumentation (wrappers on the instance; the engine's code is untouched) --------


class Stopwatch:
    """Accumulates the time spent in wrapped callables, by label."""

    def __init__(self) -> None:
        self.ns: dict[str, int] = defaultdict(int)

    def reset(self) -> None:
        self.ns.clear()

    def wrap(self, label: str, fn: Callable[..., Any], key: Callable[..., str] | None = None) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter_ns()
            try:
                return fn(*args, **kwargs)
            finally:
                self.ns[label if key is None else f"{label}:{key(*args, **kwargs)}"] += time.perf_counter_ns() - t0

        return timed


class CallTimeout(Exception):
    """A timed call ran past its limit."""


def within(seconds: float, fn: Callable[[], Any]) -> Any:
    """Call ``fn``, interrupting it with CallTimeout after ``seconds`` of wall time (0: no limit)."""
    if seconds <= 0:
        return fn()

    def expire(signum: int, frame: Any) -> None:
        # Raised inside a garbage-collector callback the exception is ignored: fire again soon.
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        raise CallTimeout

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class GcWatch:
    """Counts the garbage collector's passes and the time they take, by generation."""

    def __init__(self) -> None:
        self.started: int | None = None
        self.passes: dict[int, list[int]] = defaultdict(list)
        self.active = False

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if not self.active:
            return
        if phase == "start":
            self.started = time.perf_counter_ns()
        elif self.started is not None:
            self.passes[info["generation"]].append(time.perf_counter_ns() - self.started)
            self.started = None

    def report(self) -> dict[str, Any]:
        return {
            f"gen{g}": {"passes": len(v), "total_ms": sum(v) / 1e6, "max_ms": max(v) / 1e6}
            for g, v in sorted(self.passes.items())
        }


# ---- one size, in a child process --------------------------------------------------


def measure_size(
    n_grants: int, n_checks: int, n_visible: int, seed: int, budget: float, call_timeout: float
) -> dict[str, Any]:
    result: dict[str, Any] = {"grants_requested": n_grants, "seed": seed, "loadavg_start": loadavg()}
    rss0 = rss_mib()

    progress(f"[{n_grants}] generating the world")
    t = time.perf_counter()
    gen = worldgen.generate(n_grants, seed)
    result["generate_s"] = time.perf_counter() - t
    result["world"] = gen.stats()
    progress(f"[{n_grants}] world: {gen.stats()['grants']} grants, {gen.stats()['entities_existing']} entities, "
             f"{gen.stats()['memberships']} memberships ({result['generate_s']:.1f}s)")
    rss_world = rss_mib()

    # -- load ----------------------------------------------------------------------
    from privilog.engine.authorizer import Authorizer
    from privilog.engine.facts import world_facts
    from privilog.engine.world import World

    from privilog import dsl

    def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
        """fn's value, wall seconds and CPU seconds (this thread)."""
        c0, t0 = time.thread_time(), time.perf_counter()
        value = fn()
        return value, time.perf_counter() - t0, time.thread_time() - c0

    policy, policy_s, policy_cpu = timed(lambda: dsl.load_policy("cdap"))
    progress(f"[{n_grants}] policy parsed and checked in {policy_s * 1000:.0f} ms")
    # compile, a fresh pyDatalog logic, the rules and the tables' facts
    authz, init_s, init_cpu = timed(lambda: Authorizer(policy, World()))
    program_facts = sum(len(v) for v in authz.program.facts.values())
    facts, facts_s, facts_cpu = timed(lambda: world_facts(gen.world))
    n_facts = {k: len(v) for k, v in facts.items()}
    total_facts = sum(n_facts.values())
    del facts

    progress(f"[{n_grants}] asserting {total_facts} world facts into pyDatalog ...")
    # Authorizer.__init__ is exactly: check, compile, backend, refresh(); refresh derives the
    # facts again, asserts them (backend.add) and indexes the grants. Timing it on its own
    # separates fact loading from set-up; a wrapper on backend.add times the asserting.
    adding = Stopwatch()
    add = authz.backend.add
    authz.backend.add = adding.wrap("add", add)  # type: ignore[method-assign]
    authz.world = gen.world
    _, refresh_s, refresh_cpu = timed(authz.refresh)
    authz.backend.add = add  # type: ignore[method-assign]
    assert_s = adding.ns["add"] / 1e9
    result["load"] = {
        "policy_parse_check_s": policy_s,
        "policy_parse_check_cpu_s": policy_cpu,
        "compile_and_backend_init_s": init_s,
        "compile_and_backend_init_cpu_s": init_cpu,
        "program_facts": program_facts,
        "rules": len(authz.program.rules),
        "world_facts_derive_s": facts_s,
        "world_facts_derive_cpu_s": facts_cpu,
        "world_facts_assert_s": assert_s,
        "refresh_other_s": max(refresh_s - facts_s - assert_s, 0.0),
        "refresh_s": refresh_s,
        "refresh_cpu_s": refresh_cpu,
        "world_facts": n_facts,
        "world_facts_total": total_facts,
        "assert_us_per_fact": assert_s / total_facts * 1e6 if total_facts else None,
        "authorizer_total_s": init_s + refresh_s,
        "authorizer_total_cpu_s": init_cpu + refresh_cpu,
        "policy_plus_authorizer_s": policy_s + init_s + refresh_s,
    }
    progress(f"[{n_grants}] loaded: init {init_s:.2f}s, derive facts {facts_s:.2f}s, assert {assert_s:.2f}s "
             f"({result['load']['assert_us_per_fact']:.1f} µs/fact), refresh {refresh_s:.2f}s "
             f"({refresh_cpu:.2f}s CPU)")
    rss_loaded = rss_mib()

    # -- checks ----------------------------------------------------------------------
    rng = random.Random(f"privilog-bench-requests-{seed}-{n_grants}")
    idx = Indexes.build(gen)
    warmup = make_requests(idx, 6 * 5, rng)
    specs = make_requests(idx, n_checks, rng)

    watch = Stopwatch()
    authz.deciding.evaluate = watch.wrap("evaluate", authz.deciding.evaluate)  # type: ignore[method-assign]
    authz.backend.query = watch.wrap(  # type: ignore[method-assign]
        "query", authz.backend.query, key=lambda relation, *_: relation
    )
    gcw = GcWatch()
    gc.callbacks.append(gcw)

    def run(spec: Spec) -> tuple[int, int, bool, dict[str, int]]:
        watch.reset()
        c0 = time.thread_time_ns()
        t0 = time.perf_counter_ns()
        decision = authz.check(authz.request(spec.principal, spec.operation, spec.entity, dict(spec.args)))
        elapsed = time.perf_counter_ns() - t0
        cpu = time.thread_time_ns() - c0
        return elapsed, cpu, decision.allowed, dict(watch.ns)

    progress(f"[{n_grants}] warm-up: {len(warmup)} checks")
    for spec in warmup:
        run(spec)

    progress(f"[{n_grants}] timing {len(specs)} checks, one at a time (budget {budget:.0f}s)")
    gcw.active = True
    rows: list[dict[str, Any]] = []
    began = time.perf_counter()
    for i, spec in enumerate(specs, 1):
        elapsed, cpu, allowed, parts = run(spec)
        rows.append({
            "operation": spec.operation, "intent": spec.intent, "allowed": allowed, "ns": elapsed, "cpu_ns": cpu,
            "evaluate_ns": parts.get("evaluate", 0),
            "query_ns": {k.split(":", 1)[1]: v for k, v in parts.items() if k.startswith("query:")},
            "request": f"{spec.principal} {spec.operation} {spec.entity}" + "".join(f" {k}={v}" for k, v in spec.args),
        })
        if i % 50 == 0 or i == len(specs):
            progress(f"[{n_grants}]   {i}/{len(specs)} checks, median so far "
                     f"{statistics.median(r['ns'] for r in rows) / 1e6:.2f} ms")
        if time.perf_counter() - began > budget and i < len(specs):
            progress(f"[{n_grants}]   time budget spent: stopping after {i} of {len(specs)} checks")
            break
    gcw.active = False
    result["checks"] = summarise_checks(rows)
    result["checks_gc"] = gcw.report()
    slowest = sorted(rows, key=lambda r: -r["ns"])[:5]
    result["slowest_checks"] = [
        {"request": r["request"], "allowed": r["allowed"], "ms": r["ns"] / 1e6,
         "evaluate_ms": r["evaluate_ns"] / 1e6, "query_ms": {k: v / 1e6 for k, v in r["query_ns"].items()}}
        for r in slowest
    ]

    # -- visible ---------------------------------------------------------------------
    progress(f"[{n_grants}] timing {n_visible} visible(principal, 'dataset', namespace) calls")
    vis_specs: list[tuple[str, str]] = []
    for i in range(n_visible):
        if i % 2 == 0:
            grant = rng.choice(idx.by_action_type[("*", "dataset")])
            ns = next(a for a in grant.entity.ancestors() if a.type == "namespace")
            vis_specs.append((idx.requester(rng, grant.principal), str(ns)))
        else:
            vis_specs.append((rng.choice(gen.users), str(rng.choice(gen.by_type["namespace"]))))
    # no warm-up: the checks above warmed the authorizer, and at 100k grants one call takes minutes
    vis_ns: list[int] = []
    vis_cpu: list[int] = []
    shown: list[int] = []
    eval_ns: list[int] = []
    timed_out: list[str] = []
    gcw.active = True
    began = time.perf_counter()
    for who, ns in vis_specs:
        watch.reset()
        c0 = time.thread_time_ns()
        t0 = time.perf_counter_ns()
        try:
            seen = within(call_timeout, lambda who=who, ns=ns: authz.visible(who, "dataset", ns))
        except CallTimeout:
            timed_out.append(f"{who} {ns}")
            progress(f"[{n_grants}]   visible({who}, dataset, {ns}) still running after {call_timeout:g}s: "
                     "stopped; no more visible calls at this size")
            break
        vis_ns.append(time.perf_counter_ns() - t0)
        vis_cpu.append(time.thread_time_ns() - c0)
        eval_ns.append(watch.ns.get("evaluate", 0))
        shown.append(len(seen))
        progress(f"[{n_grants}]   visible call {len(vis_ns)}: {vis_ns[-1] / 1e9:.2f}s, {len(seen)} shown")
        if time.perf_counter() - began > budget / 2:
            progress(f"[{n_grants}]   time budget spent: stopping after {len(vis_ns)} visible calls")
            break
    gcw.active = False
    gc.callbacks.remove(gcw)
    result["visible"] = {
        **summary_ms(vis_ns),
        "cpu_median_ms": statistics.median(vis_cpu) / 1e6 if vis_cpu else None,
        "evaluate_median_ms": statistics.median(eval_ns) / 1e6 if eval_ns else None,
        "timed_out": {"limit_s": call_timeout, "calls": timed_out} if timed_out else None,
        "shown_median": statistics.median(shown) if shown else None,
        "shown_max": max(shown) if shown else None,
        "datasets_per_namespace_median": statistics.median(
            sum(1 for d in gen.by_type["dataset"] if d.name.startswith(ns.split(":")[1] + "."))
            for _, ns in vis_specs[:10]
        ),
    }
    result["memory_mib"] = {
        "start": rss0, "after_world": rss_world, "after_load": rss_loaded, "peak": peak_rss_mib(),
    }
    result["loadavg_end"] = loadavg()
    progress(f"[{n_grants}] done")
    return result


def summarise_checks(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def group(selected: Iterable[dict[str, Any]]) -> dict[str, Any]:
        chosen = list(selected)
        summary = summary_ms([r["ns"] for r in chosen])
        if chosen:
            summary["cpu_median_ms"] = statistics.median(r["cpu_ns"] for r in chosen) / 1e6
            summary["cpu_p99_ms"] = percentile([r["cpu_ns"] / 1e6 for r in chosen], 99)
            summary["evaluate_median_ms"] = statistics.median(r["evaluate_ns"] for r in chosen) / 1e6
            summary["outside_evaluate_median_ms"] = statistics.median(r["ns"] - r["evaluate_ns"] for r in chosen) / 1e6
        return summary

    out["all"] = group(rows)
    out["allowed"] = group(r for r in rows if r["allowed"])
    out["denied"] = group(r for r in rows if not r["allowed"])
    out["by_operation"] = {
        op: {
            "all": group(r for r in rows if r["operation"] == op),
            "allowed": group(r for r in rows if r["operation"] == op and r["allowed"]),
            "denied": group(r for r in rows if r["operation"] == op and not r["allowed"]),
        }
        for op in OPERATIONS
    }
    queries: dict[str, list[int]] = defaultdict(list)
    for r in rows:
        for relation, ns in r["query_ns"].items():
            queries[relation].append(ns)
    out["query_median_ms"] = {k: statistics.median(v) / 1e6 for k, v in sorted(queries.items())}
    return out


# ---- the command line, cold -------------------------------------------------------


def privilog_command() -> list[str]:
    exe = shutil.which("privilog")
    return [exe] if exe else [sys.executable, "-m", "privilog"]


def time_command(argv: list[str], runs: int, expect: int | None, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Wall time of a command, a new process each run, after one untimed run (file caches warm)."""
    subprocess.run(argv, cwd=ROOT, capture_output=True, check=False, env=env)
    times: list[int] = []
    codes: list[int] = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False, env=env)
        times.append(time.perf_counter_ns() - t0)
        codes.append(done.returncode)
    shown = [Path(a).name if i == 0 else a for i, a in enumerate(argv)]
    out = {**summary_ms(times), "exit_codes": sorted(set(codes)), "argv": shown}
    if expect is not None and set(codes) != {expect}:
        out["unexpected_exit"] = f"expected {expect}, got {codes}: {done.stderr.strip()[:300]}"
        progress(f"  warning: {out['unexpected_exit']}")
    return out


def measure_cli(runs: int, seed: int, world_grants: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="privilog-bench-pycache-") as pycache:
        # An installed package has bytecode caches; keep them out of the source tree.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = pycache
        return _measure_cli(runs, seed, world_grants, env)


def _measure_cli(runs: int, seed: int, world_grants: int, env: dict[str, str]) -> dict[str, Any]:
    from privilog.engine.world import save_world

    cli = privilog_command()
    sample = ROOT / "privilog" / "samples" / "world.yaml"
    out: dict[str, Any] = {}
    progress(f"CLI: python start-up, {runs} runs")
    out["python_startup"] = time_command([sys.executable, "-c", "pass"], runs, 0, env)
    progress(f"CLI: `import privilog.cli`, {runs} runs")
    out["import_privilog_cli"] = time_command([sys.executable, "-c", "import privilog.cli"], runs, 0, env)
    progress(f"CLI: privilog check, no world, {runs} runs")
    out["check_no_world"] = time_command(
        [*cli, "check", "user:alice", "namespace.create", "namespace:ns1"], runs, 1, env
    )
    progress(f"CLI: privilog check --world sample, {runs} runs")
    sample_allowed = [*cli, "check", "user:bob", "dataset.read", "dataset:sales.orders", "--world", str(sample)]
    out["check_sample_allowed"] = time_command(sample_allowed, runs, 0, env)
    out["check_sample_denied"] = time_command(
        [*cli, "check", "user:bob", "dataset.write", "dataset:sales.orders", "--world", str(sample)], runs, 1, env
    )
    no_cache = {**env, "PYTHONDONTWRITEBYTECODE": "1"}
    no_cache.pop("PYTHONPYCACHEPREFIX")
    if "PYTHONDONTWRITEBYTECODE" in os.environ:
        # privilog's own modules compiled from source at every start, as in this environment
        out["check_sample_allowed_no_bytecode_cache"] = time_command(sample_allowed, runs, 0, no_cache)

    progress(f"CLI: writing a generated {world_grants}-grant world to a temporary YAML file")
    gen = worldgen.generate(world_grants, seed)
    rng = random.Random(f"privilog-bench-cli-{seed}")
    idx = Indexes.build(gen)
    who, what = idx.held(rng, "READ", "dataset")
    with tempfile.TemporaryDirectory(prefix="privilog-bench-") as tmp:
        path = Path(tmp) / f"world-{world_grants}.yaml"
        save_world(gen.world, path)
        size = path.stat().st_size
        progress(f"CLI: privilog check --world {path.name} ({size / 1e6:.1f} MB), {runs} runs each")
        allowed = time_command([*cli, "check", who, "dataset.read", str(what), "--world", str(path)], runs, 0, env)
        denied = time_command(
            [*cli, "check", "user:nobody", "dataset.read", str(what), "--world", str(path)], runs, 1, env
        )
        # where the time goes inside one such process
        progress("CLI: one in-process breakdown of the generated-world check")
        breakdown = cli_breakdown(path, who, str(what), env)
    out[f"check_{world_grants}_allowed"] = {**allowed, "world_file_bytes": size}
    out[f"check_{world_grants}_denied"] = {**denied, "world_file_bytes": size}
    out[f"check_{world_grants}_breakdown_s"] = breakdown
    return out


def cli_breakdown(path: Path, who: str, what: str, env: dict[str, str]) -> dict[str, float]:
    code = f"""
import json, time
t0 = time.perf_counter()
from privilog import dsl
from privilog.engine.authorizer import Authorizer
from privilog.engine.world import load_world
t1 = time.perf_counter()
policy = dsl.load_policy("cdap")
t2 = time.perf_counter()
world = load_world({str(path)!r}, policy.actions)
t3 = time.perf_counter()
authz = Authorizer(policy, world)
t4 = time.perf_counter()
authz.check(authz.request({who!r}, "dataset.read", {what!r}))
t5 = time.perf_counter()
print(json.dumps({{"imports": t1 - t0, "policy": t2 - t1, "read_world_yaml": t3 - t2,
                  "authorizer": t4 - t3, "check": t5 - t4}}))
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True, env=env)
    return json.loads(done.stdout)


# ---- the table -------------------------------------------------------------------


def fmt_ms(summary: dict[str, Any], key: str) -> str:
    if not summary or not summary.get("n"):
        return "—"
    value = summary[key]
    return f"{value:.2f}" if value < 100 else f"{value:.0f}"


def pick(size: dict[str, Any], op: str | None, outcome: str) -> dict[str, Any]:
    """The summary of one size's checks of ``op`` (None: all) that were ``outcome``."""
    checks = size.get("checks", {})
    if op is None:
        return dict(checks.get(outcome, {}))
    return dict(checks.get("by_operation", {}).get(op, {}).get(outcome, {}))


def render(results: dict[str, Any]) -> str:
    lines: list[str] = []
    m = results["machine"]
    lines.append(f"privilog benchmark, {m['date']}")
    lines.append(f"{m['cpu_model']}, {m['cpu_count']} cores, {m['memory_gib']} GiB, Python {m['python']}, "
                 f"pyDatalog {m['pydatalog']}, privilog {m['privilog_commit']}")
    sizes = results["sizes"]
    if sizes:
        head = f"{'':42}" + "".join(f"{s['grants_requested']:>14,}" for s in sizes)
        lines += ["", "Load (seconds)", head]

        def row(label: str, get: Callable[[dict[str, Any]], Any], spec: str = ".2f") -> None:
            cells = []
            for s in sizes:
                try:
                    value = get(s)
                    cells.append(f"{value:>14{spec}}" if value is not None else f"{'—':>14}")
                except (KeyError, TypeError):
                    cells.append(f"{'—':>14}")
            lines.append(f"{label:42}" + "".join(cells))

        row("entities (existing)", lambda s: s["world"]["entities_existing"], ",d")
        row("world facts", lambda s: s["load"]["world_facts_total"], ",d")
        row("generate world", lambda s: s["generate_s"])
        row("policy parse + check", lambda s: s["load"]["policy_parse_check_s"])
        row("compile + backend init (rules)", lambda s: s["load"]["compile_and_backend_init_s"])
        row("derive world facts (Python)", lambda s: s["load"]["world_facts_derive_s"])
        row("assert world facts (pyDatalog)", lambda s: s["load"]["world_facts_assert_s"])
        row("  µs per asserted fact", lambda s: s["load"]["assert_us_per_fact"], ".1f")
        row("rest of refresh (diff, grant index)", lambda s: s["load"]["refresh_other_s"])
        row("Authorizer total (init + refresh)", lambda s: s["load"]["authorizer_total_s"])
        row("  of which CPU (thread time)", lambda s: s["load"]["authorizer_total_cpu_s"])
        row("peak RSS (MiB)", lambda s: s["memory_mib"]["peak"], ",.0f")

        lines += ["", "Check latency, ms: median / p99 (n)   [allowed | denied]", head]
        for op in (*OPERATIONS, None):
            for outcome in ("allowed", "denied"):
                def cell(s: dict[str, Any], op: str | None = op, outcome: str = outcome) -> str:
                    summary = pick(s, op, outcome)
                    if not summary.get("n"):
                        return f"{'—':>14}"
                    return f"{fmt_ms(summary, 'median_ms') + ' / ' + fmt_ms(summary, 'p99_ms'):>14}"
                label = f"{op or 'ALL'} {outcome}"
                n = "/".join(str(pick(s, op, outcome).get("n", 0)) for s in sizes)
                lines.append(f"{label + ' (n ' + n + ')':42}" + "".join(cell(s) for s in sizes))
        lines += ["", "Check CPU (thread) time, median ms: allowed | denied", head]
        for op in (*OPERATIONS, None):
            def cpu_cell(s: dict[str, Any], op: str | None = op) -> str:
                parts = [pick(s, op, outcome) for outcome in ("allowed", "denied")]
                text = " | ".join(fmt_ms(p, "cpu_median_ms") if p.get("n") else "—" for p in parts)
                return f"{text:>14}"
            lines.append(f"{op or 'ALL':42}" + "".join(cpu_cell(s) for s in sizes))
        lines.append("")
        row("all checks: median ms", lambda s: s["checks"]["all"]["median_ms"])
        row("all checks: p99 ms", lambda s: s["checks"]["all"]["p99_ms"])
        row("all checks: median CPU ms (thread time)", lambda s: s["checks"]["all"]["cpu_median_ms"])
        row("allowed: median ms in pyDatalog", lambda s: s["checks"]["allowed"]["evaluate_median_ms"])
        row("denied: median ms outside pyDatalog", lambda s: s["checks"]["denied"]["outside_evaluate_median_ms"])
        row("visible(p, dataset, ns): median ms", lambda s: s["visible"]["median_ms"])
        row("visible(p, dataset, ns): p99 ms", lambda s: s["visible"]["p99_ms"])
        row("visible: median CPU ms", lambda s: s["visible"]["cpu_median_ms"])
        row("visible: calls timed", lambda s: s["visible"]["n"], "d")
        row("visible: calls stopped at the limit", lambda s: len((s["visible"]["timed_out"] or {})["calls"]), "d")
        row("load average at start (1 min)", lambda s: s["loadavg_start"][0], ".1f")
        row("gen-2 GC passes during checks+visible", lambda s: s["checks_gc"].get("gen2", {}).get("passes", 0), "d")
    cli = results.get("cli")
    if cli:
        lines += ["", "Cold start, a new process each run: median (min–max) ms"]
        for key, summary in cli.items():
            if key.endswith("breakdown_s"):
                parts = ", ".join(f"{k} {v * 1000:.0f}" for k, v in summary.items())
                lines.append(f"  {key:34} {parts} (ms)")
                continue
            lines.append(f"  {key:34} {summary['median_ms']:8.0f} ({summary['min_ms']:.0f}–{summary['max_ms']:.0f})"
                         f"  exit {summary['exit_codes']}")
    return "\n".join(lines)


# ---- main ------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="grant counts, comma-separated")
    parser.add_argument("--checks", type=int, default=300, help="timed checks per size (default 300)")
    parser.add_argument("--visible", type=int, default=30, help="timed visible() calls per size (default 30)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--budget", type=float, default=600, help="seconds of timed checks per size at most")
    parser.add_argument("--call-timeout", type=float, default=900,
                        help="seconds one visible() call may take before it is stopped (0: no limit)")
    parser.add_argument("--cli-runs", type=int, default=5, help="runs of each CLI command (median)")
    parser.add_argument("--cli-world", type=int, default=10000, help="grants in the CLI's generated world")
    parser.add_argument("--no-cli", action="store_true", help="skip the cold-start CLI timings")
    parser.add_argument("--out", default=str(HERE / "results.json"))
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)  # one size, in this process
    parser.add_argument("--worker-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker is not None:
        result = measure_size(args.worker, args.checks, args.visible, args.seed, args.budget, args.call_timeout)
        Path(args.worker_out).write_text(json.dumps(result, indent=1))
        return 0

    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    results: dict[str, Any] = {
        "machine": machine_info(),
        "settings": {"sizes": sizes, "checks": args.checks, "visible": args.visible, "seed": args.seed,
                     "budget_s": args.budget, "call_timeout_s": args.call_timeout, "cli_runs": args.cli_runs},
        "sizes": [],
    }
    progress(f"machine: {results['machine']['cpu_model']}, {results['machine']['cpu_count']} cores")
    out = Path(args.out)

    def save() -> None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=1) + "\n")

    for size in sizes:
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
            part = Path(handle.name)
        t = time.perf_counter()
        done = subprocess.run(
            [sys.executable, __file__, "--worker", str(size), "--worker-out", str(part), "--checks", str(args.checks),
             "--visible", str(args.visible), "--seed", str(args.seed), "--budget", str(args.budget),
             "--call-timeout", str(args.call_timeout)],
            check=False,
        )
        if done.returncode != 0:
            progress(f"size {size} failed (exit {done.returncode})")
            results["sizes"].append({"grants_requested": size, "error": f"exit {done.returncode}"})
        else:
            result = json.loads(part.read_text())
            result["wall_s"] = time.perf_counter() - t
            results["sizes"].append(result)
        part.unlink(missing_ok=True)
        save()
    if not args.no_cli:
        results["cli"] = measure_cli(args.cli_runs, args.seed, args.cli_world)
    save()
    print(render(results))
    progress(f"results written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
