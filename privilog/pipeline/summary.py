"""A pipeline run's tables counted with pyarrow, without Spark: the :class:`Report` that
``privilog pipeline report`` prints and draws.

Decisions by operation and over time (from the requests' ``timestamp``), the
most-denied principals, the unmet requirements most often met with, rejects by
reason, visibility by type and principal, and an ``impact`` run's changes. Counts
are made by pyarrow's group-by over the columns needed, so a run of millions of
decisions takes seconds.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from privilog.pipeline.results import Run

if TYPE_CHECKING:
    import pyarrow as pa

TOP = 10  # rows of each "most" list in the text; the page shows TOP * 2
REJECTED_ROWS = 50  # rejected rows listed on the page, in the order of the table
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
    # each of the policy's own deny rules (its place, FILE:LINE) that denied a request, and how many it denied
    denials: tuple[tuple[str, int], ...] = ()

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
    first: tuple[tuple[str, str, str, str], ...]  # the first rejected rows: table, where, reason, row

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
class LeastPrivilege:
    """What ``unused`` wrote: its summary (run.json), the principals with the most unused grants
    (principal, held, used, unused), the sole grants standing for the most requests (grant, requests),
    and the first recommended removals (grant, whether the log used it)."""

    summary: dict[str, Any]
    principals: tuple[tuple[str, int, int, int], ...]
    sole: tuple[tuple[str, int], ...]
    removals: tuple[tuple[str, str], ...]

    @property
    def method(self) -> str:
        bound = self.summary.get("bound")
        return "exact" if self.summary.get("method") == "exact" else f"greedy, at most {bound}× the fewest kept"


@dataclass(frozen=True)
class Report:
    """A run summarized: each part present when the run wrote its table."""

    folder: str
    tables: tuple[str, ...]
    decisions: Decisions | None
    rejects: Rejects | None
    visibility: Visibility | None
    impact: Impact | None
    least_privilege: LeastPrivilege | None = None


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
        _least_privilege(run) if "principals" in run.tables and "removals" in run.tables else None,
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
    denials: Counter[str] = Counter()
    if "denied_by" in run.columns("decisions"):  # runs before the column have none
        places = pc.list_flatten(run.read("decisions", ["denied_by"])["denied_by"]).to_pylist()
        denials.update(str(p) for p in places)
    by_rule = tuple(sorted(denials.items(), key=lambda kv: (-kv[1], kv[0])))
    return Decisions(tuple(operations), tuple(principals), top_unmet, timeline, by_rule)


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
    table = run.read("rejects", ["table", "reason", "row", "file", "row_number"])
    by_table = Counter(table["table"].to_pylist())
    kinds: Counter[str] = Counter()
    example: dict[str, tuple[str, str]] = {}
    for reason, row in zip(table["reason"].to_pylist(), table["row"].to_pylist(), strict=True):
        kind = reason_kind(str(reason))
        kinds[kind] += 1
        example.setdefault(kind, (str(reason), str(row)))
    first = tuple(
        (str(r.get("table")), _where(r.get("file"), r.get("row_number")), str(r.get("reason")), str(r.get("row")))
        for r in table.slice(0, REJECTED_ROWS).to_pylist()
    )
    return Rejects(
        tuple(sorted(by_table.items(), key=lambda kv: (-kv[1], str(kv[0])))),
        tuple((k, n, *example[k]) for k, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))),
        first,
    )


def _where(file: object, row: object) -> str:
    """A rejected row's place: its file's name and row number (``requests.csv:12``)."""
    name = str(file).rstrip("/").rsplit("/", 1)[-1] if file else "?"
    return f"{name}:{row}" if row is not None else name


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


def _least_privilege(run: Run) -> LeastPrivilege:
    def grant(row: dict[str, Any]) -> str:
        return f"{row['principal']} {row['action']} {row['entity']}"

    principals = sorted(
        (r for r in run.read("principals", ["principal", "held", "used", "unused"]).to_pylist() if r["unused"]),
        key=lambda r: (-int(r["unused"]), str(r["principal"])),
    )
    sole = sorted(run.read("sole", ["principal", "action", "entity", "requests"]).to_pylist(),
                  key=lambda r: (-int(r["requests"]), grant(r)))  # fmt: skip
    removals = run.read("removals", ["principal", "action", "entity", "used"]).slice(0, EXAMPLES).to_pylist()
    return LeastPrivilege(
        dict(run.run.manifest.get("least_privilege") or {}),
        tuple((str(r["principal"]), int(r["held"]), int(r["used"]), int(r["unused"])) for r in principals[: TOP * 2]),
        tuple((grant(r), int(r["requests"])) for r in sole[: TOP * 2]),
        tuple((grant(r), "used" if _true(r["used"]) else "unused") for r in removals),
    )


def _true(value: object) -> bool:
    """A boolean as a run wrote it (CSV writes it as text)."""
    return value is True or str(value).lower() == "true"
