"""``privilog pipeline show``: a run's tables printed without Spark, in each format a run writes.

The runs here are written as Spark writes them (folders of part files: Parquet, CSV with a
header and nested columns as JSON text with doubled quotes, JSON lines with nulls kept),
with the pyarrow and csv modules, through the pipeline's own :class:`Staging`; the
tables the real pipeline writes are shown in tests/spark/test_pipeline.py.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from privilog.cli import main
from privilog.pipeline.runs import Output, Staging

ROOT = Path(__file__).resolve().parents[2]

COLUMNS = [
    {"name": "principal", "type": "string"},
    {"name": "operation", "type": "string"},
    {"name": "decision", "type": "string"},
    {"name": "unmet", "type": "array<struct<requirement:string,text:string,lacking:array<string>>>"},
    {"name": "requests", "type": "bigint"},
]
ROWS: list[dict[str, Any]] = [
    {
        "principal": "user:alice",
        "operation": "namespace.delete",
        "decision": "deny",
        "unmet": [
            {"requirement": "namespace.delete#2", "text": 'ADMIN on "every" descendant', "lacking": ["dataset:a.b"]}
        ],
        "requests": 3,
    },
    {"principal": "user:bob", "operation": "dataset.read", "decision": "allow", "unmet": [], "requests": 1},
    {"principal": None, "operation": "dataset.read", "decision": "deny", "unmet": [], "requests": 12345},
]


def _schema() -> Any:
    from privilog.pipeline.show import arrow_type

    return pa.schema([(c["name"], arrow_type(c["type"])) for c in COLUMNS])


def _write(folder: Path, fmt: str, rows: list[dict[str, Any]]) -> None:
    folder.mkdir()
    (folder / "_SUCCESS").write_text("")
    halves = [rows[:1], rows[1:]]  # two part files, as Spark writes one per partition
    for i, part in enumerate(halves):
        name = folder / f"part-0000{i}-x.{'snappy.parquet' if fmt == 'parquet' else fmt}"
        if fmt == "parquet":
            pq.write_table(pa.Table.from_pylist(part, schema=_schema()), name)
        elif fmt == "json":
            name.write_text("".join(json.dumps(r) + "\n" for r in part))
        else:
            with name.open("w", newline="") as f:
                out = csv.writer(f)
                out.writerow([c["name"] for c in COLUMNS])
                for r in part:
                    out.writerow(
                        [json.dumps(r[c["name"]]) if c["type"].startswith("array") else r[c["name"]] for c in COLUMNS]
                    )


def make_run(out: Path, fmt: str) -> None:
    with Staging(out, "impact", fmt) as run:
        _write(run.table("changes"), fmt, ROWS)
        run.wrote(Output("changes", fmt, COLUMNS, len(ROWS)))
        empty = run.table("rejects")
        empty.mkdir()
        run.wrote(Output("rejects", fmt, [{"name": "reason", "type": "string"}], 0))
        run.publish(
            policies=[{"name": "cdap-4.2", "sha256": "ab" * 32}, {"name": "cdap", "sha256": "cd" * 32}],
            inputs={"requests": {"path": "/data/log.csv", "format": "csv", "rows": 4,
                                 "used": {"cdap-4.2": 3, "cdap": 3}, "rejected": {"cdap-4.2": 1, "cdap": 1}}},
            privilog="0.1.0",
            spark="4.0.0",
        )  # fmt: skip


def show(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["pipeline", "show", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_each_format_reads_back_as_the_same_rows(tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    make_run(out, fmt)
    code, printed, err = show(capsys, str(out), "changes", "--json")
    assert (code, err) == (0, "")
    assert [json.loads(line) for line in printed.splitlines()] == ROWS


def test_show_summarises_the_run_and_prints_each_tables_first_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    make_run(out, "csv")
    code, printed, _ = show(capsys, str(out), "--limit", "2")
    assert code == 0
    lines = printed.splitlines()
    assert lines[0].startswith("impact run ") and " to " in lines[0]
    assert "  policies cdap-4.2 (sha256 abababababab), cdap (sha256 cdcdcdcdcdcd)" in lines
    assert (
        "  inputs   requests /data/log.csv (csv): 4 rows = 3 used + 1 rejected under cdap-4.2; "
        "3 used + 1 rejected under cdap" in lines
    )
    assert f"  outputs  changes 3, rejects 0 rows (csv) in {out}" in lines
    at = lines.index("changes (the first 2 of 3 rows)")
    assert lines[at + 1].split() == ["principal", "operation", "decision", "unmet", "requests"]
    assert lines[at + 3].split() == [
        *("user:alice", "namespace.delete", "deny", "namespace.delete#2", "ADMIN", "on", '"every"'),
        *("descendant", "dataset:a.b", "3"),
    ]
    assert "rejects: no rows" in lines


def test_show_one_table_with_a_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    make_run(out, "parquet")
    code, printed, _ = show(capsys, str(out), "changes", "--limit", "0")
    assert code == 0
    lines = printed.splitlines()
    assert lines[0] == "changes (all 3 rows)"
    assert lines[-1].split() == ["dataset.read", "deny", "12,345"]  # a null principal prints as nothing
    code, printed, _ = show(capsys, str(out), "changes", "--json", "--limit", "1")
    assert [json.loads(line) for line in printed.splitlines()] == ROWS[:1]
    code, printed, _ = show(capsys, str(out), "--json")
    assert json.loads(printed)["command"] == "impact"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["{out}", "decisions"],
            "privilog: {out}: the run has no table `decisions`; its tables are changes, rejects\n",
        ),
        (["{out}", "--limit", "-1"], "privilog: --limit -1: give a number of rows, 0 for all\n"),
        (["{tmp}/nowhere"], "privilog: {tmp}/nowhere: no such folder (a pipeline run's --out)\n"),
        (
            ["{tmp}"],
            "privilog: {tmp} has no run.json: it is not the folder of a finished pipeline run (decide, visibility "
            "and impact write run.json last, when every table is written)\n",
        ),
    ],
    ids=["unknown table", "negative limit", "no folder", "no manifest"],
)
def test_show_errors_are_one_line(
    tmp_path: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    make_run(out, "json")
    code, printed, err = show(capsys, *(a.format(out=out, tmp=tmp_path) for a in argv))
    assert (code, printed, err) == (2, "", message.format(out=out, tmp=tmp_path))


def test_show_without_pyarrow_names_the_extra(tmp_path: Path) -> None:
    out = tmp_path / "out"
    make_run(out, "json")
    script = "import sys; sys.modules['pyarrow'] = None\nfrom privilog.cli import main\nsys.exit(main(sys.argv[1:]))"
    done = subprocess.run(
        [sys.executable, "-c", script, "pipeline", "show", str(out)], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "pip install 'privilog[parquet]'" in done.stderr
    assert done.stderr.startswith("privilog: `pipeline show` reads tables with pyarrow")
