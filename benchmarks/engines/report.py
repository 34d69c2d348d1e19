"""The table of an engines benchmark run, and privilog's figures against issue 11's targets."""

from __future__ import annotations

from typing import Any

from benchmarks.engines.workload import KINDS

TARGET_ENGINES = ("privilog-compiled", "privilog-pydatalog")
REGO_ENGINES = ("regorus", "regorus-rvm")


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
    agreement = size.get("agreement", {})
    counts = agreement.get("counts", {})
    checked = agreement.get("checked", {})
    lines.append(
        f"agreement (reference {size.get('truth')}): {checked.get('decisions', 0):,} decisions, "
        f"{checked.get('visible', 0)} visible sets, {checked.get('why', 0)} explanations compared: "
        + (", ".join(f"{n} {what}" for what, n in counts.items()) + " DISAGREE" if counts else "all agree")
    )
    for example in agreement.get("examples", [])[:5]:
        lines.append(f"   {example}")
    lines.append(f"   (* = cut by the time budget; load average {size.get('loadavg_start')} -> "
                 f"{size.get('loadavg_end')})")
    return "\n".join(lines)


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of issue 11, per size, for the compiled backend (or the reference when it is absent)."""
    out: list[dict[str, Any]] = []
    for size in results.get("sizes", []):
        engine = next((e for e in TARGET_ENGINES if e in size.get("engines", [])), None)
        if engine is None or "checks" not in size:
            continue
        n = size["size"]
        checks = {k: v[engine] for k, v in size["checks"].items() if engine in v}

        def add(figure: str, target: str, measured: str, met: bool | None, n: int = n, engine: str = engine) -> None:
            out.append({"size": n, "engine": engine, "figure": figure, "target": target,
                        "measured": measured, "met": met})

        if checks:
            worst = max(checks, key=lambda k: checks[k]["p50_us"])
            add("check p50 (worst kind)", "≤ 2 µs", f"{checks[worst]['p50_us']:.2f} µs ({worst})",
                checks[worst]["p50_us"] <= 2)
            worst = max(checks, key=lambda k: checks[k]["p99_us"])
            add("check p99 (worst kind)", "≤ 20 µs", f"{checks[worst]['p99_us']:.2f} µs ({worst})",
                checks[worst]["p99_us"] <= 20)
            for rego in REGO_ENGINES:
                ratios = {k: size["checks"][k][rego]["p50_us"] / checks[k]["p50_us"]
                          for k in checks if rego in size["checks"][k]}
                if ratios:
                    low = min(ratios, key=lambda k: ratios[k])
                    add(f"p50 ratio to {rego} (lowest kind)", "≥ 20×", f"{ratios[low]:.1f}× ({low})",
                        ratios[low] >= 20)
        vis = size.get("visible", {}).get(engine)
        if vis and vis.get("n"):
            add("visible p50", "≤ 50 µs at 100k", f"{vis['p50_us']:.1f} µs",
                vis["p50_us"] <= 50 if n == 100_000 else None)
        why = size.get("why", {}).get(engine)
        if why and why.get("n"):
            add("why p50", "≤ 200 µs", f"{why['p50_us']:.1f} µs", why["p50_us"] <= 200)
        changes = size.get("changes", {}).get(engine, {})
        for what in ("grant", "revoke"):
            found = changes.get(what)
            then = changes.get(f"{what}_then_check")
            if found and found.get("n"):
                add(f"{what} p50 (+ next check)", "≤ 50 µs",
                    f"{found['p50_us']:.1f} µs (+check {then['p50_us']:.1f} µs)", then["p50_us"] <= 50)
        load = size.get("load", {}).get(engine)
        if load and "error" not in load:
            seconds, peak = load["total_s"], load["peak_rss_mib"]
            add("load (fresh process)", "1M: ≤ 5 s, ≤ 1.5 GiB", f"{seconds:.2f} s, {peak:,.0f} MiB peak RSS",
                (seconds <= 5 and peak <= 1536) if n >= 1_000_000 else None)
        elif load:
            add("load (fresh process)", "1M: ≤ 5 s, ≤ 1.5 GiB", load["error"], False if n >= 1_000_000 else None)
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
        lines = ["Against issue 11's targets:"]
        for t in found:
            mark = {True: "met", False: "MISSED", None: "(not the target's size)"}[t["met"]]
            lines.append(f"  {t['size']:>9,}  {t['engine']:<19} {t['figure']:<38} {t['target']:<22} "
                         f"{t['measured']:<42} {mark}")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)
