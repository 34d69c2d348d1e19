"""``privilog decide``: a file of requests decided in process, without Spark.

The requests are the pipeline's access log (``principal, operation, entity``, and optionally
``args``, a JSON object, and ``timestamp``): CSV with a header, JSON lines, Parquet (with
pyarrow), or ``-`` for standard input (CSV or JSON lines, told by the first character). Each
request's row goes out as it is decided, with the columns of ``privilog pipeline decide``'s
``decisions`` table (``Authorizer.tabled``: the engine's plans where the backend has them), as
CSV, JSON lines or Parquet, to ``--out`` or standard output; memory stays flat however long the
file. A row that is not a request goes to the rejects (``--rejects``, else standard error) with
its file, line and reason, and the rest are still decided.

Exit 0 once the file is decided (whatever was allowed or denied), rejects or not; 2 when it
cannot be read, or when it has rows and every one was rejected.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import operator
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from privilog.cli.options import add_common, load_authorizer
from privilog.dsl.errors import PrivilogError
from privilog.usage import EXIT_BAD_INPUT, EXIT_OK, UsageError

COLUMNS = ("principal", "operation", "entity", "args", "timestamp")  # the pipeline's requests table
REQUIRED = COLUMNS[:3]
DECIDED = ("decision", "unmet", "bypass", "denied_by", "allowed_by")  # what the pipeline adds to each
OUT_FORMATS = ("csv", "json", "parquet")
SUFFIXES = {".csv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json", ".parquet": "parquet"}
CHUNK = 8192  # rows gathered before a Parquet row group is written
REJECT_COLUMNS = ("file", "line", "reason", "row")  # where (the line; a Parquet file's row), why, and the row as JSON

DESCRIPTION = (
    "Decide a file of requests in process, without Spark: the pipeline's access log (CSV with a header, "
    "JSON lines, Parquet, or - for standard input) with principal, operation, entity, and optionally args "
    "(a JSON object) and timestamp. Writes one row per request with the columns of `privilog pipeline "
    "decide`'s decisions table (the request's columns, decision, unmet, bypass, denied_by, allowed_by) "
    "as CSV, JSON lines or Parquet. A row that is not a request is rejected with its file, line and "
    "reason (to --rejects, else standard error); the others are still decided. Exit 0 once decided, "
    "2 when the file cannot be read or every row of it was rejected."
)


class DecideError(PrivilogError):
    """A requests file that cannot be read, or an output that cannot be written."""


# ---- reading --------------------------------------------------------------------------


Values = tuple[Any, ...]  # a row's principal, operation, entity, args and timestamp (None: not given)
Read = tuple[int, Values | str]  # a row's number (its line; its row in Parquet) and its values, or why it is no row


def input_format(path: str, given: str | None, first: str = "") -> str:
    """The requests file's format: ``--input-format``, else its name's suffix, else (standard input,
    or a name without one) JSON lines when it starts with ``{``, CSV otherwise."""
    if given:
        return given
    suffix = Path(path).suffix.lower() if path != "-" else ""
    if suffix in SUFFIXES:
        return SUFFIXES[suffix]
    return "json" if first.lstrip().startswith("{") else "csv"


def _missing(found: Any) -> str | None:
    absent = [c for c in REQUIRED if c not in found]
    return f"a request needs the columns {', '.join(REQUIRED)}; missing {', '.join(absent)}" if absent else None


class Lines:
    """A file's lines as text, decoded one at a time (a line that is not UTF-8 is one error naming
    it), counting the bytes read so far (for the progress line)."""

    def __init__(self, file: IO[bytes], name: str):
        self.file, self.name = file, name
        self.read_bytes = 0

    def __iter__(self) -> Iterator[str]:
        for number, raw in enumerate(self.file, start=1):
            self.read_bytes += len(raw)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                where = f"{self.name}:{number}"
                raise DecideError(f"{where}: not UTF-8 text (byte {error.start + 1} of the line)") from None
            yield line[1:] if number == 1 and line.startswith("\ufeff") else line


def csv_rows(lines: Any, name: str) -> Iterator[Read]:
    reader = csv.reader(lines, strict=True)
    try:
        header = next(reader, None)
        if header is None:
            return
        problem = _missing(header)
        if problem:
            raise DecideError(f"{name}:1: {problem} (found {', '.join(header) or 'none'})")
        width = len(header)
        # the request's columns by their place in a row; one the header lacks reads the empty field
        # appended to each row
        pick = operator.itemgetter(*(header.index(c) if c in header else width for c in COLUMNS))
        line = reader.line_num
        for row in reader:
            start, line = line + 1, reader.line_num
            if not row:
                continue
            if len(row) != width:
                yield start, f"a row of {width} fields ({', '.join(header)}) has {len(row)}"
                continue
            row.append("")
            yield start, pick(row)
    except csv.Error as error:
        raise DecideError(f"{name}:{reader.line_num}: not valid CSV: {error}") from None


def json_rows(lines: Any, name: str) -> Iterator[Read]:
    decode = json.JSONDecoder().decode
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = decode(line)
        except ValueError as error:
            yield number, f"not valid JSON: {str(error).partition(':')[0]}"
            continue
        if not isinstance(row, dict):
            yield number, "a request is a JSON object"
            continue
        problem = _missing(row)
        yield number, problem or (*(row[c] for c in REQUIRED), row.get("args"), row.get("timestamp"))


def parquet_rows(path: str) -> Iterator[Read]:
    pq = _pyarrow_parquet("reading a Parquet requests file")
    try:
        file = pq.ParquetFile(path)
        names = file.schema_arrow.names
        problem = _missing(names)
        if problem:
            raise DecideError(f"{path}: {problem} (found {', '.join(names) or 'none'})")
        columns = [c for c in COLUMNS if c in names]
        number = 0
        for batch in file.iter_batches(batch_size=CHUNK, columns=columns):
            found = {c: batch.column(c).to_pylist() for c in columns}
            for values in zip(*(found.get(c) or [None] * batch.num_rows for c in COLUMNS), strict=True):
                number += 1
                yield number, values
    except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError
        raise DecideError(f"{path}: cannot read the requests as Parquet: {error}") from None


def _pyarrow_parquet(what: str) -> Any:
    try:
        import pyarrow.parquet as pq  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        raise DecideError(f"{what} needs pyarrow: `pip install 'privilog[parquet]'`") from None
    return pq


def _args(given: Any) -> dict[str, object] | None:
    """A row's ``args``: a JSON object (its text in CSV), or none (absent, null or blank)."""
    if given is None or (isinstance(given, str) and not given.strip()):
        return None
    if isinstance(given, str):
        try:
            given = json.loads(given)
        except ValueError:
            raise ValueError(f"args `{given}` is not a JSON object") from None
    if not isinstance(given, dict):
        raise ValueError(f"args is a JSON object of NAME: VALUE, not {json.dumps(given)[:60]}")
    return given


def _text(value: Any) -> str | None:
    """A request column as the decisions table keeps it: text (args as JSON text), or null."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


# ---- writing --------------------------------------------------------------------------


def _unmet(unmet: tuple[tuple[str, str, tuple[str, ...]], ...]) -> list[dict[str, Any]]:
    return [{"requirement": r, "text": t, "lacking": list(lacking)} for r, t, lacking in unmet]


def _allowed_by(grants: tuple[tuple[str, str, str, str], ...]) -> list[dict[str, str]]:
    return [{"requirement": r, "principal": p, "action": a, "entity": e} for r, p, a, e in grants]


class Writer:
    """Decided rows out in one format; nested columns as JSON text in CSV (as the pipeline writes them)."""

    def __init__(self, stream: IO[Any], fmt: str):
        self.stream = stream
        self.fmt = fmt
        self._json: dict[Any, str] = {}  # nested values' JSON text, by value: logs repeat them
        self._chunk: list[tuple[Any, ...]] = []
        self._parquet: Any = None
        if fmt == "csv":
            self._csv = csv.writer(stream, lineterminator="\n")
            self._csv.writerow((*COLUMNS, *DECIDED))

    def text(self, value: Any, shape: Callable[[Any], Any]) -> str:
        if not value:
            return "[]"
        found = self._json.get(value)
        if found is None:
            if len(self._json) >= 1 << 16:
                self._json.clear()
            found = self._json[value] = json.dumps(shape(value), separators=(",", ":"))
        return found

    def write(self, request: tuple[Any, ...], tabled: Any) -> None:
        if self.fmt == "csv":
            allowed, unmet, bypass, denied_by, allowed_by = tabled
            self._csv.writerow(
                (
                    *request,
                    "allow" if allowed else "deny",
                    self.text(unmet, _unmet) if unmet else "[]",
                    self.text(bypass, list) if bypass else "[]",
                    self.text(denied_by, list) if denied_by else "[]",
                    self.text(allowed_by, _allowed_by) if allowed_by else "[]",
                )
            )
        elif self.fmt == "json":
            row = dict(zip(COLUMNS, request, strict=True))
            row["decision"] = "allow" if tabled.allowed else "deny"
            row["unmet"] = _unmet(tabled.unmet)
            row["bypass"] = list(tabled.bypass)
            row["denied_by"] = list(tabled.denied_by)
            row["allowed_by"] = _allowed_by(tabled.allowed_by)
            self.stream.write(json.dumps(row, separators=(",", ":")) + "\n")
        else:
            self._chunk.append((*request, tabled))
            if len(self._chunk) >= CHUNK:
                self._flush()

    def _flush(self) -> None:
        if self._parquet is None:
            pa, pq = _pyarrow(), _pyarrow_parquet("writing Parquet")
            self._schema = decisions_schema(pa)
            self._parquet = pq.ParquetWriter(self.stream, self._schema)
        columns: list[list[Any]] = [[] for _ in range(len(COLUMNS) + len(DECIDED))]
        for *request, tabled in self._chunk:
            for i, value in enumerate(request):
                columns[i].append(value)
            base = len(COLUMNS)
            columns[base].append("allow" if tabled.allowed else "deny")
            columns[base + 1].append(_unmet(tabled.unmet))
            columns[base + 2].append(list(tabled.bypass))
            columns[base + 3].append(list(tabled.denied_by))
            columns[base + 4].append(_allowed_by(tabled.allowed_by))
        self._chunk = []
        pa = _pyarrow()
        self._parquet.write_table(pa.Table.from_arrays(columns, schema=self._schema))

    def close(self) -> None:
        if self.fmt == "parquet":
            if self._chunk or self._parquet is None:
                self._flush()
            self._parquet.close()


def _pyarrow() -> Any:
    try:
        import pyarrow as pa  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        raise DecideError("writing Parquet needs pyarrow: `pip install 'privilog[parquet]'`") from None
    return pa


def decisions_schema(pa: Any) -> Any:
    """The pipeline's decisions table as an Arrow schema (engine.spark.decisions)."""
    text = pa.string()
    return pa.schema(
        [
            *((c, text) for c in COLUMNS),
            ("decision", text),
            ("unmet", pa.list_(pa.struct([("requirement", text), ("text", text), ("lacking", pa.list_(text))]))),
            ("bypass", pa.list_(text)),
            ("denied_by", pa.list_(text)),
            (
                "allowed_by",
                pa.list_(pa.struct([("requirement", text), ("principal", text), ("action", text), ("entity", text)])),
            ),
        ]
    )


class Rejects:
    """Rejected rows: ``FILE:LINE: reason`` lines on standard error, or a file: CSV or JSON lines by
    its name (``file, line, reason, row``: the row as JSON, null when it is no row), else the same lines."""

    def __init__(self, path: str | None):
        self.count = 0
        self.path = path
        self.fmt = SUFFIXES.get(Path(path).suffix.lower(), "text") if path else "text"
        self.stream: IO[str] = sys.stderr
        if path:
            self.stream = open_out(path, text=True)
        if self.fmt == "csv":
            self._csv = csv.writer(self.stream, lineterminator="\n")
            self._csv.writerow(REJECT_COLUMNS)

    def add(self, name: str, number: int, row: Any, reason: str) -> None:
        self.count += 1
        shown = json.dumps(row, separators=(",", ":"), default=str) if isinstance(row, dict) else None
        if self.fmt == "csv":
            self._csv.writerow((name, number, reason, shown))
        elif self.fmt == "json":
            values = (name, number, reason, shown)
            self.stream.write(json.dumps(dict(zip(REJECT_COLUMNS, values, strict=True))) + "\n")
        else:
            self.stream.write(f"{name}:{number}: {reason}\n")

    def close(self) -> None:
        if self.path:
            self.stream.close()


def open_out(path: str, text: bool) -> IO[Any]:
    try:
        if text:
            return open(path, "w", encoding="utf-8", newline="")
        return open(path, "wb")
    except OSError as error:
        raise DecideError(f"{path}: cannot write: {error.strerror}") from None


# ---- progress -------------------------------------------------------------------------


class Progress:
    """A line on standard error, redrawn at most five times a second, when it is a terminal."""

    def __init__(self, total: int | None, read: Callable[[], int] | None):
        self.on = sys.stderr.isatty()
        self.total, self.read = total, read
        self.started = time.monotonic()
        self.last = self.started - 1.0  # the first tick draws
        self.drawn = False

    def tick(self, decided: int, rejected: int) -> None:
        now = time.monotonic()
        if now - self.last < 0.2:
            return
        self.last = now
        rate = decided / max(now - self.started, 1e-9)
        share = ""
        if self.total and self.read is not None:
            share = f"{min(self.read() / self.total, 1.0):6.1%} "
        sys.stderr.write(f"\r{share}decided {decided:,} ({rate:,.0f}/s), {rejected:,} rejected\x1b[K")
        sys.stderr.flush()
        self.drawn = True

    def done(self) -> None:
        if self.drawn:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


# ---- the command ----------------------------------------------------------------------


def out_format(args: argparse.Namespace) -> str:
    if args.format:
        return str(args.format)
    if args.out and args.out != "-":
        return SUFFIXES.get(Path(args.out).suffix.lower(), "csv")
    return "csv"


def cmd_decide(args: argparse.Namespace) -> int:
    fmt = out_format(args)
    if fmt == "parquet":
        _pyarrow()
        _pyarrow_parquet("writing Parquet")
        if not args.out or args.out == "-":
            raise UsageError("privilog decide: Parquet goes to a file: give --out FILE.parquet")
    name = "<stdin>" if args.requests == "-" else args.requests
    if args.requests == "-" and args.input_format == "parquet":
        raise UsageError("privilog decide: Parquet requests are read from a file, not standard input")
    if args.requests != "-" and not os.path.isfile(args.requests):
        what = "not a regular file" if os.path.exists(args.requests) else "no such file"
        raise DecideError(f"{args.requests}: {what} (the requests to decide)")
    authorizer = load_authorizer(args)
    with Inputs(args, name) as (reads, total, read_chars):
        rejects = Rejects(args.rejects)
        target = args.out if args.out and args.out != "-" else None
        staged = f"{target}.partial-{os.getpid()}" if target else None
        try:
            if staged:
                stream = open_out(staged, text=fmt != "parquet")
            elif fmt == "parquet":
                raise AssertionError("checked above")
            else:
                stream = sys.stdout
            writer = Writer(stream, fmt)
            counts = decide_rows(authorizer, reads, name, writer, rejects, Progress(total, read_chars))
            writer.close()
            if staged:
                stream.close()
                os.replace(staged, target)  # type: ignore[arg-type]
                staged = None
        finally:
            rejects.close()
            if staged:
                with contextlib.suppress(OSError):
                    os.unlink(staged)
    decided, allowed, rejected = counts
    print(
        f"decided {decided:,} requests ({allowed:,} allowed, {decided - allowed:,} denied), {rejected:,} rejected",
        file=sys.stderr,
    )
    if rejected and not decided:
        return EXIT_BAD_INPUT
    return EXIT_OK


class Inputs:
    """The requests file's rows (and, for the progress line, its size and the characters read)."""

    def __init__(self, args: argparse.Namespace, name: str):
        self.args, self.name = args, name
        self.file: IO[bytes] | None = None

    def __enter__(self) -> tuple[Iterator[Read], int | None, Callable[[], int] | None]:
        args, name = self.args, self.name
        if args.requests != "-" and input_format(args.requests, args.input_format) == "parquet":
            return parquet_rows(args.requests), None, None
        try:
            if args.requests == "-":
                self.file = sys.stdin.buffer
                total = None
            else:
                self.file = open(args.requests, "rb")
                total = os.fstat(self.file.fileno()).st_size
        except OSError as error:
            raise DecideError(f"{name}: cannot read the requests: {error.strerror}") from None
        counted = Lines(self.file, name)
        lines = iter(counted)
        first = next(lines, "")
        fmt = input_format(args.requests, args.input_format, first)
        chained = _chain(first, lines)
        rows = json_rows(chained, name) if fmt == "json" else csv_rows(chained, name)
        return rows, total, (lambda: counted.read_bytes)

    def __exit__(self, *_: object) -> None:
        if self.file is not None and self.args.requests != "-":
            self.file.close()


def _chain(first: str, rest: Iterator[str]) -> Iterator[str]:
    if first:
        yield first
    yield from rest


REJECTED = (PrivilogError, TypeError, ValueError, AttributeError)  # a row, not privilog, is wrong


def decide_rows(
    authorizer: Any, reads: Iterator[Read], name: str, writer: Writer, rejects: Rejects, progress: Progress
) -> tuple[int, int, int]:
    """Decide each row as it is read and write it; reject what is no request. (decided, allowed, rejected)."""
    tabled = authorizer.tabled
    write = writer.write
    decided = allowed = 0
    tick = progress.on
    for number, row in reads:
        if isinstance(row, str):
            rejects.add(name, number, None, row)
            continue
        principal, operation, entity, given, stamp = row
        try:
            if not (principal and operation and entity):
                named = (("principal", principal), ("operation", operation), ("entity", entity))
                raise ValueError(f"missing {next(c for c, v in named if not v)}")
            found = tabled(principal, operation, entity, _args(given) if given else None)
        except REJECTED as error:
            rejects.add(name, number, dict(zip(COLUMNS, row, strict=True)), str(error))
            continue
        write((principal, operation, entity, _text(given) or None, _text(stamp) or None), found)
        decided += 1
        allowed += found.allowed
        if tick and not decided & 1023:
            progress.tick(decided, rejects.count)
    progress.done()
    return decided, allowed, rejects.count


def register(sub: Any) -> None:
    """Add ``decide`` to the command line's subparsers."""
    p = sub.add_parser("decide", help="decide a file of requests in process (no Spark)", description=DESCRIPTION)
    p.add_argument("requests", metavar="REQUESTS", help="the requests: CSV, JSON lines, Parquet, or - (stdin)")
    p.add_argument("--out", metavar="FILE", help="where the decisions go (default: standard output)")
    p.add_argument(
        "--format", choices=OUT_FORMATS, help="csv, json (JSON lines) or parquet (default: --out's suffix, else csv)"
    )
    p.add_argument(
        "--input-format",
        choices=("csv", "json", "parquet"),
        help="the requests' format (default: their suffix; else JSON lines if they start with {, else CSV)",
    )
    p.add_argument(
        "--rejects", metavar="FILE", help="where rejected rows go: .csv or .jsonl (file, line, reason, row), "
        "else FILE:LINE: reason lines (default: standard error)"
    )  # fmt: skip
    add_common(p)
    p.set_defaults(run=cmd_decide)
