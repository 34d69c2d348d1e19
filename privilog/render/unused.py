"""A least-privilege report (:mod:`engine.leastprivilege`) as text a person reads, and as JSON."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from privilog.engine.accesslog import Rejected
from privilog.engine.decision import Request
from privilog.engine.leastprivilege import Report
from privilog.engine.world import Grant

SHOWN = 20  # grants listed in each section of the text (all of them in JSON)
TOP = 5  # principals with the most unused grants


def _grant(grant: Grant) -> str:
    return f"{grant.principal} {grant.action} {grant.entity}"


def _listed(title: str, lines: list[str], total: int, more: str = "--json lists them all") -> list[str]:
    out = [f"{title} ({total}):"] if total else [f"{title}: none"]
    out += [f"  {line}" for line in lines[:SHOWN]]
    if total > min(len(lines), SHOWN):
        out.append(f"  ... and {total - min(len(lines), SHOWN)} more ({more})")
    return out


def render_unused(
    report: Report,
    rejected: Sequence[Rejected],
    verified: Sequence[Request] | None,
    changed: int | None = None,
    rejects_in: str = "--json lists them all",
) -> str:
    """The summary first, then unused, sole and recommended grants, the principals, and the check.

    ``rejected``: the log's rows that were not requests, to list (``report.rejected`` counts them,
    and ``rejects_in`` says where the rest are); ``verified``: the allowed requests denied without
    the removals (``changed`` of them, if more)."""
    window = f", from {report.window[0]} to {report.window[1]}" if report.window else ""
    method = "exact" if report.method == "exact" else f"greedy, at most {report.bound}x the fewest kept"
    lines = [
        f"log: {report.requests + report.rejected:,} rows{window}: {report.allowed:,} allowed, "
        f"{report.denied:,} denied, {report.rejected:,} rejected",
        f"grants: {report.grants:,}: {len(report.used):,} used, {len(report.unused):,} unused, "
        f"{len(report.sole):,} sole; {len(report.removals):,} can be removed together ({method})",
    ]
    if report.denied:
        were = "request was" if report.denied == 1 else "requests were"
        lines.append(
            f"note: {report.denied:,} {were} denied: counted, never used to keep a grant "
            "(removing grants never allows a request)"
        )
    lines += _listed("unused grants (no allowed request could have used them)", [_grant(g) for g in report.unused],
                     len(report.unused))  # fmt: skip
    sole = [
        f"{_grant(s.grant)}: the only way for {s.requests:,} request{'s' if s.requests != 1 else ''}, "
        f"e.g. {s.examples[0]}"
        for s in report.sole
    ]
    lines += _listed("sole grants (an allowed request would be denied without them)", sole, len(report.sole))
    unused = set(report.unused)
    removals = [_grant(g) + ("" if g in unused else "   (used; other grants serve its requests)")
                for g in report.removals]  # fmt: skip
    lines += _listed("recommended removals (all together, every allowed request stays allowed)", removals,
                     len(report.removals))  # fmt: skip
    most = sorted((p for p in report.principals if p.unused), key=lambda p: (-p.unused, p.principal))[:TOP]
    if most:
        lines.append("most unused grants:")
        lines += [f"  {p.principal}: {p.unused} of {p.held} unused" for p in most]
    if report.inactive:
        lines += _listed("users with no request in the log", report.inactive, len(report.inactive))
    if report.rejected:
        lines += _listed("rejected rows", [f"{r.where}: {r.reason}" for r in rejected], report.rejected, rejects_in)
    if verified is not None:
        if verified:
            count = changed if changed is not None else len(verified)
            lines.append(f"verify: FAILED: {count:,} allowed requests are denied without the removals:")
            lines += [f"  {r}" for r in verified[:SHOWN]]
        else:
            lines.append(
                f"verify: the removals applied to a copy of the world and the log decided again: "
                f"all {report.allowed:,} allowed requests stay allowed"
            )
    return "\n".join(lines)


def unused_json(report: Report, rejected: Sequence[Rejected], verified: Sequence[Request] | None) -> dict[str, Any]:
    def grant(g: Grant) -> dict[str, str]:
        return {"principal": g.principal, "action": g.action, "entity": str(g.entity)}

    unused = set(report.unused)
    return {
        "summary": report.summary(),
        "window": list(report.window) if report.window else None,
        "unused": [grant(g) for g in report.unused],
        "sole": [
            {**grant(s.grant), "requests": s.requests, "examples": [r.to_json() for r in s.examples]}
            for s in report.sole
        ],
        "recommended_removals": [{**grant(g), "used": g not in unused} for g in report.removals],
        "principals": [
            {"principal": p.principal, "held": p.held, "used": p.used, "unused": p.unused, "requests": p.requests}
            for p in report.principals
        ],
        "inactive": report.inactive,
        "rejected": [{"where": r.where, "reason": r.reason} for r in rejected],
        "verify": None if verified is None else {"changed": [r.to_json() for r in verified]},
    }
