"""``privilog pipeline report --html`` on real runs: ``generate``, then ``decide`` and ``impact`` on Spark.

Once for the module, in this process's Spark session (local mode): a deployment of
200 entities, 200 grants and 300 requests, with bad rows, and three requests whose
principal, entity or operation is markup (rejected, so they reach the page through
the rejects); ``decide`` and ``impact cdap-4.2 cdap`` over it, and a report of each.
Each page is opened in headless Chromium: it draws charts (the screenshot holds the
charts' colours and many others), logs no error, fetches nothing, runs nothing, and
its tables hold the numbers counted here from the run's tables.
"""

from __future__ import annotations

import collections
import contextlib
import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
import pyspark  # noqa: F401  (the test extra installs it: without it the module fails, it is not skipped)
import pytest

from privilog.cli import main
from privilog.render.charts import ALLOWED, DENIED, TO_ALLOW, TO_DENY
from tests.pipeline_report.browser import Chromium
from tests.pipeline_report.conftest import Shown, number, report, rgb, show

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.slow

TABLES = ("entities", "grants", "members", "requests")
HOSTILE = {
    "principal": "user:<img src=x onerror=alert(1)>",
    "entity": "dataset:ns00000.<script>alert(2)</script>",
    "operation": "<svg onload=alert(3)>",
}


@dataclass(frozen=True)
class Runs:
    decide: Path
    impact: Path
    printed: dict[str, str]  # what each command printed


def _pipeline(*argv: str) -> tuple[int, str]:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["pipeline", *argv, "--quiet"])
    return code, printed.getvalue()


@pytest.fixture(scope="module")
def runs(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    root = tmp_path_factory.mktemp("report-runs")
    deployment = root / "deployment"
    generated = [
        *("generate", "--out", str(deployment), "--format", "csv", "--seed", "5"),
        *("--entities", "200", "--grants", "200", "--requests", "300", "--bad-rows", "2"),
    ]
    assert main(generated) == 0
    requests = deployment / "requests.csv"
    with requests.open(encoding="utf-8", newline="") as f:
        columns = next(csv.reader(f))
    good = {"principal": "user:u000001", "operation": "dataset.read", "entity": "dataset:ns00000.ds000"}
    with requests.open("a", encoding="utf-8", newline="") as f:
        for field, value in HOSTILE.items():
            row = {**good, field: value, "args": "", "timestamp": "2026-11-01T00:00:01Z"}
            csv.writer(f).writerow([row[c] for c in columns])
    inputs = [a for t in TABLES for a in (f"--{t}", str(deployment / f"{t}.csv"))]
    printed = {}
    code, printed["decide"] = _pipeline("decide", *inputs, "--out", str(root / "decide"))
    assert code == 0
    code, printed["impact"] = _pipeline("impact", "cdap-4.2", "cdap", *inputs, "--out", str(root / "impact"))
    assert code == 1  # some decisions change
    return Runs(root / "decide", root / "impact", printed)


def _rows(folder: Path, table: str) -> list[dict[str, Any]]:
    return list(pq.read_table(str(folder / table)).to_pylist())


@pytest.fixture(scope="module")
def decide_page(runs: Runs, chromium: Chromium) -> tuple[str, Shown]:
    code, out, err = report(str(runs.decide), "--html")
    assert (code, err) == (0, "")
    return out, show(chromium, runs.decide / "report.html")


@pytest.fixture(scope="module")
def impact_page(runs: Runs, chromium: Chromium) -> tuple[str, Shown]:
    code, out, err = report(str(runs.impact), "--html")
    assert (code, err) == (0, "")
    return out, show(chromium, runs.impact / "report.html")


def _clean(shown: Shown, page: Path) -> None:
    """Drawn, and nothing logged, asked for, run or opened."""
    assert shown.page.errors == [] and shown.page.dialogs == []
    assert shown.page.requests == [page.as_uri()]
    assert all(shown.elements[tag] == 0 for tag in ("script", "img", "iframe", "object", "embed"))
    assert len(shown.colours) > 50  # not blank: text, bars, grid lines, antialiased edges


def test_the_decide_page_is_drawn_and_clean(runs: Runs, decide_page: tuple[str, Shown]) -> None:
    _, shown = decide_page
    _clean(shown, runs.decide / "report.html")
    assert rgb(ALLOWED) in shown.colours and rgb(DENIED) in shown.colours
    expected = {
        "Decisions by operation",
        "Decisions over time",
        "Most-denied principals",
        "Most-denied operations",
        "Top unmet requirements",
        "Rejects by reason",
    }
    assert expected <= set(shown.sections)
    for title in expected:
        (chart,) = shown.sections[title]["charts"]
        assert chart["title"] == title and chart["bars"] > 0


def test_the_decide_page_holds_the_numbers_of_the_tables(runs: Runs, decide_page: tuple[str, Shown]) -> None:
    out, shown = decide_page
    decisions = _rows(runs.decide, "decisions")
    allowed = collections.Counter(r["operation"] for r in decisions if r["decision"] == "allow")
    denied = collections.Counter(r["operation"] for r in decisions if r["decision"] == "deny")
    total_allowed, total_denied = sum(allowed.values()), sum(denied.values())
    # the same counts as decide printed, and as the text report says
    assert f"{total_allowed:,} allowed, {total_denied:,} denied" in runs.printed["decide"]
    assert f"decisions: {len(decisions):,} requests, {total_allowed:,} allowed, {total_denied:,} denied" in out
    assert shown.figures["requests decided"] == f"{len(decisions):,}"
    assert (number(shown.figures["allowed"]), number(shown.figures["denied"])) == (total_allowed, total_denied)
    rows = shown.table("Decisions by operation")[1:]
    assert {r[0]: (number(r[1]), number(r[2])) for r in rows} == {
        op: (allowed[op], denied[op]) for op in allowed.keys() | denied.keys()
    }
    by_principal = collections.Counter(r["principal"] for r in decisions if r["decision"] == "deny")
    _top(by_principal, {r[0]: number(r[2]) for r in shown.table("Most-denied principals")[1:]})
    lacking = collections.Counter(u["requirement"] for r in decisions if r["decision"] == "deny" for u in r["unmet"])
    _top(lacking, {r[0]: number(r[2]) for r in shown.table("Top unmet requirements")[1:]})
    timed = sum(1 for r in decisions if r["timestamp"])
    assert sum(number(r[3]) for r in shown.table("Decisions over time")[1:]) == timed
    rejects = _rows(runs.decide, "rejects")
    assert number(shown.figures["rows rejected"]) == len(rejects)
    assert sum(number(r[1]) for r in shown.table("Rejects by reason")[1:]) == len(rejects)


def _top(counted: collections.Counter[str], shown: dict[str, int]) -> None:
    """``shown`` is the top of ``counted`` (20 at most): the right counts, none left out that has more."""
    assert shown == {k: counted[k] for k in shown} and len(shown) == min(20, len(counted))
    assert min(shown.values()) >= max((n for k, n in counted.items() if k not in shown), default=0)


def test_markup_in_the_input_is_shown_as_text_and_runs_nothing(decide_page: tuple[str, Shown]) -> None:
    _, shown = decide_page
    for value in HOSTILE.values():
        assert value in shown.text
    assert shown.page.dialogs == [] and shown.elements["img"] == 0 and shown.elements["script"] == 0


def test_the_impact_page_holds_its_changes(runs: Runs, impact_page: tuple[str, Shown]) -> None:
    out, shown = impact_page
    _clean(shown, runs.impact / "report.html")
    assert rgb(TO_DENY) in shown.colours or rgb(TO_ALLOW) in shown.colours
    changes = _rows(runs.impact, "changes")
    to_deny = sum(1 for c in changes if c["decision_a"] == "allow")
    to_allow = len(changes) - to_deny
    assert f"{len(changes):,} changed" in runs.printed["impact"]
    assert f"({to_deny:,} allow→deny, {to_allow:,} deny→allow; distinct requests)" in out
    assert (number(shown.figures["allow→deny"]), number(shown.figures["deny→allow"])) == (to_deny, to_allow)
    title = "Changes between the two policies, by operation"
    counted = collections.Counter((c["operation"], c["decision_a"]) for c in changes)
    assert {r[0]: (number(r[1]), number(r[2])) for r in shown.table(title)[1:]} == {
        op: (counted[op, "allow"], counted[op, "deny"]) for op, _ in counted
    }
    examples = shown.table(title, 1)[1:]
    assert examples and len(examples) <= 20
    known = {(c["principal"], c["operation"], c["entity"], c["decision_a"], c["requests"]) for c in changes}
    for row in examples:
        assert (row[0], row[1], row[2], row[4], number(row[6])) in known
