"""``privilog pipeline report OUT [--html] [--out FILE]``: a run's results summarized, without Spark.

The run's tables (:mod:`privilog.pipeline.results`) are counted with pyarrow into a
:class:`Report`: decisions by operation and over time, the most-denied principals and
operations, the unmet requirements most often met with, rejects by reason,
visibility by type and principal, and an ``impact`` run's changes. The report is
printed as text, and with ``--html`` written as one self-contained page of charts
(:mod:`privilog.render.charts`), each with the table of its numbers under it.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privilog.dsl.files import write_atomically
from privilog.pipeline.results import Run, read_run
from privilog.pipeline.tables import PipelineError
from privilog.render import charts
from privilog.render.charts import ALLOWED, DENIED, NEUTRAL, TO_ALLOW, TO_DENY, Series

if TYPE_CHECKING:
    import pyarrow as pa

TOP = 10  # rows of each "most" list in the text; the page shows TOP * 2
EXAMPLES = 20  # changes of an impact run shown on the page: half allow→deny, half deny→allow


@dataclass(frozen=True)
class Tally:
    """A key (an operation, a principal) and how many of its requests were allowed and denied."""

    key: str
    allowed: int
    denied: int

    @property
    def total(self) -> int:
        return self.allowed + self.denied


@dataclass(frozen=True)
class Timeline:
    """Decisions per interval of the requests' timestamps (UTC)."""

    step: str  # "minute", "hour", ...
    buckets: tuple[Tally, ...]  # key: the interval's start, as the step needs it written
    first: str
    last: str
    untimed: int  # requests without a timestamp, or with one that does not read as ISO 8601


@dataclass(frozen=True)
class Decisions:
    """What ``decide`` wrote, counted."""

    by_operation: tuple[Tally, ...]  # every operation, most requests first
    principals: tuple[Tally, ...]  # most denied first
    unmet: tuple[tuple[str, str, int], ...]  # requirement, its text, denied requests that lack it
    timeline: Timeline | None

    @property
    def allowed(self) -> int:
        return sum(t.allowed for t in self.by_operation)

    @property
    def denied(self) -> int:
        return sum(t.denied for t in self.by_operation)

    @property
    def most_denied_operations(self) -> tuple[Tally, ...]:
        return tuple(sorted((t for t in self.by_operation if t.denied), key=lambda t: (-t.denied, t.key)))


@dataclass(frozen=True)
class Rejects:
    """Input rows the run did not use: by table, and by reason with the ids in it blanked (`…`)."""

    by_table: tuple[tuple[str, int], ...]
    by_reason: tuple[tuple[str, int, str, str], ...]  # kind of reason, rows, an example's reason and row

    @property
    def total(self) -> int:
        return sum(n for _, n in self.by_table)


@dataclass(frozen=True)
class Visibility:
    """What ``visibility`` wrote, counted: (principal, entity) pairs by type and by principal."""

    pairs: int
    principals: int
    by_type: tuple[tuple[str, int], ...]
    top_principals: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Change:
    """A distinct request two policies decide differently; ``why`` is the deciding side's unmet requirements."""

    principal: str
    operation: str
    entity: str
    args: str
    before: str
    after: str
    requests: int
    why: str


@dataclass(frozen=True)
class Impact:
    """What ``impact`` wrote: per operation (operation, allow→deny, deny→allow, log rows, compared) and examples."""

    by_operation: tuple[tuple[str, int, int, int, int], ...]
    examples: tuple[Change, ...]

    @property
    def compared(self) -> int:
        return sum(row[4] for row in self.by_operation)

    @property
    def allow_to_deny(self) -> int:
        return sum(row[1] for row in self.by_operation)

    @property
    def deny_to_allow(self) -> int:
        return sum(row[2] for row in self.by_operation)

    @property
    def changed(self) -> tuple[tuple[str, int, int, int, int], ...]:
        return tuple(row for row in self.by_operation if row[1] or row[2])


@dataclass(frozen=True)
class Report:
    """A run summarized: each part present when the run wrote its table."""

    folder: str
    tables: tuple[str, ...]
    decisions: Decisions | None
    rejects: Rejects | None
    visibility: Visibility | None
    impact: Impact | None


# ---- counting -------------------------------------------------------------------------


def summarize(run: Run) -> Report:
    """Every table of ``run`` counted."""
    return Report(
        str(run.folder),
        run.tables,
        _decisions(run) if "decisions" in run.tables else None,
        _rejects(run) if "rejects" in run.tables else None,
        _visibility(run) if "visibility" in run.tables else None,
        _impact(run) if "changes" in run.tables and "by_operation" in run.tables else None,
    )


def _tallies(table: pa.Table, key: str) -> dict[str, Tally]:
    counted = table.group_by([key, "decision"]).aggregate([([], "count_all")]).to_pylist()
    allowed: Counter[str] = Counter()
    denied: Counter[str] = Counter()
    for row in counted:
        (allowed if row["decision"] == "allow" else denied)[str(row[key])] += row["count_all"]
    return {k: Tally(k, allowed[k], denied[k]) for k in allowed.keys() | denied.keys()}


def _decisions(run: Run) -> Decisions:
    import pyarrow.compute as pc

    table = run.read("decisions", ["principal", "operation", "decision", "timestamp"])
    operations = sorted(_tallies(table, "operation").values(), key=lambda t: (-t.total, t.key))
    principals = sorted(
        (t for t in _tallies(table, "principal").values() if t.denied), key=lambda t: (-t.denied, t.key)
    )
    unmet = run.read("decisions", ["decision", "unmet"])
    lacking = pc.list_flatten(unmet.filter(pc.equal(unmet["decision"], "deny"))["unmet"])
    requirements = Counter(
        zip(
            pc.struct_field(lacking, "requirement").to_pylist(),
            pc.struct_field(lacking, "text").to_pylist(),
            strict=True,
        )
    )
    top_unmet = tuple(
        (str(r), str(t), n) for (r, t), n in sorted(requirements.items(), key=lambda kv: (-kv[1], str(kv[0])))
    )
    timeline = _timeline(table) if "timestamp" in table.column_names else None
    return Decisions(tuple(operations), tuple(principals), top_unmet, timeline)


STEPS = (  # (milliseconds, name): the first that gives at most MAX_BUCKETS intervals is used
    (1_000, "second"),
    (10_000, "10 seconds"),
    (60_000, "minute"),
    (600_000, "10 minutes"),
    (3_600_000, "hour"),
    (21_600_000, "6 hours"),
    (86_400_000, "day"),
    (604_800_000, "week"),
)
MAX_BUCKETS = 60


def _timeline(table: pa.Table) -> Timeline | None:
    import pyarrow as pa
    import pyarrow.compute as pc

    moments = _epoch_ms(table["timestamp"])
    timed = table.select(["decision"]).append_column("ms", moments).filter(pc.is_valid(moments))
    if not timed.num_rows:
        return None
    bounds = pc.min_max(timed["ms"]).as_py()
    first, last = int(bounds["min"]), int(bounds["max"])
    step, name = next(
        ((ms, n) for ms, n in STEPS if last // ms - first // ms < MAX_BUCKETS),
        (STEPS[-1][0] * ((last - first) // (STEPS[-1][0] * MAX_BUCKETS) + 1), f"{STEPS[-1][1]}s"),
    )
    start = first - first % step
    index = pc.divide(pc.subtract(timed["ms"], pa.scalar(start, pa.int64())), pa.scalar(step, pa.int64()))
    counted = timed.append_column("bucket", index).group_by(["bucket", "decision"]).aggregate([([], "count_all")])
    allowed: Counter[int] = Counter()
    denied: Counter[int] = Counter()
    for row in counted.to_pylist():
        (allowed if row["decision"] == "allow" else denied)[row["bucket"]] += row["count_all"]
    buckets = tuple(
        Tally(_when(start + i * step, step), allowed[i], denied[i]) for i in range((last - start) // step + 1)
    )
    return Timeline(name, buckets, _when(first, 1), _when(last, 1), table.num_rows - timed.num_rows)


def _when(ms: int, step: int) -> str:
    """A moment (UTC) written to the precision ``step`` needs."""
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    if step >= 86_400_000:
        return moment.strftime("%Y-%m-%d")
    if step >= 3_600_000:
        return moment.strftime("%m-%d %H:00")
    if step >= 60_000:
        return moment.strftime("%H:%M")
    if step > 1:
        return moment.strftime("%H:%M:%S")
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def _epoch_ms(column: Any) -> pa.Array:
    """Milliseconds since 1970 (UTC) of ISO 8601 timestamps; null where there is none or it does not read."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_timestamp(values.type):
        return (
            pc.cast(values, pa.int64())
            if values.type.unit == "ms"
            else pc.cast(pc.cast(values, pa.timestamp("ms", values.type.tz)), pa.int64())
        )
    values = pc.cast(values, pa.string())
    for target in (pa.timestamp("ms", "UTC"), pa.timestamp("ms")):  # all with an offset, or all without
        try:
            return pc.cast(pc.cast(values, target), pa.int64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
    distinct = pc.unique(values)
    read = pa.array([_read_time(v) for v in distinct.to_pylist()], pa.int64())
    return pc.take(read, pc.index_in(values, value_set=distinct))


def _read_time(text: str | None) -> int | None:
    """One timestamp as milliseconds (UTC when it names no offset), or None.

    >>> _read_time("2026-11-01T00:00:05.332Z"), _read_time("2026-11-01 02:00:05+02:00"), _read_time("soon")
    (1793491205332, 1793491205000, None)
    """
    try:
        moment = datetime.fromisoformat((text or "").strip())
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return round(moment.timestamp() * 1000)


QUOTED = re.compile(r"`[^`]*`")


def reason_kind(reason: str) -> str:
    """A reject's reason with what it quotes blanked, so that rows rejected for one cause count together.

    >>> reason_kind("malformed principal `team`: expected user:NAME, group:NAME or role:NAME")
    'malformed principal `…`: expected user:NAME, group:NAME or role:NAME'
    """
    return QUOTED.sub("`…`", reason)


def _rejects(run: Run) -> Rejects:
    table = run.read("rejects", ["table", "reason", "row"])
    by_table = Counter(table["table"].to_pylist())
    kinds: Counter[str] = Counter()
    example: dict[str, tuple[str, str]] = {}
    for reason, row in zip(table["reason"].to_pylist(), table["row"].to_pylist(), strict=True):
        kind = reason_kind(str(reason))
        kinds[kind] += 1
        example.setdefault(kind, (str(reason), str(row)))
    return Rejects(
        tuple(sorted(by_table.items(), key=lambda kv: (-kv[1], str(kv[0])))),
        tuple((k, n, *example[k]) for k, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))),
    )


def _visibility(run: Run) -> Visibility:
    table = run.read("visibility", ["principal", "type"])
    by_type = table.group_by(["type"]).aggregate([([], "count_all")]).to_pylist()
    by_principal = table.group_by(["principal"]).aggregate([([], "count_all")]).to_pylist()
    return Visibility(
        table.num_rows,
        len(by_principal),
        tuple(sorted(((str(r["type"]), r["count_all"]) for r in by_type), key=lambda kv: (-kv[1], kv[0]))),
        tuple(
            sorted(((str(r["principal"]), r["count_all"]) for r in by_principal), key=lambda kv: (-kv[1], kv[0]))[
                : TOP * 2
            ]
        ),
    )


def _impact(run: Run) -> Impact:
    rows = run.read("by_operation").to_pylist()
    by_operation = tuple(
        (str(r["operation"]), int(r["allow_to_deny"]), int(r["deny_to_allow"]), int(r["log_rows"]), int(r["compared"]))
        for r in sorted(rows, key=lambda r: str(r["operation"]))
    )
    import pyarrow.compute as pc

    changes = run.read("changes").sort_by([("requests", "descending"), ("operation", "ascending")])
    examples = []
    for before in ("allow", "deny"):
        chosen = changes.filter(pc.equal(changes["decision_a"], before)).slice(0, EXAMPLES // 2)
        examples += [_change(row) for row in chosen.to_pylist()]
    return Impact(by_operation, tuple(examples))


def _change(row: dict[str, Any]) -> Change:
    unmet = row["unmet_b"] if row["decision_b"] == "deny" else row["unmet_a"]
    return Change(
        str(row["principal"]),
        str(row["operation"]),
        str(row["entity"]),
        row["args"] or "",
        str(row["decision_a"]),
        str(row["decision_b"]),
        int(row["requests"]),
        "; ".join(f"{u['text']} ({u['requirement']})" for u in unmet or []),
    )


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


def render_text(report: Report) -> str:
    """The report as a terminal shows it: the top of each list, counts aligned."""
    n = charts.number
    lines = [f"run {report.folder} ({', '.join(report.tables)})"]
    if report.decisions is not None:
        d = report.decisions
        total = d.allowed + d.denied
        lines += ["", f"decisions: {n(total)} requests, {n(d.allowed)} allowed, {n(d.denied)} denied"]
        operations = [(t.key, t.allowed, t.denied) for t in d.by_operation[:TOP]]
        lines += _columns(operations, ["operation", "allowed", "denied"])
        lines += _more(len(operations), len(d.by_operation), "operations")
        principals = [(t.key, t.denied, t.total) for t in d.principals[:TOP]]
        if principals:
            lines += ["", *_columns(principals, ["most-denied principal", "denied", "requests"])]
        unmet = [(f"{r} {t}", c) for r, t, c in d.unmet[:TOP]]
        if unmet:
            lines += ["", *_columns(unmet, ["unmet requirement", "denied requests"])]
        if d.timeline is not None:
            t = d.timeline
            lines += ["", f"over time: {t.first} to {t.last} UTC, counted per {t.step} ({len(t.buckets)} intervals)"]
        if d.timeline is None or d.timeline.untimed:
            untimed = total if d.timeline is None else d.timeline.untimed
            lines.append(f"{n(untimed)} requests without a readable timestamp")
    if report.visibility is not None:
        v = report.visibility
        lines += ["", f"visibility: {n(v.pairs)} (principal, entity) pairs for {n(v.principals)} principals"]
        lines += _columns(v.by_type, ["type", "pairs"])
    if report.impact is not None:
        i = report.impact
        lines += [
            "",
            f"impact: {n(i.allow_to_deny + i.deny_to_allow)} of {n(i.compared)} compared requests change "
            f"({n(i.allow_to_deny)} allow→deny, {n(i.deny_to_allow)} deny→allow; distinct requests)",
        ]
        if i.changed:
            lines += _columns([row[:4] for row in i.changed], ["operation", "allow→deny", "deny→allow", "log rows"])
    if report.rejects is not None:
        r = report.rejects
        tables = ", ".join(f"{n(c)} {t}" for t, c in r.by_table)
        lines += ["", f"rejects: {n(r.total)} rows" + (f" ({tables})" if tables else "")]
        reasons = [(kind, count) for kind, count, _, _ in r.by_reason[:TOP]]
        if reasons:
            lines += _columns(reasons, ["reason", "rows"])
            lines += _more(len(reasons), len(r.by_reason), "reasons")
    return "\n".join(lines) + "\n"


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
        parts.append(charts.section("Decisions over time", note="The requests have no readable timestamp column."))
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
