"""A principal's report and an entity's (``privilog report``) as text and as CSV rows.

The text is a tree a person reads top down: the memberships as chains (``user:dave -> group:analysts``),
each grant that reaches with what it allows (grouped by entity), the accesses a rule of the policy
or a bypass allows (no grant named as a witness), and what the principal sees; for an entity, each principal with its
operations grouped by the same reasons.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence

from privilog.engine.ids import EntityId
from privilog.engine.report import EntityReport, Held, PrincipalReport, Reaching

ARROW = " -> "
CSV_COLUMNS = ("principal", "operation", "entity", "grant_principal", "grant_action", "grant_entity", "via", "rule")


def _chain(chain: Sequence[str]) -> str:
    return ARROW.join(chain)


def _by_entity(pairs: Iterable[tuple[str, EntityId]]) -> list[str]:
    """``entity: op, op`` lines, operations without their type's prefix."""
    grouped: dict[EntityId, list[str]] = {}
    for op, entity in pairs:
        grouped.setdefault(entity, []).append(op.partition(".")[2] or op)
    return [f"{entity}: {', '.join(sorted(ops))}" for entity, ops in sorted(grouped.items())]


def _grant(reaching: Reaching, principal: str) -> str:
    g = reaching.grant
    own = g.principal == principal
    return f"{g.action} on {g.entity}" + ("" if own else f"  (held by {g.principal}: {_chain(reaching.via)})")


def render_principal(report: PrincipalReport) -> str:
    """The report of a user, a group or a role as text."""
    p = report.principal
    lines = [f"{p}" + ("" if report.known else "  (the world names it nowhere)")]
    if report.memberships:
        lines.append(f"in {len(report.memberships)} group(s) and role(s):")
        lines += [f"  {_chain(c)}" for c in report.memberships]
    elif report.kind == "user":
        lines.append("in no group or role")
    if report.kind != "user":
        if report.members:
            lines.append(f"members ({len(report.members)}), who hold what it holds:")
            lines += [f"  {_chain(c)}" for c in report.members]
        else:
            lines.append("no members")
    if report.grants:
        lines.append(f"grants that reach it ({len(report.grants)}):")
        for reaching in report.grants:
            lines.append(f"  {_grant(reaching, p)}")
            allows = _by_entity(reaching.allows)
            if allows:
                lines += [f"    allows {line}" for line in allows]
            else:
                lines.append("    allows nothing alone (on what exists)")
    else:
        lines.append("no grant reaches it")
    unexplained = [a for a in report.accesses if not a.grants]
    if unexplained:
        lines.append(f"allowed by a rule of the policy or a bypass, not by a grant it names ({len(unexplained)}):")
        reasons: dict[tuple[str, ...], list[tuple[str, EntityId]]] = {}
        for access in unexplained:
            reasons.setdefault(access.rules, []).append((access.operation, access.entity))
        for rules, pairs in sorted(reasons.items()):
            lines.append(f"  {'; '.join(rules) or 'the operation requires nothing'}:")
            lines += [f"    {line}" for line in _by_entity(pairs)]
    lines.append(f"accesses: {len(report.accesses)} (operation, entity) allowed")
    if report.visible:
        lines.append("sees:")
        lines += [f"  {t}: {', '.join(str(e) for e in es)}" for t, es in report.visible]
    else:
        lines.append("sees nothing")
    return "\n".join(lines)


def _why(access: Held) -> str:
    parts = [_grant(r, access.principal) for r in access.grants] + list(access.rules)
    return "; ".join(parts) or "the operation requires nothing"


def render_entity(report: EntityReport) -> str:
    """The report of an entity as text."""
    head = f"{report.entity}" + ("" if report.exists else "  (does not exist)")
    principals = report.principals()
    if not principals:
        return f"{head}\nnobody in the world has any access to it"
    lines = [f"{head}: {len(principals)} principal(s) with access"]
    for principal in principals:
        lines.append(f"  {principal}")
        grouped: dict[str, list[str]] = {}
        for access in report.accesses:
            if access.principal == principal:
                grouped.setdefault(_why(access), []).append(access.operation.partition(".")[2])
        for why, ops in grouped.items():
            lines.append(f"    {', '.join(ops)}: {why}")
    return "\n".join(lines)


def csv_rows(accesses: Iterable[Held]) -> str:
    """Every access as CSV: a row for each grant behind it (or each rule), with the chain to the grant's
    holder (``via``, the principals joined by `` -> ``)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for a in accesses:
        base = [a.principal, a.operation, str(a.entity)]
        for r in a.grants:
            writer.writerow([*base, r.grant.principal, r.grant.action, str(r.grant.entity), _chain(r.via), ""])
        for rule in a.rules:
            writer.writerow([*base, "", "", "", "", rule])
        if not a.grants and not a.rules:
            writer.writerow([*base, "", "", "", "", ""])
    return out.getvalue()
