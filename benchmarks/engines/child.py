"""One size of the engines benchmark, in its own process.

    python -m benchmarks.engines.child CONFIG_JSON OUT_JSON

Generates the world and the requests, writes the world file, loads each
engine from it in a fresh process of its own (load time, peak memory; a load
over the memory limit or the time limit is stopped, and the engine recorded as
skipped with what was measured when it was stopped), loads every engine that
fits again here, checks that all agree on every request, visible set and
explanation, then times them side by side, and writes the figures to OUT_JSON.

At the first disagreement (an engine's answer that is not the reference's) it
stops: the disagreement, with the request, every engine's answer and the
world's grants that bear on it, goes to stderr and to OUT_JSON, and the
process exits 3 (``keep_going`` in the config: record them all and go on).
The orchestrator is ``benchmarks/engines/__main__.py``.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.engines import adapters, workload
from benchmarks.engines.common import ROOT, loadavg, proc_status, progress, summary_us, timer_overhead_ns

MAX_RECORDED = 50  # disagreements kept in full per size (all are counted), with keep_going
DISAGREED = 3  # the exit status of a child stopped at a disagreement
MAX_RELEVANT = 40  # grants shown with a disagreement


class Disagreement(Exception):
    """The engines disagreed: ``record`` says on what (stops the run unless keep_going)."""

    def __init__(self, record: dict[str, Any]):
        super().__init__(record.get("what"))
        self.record = record


class Failed(str):
    """An error an engine raised instead of answering, as a comparable value."""


def _answer(fn: Callable[..., Any], args: Sequence[Any]) -> Any:
    """An engine's answer, or the error it raised."""
    try:
        return fn(*args)
    except Exception as error:
        return Failed(f"error: {type(error).__name__}: {error}")


class GcWatch:
    """Counts the collector's passes (and their time) while active, by generation."""

    def __init__(self) -> None:
        self.active = False
        self.started = 0
        self.passes: dict[int, list[int]] = defaultdict(list)

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if not self.active:
            return
        if phase == "start":
            self.started = time.perf_counter_ns()
        else:
            self.passes[info["generation"]].append(time.perf_counter_ns() - self.started)

    def take(self) -> dict[str, Any]:
        out = {f"gen{g}": {"passes": len(v), "total_ms": sum(v) / 1e6, "max_ms": max(v) / 1e6}
               for g, v in sorted(self.passes.items())}
        self.passes.clear()
        return out


class Timer:
    """Times calls one at a time, rounds outside and engines inside, each engine within a budget."""

    def __init__(self, budget_s: float, rounds: int, gcw: GcWatch):
        self.budget_ns = int(budget_s * 1e9)
        self.rounds = rounds
        self.gcw = gcw

    def run(self, fns: dict[str, Callable[..., Any]], calls: list[tuple[Any, ...]], label: str,
            rounds: int | None = None) -> dict[str, dict[str, Any]]:
        clock = time.perf_counter_ns
        samples: dict[str, list[tuple[int, int]]] = {name: [] for name in fns}
        spent = dict.fromkeys(fns, 0)
        cut = dict.fromkeys(fns, False)
        gcs: dict[str, list[dict[str, Any]]] = {name: [] for name in fns}
        for fn in fns.values():  # warm-up: the agreement pass ran every call once already
            for args in calls[:20]:
                _answer(fn, args)
        for _ in range(rounds or self.rounds):
            for name, fn in fns.items():
                if cut[name]:
                    continue
                gc.collect()
                out = samples[name]
                self.gcw.active = True
                began = clock()
                for i, args in enumerate(calls):
                    t0 = clock()
                    fn(*args)
                    t1 = clock()
                    out.append((i, t1 - t0))
                    if t1 - began + spent[name] > self.budget_ns:
                        cut[name] = True
                        break
                spent[name] += clock() - began
                self.gcw.active = False
                gcs[name].append(self.gcw.take())
        result = {}
        for name, timed in samples.items():
            result[name] = {
                "samples": timed,
                "cut_by_budget": cut[name],
                "seconds": spent[name] / 1e9,
                "gc": _merge_gc(gcs[name]),
            }
            if cut[name]:
                progress(f"    {label} {name}: budget spent after {len(timed)} calls")
        return result


def _merge_gc(parts: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, dict[str, float]] = {}
    for part in parts:
        for gen, figures in part.items():
            merged = out.setdefault(gen, {"passes": 0, "total_ms": 0.0, "max_ms": 0.0})
            merged["passes"] += figures["passes"]
            merged["total_ms"] += figures["total_ms"]
            merged["max_ms"] = max(merged["max_ms"], figures["max_ms"])
    return out


def _summarise(timed: dict[str, Any], truth: list[Any] | None) -> dict[str, Any]:
    """p50/p99 of all samples, and split by the reference's decision when there is one."""
    ns = [t for _, t in timed["samples"]]
    out = {**summary_us(ns), "cut_by_budget": timed["cut_by_budget"],
           "distinct_calls": len({i for i, _ in timed["samples"]}), "gc_during": timed["gc"]}
    if truth is not None:
        for outcome, label in ((True, "allowed"), (False, "denied")):
            part = [t for i, t in timed["samples"] if truth[i] is outcome]
            if part:
                s = summary_us(part)
                out[label] = {"n": s["n"], "p50_us": s["p50_us"], "p99_us": s["p99_us"]}
    return out


def _status_mib(pid: int) -> tuple[float, float]:
    """(resident, peak resident) memory of a process, in MiB; zeros once it is gone."""
    rss = hwm = 0.0
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) / 1024
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return rss, hwm


def _load_in_child(engine: str, path: Path, timeout: float, memory_limit_mib: float) -> dict[str, Any]:
    """Load ``engine`` from the world file in a fresh process, watched: stopped when its resident memory
    passes ``memory_limit_mib`` or it runs past ``timeout`` seconds, with what it had reached then."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    began = time.perf_counter()
    peak = 0.0
    with subprocess.Popen(
        [sys.executable, "-m", "benchmarks.engines.load", engine, str(path)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as proc:
        stopped = None
        while proc.poll() is None:
            rss, hwm = _status_mib(proc.pid)
            peak = max(peak, rss, hwm)
            elapsed = time.perf_counter() - began
            if memory_limit_mib and rss > memory_limit_mib:
                stopped = (f"stopped at {rss:,.0f} MiB resident (limit {memory_limit_mib:,.0f} MiB) "
                           f"after {elapsed:.1f} s of loading")
            elif elapsed > timeout:
                stopped = f"did not finish within {timeout:g} s (at {rss:,.0f} MiB resident)"
            if stopped:
                proc.kill()
                proc.communicate()
                return {"engine": engine, "error": stopped, "stopped": True, "peak_rss_mib": peak,
                        "seconds": elapsed}
            time.sleep(0.1)
        out, err = proc.communicate()
    elapsed = time.perf_counter() - began
    if proc.returncode != 0:
        last = (err.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return {"engine": engine, "error": f"{last} (exit {proc.returncode}, after {elapsed:.1f} s, "
                f"peak {peak:,.0f} MiB resident)", "peak_rss_mib": peak, "seconds": elapsed}
    return dict(json.loads(out.strip().splitlines()[-1]))


def _closure(data: dict[str, Any], principal: str) -> list[str]:
    """The principal and every group or role it is in, directly or through others."""
    direct: dict[str, list[str]] = defaultdict(list)
    for member, group in data.get("members", ()):
        direct[member].append(group)
    found = [principal]
    for current in found:
        found.extend(g for g in direct.get(current, ()) if g not in found)
    return found


def _inside(entity: str, place: str) -> bool:
    """Whether the id ``entity`` is ``place`` or inside it, by the ids alone."""
    if entity == place:
        return True
    kind, _, name = place.partition(":")
    if kind == "namespace":
        return entity.partition(":")[2].partition(".")[0] == name and not entity.startswith("kerberosprincipal:")
    if kind == "application":
        return entity.partition(":")[0] in ("program", "schedule") and entity.partition(":")[2].startswith(name + ".")
    return False


def relevant(data: dict[str, Any], principal: str, entities: Sequence[str]) -> dict[str, Any]:
    """What in the world bears on a request: the principal's groups, and their grants on the entities
    (and on anything inside them by id, existing or not), whether each entity exists."""
    who = _closure(data, principal)
    holders = set(who)
    existing = set(data.get("entities", ()))
    grants = [f"{p} {a} {e}" + ("" if e in existing or e.startswith("kerberosprincipal:") else "  (does not exist)")
              for p, a, e in data.get("grants", ())
              if p in holders and any(_inside(e, x) for x in entities)]
    return {"principals": who, "grants_shown": grants[:MAX_RELEVANT], "grants": len(grants),
            "exists": {e: e in existing for e in entities}}


def block(record: dict[str, Any]) -> str:
    """A disagreement as lines of text: what, the request, each engine's answer, the grants that bear on it."""
    lines = [f"DISAGREEMENT ({record['what']}) at {record.get('size', 0):,} grants, reference {record.get('truth')}:",
             f"  request: {record.get('request') or record.get('grant') or record.get('revoke')}"]
    for engine, answer in (record.get("answers") or {}).items():
        lines.append(f"  {engine:<20} {answer}")
    for key in ("engine", "then", "why", "decision", "versus"):
        if key in record:
            lines.append(f"  {key}: {record[key]}")
    world = record.get("world")
    if world:
        lines.append("  principals: " + ", ".join(world["principals"]))
        lines.append("  exists: " + ", ".join(f"{e} {'yes' if y else 'no'}" for e, y in world["exists"].items()))
        lines.append(f"  their grants on these entities or inside them ({world['grants']}):")
        lines += [f"    {g}" for g in world["grants_shown"]] or ["    (none)"]
        if world["grants"] > len(world["grants_shown"]):
            lines.append(f"    ... and {world['grants'] - len(world['grants_shown'])} more")
    return "\n".join(lines)


def _fits(engine: str, loaded: dict[str, Any], limit_mib: float) -> str | None:
    """None if loading ``engine`` here (beside what this process holds) should stay under the limit."""
    if "error" in loaded:
        return f"did not load in a fresh process: {loaded['error']}"
    if not limit_mib:
        return None
    need = max(0.0, (loaded.get("peak_rss_mib") or 0.0) - (loaded.get("rss_before_mib") or 0.0))
    have = proc_status().get("rss_mib", 0.0)
    if have + need > limit_mib:
        return (f"not loaded in the timing process: it took {need:,.0f} MiB to load alone, beside the "
                f"{have:,.0f} MiB this process holds (limit {limit_mib:,.0f} MiB)")
    return None


def measure(cfg: dict[str, Any]) -> dict[str, Any]:
    size = int(cfg["size"])
    tag = f"[{size:,}]"
    result: dict[str, Any] = {"size": size, "loadavg_start": loadavg(), "config": cfg}
    progress(f"{tag} generating the world and the requests")
    t = time.perf_counter()
    work = workload.build(size, cfg["seed"], cfg["per_kind"], cfg["visible"], cfg["changes"])
    result["generate_s"] = time.perf_counter() - t
    result["world"] = work.stats
    progress(f"{tag} {work.stats['grants']:,} grants, {work.stats['entities_existing']:,} entities, "
             f"{work.stats['memberships']:,} memberships; heaviest principals "
             + ", ".join(f"{p} ({n:,} grants)" for p, n in work.heavy))

    result["generate_peak_rss_mib"] = proc_status().get("hwm_mib")
    engines: list[str] = []
    result["skipped"] = {}
    for engine in cfg["engines"]:
        if engine == "privilog-pydatalog" and size > cfg["pydatalog_max"]:
            result["skipped"][engine] = f"reference backend run only up to {cfg['pydatalog_max']:,} grants"
            continue
        why_not = adapters.unavailable(engine)
        if why_not:
            result["skipped"][engine] = why_not
            progress(f"{tag} {engine} skipped: {why_not}")
            continue
        engines.append(engine)
    result["engines"] = engines

    # -- load, each engine in a fresh process, from the same world file --------------------
    workdir = Path(cfg["workdir"])
    path = workdir / f"world-{size}.json"
    t = time.perf_counter()
    with open(path, "w", encoding="utf-8") as f:
        json.dump(work.data, f)
    result["write_world_s"] = time.perf_counter() - t
    result["world_file_mib"] = path.stat().st_size / 2**20
    progress(f"{tag} world file: {result['world_file_mib']:,.0f} MiB, written in {result['write_world_s']:.1f} s")
    result["load"] = {}
    limit = float(cfg.get("memory_limit_mib") or 0)
    if not cfg.get("no_load_children"):
        for engine in engines:
            progress(f"{tag} loading {engine} from the world file in a fresh process")
            loaded = _load_in_child(engine, path, cfg["load_timeout"], limit)
            result["load"][engine] = loaded
            if "error" in loaded:
                progress(f"{tag}   {engine}: {loaded['error']}")
            else:
                progress(f"{tag}   {engine}: {loaded['total_s']:.2f} s, peak RSS {loaded['peak_rss_mib']:.0f} MiB, "
                         f"RSS after {loaded['rss_after_mib']:.0f} MiB ("
                         + ", ".join(f"{k} {v:.2f}" for k, v in loaded["phases_s"].items()) + ")")

    # -- every engine that fits, in this process ------------------------------------------------
    from privilog import dsl
    from privilog.api import load_world_for

    policy = dsl.load_policy("cdap")
    built: dict[str, Any] = {}
    result["in_process_load"] = {}
    for engine in engines:
        loaded = result["load"].get(engine)
        why_not = _fits(engine, loaded, limit) if loaded else None
        if why_not:
            result["skipped"][engine] = why_not
            progress(f"{tag} {engine} skipped: {why_not}")
            continue
        rss = proc_status().get("rss_mib", 0.0)
        t0 = time.perf_counter()
        try:
            # privilog reads the world file, as it does in its own process (and as a deployment does)
            world = load_world_for(policy, str(path)) if adapters.backend_of(engine) else None
            built[engine] = adapters.build(engine, work.data, world, policy)
        except Exception as error:
            result["skipped"][engine] = f"failed to load: {type(error).__name__}: {error}"
            progress(f"{tag} {engine} failed to load: {error}")
            continue
        finally:
            world = None
        took = time.perf_counter() - t0
        grew = proc_status().get("rss_mib", 0.0) - rss
        result["in_process_load"][engine] = {"seconds": took, "rss_growth_mib": grew}
        progress(f"{tag} {engine} loaded in this process: {took:.2f} s, RSS +{grew:.0f} MiB")
    path.unlink()
    engines = [e for e in engines if e in built]
    result["engines"] = engines
    if not engines:
        progress(f"{tag} no engine loaded: nothing to compare or time")
        result["memory_mib"] = proc_status()
        result["loadavg_end"] = loadavg()
        return result
    # Everything loaded is long-lived: out of the collector's sight, so that one engine's objects
    # do not lengthen the collections that another engine's calls trigger (privilog's Authorizer
    # does the same with its own facts). The collector stays on while timing.
    gc.collect()
    gc.freeze()

    truth_engine = next((e for e in ("privilog-pydatalog", "privilog-compiled", "floor") if e in built), engines[0])
    result["truth"] = truth_engine
    disagreements: list[dict[str, Any]] = []
    counts: dict[str, int] = defaultdict(int)
    keep_going = bool(cfg.get("keep_going"))

    def disagree(what: str, detail: dict[str, Any], principal: str | None = None,
                 entities: Sequence[str] = ()) -> None:
        """Record a disagreement; unless keep_going, stop here (raise Disagreement)."""
        counts[what] += 1
        record = {"what": what, "size": size, "truth": truth_engine, **detail}
        if principal is not None and (not keep_going or len(disagreements) < MAX_RECORDED):
            record["world"] = relevant(work.data, principal, [e for e in entities if e])
        if len(disagreements) < MAX_RECORDED:
            disagreements.append(record)
        if not keep_going:
            raise Disagreement(record)

    def stopped(error: Disagreement) -> dict[str, Any]:
        text = block(error.record)
        progress(f"{tag} stopped at the first disagreement:\n{text}")
        result["agreement"] = {"counts": dict(counts), "examples": disagreements}
        result["disagreement"] = {**error.record, "text": text}
        result["memory_mib"] = proc_status()
        result["loadavg_end"] = loadavg()
        gc.unfreeze()
        return result

    try:
        return _agree_and_time(cfg, tag, result, work, built, engines, truth_engine, disagree, counts, disagreements)
    except Disagreement as error:
        return stopped(error)


def _agree_and_time(cfg: dict[str, Any], tag: str, result: dict[str, Any], work: workload.Workload,
                    built: dict[str, Any], engines: list[str], truth_engine: str,
                    disagree: Callable[..., None], counts: dict[str, int],
                    disagreements: list[dict[str, Any]]) -> dict[str, Any]:
    """Agreement on every request, visible set and explanation, then the timings (``disagree`` may stop it)."""

    # -- agreement: every request, visible set and explanation -------------------------------
    truth: dict[str, list[Any]] = {}
    for kind, reqs in work.requests.items():
        progress(f"{tag} agreement: {len(reqs)} {kind} requests on {len(engines)} engines")
        answers = {e: [_answer(built[e].allows, r.call()) for r in reqs] for e in engines}
        truth[kind] = answers[truth_engine]
        for i, r in enumerate(reqs):
            row = {e: answers[e][i] for e in engines}
            if any(repr(v) != repr(row[truth_engine]) for v in row.values()):
                disagree(f"decision {kind}", {"request": str(r), "heavy": r.heavy, "intent": r.intent,
                                              "answers": row},
                         r.principal, [r.entity, *(v for _, v in r.args if ":" in v)])
    result["allowed_share"] = {k: sum(v is True for v in t) / len(t) for k, t in truth.items() if t}

    progress(f"{tag} agreement: {len(work.visible)} visible calls")
    vis_calls = [(p, "dataset", ns) for p, ns in work.visible]
    shown: list[int] = []
    for call in vis_calls:
        row = {}
        for e in engines:
            got = _answer(built[e].visible, call)
            row[e] = got if isinstance(got, Failed) else built[e].visible_set(got)
        if len({repr(sorted(v)) if isinstance(v, frozenset) else v for v in row.values()}) > 1:
            ref = row[truth_engine]
            diff = {e: ({"extra": sorted(v - ref), "missing": sorted(ref - v)} if isinstance(v, frozenset)
                        and isinstance(ref, frozenset) else v) for e, v in row.items() if v != ref}
            disagree("visible", {"request": " ".join(call), "versus": diff}, call[0], [call[2]])
        if isinstance(row[truth_engine], frozenset):
            shown.append(len(row[truth_engine]))
    result["visible_shown"] = {"median": sorted(shown)[len(shown) // 2] if shown else None,
                               "max": max(shown, default=None)}

    why_engines = [e for e in engines if getattr(built[e], "why", None)]
    why_calls: list[tuple[Any, ...]] = []
    why_truth: list[Any] = []
    for kind, reqs in work.requests.items():
        for i, r in enumerate(reqs[: cfg["why"]]):
            why_calls.append(r.call())
            why_truth.append(truth[kind][i])
    if why_engines:
        progress(f"{tag} agreement: {len(why_calls)} explanations (why) on {', '.join(why_engines)}")
        explained = {e: [_answer(built[e].why, c) for c in why_calls] for e in why_engines}
        for i, call in enumerate(why_calls):
            req = workload.Req(call[0], call[1], call[2], tuple(call[3].items()))
            for e in why_engines:
                d = explained[e][i]
                if isinstance(d, Failed) or d.allowed is not why_truth[i]:
                    disagree("why decision", {"request": str(req), "engine": e,
                                              "why": d if isinstance(d, Failed) else d.allowed,
                                              "decision": why_truth[i]}, req.principal, [req.entity])
            if len(why_engines) > 1:
                shapes = {e: (explained[e][i] if isinstance(explained[e][i], Failed) else explained[e][i].to_json())
                          for e in why_engines}
                first = shapes[why_engines[0]]
                if any(s != first for s in shapes.values()):
                    disagree("why explanation", {"request": str(req), "explanations": shapes},
                             req.principal, [req.entity])
    result["agreement"] = {"checked": {
        "decisions": sum(len(r) for r in work.requests.values()) * len(engines),
        "visible": len(vis_calls), "why": len(why_calls) if why_engines else 0},
        "counts": dict(counts), "examples": disagreements}
    if counts:
        progress(f"{tag} DISAGREEMENTS: {dict(counts)}; first: {json.dumps(disagreements[0], default=str)[:600]}")
    else:
        progress(f"{tag} all engines agree on every request, visible set and explanation")
    if cfg.get("agreement_only"):
        gc.unfreeze()
        return result

    # -- timing --------------------------------------------------------------------------------
    gcw = GcWatch()
    gc.callbacks.append(gcw)
    timer = Timer(cfg["budget"], cfg["rounds"], gcw)
    result["timer_overhead_ns"] = timer_overhead_ns()
    result["checks"] = {}
    for kind, reqs in work.requests.items():
        progress(f"{tag} timing {kind}: {len(reqs)} requests x {cfg['rounds']} rounds")
        calls = [r.call() for r in reqs]
        timed = timer.run({e: built[e].allows for e in engines}, calls, kind)
        result["checks"][kind] = {e: _summarise(timed[e], truth[kind]) for e in engines}
        progress(f"{tag}   p50 µs: " + ", ".join(f"{e} {result['checks'][kind][e]['p50_us']:.1f}" for e in engines))

    progress(f"{tag} timing visible: {len(vis_calls)} calls x {cfg['visible_rounds']} rounds")
    timed = timer.run({e: built[e].visible for e in engines}, vis_calls, "visible", cfg["visible_rounds"])
    result["visible"] = {e: _summarise(timed[e], None) for e in engines}

    if why_engines:
        progress(f"{tag} timing why: {len(why_calls)} explanations")
        timed = timer.run({e: built[e].why for e in why_engines}, why_calls, "why")
        result["why"] = {e: _summarise(timed[e], why_truth) for e in why_engines}

    # -- grant and revoke, each applied and seen by the next check ----------------------------
    ref = built[truth_engine]
    changes = [c for c in work.change_candidates if ref.allows(c[0], "dataset.read", c[2], {}) is False]
    changes = changes[: cfg["changes"]]
    result["changes"] = {}
    clock = time.perf_counter_ns
    for e in engines:
        adapter = built[e]
        if adapter.grant is None:
            continue
        progress(f"{tag} timing grant/revoke on {e}: {len(changes)} changes")
        grant_ns: list[int] = []
        grant_check_ns: list[int] = []
        revoke_ns: list[int] = []
        revoke_check_ns: list[int] = []
        began = clock()
        gc.collect()
        for p, a, ent in changes:
            t0 = clock()
            adapter.grant(p, a, ent)
            t1 = clock()
            seen = adapter.allows(p, "dataset.read", ent, {})
            t2 = clock()
            grant_ns.append(t1 - t0)
            grant_check_ns.append(t2 - t0)
            if seen is not True:
                disagree("grant not seen", {"engine": e, "grant": f"{p} {a} {ent}", "then": seen}, p, [ent])
            if adapter.revoke is not None:
                t0 = clock()
                adapter.revoke(p, a, ent)
                t1 = clock()
                seen = adapter.allows(p, "dataset.read", ent, {})
                t2 = clock()
                revoke_ns.append(t1 - t0)
                revoke_check_ns.append(t2 - t0)
                if seen is not False:
                    disagree("revoke not seen", {"engine": e, "revoke": f"{p} {a} {ent}", "then": seen}, p, [ent])
            if clock() - began > cfg["budget"] * 1e9:
                progress(f"{tag}   {e}: budget spent after {len(grant_ns)} changes")
                break
        result["changes"][e] = {
            "grant": summary_us(grant_ns), "grant_then_check": summary_us(grant_check_ns),
            "revoke": summary_us(revoke_ns), "revoke_then_check": summary_us(revoke_check_ns),
        }
    gc.callbacks.remove(gcw)
    result["agreement"]["counts"] = dict(counts)
    result["agreement"]["examples"] = disagreements
    result["memory_mib"] = proc_status()
    result["loadavg_end"] = loadavg()
    progress(f"{tag} done")
    return result


def main() -> int:
    cfg = json.loads(sys.argv[1])
    out = measure(cfg)
    Path(sys.argv[2]).write_text(json.dumps(out, default=str), encoding="utf-8")
    return DISAGREED if out.get("disagreement") else 0


if __name__ == "__main__":
    raise SystemExit(main())
