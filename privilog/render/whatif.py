"""What a change to a world would do, as text and JSON: the accesses it takes away and gives
(:func:`engine.whatif.impact`), and the logged requests it would decide differently
(:func:`engine.whatif.redecide`). Backs ``privilog whatif`` and ``--dry-run`` of the change commands.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from privilog.engine.decision import Request
from privilog.engine.whatif import Impact


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
