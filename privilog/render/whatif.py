"""What a change to a world would do, as text and JSON: the accesses it takes away and gives
(:func:`engine.whatif.impact`), and the logged requests it would decide differently
(:func:`engine.whatif.redecide`). Backs ``privilog whatif`` and ``--dry-run`` of the change commands;
and what changed between two moments of a store, each access with the log entry that did it
(``privilog store diff``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from privilog.engine.decision import Request
from privilog.engine.whatif import Impact

if TYPE_CHECKING:
    from privilog.store.diff import StoreDiff


def render_impact(impact: Impact) -> str:
    """The accesses lost and gained, a row each, and their counts.

    >>> from privilog.engine.whatif import Access
    >>> from privilog.engine.ids import EntityId
    >>> lost = (Access("user:bob", "dataset.read", EntityId.parse("dataset:ns1.d")),)
    >>> print(render_impact(Impact(lost, ())))
    access  principal  operation     entity
    ------  ---------  ------------  -------------
    lost    user:bob   dataset.read  dataset:ns1.d
    (1 access lost, 0 gained)
    """
    if not impact.changes:
        return "no access changes: nothing lost, nothing gained"
    rows = [("lost", a) for a in impact.lost] + [("gained", a) for a in impact.gained]
    table = [("access", "principal", "operation", "entity")]
    table += [(side, a.principal, a.operation, str(a.entity)) for side, a in rows]
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lost = f"{len(impact.lost)} access{'' if len(impact.lost) == 1 else 'es'} lost"
    lines.append(f"({lost}, {len(impact.gained)} gained)")
    return "\n".join(lines)


def render_redecided(changed: Sequence[tuple[Request, bool, bool]], decided: int, rejected: int) -> str:
    """The logged requests decided differently after the change (identical requests counted together),
    out of the ``decided`` well-formed ones; ``rejected`` rows were not requests."""
    turned = sum(1 for _, a, _b in changed if a)
    head = (
        f"logged requests decided differently: {len(changed)} of {decided} "
        f"({turned} allow → deny, {len(changed) - turned} deny → allow)"
    )
    if rejected:
        head += f"; {rejected} rows of the log rejected (not requests)"
    lines = [head]
    for (request, before, _after), times in Counter(changed).items():
        arrow = "allow → deny" if before else "deny → allow"
        lines.append(f"  {arrow}  {request}" + (f"  (x{times})" if times > 1 else ""))
    return "\n".join(lines)


def redecided_json(changed: Sequence[tuple[Request, bool, bool]], decided: int, rejected: int) -> dict[str, Any]:
    return {
        "decided": decided,
        "rejected": rejected,
        "changed": len(changed),
        "allow_to_deny": sum(1 for _, a, _b in changed if a),
        "deny_to_allow": sum(1 for _, a, _b in changed if not a),
        "requests": [
            {"request": r.to_json(), "before": "allow" if a else "deny", "after": "allow" if b else "deny"}
            for r, a, b in changed
        ],
    }


def render_store_diff(found: StoreDiff) -> str:
    """The accesses gained and lost between two log entries, a row each with the entry that last flipped it
    (``#SEQ TIME ACTOR KIND: ITEMS``), and their counts."""
    head = f"from log entry {found.start} to {found.end} ({found.steps} change{'' if found.steps == 1 else 's'})"
    if not found.gained and not found.lost:
        back = f"; {found.flipped_back} changed and came back" if found.flipped_back else ""
        return f"{head}: no access changes{back}"
    rows = [("lost", a, c) for a, c in found.lost] + [("gained", a, c) for a, c in found.gained]
    table = [("access", "principal", "operation", "entity", "by")]
    table += [(side, a.principal, a.operation, str(a.entity), _entry(c)) for side, a, c in rows]
    widths = [max(len(row[i]) for row in table) for i in range(5)]
    lines = [head + ":"]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in table]
    lines.insert(2, "  ".join("-" * w for w in widths))
    lost = f"{len(found.lost)} access{'' if len(found.lost) == 1 else 'es'} lost"
    back = f"; {found.flipped_back} changed and came back" if found.flipped_back else ""
    lines.append(f"({lost}, {len(found.gained)} gained{back})")
    return "\n".join(lines)


def _entry(change: Any) -> str:
    items = [" ".join(i) if isinstance(i, tuple) else str(i) for i in change.items]
    shown = "; ".join(items[:2]) + (f" (+{len(items) - 2} more)" if len(items) > 2 else "")
    return f"#{change.seq} {change.at[:19]} {change.actor} {change.kind}: {shown}"
