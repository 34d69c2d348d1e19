"""``privilog pipeline show``: a run's tables printed without starting Spark, read with pyarrow.

The run is opened through its manifest (:func:`privilog.pipeline.runs.open_run`), which
says each table's format and columns; a table is read in any of the formats a run
writes (Parquet, CSV, JSON lines) into the same values, a CSV's JSON-text columns
decoded back into lists and structs. Only the rows printed are read.

Plain aligned columns, as ``privilog query`` prints an answer: the values are short
strings and counts, and a table library would add a dependency for ten lines.
"""

from __future__ import annotations

import argparse
import json
import re
from typing import TYPE_CHECKING, Any

from privilog.pipeline.runs import Run, open_run
from privilog.pipeline.tables import PipelineError

if TYPE_CHECKING:
    import pyarrow as pa

LIMIT = 20  # rows of one table printed by default
BRIEF = 5  # rows of each table printed without TABLE
CELL = 60  # characters of a cell printed (--json prints them whole)


def require_pyarrow(command: str = "pipeline show") -> None:
    """One line naming the extra to install when pyarrow is not there."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise PipelineError(
            f"`{command}` reads tables with pyarrow, which is not installed: install privilog with its "
            "parquet extra, `pip install 'privilog[parquet]'` (Spark is not needed)"
        ) from None


# ---- reading ----------------------------------------------------------------------------


def arrow_type(spark_type: str) -> pa.DataType:
    """A Spark type as its ``simpleString`` writes it, as a pyarrow type.

    >>> str(arrow_type("array<struct<requirement:string,lacking:array<string>>>"))
    'list<item: struct<requirement: string, lacking: list<item: string>>>'
    """
    import pyarrow as pa

    text = spark_type.strip()
    simple = {
        "string": pa.string(), "bigint": pa.int64(), "int": pa.int32(), "smallint": pa.int16(),
        "tinyint": pa.int8(), "boolean": pa.bool_(), "double": pa.float64(), "float": pa.float32(),
        "date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC"), "binary": pa.binary(),
    }  # fmt: skip
    if text in simple:
        return simple[text]
    found = re.fullmatch(r"(array|struct|map)<(.*)>", text, re.S)
    if found is None:
        raise PipelineError(f"a run's manifest names the column type `{spark_type}`, which show cannot read")
    kind, inner = found.groups()
    parts = _split(inner)
    if kind == "array":
        return pa.list_(arrow_type(inner))
    if kind == "map":
        return pa.map_(arrow_type(parts[0]), arrow_type(parts[1]))
    return pa.struct([(p.partition(":")[0], arrow_type(p.partition(":")[2])) for p in parts])


def _split(text: str) -> list[str]:
    """Split at the commas that are not inside ``<...>``."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += {"<": 1, ">": -1}.get(c, 0)
        if c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return [*parts, text[start:]]


def _nested(spark_type: str) -> bool:
    return spark_type.startswith(("array<", "struct<", "map<"))


def read_arrow(run: Run, table: str, limit: int | None = None) -> pa.Table:
    """The first ``limit`` rows of a table of the run (all with None), in the manifest's types.

    A CSV table's JSON-text columns (lists and structs) are decoded back into them, so a table
    reads the same whatever format the run wrote it in.
    """
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.dataset as ds
    import pyarrow.json as pajson

    meta = run.tables[table]
    columns: list[dict[str, str]] = meta["columns"]
    schema = pa.schema([(c["name"], arrow_type(c["type"])) for c in columns])
    if meta["rows"] == 0 or limit == 0:
        return schema.empty_table()
    fmt = meta["format"]
    read_schema = schema
    if fmt == "csv":
        types = {c["name"]: pa.string() if _nested(c["type"]) else arrow_type(c["type"]) for c in columns}
        file_format: Any = ds.CsvFileFormat(
            parse_options=pacsv.ParseOptions(newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(
                column_types=types, strings_can_be_null=True, quoted_strings_can_be_null=False
            ),
        )
        read_schema = pa.schema(list(types.items()))
    elif fmt == "json":
        file_format = ds.JsonFileFormat(parse_options=pajson.ParseOptions(explicit_schema=schema))
    else:
        file_format = "parquet"
    try:
        dataset = ds.dataset(str(run.path(table)), format=file_format, schema=read_schema)
        arrow = dataset.head(limit) if limit is not None else dataset.to_table()
    except (pa.ArrowInvalid, OSError) as error:
        raise PipelineError(f"{run.path(table)}: cannot read the table as {fmt} ({error})") from None
    if fmt == "csv":
        nested = [c["name"] for c in columns if _nested(c["type"])]
        if nested:
            rows = arrow.to_pylist()
            for row in rows:
                for name in nested:
                    if row[name] is not None:
                        row[name] = json.loads(row[name])
            arrow = pa.Table.from_pylist(rows, schema=schema)
    return arrow


def read_rows(run: Run, table: str, limit: int | None) -> list[dict[str, Any]]:
    """The first ``limit`` rows of a table of the run (all with None), as plain values."""
    rows: list[dict[str, Any]] = read_arrow(run, table, limit).to_pylist()
    return rows


# ---- printing ---------------------------------------------------------------------------


def cell(value: Any) -> str:
    """A value as one short line: a list's items joined by ``; ``, a struct's non-empty values by spaces.

    >>> cell([{"requirement": "dataset.read#1", "text": "any on self", "lacking": []}])
    'dataset.read#1 any on self'
    >>> cell(None), cell(1234), cell(["a", "b"])
    ('', '1,234', 'a; b')
    """
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, dict):
        return " ".join(cell(v) for v in value.values() if v not in (None, "", [], {}))
    if isinstance(value, list):
        return "; ".join(cell(v) for v in value)
    return str(value).replace("\n", "\\n")


def render_rows(rows: list[dict[str, Any]], names: list[str]) -> list[str]:
    """Rows as aligned columns under their names, each cell cut to ``CELL`` characters.

    >>> print("\\n".join(render_rows([{"a": "x", "b": 12}], ["a", "b"])))
    a  b
    -  --
    x  12
    """
    cells = [[_cut(cell(row.get(n))) for n in names] for row in rows]
    widths = [max([len(n), *(len(r[i]) for r in cells)]) for i, n in enumerate(names)]
    lines = ["  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return lines


def _cut(text: str) -> str:
    return text if len(text) <= CELL else text[: CELL - 1] + "…"


def render_manifest(run: Run) -> list[str]:
    """What a run read and wrote, from its manifest, in a few lines."""
    m = run.manifest
    policies = ", ".join(f"{p['name']} (sha256 {p['sha256'][:12]})" for p in m.get("policies", []))
    lines = [
        f"{m['command']} run {m['id']}: {m['started']} to {m['finished']}",
        f"  policy   {policies}" if len(m.get("policies", [])) < 2 else f"  policies {policies}",
        f"  by       privilog {m.get('privilog', '?')}, Spark {m.get('spark', '?')}",
    ]
    for i, (table, what) in enumerate(m.get("inputs", {}).items()):
        used, rejected = what["used"], what["rejected"]
        if isinstance(used, dict):
            split = "; ".join(f"{u:,} used + {rejected[p]:,} rejected under {p}" for p, u in used.items())
        else:
            split = f"{used:,} used + {rejected:,} rejected"
        head = "  inputs   " if i == 0 else "           "
        lines.append(f"{head}{table} {what['path']} ({what['format']}): {what['rows']:,} rows = {split}")
    outputs = ", ".join(f"{t} {o['rows']:,}" for t, o in run.tables.items())
    formats = sorted({o["format"] for o in run.tables.values()})
    lines.append(f"  outputs  {outputs} rows ({', '.join(formats)}) in {run.folder}")
    if m.get("summary"):
        lines += ["", *render_summary(m["summary"]).splitlines()]
    return lines


def render_summary(summary: list[dict[str, Any]]) -> str:
    """decide's summary: per operation, allowed, denied and the requirements most often unmet.

    >>> print(render_summary([{"operation": "dataset.read", "allowed": 3, "denied": 1200,
    ...     "unmet": [{"requirement": "dataset.read#1", "text": "any on self", "requests": 1200}]}]))
    operation     allowed  denied  most often unmet (denied requests)
    dataset.read        3   1,200  #1 any on self (1,200)
    """
    width = max([len("operation"), *(len(s["operation"]) for s in summary)])
    lines = [f"{'operation':{width}}  {'allowed':>7}  {'denied':>6}  most often unmet (denied requests)"]
    for s in summary:
        unmet = ", ".join(
            f"#{u['requirement'].rpartition('#')[2]} {_short(u['text'])} ({u['requests']:,})" for u in s["unmet"]
        )
        lines.append(f"{s['operation']:{width}}  {s['allowed']:>7,}  {s['denied']:>6,}  {unmet}".rstrip())
    return "\n".join(lines)


def _short(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def render_table(run: Run, table: str, limit: int | None) -> list[str]:
    total = run.tables[table]["rows"]
    rows = read_rows(run, table, limit)
    names = [c["name"] for c in run.tables[table]["columns"]]
    shown = f"all {total:,} rows" if len(rows) == total else f"the first {len(rows):,} of {total:,} rows"
    if total == 0:
        return [f"{table}: no rows"]
    return [f"{table} ({shown})", *render_rows(rows, names)]


def cmd_show(args: argparse.Namespace) -> int:
    require_pyarrow()
    run = open_run(args.out)
    if args.table is not None and args.table not in run.tables:
        raise PipelineError(f"{args.out}: the run has no table `{args.table}`; its tables are {', '.join(run.tables)}")
    if args.limit is not None and args.limit < 0:
        raise PipelineError(f"--limit {args.limit}: give a number of rows, 0 for all")
    if args.json and args.table is None:
        print(json.dumps(run.manifest, indent=2, ensure_ascii=False))
    elif args.json:
        for row in read_rows(run, args.table, _limit(args.limit, LIMIT)):
            print(json.dumps(row, ensure_ascii=False, default=str))
    elif args.table is not None:
        print("\n".join(render_table(run, args.table, _limit(args.limit, LIMIT))))
    else:
        lines = render_manifest(run)
        for name in run.tables:
            lines += ["", *render_table(run, name, _limit(args.limit, BRIEF))]
        print("\n".join(lines))
    return 0


def _limit(given: int | None, default: int) -> int | None:
    """The rows to read: ``--limit``, or the default; None (all) for ``--limit 0``."""
    if given is None:
        return default
    return given or None
