"""``privilog prove``'s reports as text: a line per promise, each counterexample with its decisions explained."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from privilog.engine.world import World
from privilog.proofs.findings import Counterexample, Report, Scene, Verdict
from privilog.render.explain import render_decision


def render_report(report: Report) -> str:
    """A summary line per promise, then each counterexample in full."""
    kept = sum(v.held for v in report.verdicts)
    lines = [
        f"{report.policy}: {kept} of {len(report.verdicts)} promises kept "
        f"(every world up to {report.max_entities} {'entity' if report.max_entities == 1 else 'entities'} "
        f"of each kind, then {report.examples} generated; {report.seconds:.0f} s)"
    ]
    width = max(len(v.promise.name) for v in report.verdicts)
    for verdict in report.verdicts:
        lines.append(f"  {verdict.promise.name:{width}}  {_status(verdict)}")
    lines += [f"  note: {note}" for note in report.notes]
    for verdict in report.verdicts:
        if verdict.counterexample is not None:
            lines += ["", *render_counterexample(verdict, verdict.counterexample)]
    return "\n".join(lines)


def promise_table(reports: Sequence[dict[str, Any]]) -> str:
    """Which policy keeps which promise, from reports as JSON (``Report.to_json``), in Markdown."""
    names = [p["name"] for p in reports[0]["properties"]] if reports else []
    lines = [
        "| promise | " + " | ".join(f"`{r['policy']}`" for r in reports) + " |",
        "|---|" + "---|" * len(reports),
    ]
    for name in names:
        cells = []
        for report in reports:
            (found,) = [p for p in report["properties"] if p["name"] == name]
            count = len(found["operations"])
            cells.append("kept" if found["held"] else f"**broken** ({count} op{'s' if count != 1 else ''})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _status(verdict: Verdict) -> str:
    if verdict.held:
        return f"held ({verdict.worlds} worlds checked)"
    count = len(verdict.operations)
    return f"BROKEN by {count} operation{'s' if count != 1 else ''}" if count else "BROKEN"


def render_counterexample(verdict: Verdict, found: Counterexample) -> list[str]:
    """The promise, what broke it and where, and each scene with its decision explained."""
    lines = [f"{verdict.promise.name}: {verdict.promise.sentence}"]
    if verdict.operations:
        shown = ", ".join(verdict.operations[:8])
        more = len(verdict.operations) - 8
        lines.append(f"  broken by {shown}" + (f" and {more} more" if more > 0 else ""))
    lines.append(f"  counterexample: {found.summary}")
    for number, scene in enumerate(found.scenes, start=1):
        lines += [f"  {number}. {scene.caption}", *_scene_lines(scene)]
    return lines


def _scene_lines(scene: Scene) -> list[str]:
    lines = [f"       {line}" for line in world_lines(scene.world, scene.request is not None)]
    if scene.decision is not None:
        lines += [f"     {line}" for line in render_decision(scene.decision).splitlines()]
    elif scene.request is not None:
        lines.append(f"     request: {scene.request}")
    return lines


def world_lines(world: World, requested: bool = True) -> list[str]:
    """A world in a few lines: its entities, grants, memberships and admins."""
    nothing = "none (only what the request names)" if requested else "none"
    entities = ", ".join(str(e) for e in sorted(world.entities)) or nothing
    lines = [f"entities: {entities}"]
    grants = "; ".join(str(g) for g in sorted(world.grants)) or "none"
    lines.append(f"grants: {grants}")
    if world.members:
        lines.append("members: " + "; ".join(f"{m} in {g}" for m, g in sorted(world.members)))
    if world.admins:
        lines.append("admins: " + ", ".join(sorted(world.admins)))
    return lines
