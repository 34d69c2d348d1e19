"""Policy comparisons rendered for a person reviewing a rollout, and as JSON."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from privilog.engine.compare import OperationDiff, Witness
from privilog.engine.decision import Request


def _witness_lines(witness: Witness) -> list[str]:
    entities = ", ".join(sorted(str(e) for e in witness.world.entities))
    grants = "; ".join(f"{g.principal} {g.action} {g.entity}" for g in witness.grants) or "none"
    unmet = "; ".join(o.text for o in witness.denial.unmet) or "the operation"
    members = "; ".join(f"{m} is in {g}" for m, g in sorted(witness.world.members))
    return [
        f"  {witness.allowed_by} allows, {witness.denied_by} denies: {witness.request}",
        f"      in a world of {entities}",
        f"      with grants: {grants}" + (f"; {members}" if members else ""),
        f"      {witness.denied_by} lacks: {unmet}",
    ]


def render_diff(left: str, right: str, diffs: Sequence[OperationDiff]) -> str:
    """Each operation whose decisions differ, side by side, with its witnesses."""
    both = [d for d in diffs if d.left is not None and d.right is not None]
    changed = [d for d in both if d.witnesses]
    width = max(len(left), len(right)) + 1
    lines = [f"{left} vs {right}: {len(changed)} of {len(both)} shared operations decide differently"]
    for diff in changed:
        assert diff.left is not None and diff.right is not None
        lines.append("")
        lines.append(diff.operation)
        lines.append(f"  {left + ':':{width}} {', '.join(diff.left)}")
        lines.append(f"  {right + ':':{width}} {', '.join(diff.right)}")
        for witness in diff.witnesses:
            lines += _witness_lines(witness)
    for name, side in ((left, "left"), (right, "right")):
        only = [d.operation for d in diffs if getattr(d, "right" if side == "left" else "left") is None]
        if only:
            lines.append("")
            lines.append(f"Only in {name} ({len(only)}): {', '.join(only)}")
    same = [d.operation for d in both if not d.witnesses and d.left != d.right]
    if same:
        lines.append("")
        lines.append(f"Written differently but deciding alike on every world tried: {', '.join(same)}")
    return "\n".join(lines)


def render_world_diff(left: str, right: str, changed: dict[str, list[tuple[Request, bool, bool]]]) -> str:
    """Decisions in a world that change between two policies, grouped by operation, with counts."""
    total = sum(len(v) for v in changed.values())
    lines = [f"{left} vs {right}: {total} decisions change"]
    for operation, rows in changed.items():
        lost = sum(1 for _, a, b in rows if a and not b)
        lines.append("")
        lines.append(f"{operation}: {len(rows)} ({lost} allow → deny, {len(rows) - lost} deny → allow)")
        for request, a, _b in rows:
            arrow = "allow → deny" if a else "deny → allow"
            lines.append(f"  {arrow}  {request}")
    return "\n".join(lines)


def world_diff_json(left: str, right: str, changed: dict[str, list[tuple[Request, bool, bool]]]) -> dict[str, Any]:
    return {
        "left": left,
        "right": right,
        "changed": {
            operation: {
                "count": len(rows),
                "allow_to_deny": sum(1 for _, a, b in rows if a and not b),
                "deny_to_allow": sum(1 for _, a, b in rows if b and not a),
                "decisions": [
                    {"request": r.to_json(), "left": "allow" if a else "deny", "right": "allow" if b else "deny"}
                    for r, a, b in rows
                ],
            }
            for operation, rows in changed.items()
        },
    }
