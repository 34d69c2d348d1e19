"""The table of an engines benchmark run, and privilog's figures against issue 38's targets.

Issue 38's targets (2-core machine, at 10^6 grants; shown beside the figure at every size):
load from a world file <= 5 s; resident memory after load <= 1.5 GiB; check p50 of every
kind <= 1.5x the floor's p50 in the same run; check p99 of every kind, creates included,
<= 20 µs; grant applied in memory p50 <= 30 µs, revoke <= 40 µs; at 10^7 grants: loads
and answers on the machine (time and memory reported).
"""

from __future__ import annotations

from typing import Any

from benchmarks.engines.workload import KINDS

TARGET_ENGINES = ("privilog-compiled", "privilog-pydatalog")


def _us(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 1e6:
        return f"{value / 1e6:.2f}s"
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.0f}"
    return f"{value:.1f}"


def _pair(summary: dict[str, Any] | None) -> str:
    if not summary or not summary.get("n"):
        return "-"
    cut = "*" if summary.get("cut_by_budget") else ""
    return f"{_us(summary['p50_us'])} / {_us(summary['p99_us'])}{cut}"


def size_table(size: dict[str, Any]) -> str:
    engines = size.get("engines", [])
    world = size.get("world", {})
    lines = [
        f"== {size['size']:,} grants requested: {world.get('grants', 0):,} grants, "
        f"{world.get('entities_existing', 0):,} entities, {world.get('memberships', 0):,} memberships; "
        "heaviest principals "
        + ", ".join(f"{h['grants']:,}" for h in world.get("heavy_principals", []))
        + " grants ==",
    ]
    if size.get("skipped"):
        for engine, why in size["skipped"].items():
            lines.append(f"   ({engine} not run: {why})")
    width = max(18, *(len(e) + 2 for e in engines)) if engines else 18
    head = f"{'p50 / p99 µs':<26}" + "".join(f"{e:>{width}}" for e in engines)
    lines.append(head)

    def row(label: str, cells: list[str]) -> None:
        lines.append(f"{label:<26}" + "".join(f"{c:>{width}}" for c in cells))

    if size.get("checks"):  # none when the run stopped at a disagreement
        for kind in KINDS:
            figures = size.get("checks", {}).get(kind, {})
            row(kind, [_pair(figures.get(e)) for e in engines])
        row("visible (datasets of ns)", [_pair(size.get("visible", {}).get(e)) for e in engines])
        row("why (check, explained)", [_pair(size.get("why", {}).get(e)) for e in engines])
        changes = size.get("changes", {})
        for what in ("grant", "grant_then_check", "revoke", "revoke_then_check"):
            row(what.replace("_then_check", " + next check"), [_pair(changes.get(e, {}).get(what)) for e in engines])
    loads = size.get("load", {})

    def load_cell(e: str, key: str, fmt: str) -> str:
        found = loads.get(e)
        if not found:
            return "-"
        if "error" in found:
            return "failed"
        return fmt.format(found[key])

    row("load, s (fresh process)", [load_cell(e, "total_s", "{:.2f}") for e in engines])
    row("peak RSS, MiB (load)", [load_cell(e, "peak_rss_mib", "{:,.0f}") for e in engines])
    if size.get("generate_s") is not None:
        peak = size.get("generate_peak_rss_mib") or 0
        lines.append(f"generated in {size['generate_s']:.1f} s (peak RSS {peak:,.0f} MiB), "
                     f"world file {size.get('world_file_mib', 0):,.0f} MiB")
    for engine, loaded in loads.items():
        if "error" in loaded:
            lines.append(f"   ({engine}'s load: {loaded['error']})")
    agreement = size.get("agreement", {})
    counts = agreement.get("counts", {})
    checked = agreement.get("checked", {})
    if size.get("disagreement"):
        lines.append(f"agreement (reference {size.get('truth')}): stopped at the first disagreement")
        lines.append(size["disagreement"].get("text", str(size["disagreement"])))
        lines.append("   (the run stopped here: no figure above was timed on engines that disagree)")
    else:
        lines.append(
            f"agreement (reference {size.get('truth')}): {checked.get('decisions', 0):,} decisions, "
            f"{checked.get('visible', 0)} visible sets, {checked.get('why', 0)} explanations compared: "
            + (", ".join(f"{n} {what}" for what, n in counts.items()) + " DISAGREE" if counts else "all agree"))
        for example in agreement.get("examples", [])[:5]:  # --keep-going: the first few, one line each
            what = example.get("request") or example.get("grant") or example.get("revoke")
            answers = example.get("answers") or {k: example[k] for k in ("engine", "then", "versus") if k in example}
            lines.append(f"   {example.get('what')}: {what}: {answers}")
    lines.append(f"   (* = cut by the time budget; load average {size.get('loadavg_start')} -> "
                 f"{size.get('loadavg_end')})")
    return "\n".join(lines)


TARGET_SIZE = 1_000_000  # issue 38's targets are set at 10^6 grants
CHECK_P99_US = 20.0
FLOOR_RATIO = 1.5
GRANT_P50_US = 30.0
REVOKE_P50_US = 40.0
LOAD_S = 5.0
RSS_MIB = 1.5 * 1024


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of issue 38, at each size, for the compiled backend (or the reference when it is absent).

    ``met`` is True or False against the target's bound at every size (the bounds are set at 10^6
    grants: below they are easier, above harder); at 10^7 the target is to load and answer."""
    out: list[dict[str, Any]] = []
    for size in results.get("sizes", []):
        n = size["size"]
        engine = next((e for e in TARGET_ENGINES if e in size.get("engines", []) or e in size.get("load", {})), None)
        if engine is None:
            continue

        def add(figure: str, target: str, measured: str, met: bool | None, n: int = n, engine: str = engine) -> None:
            out.append({"size": n, "engine": engine, "figure": figure, "target": target,
                        "measured": measured, "met": met})

        load = size.get("load", {}).get(engine)
        if load and "error" not in load:
            seconds, after, peak = load["total_s"], load.get("rss_after_mib") or 0.0, load["peak_rss_mib"]
            add("load from the world file (fresh process)", f"≤ {LOAD_S:g} s", f"{seconds:.2f} s", seconds <= LOAD_S)
            add("RSS after load", "≤ 1.5 GiB", f"{after:,.0f} MiB (peak {peak:,.0f})", after <= RSS_MIB)
        elif load:
            add("load from the world file (fresh process)", f"≤ {LOAD_S:g} s, ≤ 1.5 GiB", load["error"], False)
        elif engine in size.get("skipped", {}):
            add("load", f"≤ {LOAD_S:g} s, ≤ 1.5 GiB", size["skipped"][engine], False)
        checks = {k: v[engine] for k, v in size.get("checks", {}).items() if engine in v}
        for kind, figures in checks.items():
            floor = size["checks"][kind].get("floor")
            if floor and floor.get("p50_us"):
                ratio = figures["p50_us"] / floor["p50_us"]
                add(f"check p50 {kind} / floor's", f"≤ {FLOOR_RATIO:g}×",
                    f"{figures['p50_us']:.2f} / {floor['p50_us']:.2f} µs = {ratio:.2f}×", ratio <= FLOOR_RATIO)
            else:
                add(f"check p50 {kind} / floor's", f"≤ {FLOOR_RATIO:g}×", f"{figures['p50_us']:.2f} µs (no floor)",
                    None)
        for kind, figures in checks.items():
            add(f"check p99 {kind}", f"≤ {CHECK_P99_US:g} µs", f"{figures['p99_us']:.2f} µs",
                figures["p99_us"] <= CHECK_P99_US)
        changes = size.get("changes", {}).get(engine, {})
        for what, bound in (("grant", GRANT_P50_US), ("revoke", REVOKE_P50_US)):
            found = changes.get(what)
            if found and found.get("n"):
                add(f"{what} p50 (applied in memory)", f"≤ {bound:g} µs", f"{found['p50_us']:.1f} µs",
                    found["p50_us"] <= bound)
        if n >= 10 * TARGET_SIZE:
            answered = bool(checks)
            add("10^7: loads and answers", "loads and answers",
                "answered" if answered else (size.get("skipped", {}).get(engine) or "not timed"), answered)
    return out


def render(results: dict[str, Any]) -> str:
    machine = results.get("machine", {})
    parts = [
        f"privilog engines benchmark, {machine.get('date')}: {machine.get('cpu_model')}, {machine.get('cpu_count')} "
        f"cores, {machine.get('memory_gib')} GiB, Python {machine.get('python')}, regorus {machine.get('regorus')}, "
        f"privilog {machine.get('privilog_commit')}, load average {machine.get('loadavg')}",
    ]
    for size in results.get("sizes", []):
        if "error" in size:
            parts.append(f"== {size['size']:,} grants: {size['error']} ==")
            continue
        parts.append(size_table(size))
    found = targets(results)
    if found:
        lines = ["Against issue 38's targets (set at 10^6 grants; shown at every size):"]
        for t in found:
            mark = {True: "met", False: "MISSED", None: "-"}[t["met"]]
            lines.append(f"  {t['size']:>10,}  {t['engine']:<18} {t['figure']:<44} {t['target']:<14} "
                         f"{t['measured']:<44} {mark}")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)
