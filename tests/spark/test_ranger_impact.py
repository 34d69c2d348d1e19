"""`privilog pipeline impact ranger-cdap cdap-5.1 --world IMPORTED --requests LOG` (docs/ranger.md,
"Measuring the difference over your access log"): the world `privilog ranger import` writes as the
deployment, each policy reading it as `privilog diff` does (cdap-5.1, which does not read Ranger's
facts, decides on their allow items as CDAP grants). Over an access log of the sample deployment
(tests/ranger/cdap-inventory.yaml), the pipeline's changed decisions are `privilog diff --world
--json`'s, restricted to the log's requests, each counted as often as the log asks it."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import pyspark  # noqa: F401  (the test extra installs it: without it the module fails, it is not skipped)
import pytest

from privilog.cli import main

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.slow

RANGER = Path(__file__).resolve().parent.parent / "ranger"

DATASETS = [
    "dataset:finance.ledger", "dataset:finance.sales_2026", "dataset:hr.salaries", "dataset:finance.customers_pii",
    "dataset:sandbox_alice.tmp_2026_scratch",
]  # fmt: skip
PROGRAMS = [
    "program:finance.etl_daily.service.api", "program:finance.etl_daily.workflow.DataPipelineWorkflow",
    "program:marketing.campaigns.spark.score",
]  # fmt: skip
LOG = [
    *((user, "dataset.read", d) for user in ("user:hr_auditor_ext", "user:intern1", "user:analyst_on_leave") for d in DATASETS),
    ("user:etl_svc", "securekey.read", "securekey:finance.db_password"),
    ("user:etl_svc", "securekey.read", "securekey:marketing.master_key"),
    *(("user:ops_lead", "program.list", p) for p in PROGRAMS),
    ("user:ops_lead", "program.start", "program:finance.etl_daily.service.api"),
    ("user:intern1", "namespace.get", "namespace:finance"),
]  # fmt: skip
REPEATED = LOG[:5] + LOG[15:18]  # a log asks some requests more than once


def test_pipeline_impact_over_an_imported_ranger_world_is_privilog_diffs_restricted_to_the_log(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    imported = tmp_path / "imported.yaml"
    assert main([
        "ranger", "import", str(RANGER / "cdap-service-export.json"), "--roles", str(RANGER / "cdap-roles-export.json"),
        "--world", str(RANGER / "cdap-inventory.yaml"), "-o", str(imported),
    ]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["diff", "ranger-cdap", "cdap-5.1", "--world", str(imported), "--json"]) == 1
    diff = json.loads(capsys.readouterr().out)
    asked = Counter(LOG + REPEATED)
    assert len(LOG + REPEATED) == 30 and len(asked) == 22
    expected = {
        (d["request"]["principal"], d["request"]["operation"], d["request"]["entity"]): (d["left"], d["right"])
        for changed in diff["changed"].values()
        for d in changed["decisions"]
        if (d["request"]["principal"], d["request"]["operation"], d["request"]["entity"]) in asked
    }
    # both ways, and requests of the log that do not change: the restriction is a real one
    assert {"allow", "deny"} == {left for left, _ in expected.values()} and 0 < len(expected) < len(asked)

    with (tmp_path / "log.csv").open("w", newline="") as file:
        csv.writer(file).writerows([("principal", "operation", "entity"), *LOG, *REPEATED])
    run = tmp_path / "run"
    code = main([
        "pipeline", "impact", "ranger-cdap", "cdap-5.1", "--world", str(imported), "--requests", str(tmp_path / "log.csv"),
        "--out", str(run), "--out-format", "json", "--quiet",
    ])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 1, err
    # the note `privilog diff` prints, once: only cdap-5.1 reads the world as CDAP grants
    assert err.count("note: cdap-5.1 does not read Ranger's policies") == 1 and "ranger-cdap does not" not in err

    from privilog.pipeline.runs import open_run
    from privilog.pipeline.show import read_rows

    changes = read_rows(open_run(run), "changes", None)
    got = {(r["principal"], r["operation"], r["entity"]): (r["decision_a"], r["decision_b"]) for r in changes}
    assert got == expected
    assert {(r["principal"], r["operation"], r["entity"]): r["requests"] for r in changes} == {k: asked[k] for k in expected}
    by_operation = {r["operation"]: r for r in read_rows(open_run(run), "by_operation", None)}
    assert {op: r["compared"] for op, r in by_operation.items()} == Counter(op for _, op, _ in LOG + REPEATED)
    assert f"{len(expected)} changed; 0 rows rejected" in out
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["inputs"]["grants"] == {"path": str(imported), "format": "world", "rows": 0, "used": 0, "rejected": 0}
    assert manifest["inputs"]["members"]["rows"] == manifest["inputs"]["members"]["used"] > 0
