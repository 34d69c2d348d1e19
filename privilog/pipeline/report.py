"""``privilog pipeline report OUT [--html] [--out FILE]``: a run's results summarized, without Spark.

The run's tables (:mod:`privilog.pipeline.results`) are counted into a
:class:`~privilog.pipeline.summary.Report`, printed as text, and with ``--html``
written as one self-contained page of charts (:mod:`privilog.render.charts`), each
with the table of its numbers under it.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from privilog.dsl.files import write_atomically
from privilog.pipeline.results import read_run
from privilog.pipeline.summary import (
    TOP,
    Decisions,
    Impact,
    LeastPrivilege,
    Rejects,
    Report,
    Tally,
    Visibility,
    summarize,
)
from privilog.pipeline.tables import PipelineError
from privilog.render import charts
from privilog.render.charts import ALLOWED, DENIED, NEUTRAL, TO_ALLOW, TO_DENY, Series

# ---- text -----------------------------------------------------------------------------


def _columns(rows: Sequence[Sequence[object]], headers: Sequence[str]) -> list[str]:
    """Rows as aligned text: the first column left, the others (counts) right."""
    cells = [list(headers), *([charts.number(v) if isinstance(v, int) else str(v) for v in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return [
        "  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        for row in cells
    ]


def _more(shown: int, total: int, what: str) -> list[str]:
    return [f"  ... {total - shown:,} more {what}"] if total > shown else []


def _counted(count: int, what: str) -> str:
    """``1 request``, ``2,000 requests``."""
    return f"{charts.number(count)} {what}{'' if count == 1 else 's'}"


def render_text(report: Report) -> str:
    """The report as a terminal shows it: the top of each list, counts aligned."""
    lines = [f"run {report.folder} ({', '.join(report.tables)})"]
    if report.decisions is not None:
        lines += _decisions_text(report.decisions)
    if report.visibility is not None:
        v = report.visibility
        pairs = _counted(v.pairs, "(principal, entity) pair")
        lines += ["", f"visibility: {pairs} for {_counted(v.principals, 'principal')}"]
        lines += _columns(v.by_type, ["type", "pairs"]) if v.by_type else []
    if report.impact is not None:
        i = report.impact
        lines += [
            "",
            f"impact: {charts.number(i.allow_to_deny + i.deny_to_allow)} of {_counted(i.compared, 'compared request')} "
            f"change ({charts.number(i.allow_to_deny)} allow→deny, {charts.number(i.deny_to_allow)} deny→allow; "
            "distinct requests)",
        ]
        if i.changed:
            lines += _columns([row[:4] for row in i.changed], ["operation", "allow→deny", "deny→allow", "log rows"])
    if report.least_privilege is not None:
        lines += _least_privilege_text(report.least_privilege)
    if report.rejects is not None:
        lines += _rejects_text(report.rejects)
    return "\n".join(lines) + "\n"


def _least_privilege_text(lp: LeastPrivilege) -> list[str]:
    s, n = lp.summary, charts.number
    lines = [
        "",
        f"least privilege: {_counted(int(s.get('grants', 0)), 'grant')}: {n(int(s.get('used', 0)))} used, "
        f"{n(int(s.get('unused', 0)))} unused, {n(int(s.get('sole', 0)))} sole; "
        f"{n(int(s.get('recommended_removals', 0)))} can be removed together ({lp.method})",
    ]
    if lp.principals:
        rows = [(p, unused, held) for p, held, _, unused in lp.principals[:TOP]]
        lines += _columns(rows, ["most unused grants", "unused", "held"])
    return lines


def _decisions_text(d: Decisions) -> list[str]:
    n = charts.number
    total = d.allowed + d.denied
    lines = ["", f"decisions: {_counted(total, 'request')}, {n(d.allowed)} allowed, {n(d.denied)} denied"]
    operations = [(t.key, t.allowed, t.denied) for t in d.by_operation[:TOP]]
    if operations:
        lines += _columns(operations, ["operation", "allowed", "denied"])
        lines += _more(len(operations), len(d.by_operation), "operations")
    principals = [(t.key, t.denied, t.total) for t in d.principals[:TOP]]
    if principals:
        lines += ["", *_columns(principals, ["most-denied principal", "denied", "requests"])]
    unmet = [(f"{r} {t}", c) for r, t, c in d.unmet[:TOP]]
    if unmet:
        lines += ["", *_columns(unmet, ["unmet requirement", "denied requests"])]
    if d.denials:
        lines += ["", *_columns(d.denials[:TOP], ["denied by the policy's rule", "denied requests"])]
        lines += _more(len(d.denials[:TOP]), len(d.denials), "rules")
    if d.timeline is not None:
        t = d.timeline
        lines += ["", f"over time: {t.first} to {t.last} UTC, counted per {t.step} ({len(t.buckets)} intervals)"]
    untimed = total if d.timeline is None else d.timeline.untimed
    if untimed:
        lines += ([] if d.timeline else [""]) + [f"{_counted(untimed, 'request')} without a readable timestamp"]
    return lines


def _rejects_text(r: Rejects) -> list[str]:
    tables = ", ".join(f"{charts.number(c)} {t}" for t, c in r.by_table)
    lines = ["", f"rejects: {_counted(r.total, 'row')}" + (f" ({tables})" if tables else "")]
    reasons = [(kind, count) for kind, count, _, _ in r.by_reason[:TOP]]
    if reasons:
        lines += _columns(reasons, ["reason", "rows"])
        lines += _more(len(reasons), len(r.by_reason), "reasons")
    return lines


# ---- HTML -----------------------------------------------------------------------------

ALLOW_DENY = (Series("allowed", ALLOWED), Series("denied", DENIED))


def render_html(report: Report) -> str:
    """The report as one HTML page: headline figures, then a chart and its table per part."""
    parts = [_headline(report)]
    if report.decisions is not None:
        parts += _decision_sections(report.decisions)
    if report.impact is not None:
        parts.append(_impact_section(report.impact))
    if report.visibility is not None:
        parts.append(_visibility_section(report.visibility))
    if report.least_privilege is not None:
        parts.append(_least_privilege_section(report.least_privilege))
    if report.rejects is not None:
        parts.append(_rejects_section(report.rejects))
    return charts.page(f"privilog pipeline run: {report.folder}", parts)


def _headline(report: Report) -> str:
    figures: list[tuple[str, int | str]] = [("tables", ", ".join(report.tables))]
    if report.decisions is not None:
        d = report.decisions
        figures += [("requests decided", d.allowed + d.denied), ("allowed", d.allowed), ("denied", d.denied)]
    if report.impact is not None:
        figures += [("allow→deny", report.impact.allow_to_deny), ("deny→allow", report.impact.deny_to_allow)]
    if report.visibility is not None:
        figures += [("visible (principal, entity) pairs", report.visibility.pairs)]
    if report.least_privilege is not None:
        s = report.least_privilege.summary
        figures += [
            ("grants", int(s.get("grants", 0))),
            ("unused grants", int(s.get("unused", 0))),
            ("recommended for removal", int(s.get("recommended_removals", 0))),
        ]
    if report.rejects is not None:
        figures += [("rows rejected", report.rejects.total)]
    return charts.figures(figures)


def _tally_chart(title: str, tallies: Sequence[Tally], first: str, note: str = "") -> str:
    if not tallies:
        return charts.section(title, note="none")
    values = [(t.allowed, t.denied) for t in tallies]
    return charts.section(
        title,
        charts.bars(title, [t.key for t in tallies], ALLOW_DENY, values, "requests"),
        charts.table(
            [first, "allowed", "denied", "requests"], [(t.key, t.allowed, t.denied, t.total) for t in tallies]
        ),
        note=note,
    )


def _decision_sections(d: Decisions) -> list[str]:
    parts = [_tally_chart("Decisions by operation", d.by_operation, "operation")]
    if d.timeline is not None:
        t = d.timeline
        title = "Decisions over time"
        labels = [b.key for b in t.buckets]
        parts.append(
            charts.section(
                title,
                charts.columns(
                    title,
                    labels,
                    ALLOW_DENY,
                    [(b.allowed, b.denied) for b in t.buckets],
                    f"time (UTC), per {t.step}",
                    "requests",
                ),
                charts.table(
                    [f"{t.step} from (UTC)", "allowed", "denied", "requests"],
                    [(b.key, b.allowed, b.denied, b.total) for b in t.buckets],
                ),
                note=f"From {t.first} to {t.last} UTC, by the requests' timestamp column"
                + (f"; {t.untimed:,} requests had no readable timestamp." if t.untimed else "."),
            )
        )
    else:
        parts.append(
            charts.section(
                "Decisions over time",
                note="No request has a readable timestamp (the timestamp column of the access log, ISO 8601).",
            )
        )
    parts.append(_tally_chart("Most-denied principals", d.principals[: TOP * 2], "principal"))
    parts.append(_tally_chart("Most-denied operations", d.most_denied_operations[: TOP * 2], "operation"))
    top = d.unmet[: TOP * 2]
    title = "Top unmet requirements"
    note = "How many denied requests lack each requirement (a request may lack several)."
    if top:
        labels = [f"{text} ({requirement})" for requirement, text, _ in top]
        parts.append(
            charts.section(
                title,
                charts.bars(
                    title, labels, [Series("denied requests", DENIED)], [(c,) for _, _, c in top], "denied requests"
                ),
                charts.table(["requirement", "as the policy writes it", "denied requests"], top),
                note=note,
            )
        )
    else:
        parts.append(charts.section(title, note="No request was denied."))
    if d.denials:
        parts.append(
            charts.section(
                "Denials by the policy's own rules",
                charts.table(["rule (FILE:LINE)", "denied requests"], d.denials),
                note="How many requests each of the policy's own `denied` rules denied (a request may have several).",
            )
        )
    return parts


def _impact_section(i: Impact) -> str:
    title = "Changes between the two policies, by operation"
    note = (
        f"{i.allow_to_deny + i.deny_to_allow:,} of {i.compared:,} distinct requests are decided differently "
        "by policy B than by policy A (POLICY_A and POLICY_B of privilog pipeline impact)."
    )
    changed = i.changed
    series = (Series("allow→deny", TO_DENY), Series("deny→allow", TO_ALLOW))
    parts = []
    if changed:
        parts.append(
            charts.bars(title, [r[0] for r in changed], series, [(r[1], r[2]) for r in changed], "distinct requests")
        )
    parts.append(
        charts.table(
            ["operation", "allow→deny", "deny→allow", "log rows", "compared"],
            changed or [],
            "Operations whose decisions change",
        )
    )
    if i.examples:
        parts.append(
            charts.table(
                ["principal", "operation", "entity", "args", "policy A", "policy B", "log rows", "unmet where denied"],
                [
                    (c.principal, c.operation, c.entity, c.args, c.before, c.after, c.requests, c.why)
                    for c in i.examples
                ],
                "Examples: in each direction, the changed requests standing for the most log rows",
            )
        )
    return charts.section(title, *parts, note=note)


def _visibility_section(v: Visibility) -> str:
    title = "Visibility by entity type"
    series = [Series("pairs", NEUTRAL)]
    return charts.section(
        title,
        charts.bars(
            title, [t for t, _ in v.by_type], series, [(c,) for _, c in v.by_type], "(principal, entity) pairs"
        ),
        charts.table(["type", "pairs"], v.by_type),
        charts.table(["principal", "entities visible"], v.top_principals, "The principals that see the most"),
        note=f"{v.pairs:,} (principal, entity) pairs that a listing shows, for {v.principals:,} principals.",
    )


def _least_privilege_section(lp: LeastPrivilege) -> str:
    title = "Least privilege: grants held, used and unused, by principal"
    s = lp.summary
    verify = s.get("verify")
    checked = (
        ""
        if not verify
        else f" Verified: the log decided again without them, {verify.get('changed', 0):,} allowed requests changed."
    )
    note = (
        f"{int(s.get('grants', 0)):,} grants: {int(s.get('used', 0)):,} used by some allowed request of the log, "
        f"{int(s.get('unused', 0)):,} unused; {int(s.get('recommended_removals', 0)):,} can be removed together "
        f"while every allowed request stays allowed ({lp.method}).{checked}"
    )
    series = (Series("used", ALLOWED), Series("unused", DENIED))
    parts = []
    if lp.principals:
        shown = lp.principals[:TOP]
        parts.append(charts.bars(title, [p for p, *_ in shown], series, [(u, n) for _, _, u, n in shown], "grants"))
        parts.append(
            charts.table(
                ["principal", "held", "used", "unused"], lp.principals, "The principals with the most unused grants"
            )
        )
    parts.append(
        charts.table(["grant", "requests it alone allows"], lp.sole, "Sole grants: what would be denied without them")
    )
    parts.append(charts.table(["grant", "the log"], lp.removals, "Recommended removals (the first of them)"))
    return charts.section(title, *parts, note=note)


def _rejects_section(r: Rejects) -> str:
    title = "Rejects by reason"
    if not r.total:
        return charts.section(title, note="No input row was rejected.")
    top = r.by_reason[: TOP * 2]
    return charts.section(
        title,
        charts.bars(title, [k for k, _, _, _ in top], [Series("rows", DENIED)], [(c,) for _, c, _, _ in top], "rows"),
        charts.table(["reason (quoted values as `…`)", "rows", "an example", "its row"], top),
        charts.table(["table", "rows"], r.by_table, "Rejected rows by input table"),
        charts.table(
            ["table", "file:row", "reason", "row"],
            r.first,
            f"The first {len(r.first):,} rejected rows of {r.total:,}"
            if r.total > len(r.first)
            else "Every rejected row",
        ),
        note="Input rows the run did not use, counted by reason.",
    )


# ---- the command ----------------------------------------------------------------------


def cmd_report(args: argparse.Namespace) -> int:
    run = read_run(args.folder)
    report = summarize(run)
    print(render_text(report), end="")
    if args.html or args.out:
        target = Path(args.out) if args.out else run.folder / "report.html"
        try:
            write_atomically(target, render_html(report), "report")
        except OSError as error:
            raise PipelineError(f"{target}: cannot write the report ({error.strerror or error})") from None
        print(f"wrote {target}")
    return 0


def register(commands: Any) -> None:
    """Add ``report`` to ``privilog pipeline``'s commands."""
    q = commands.add_parser(
        "report",
        help="a run's results summarized: text, or one HTML page of charts (no Spark)",
        description="Summarize the tables a pipeline run wrote (read with pyarrow, without Spark): decisions "
        "by operation and over time, the most-denied principals and operations, the top unmet requirements, "
        "rejects by reason, visibility, and an impact run's changes. With --html, also one self-contained "
        "HTML page of charts, each with its numbers in a table.",
    )
    q.add_argument("folder", metavar="OUT", help="the --out folder of a pipeline decide, visibility or impact run")
    q.add_argument("--html", action="store_true", help="also write the HTML page (to OUT/report.html unless --out)")
    q.add_argument("--out", metavar="FILE", help="write the HTML page to FILE (implies --html)")
    q.set_defaults(run=cmd_report)
