"""An access log read in memory: the requests a deployment saw, as ``privilog pipeline`` reads them.

A CSV file with a header, or JSON lines (``.json``, ``.jsonl``, ``.ndjson``), with the columns
``principal``, ``operation`` and ``entity``, and optionally ``args`` (a JSON object; in CSV, its
text) and ``timestamp`` (ISO 8601 text, compared as text). A row that is not a well-formed request
for the policy (a missing column, an unknown operation, a malformed id, bad arguments) is
**rejected**: counted with its line and the reason, never decided, as the pipeline's rejects.
The file is read only if it is a regular file within ``PRIVILOG_MAX_WORLD_BYTES``.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privilog.dsl.errors import OneLineError, PrivilogError
from privilog.dsl.files import read_world_text
from privilog.engine.authorizer import Authorizer
from privilog.engine.decision import Request

COLUMNS = ("principal", "operation", "entity")


class LogError(OneLineError):
    """An access log that cannot be read at all (not a single bad row: those are rejected)."""


@dataclass(frozen=True)
class Rejected:
    """A row of the log that is not a request: where it is and why."""

    where: str
    reason: str


@dataclass
class AccessLog:
    """The well-formed requests of a log, in order, what was rejected, and the timestamps' span."""

    requests: list[Request] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    first: str | None = None
    last: str | None = None

    @property
    def window(self) -> tuple[str, str] | None:
        return (self.first, self.last) if self.first is not None and self.last is not None else None


def read_log(path: str | Path, authorizer: Authorizer) -> AccessLog:
    """Every row of the log at ``path`` checked as a request for ``authorizer``'s policy."""
    path = Path(path)
    try:
        text = read_world_text(path, "access log")
    except PrivilogError as error:
        raise LogError(str(error)) from None
    log = AccessLog()
    json_lines = path.suffix.lower() in (".json", ".jsonl", ".ndjson") or text.lstrip().startswith("{")
    rows = _json_rows(text, path) if json_lines else _csv_rows(text, path)
    for where, row in rows:
        if isinstance(row, str):
            log.rejected.append(Rejected(where, row))
            continue
        try:
            request = authorizer.request(row["principal"], row["operation"], row["entity"], _args(row.get("args")))
        except (PrivilogError, TypeError, ValueError, AttributeError) as error:  # a row, not privilog, is wrong
            log.rejected.append(Rejected(where, str(error)))
            continue
        log.requests.append(request)
        stamp = row.get("timestamp")
        if isinstance(stamp, str) and stamp:
            log.first = stamp if log.first is None else min(log.first, stamp)
            log.last = stamp if log.last is None else max(log.last, stamp)
    return log


def _args(given: Any) -> dict[str, object] | None:
    if given is None or given == "":
        return None
    if isinstance(given, str):
        given = json.loads(given)  # a ValueError rejects the row
    if not isinstance(given, dict):
        raise ValueError(f"args is a JSON object of NAME: VALUE, not {json.dumps(given)[:60]}")
    return given


def _missing(found: list[str] | dict[str, Any]) -> str | None:
    absent = [c for c in COLUMNS if c not in found]
    return f"a request needs the columns {', '.join(COLUMNS)}; missing {', '.join(absent)}" if absent else None


def _csv_rows(text: str, path: Path) -> Iterator[tuple[str, dict[str, Any] | str]]:
    reader = csv.reader(io.StringIO(text), strict=True)
    try:
        header = next(reader, [])
        problem = _missing(header)
        if problem:
            raise LogError(f"{path}:1: {problem} (found {', '.join(header) or 'none'})")
        line = reader.line_num
        for row in reader:
            start, line = line + 1, reader.line_num
            if not row:
                continue
            if len(row) != len(header):
                yield f"{path}:{start}", f"a row of {len(header)} fields has {len(row)}"
                continue
            yield f"{path}:{start}", dict(zip(header, row, strict=True))
    except csv.Error as error:
        raise LogError(f"{path}:{reader.line_num}: not valid CSV: {error}") from None


def _json_rows(text: str, path: Path) -> Iterator[tuple[str, dict[str, Any] | str]]:
    decode = json.JSONDecoder().decode
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = decode(line)
        except ValueError as error:
            yield where, f"not valid JSON: {str(error).partition(':')[0]}"
            continue
        if not isinstance(row, dict):
            yield where, "a request is a JSON object"
            continue
        problem = _missing(row)
        yield where, problem if problem else row
