"""The benchmarks page (``benchmarks/report.py``): every results file shown, with its commit and date,
and a file of a shape the report does not know shown generically rather than dropped."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import report

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted((ROOT / "benchmarks").rglob("*.json"))  # results*.json, programs.json, serve/logcost.json, ...


@pytest.fixture(scope="module")
def page() -> str:
    return report.markdown(ROOT)


def test_there_are_results_files() -> None:
    assert FILES, "no benchmarks/**/*.json: the page would be empty"
    assert any(p.name.startswith("results") for p in FILES)
    assert report.results_files(ROOT) == sorted(report.results_files(ROOT), key=report.results_files(ROOT).index)
    assert sorted(report.results_files(ROOT)) == FILES


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_results_file_appears_with_its_commit_and_date(page: str, path: Path) -> None:
    rel = path.relative_to(ROOT).as_posix()
    assert f"File `{rel}`" in page
    data = json.loads(path.read_text(encoding="utf-8"))
    recorded = report.provenance(data)
    assert recorded, f"{rel} records no commit, machine or date"
    text = "\n".join(report.section(ROOT, path))
    for row in recorded:
        assert row["date"] and row["date"] in text
        if row["commit"]:
            assert f"`{row['commit']}`" in text
        else:  # written before the benchmark recorded it: said on the page
            assert "**Not recorded for every run: commit" in text
    assert "```sh\npython" in text, f"{rel}: no command found in its benchmark's docstring"
    assert "Its figures, by their path" not in text, f"{rel}: shown generically, its shape is not known"


def test_the_command_line_prints_the_page(page: str) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks.report"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert run.stdout == page


def _root(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path


def test_a_file_of_an_unknown_shape_is_shown_generically(tmp_path: Path) -> None:
    root = _root(
        tmp_path,
        {
            "benchmarks/odd/__main__.py": '"""The odd benchmark (issue 99): how odd.\n\n    python -m benchmarks.odd\n"""\n',
            "benchmarks/odd/results.json": json.dumps(
                {
                    "machine": {"date": "2026-11-28T10:00:00+00:00", "privilog_commit": "abc1234"},
                    "figures": {"latency_ms": [1.5, 2.5], "deep": [{"x": 1}, {"x": 2}]},
                }
            ),
            "benchmarks/bare/results-list.json": json.dumps([1, 2, 3]),
            "benchmarks/bare/results-broken.json": "{not json",
            "benchmarks/bare/results-runs.json": json.dumps({"runs": {"a": {"pipeline": 1, "handwritten": None}}}),
        },
    )
    page = report.markdown(root)
    assert "## The odd benchmark (issue 99): `results.json`" in page
    assert "python -m benchmarks.odd" in page
    assert "2026-11-28 10:00 UTC" in page and "`abc1234`" in page
    assert "| `figures.latency_ms` | 1.50, 2.50 |" in page
    assert "| `figures.deep[1].x` | 2 |" in page
    # no command, no commit, no date: said, not dropped
    assert "## `benchmarks/bare/results-list.json`" in page
    assert page.count("This file records no commit, machine or date.") == 2
    assert "| `(the file)` | 1, 2, 3 |" in page
    assert "`benchmarks/bare/results-broken.json`" in page and "could not be read" in page
    # a known shape's name but not its content: generic, not a crash
    assert "| `runs.a.pipeline` | 1 |" in page


def test_a_partial_record_is_flagged(tmp_path: Path) -> None:
    root = _root(
        tmp_path,
        {"benchmarks/x/results.json": json.dumps({"runs": [{"date": "2026-11-28T10:00:00+00:00", "n": 1}]})},
    )
    assert "**Not recorded for every run: commit, machine.**" in report.markdown(root)
