"""What the report's tests share: a headless Chromium, run folders written with pyarrow, and pages read back.

Run folders are written as Spark writes them (a folder of Parquet part files per
table, the same columns and types), so that the report reads what it reads after a
real run; ``test_pipeline_report_run.py`` makes real runs with Spark.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from privilog.cli import main
from privilog.pipeline.runs import KIND, MANIFEST, VERSION
from tests.pipeline_report.browser import Chromium, Page, find_chromium
from tests.pipeline_report.png import read_png

UNMET = pa.list_(pa.struct([("requirement", pa.string()), ("text", pa.string()), ("lacking", pa.list_(pa.string()))]))
SCHEMAS = {
    "decisions": pa.schema(
        [
            ("principal", pa.string()),
            ("operation", pa.string()),
            ("entity", pa.string()),
            ("args", pa.string()),
            ("timestamp", pa.string()),
            ("decision", pa.string()),
            ("unmet", UNMET),
            ("denied_by", pa.list_(pa.string())),  # null in a row that leaves it out
        ]
    ),
    "rejects": pa.schema(
        [
            ("table", pa.string()),
            ("row", pa.string()),
            ("reason", pa.string()),
            ("file", pa.string()),
            ("row_number", pa.int64()),
        ]
    ),
    "visibility": pa.schema(
        [
            ("principal", pa.string()),
            ("entity", pa.string()),
            ("type", pa.string()),
            ("action", pa.string()),
            ("granted_entity", pa.string()),
            ("holder", pa.string()),
        ]
    ),
    "changes": pa.schema(
        [
            ("principal", pa.string()),
            ("operation", pa.string()),
            ("entity", pa.string()),
            ("args", pa.string()),
            ("requests", pa.int64()),
            ("decision_a", pa.string()),
            ("decision_b", pa.string()),
            ("unmet_a", UNMET),
            ("unmet_b", UNMET),
        ]
    ),
    "by_operation": pa.schema(
        [
            ("operation", pa.string()),
            ("compared", pa.int64()),
            ("allow_to_deny", pa.int64()),
            ("deny_to_allow", pa.int64()),
            ("log_rows", pa.int64()),
        ]
    ),
}


def spark_type(arrow: Any) -> str:
    """A pyarrow type as Spark's ``simpleString`` writes it in a run's manifest."""
    if pa.types.is_list(arrow):
        return f"array<{spark_type(arrow.value_type)}>"
    if pa.types.is_struct(arrow):
        return "struct<" + ",".join(f"{f.name}:{spark_type(f.type)}" for f in arrow) + ">"
    return {pa.string(): "string", pa.int64(): "bigint", pa.bool_(): "boolean"}[arrow]


def write_run(folder: Path, **tables: list[dict[str, Any]]) -> Path:
    """Each table's rows as Spark writes them: ``folder/NAME/part-0000N.parquet`` (two parts) and ``_SUCCESS``,
    and the run's manifest (``run.json``) as a finished run writes it last."""
    manifest: dict[str, Any] = {"kind": KIND, "version": VERSION, "command": "decide", "outputs": {}}
    for name, rows in tables.items():
        manifest["outputs"][name] = {
            "format": "parquet",
            "rows": len(rows),
            "columns": [{"name": f.name, "type": spark_type(f.type)} for f in SCHEMAS[name]],
        }
        target = folder / name
        target.mkdir(parents=True)
        half = len(rows) // 2
        for i, part in enumerate((rows[:half], rows[half:])):
            pq.write_table(pa.Table.from_pylist(part, schema=SCHEMAS[name]), target / f"part-0000{i}.parquet")
        (target / "_SUCCESS").touch()
    (folder / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    return folder


def unmet(*requirements: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"requirement": r, "text": t, "lacking": []} for r, t in requirements]


def report(*argv: str) -> tuple[int, str, str]:
    """``privilog pipeline report ...`` in this process: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["pipeline", "report", *argv])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chromium]:
    """One headless Chromium for the module (Debian's chromium package; .ci/run installs it)."""
    executable = find_chromium()
    if executable is None:  # a failure, not a skip: without a browser these tests would prove nothing
        pytest.fail("Debian's chromium is not installed: apt-get install -y chromium (.ci/run installs it)")
    profile = tmp_path_factory.mktemp("chromium") / "profile"
    profile.mkdir()
    browser = Chromium(executable, profile)
    yield browser
    browser.close()


# What each section of the page says, as the browser reads it: title, tables (rows of cell texts), charts.
SECTIONS = """
Array.from(document.querySelectorAll('section')).map(s => ({
  title: s.querySelector('h2').textContent,
  tables: Array.from(s.querySelectorAll('table')).map(t =>
    Array.from(t.rows).map(r => Array.from(r.cells).map(c => c.textContent))),
  charts: Array.from(s.querySelectorAll('svg')).map(g => ({
    title: g.querySelector('title').textContent,
    bars: g.querySelectorAll('rect').length,
    texts: Array.from(g.querySelectorAll('text')).map(t => t.textContent),
  })),
}))
"""


@dataclass(frozen=True)
class Shown:
    """A report page as the browser showed it."""

    page: Page
    sections: dict[str, dict[str, Any]]  # by title
    figures: dict[str, str]  # the headline boxes: what -> value
    text: str  # document.body.textContent
    elements: dict[str, int]  # tag -> how many the DOM holds
    colours: set[bytes]  # distinct pixel values of the screenshot

    def table(self, section: str, index: int = 0) -> list[list[str]]:
        """A section's table: header row first, cells as the page writes them."""
        return list(self.sections[section]["tables"][index])


def show(chromium: Chromium, html: Path) -> Shown:
    """Open ``html`` in the browser and read back what it shows."""
    page, session = chromium.open(html.as_uri())
    sections = {s["title"]: s for s in chromium.evaluate(session, SECTIONS)}
    figures = chromium.evaluate(
        session,
        "Object.fromEntries(Array.from(document.querySelectorAll('.figure')).map("
        "f => [f.lastChild.textContent, f.querySelector('b').textContent]))",
    )
    text = chromium.evaluate(session, "document.body.textContent")
    elements = {
        tag: chromium.evaluate(session, f"document.getElementsByTagName('{tag}').length")
        for tag in ("script", "img", "iframe", "object", "embed", "a", "svg", "table")
    }
    colours = read_png(page.screenshot).colours()
    return Shown(page, sections, figures, text, elements, colours)


def number(cell: str) -> int:
    """A count as the page writes it (``1,234``)."""
    return int(cell.replace(",", ""))


def rgb(colour: str) -> bytes:
    """``#4c78a8`` as the screenshot's pixel bytes (RGB)."""
    return bytes.fromhex(colour.lstrip("#"))
