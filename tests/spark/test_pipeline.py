"""``privilog generate`` and ``privilog pipeline`` end to end, through ``privilog.cli.main``.

A small deployment (300 entities, 300 grants, 2,000 requests, 3 bad rows in each
table) is generated in CSV, JSON lines and Parquet; a few rows with specific defects
are added to the CSV one. Then, in this process and its Spark session:

* ``decide`` (CSV): exit 0; the decisions table has the documented columns and one
  row per good request, each decided as the reference engine decides it; the rejects
  table holds exactly the bad rows, each with a reason, and the printed summary counts
  them;
* ``visibility`` (JSON lines): exit 0, the documented columns, what the reference
  engine shows the busiest principals;
* ``impact cdap-4.2 cdap`` (Parquet): exit 1 when some decision changes; its counts by
  operation agree with its table of changes, and each change agrees with ``decide``;
* a missing file or a missing column: exit 2 and one line saying what is wrong.
"""

from __future__ import annotations

import collections
import contextlib
import csv
import io
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyspark  # noqa: F401  (the test extra installs it: without it the module fails, it is not skipped)
import pytest
import yaml
from privilog.engine.authorizer import Authorizer, RequestError

import privilog
from privilog.cli import main
from privilog.pipeline.generate import TABLES, table_path

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.slow

BAD_ROWS = 3
REQUESTS = 2000
FORMATS = ("csv", "json", "parquet")

# Rows with one defect each, added to the CSV deployment, and a part of the reason each must get.
DEFECTS: dict[str, list[tuple[tuple[str, ...], str]]] = {
    "entities": [(("namespace:ns 1",), "malformed namespace id `namespace:ns 1`")],
    "grants": [(("user:u000001", "DELETE", "dataset:ns00000.ds000"), "unknown action `DELETE`")],
    "members": [(("user:u000001", "team"), "malformed principal `team`")],
    "requests": [
        (("user:u000001", "dataset.read", "dataset:ns00000", "", ""), "malformed dataset id `dataset:ns00000`"),
        (("user:u000001", "dataset.destroy", "dataset:ns00000.ds000", "", ""), "unknown operation `dataset.destroy`"),
        (
            ("user:u000001", "namespace.get", "dataset:ns00000.ds000", "", ""),
            "`namespace.get` acts on a namespace, but `dataset:ns00000.ds000` is a dataset",
        ),
        (
            ("user:u000001", "application.deploy", "application:ns00000.app00", "artifact=artifact:ns00000.art00", ""),
            "args `artifact=artifact:ns00000.art00` is not a JSON object",
        ),
        (
            ("user:u000001", "application.deploy", "application:ns00000.app00", '{"new_artifact": "perhaps"}', ""),
            "`$new_artifact` is true or false, not `perhaps`",
        ),
        (
            (
                "user:u000001",
                "application.deploy",
                "application:ns00000.app00",
                '{"artifact": "dataset:ns00000.x"}',
                "",
            ),
            "`$artifact` of `application.deploy` names a artifact, not `dataset:ns00000.x`",
        ),
        (
            (
                "user:u000001",
                "schedule.resume",
                "schedule:ns00000.app00.sch0",
                '{"program": "program:ns00000.app01.service.p0"}',
                "",
            ),
            "`$program` of `schedule.resume` must be a program in application:ns00000.app00",
        ),
        (("user:u000001", "dataset.read", "dataset:ns00000.ds000", '{"owner": "user:u000001"}', ""), "`$owner`"),
    ],
}


@dataclass(frozen=True)
class Deployment:
    """A generated deployment: where each format's tables are, and the rows the pipeline must reject."""

    folders: dict[str, Path]
    good: dict[str, list[dict[str, str]]]  # table -> good rows (from the CSV files)
    bad: dict[str, list[dict[str, str]]]  # table -> generated bad rows (the same in every format)

    def paths(self, fmt: str, *tables: str) -> list[str]:
        args = []
        for table in tables:
            args += [f"--{table}", str(table_path(self.folders[fmt], table, fmt))]
        return args


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def _append(path: Path, rows: list[tuple[str, ...]]) -> None:
    with path.open("a", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows(rows)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, spark: SparkSession) -> Deployment:
    """The deployment in each format; the CSV one with the rows of DEFECTS added."""
    root = tmp_path_factory.mktemp("deployment")
    folders = {fmt: root / fmt for fmt in FORMATS}
    for fmt, folder in folders.items():
        code = main(
            [
                *("generate", "--out", str(folder), "--format", fmt, "--seed", "7"),
                *("--entities", "300", "--grants", "300", "--requests", str(REQUESTS), "--bad-rows", str(BAD_ROWS)),
            ]
        )
        assert code == 0
    good, bad = {}, {}
    for table in TABLES:
        rows = _rows(table_path(folders["csv"], table, "csv"))
        good[table], bad[table] = rows[:-BAD_ROWS], rows[-BAD_ROWS:]
        _append(table_path(folders["csv"], table, "csv"), [row for row, _ in DEFECTS[table]])
    assert len(good["requests"]) == REQUESTS
    return Deployment(folders, good, bad)


def _main(argv: list[str]) -> tuple[int, str]:
    """``privilog ARGV``'s exit code and standard output (a module's fixture cannot take capsys); a run that
    stopped with an error fails here, with what it printed on standard error."""
    printed, errors = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(errors):
        code = main(argv)
    assert code in (0, 1), f"privilog {' '.join(argv[:2])} exited {code}: {errors.getvalue()}"
    return code, printed.getvalue()


def _table(spark: SparkSession, path: Path) -> list[dict[str, Any]]:
    return [row.asDict(recursive=True) for row in spark.read.parquet(str(path)).collect()]


def _shown(out: Path, table: str) -> list[dict[str, Any]]:
    """Every row of a run's table as ``pipeline show`` reads it (pyarrow, in the run's format)."""
    from privilog.pipeline.runs import open_run
    from privilog.pipeline.show import read_rows

    return read_rows(open_run(out), table, None)


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """A row without its empty fields (CSV reads an empty field as null, a reject's JSON leaves nulls out)."""
    return {k: v for k, v in row.items() if v not in (None, "")}


def _reference(deployment: Deployment, policy: str = "cdap") -> Authorizer:
    good = deployment.good
    return privilog.load(
        policy,
        {
            "entities": [r["entity"] for r in good["entities"]],
            "grants": [[r["principal"], r["action"], r["entity"]] for r in good["grants"]],
            "members": [[r["principal"], r["group"]] for r in good["members"]],
        },
    )


# ---- decide ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Decided:
    code: int
    out: str
    decisions: list[dict[str, Any]]
    rejects: list[dict[str, Any]]
    columns: list[str]
    out_folder: Path


@pytest.fixture(scope="module")
def decided(deployment: Deployment, spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Decided:
    """``privilog pipeline decide`` over the CSV deployment (with the rows of DEFECTS)."""
    out = tmp_path_factory.mktemp("decide") / "out"
    code, printed = _main(["pipeline", "decide", *deployment.paths("csv", *TABLES), "--out", str(out), "--quiet"])
    columns = spark.read.parquet(str(out / "decisions")).columns
    return Decided(code, printed, _table(spark, out / "decisions"), _table(spark, out / "rejects"), columns, out)


def test_decide_writes_one_decision_per_good_request(decided: Decided, deployment: Deployment) -> None:
    assert decided.code == 0
    assert decided.columns == [
        *("principal", "operation", "entity", "args", "timestamp", "decision", "unmet", "bypass", "denied_by"),
        "allowed_by",
    ]
    assert len(decided.decisions) == REQUESTS
    assert collections.Counter(r["timestamp"] for r in decided.decisions) == collections.Counter(
        r["timestamp"] for r in deployment.good["requests"]
    )
    for row in decided.decisions:
        assert row["decision"] in ("allow", "deny")
        assert (row["decision"] == "allow") == (row["unmet"] == []), row
        assert row["decision"] == "allow" or row["allowed_by"] == [], row
        assert row["bypass"] == [], "no settings, and cdap adds no bypass of its own"
        assert row["denied_by"] == [], "cdap has no deny rule of its own"
        for grant in row["allowed_by"]:
            assert set(grant) == {"requirement", "principal", "action", "entity"}, row
            assert grant["requirement"].startswith(row["operation"] + "#"), row
        for unmet in row["unmet"]:
            assert set(unmet) == {"requirement", "text", "lacking"}
            assert unmet["requirement"].startswith(row["operation"] + "#") and unmet["text"]


def test_decide_rejects_exactly_the_bad_rows_each_with_a_reason(decided: Decided, deployment: Deployment) -> None:
    expected = collections.Counter()
    for table in TABLES:
        columns = TABLES[table]
        for row in [*deployment.bad[table], *(dict(zip(columns, r, strict=True)) for r, _ in DEFECTS[table])]:
            expected[(table, json.dumps(_plain(row), sort_keys=True))] += 1
    got = collections.Counter(
        (r["table"], json.dumps(_plain(json.loads(r["row"])), sort_keys=True)) for r in decided.rejects
    )
    assert got == expected
    assert all(r["reason"] for r in decided.rejects)
    total = sum(expected.values())
    assert f"decided {REQUESTS:,} requests:" in decided.out
    assert f"; {total:,} rows rejected;" in decided.out


def test_each_reject_names_its_file_and_row(decided: Decided, deployment: Deployment) -> None:
    # the row in the file that the reject names is the row the reject holds
    assert decided.rejects
    for reject in decided.rejects:
        path = table_path(deployment.folders["csv"], reject["table"], "csv")
        assert reject["file"] is not None and reject["file"].endswith(str(path)), reject
        row = _rows(path)[reject["row_number"] - 1]
        assert _plain(row) == _plain(json.loads(reject["row"])), reject


def test_a_generated_bad_row_is_rejected_for_what_is_wrong_in_it(decided: Decided, deployment: Deployment) -> None:
    generated = {json.dumps(_plain(r), sort_keys=True) for rows in deployment.bad.values() for r in rows}
    for reject in decided.rejects:
        row = json.loads(reject["row"])
        if json.dumps(_plain(row), sort_keys=True) in generated:
            named = [v for v in row.values() if v and f"`{v}`" in reject["reason"]]
            assert named or reject["reason"].startswith("missing"), reject


@pytest.mark.parametrize("table", list(DEFECTS))
def test_a_row_with_a_defect_is_rejected_with_the_reason(decided: Decided, table: str) -> None:
    reasons = collections.defaultdict(list)
    for reject in decided.rejects:
        reasons[(reject["table"], json.dumps(_plain(json.loads(reject["row"])), sort_keys=True))].append(
            reject["reason"]
        )
    for row, reason in DEFECTS[table]:
        key = (table, json.dumps(_plain(dict(zip(TABLES[table], row, strict=True))), sort_keys=True))
        assert len(reasons[key]) == 1, (row, reasons[key])
        assert reason in reasons[key][0], (row, reasons[key][0])


def test_the_reference_engine_refuses_the_rejected_requests_too(deployment: Deployment) -> None:
    authz = _reference(deployment)
    for (principal, operation, entity, args, _), _ in DEFECTS["requests"]:
        try:
            parsed = json.loads(args) if args else {}
        except json.JSONDecodeError:
            continue
        with pytest.raises(RequestError):
            authz.request(principal, operation, entity, parsed)


def test_decisions_agree_with_the_reference_engine(decided: Decided, deployment: Deployment) -> None:
    authz = _reference(deployment)
    rows = sorted(decided.decisions, key=lambda r: r["timestamp"])[
        ::2
    ]  # half: the reference decides creates one by one
    requests = [authz.request(r["principal"], r["operation"], r["entity"], json.loads(r["args"] or "{}")) for r in rows]
    disagreements = []
    for row, decision in zip(rows, authz.check_many(requests, explain_denials=False), strict=True):
        want = ("allow" if decision.allowed else "deny", sorted(o.id for o in decision.unmet))
        got = (row["decision"], sorted(u["requirement"] for u in row["unmet"]))
        if want != got:
            disagreements.append((row["principal"], row["operation"], row["entity"], row["args"], want, got))
    assert disagreements == []
    assert 0.1 < sum(r["decision"] == "allow" for r in rows) / len(rows) < 0.9


def test_decide_records_the_run_in_run_json(decided: Decided, deployment: Deployment) -> None:
    import hashlib

    from privilog import dsl

    manifest = json.loads((decided.out_folder / "run.json").read_text())
    assert manifest["command"] == "decide"
    path = dsl.resolve_policy_path("cdap")
    assert manifest["policies"] == [
        {"name": "cdap", "file": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    ]
    for table in TABLES:
        bad = len(deployment.bad[table]) + len(DEFECTS[table])
        good = len(deployment.good[table])
        entry = manifest["inputs"][table]
        assert entry == {
            "path": str(table_path(deployment.folders["csv"], table, "csv")),
            "format": "csv",
            "rows": good + bad,
            "used": good,
            "rejected": bad,
        }, table
    assert manifest["inputs"]["requests"]["used"] == REQUESTS
    assert manifest["outputs"]["decisions"]["rows"] == REQUESTS
    assert manifest["outputs"]["rejects"]["rows"] == len(decided.rejects)
    assert [c["name"] for c in manifest["outputs"]["decisions"]["columns"]] == decided.columns
    assert manifest["rows_in_check"].startswith("passed")
    assert manifest["spark"].split(".")[0] == "4" and manifest["privilog"]
    assert manifest["started"] <= manifest["finished"]
    assert {p.name for p in decided.out_folder.parent.iterdir()} <= {"out", ".out.lock"}


def test_no_allowed_by_decides_the_same_with_the_same_columns_and_says_so(
    decided: Decided, deployment: Deployment, spark: SparkSession, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    argv = ["pipeline", "decide", *deployment.paths("csv", *TABLES), "--out", str(out), "--quiet", "--no-allowed-by"]
    code, printed = _main(argv)
    assert code == decided.code
    # the same counts by operation and in all; the last line names the run's folder
    assert printed.replace(str(out), "OUT") == decided.out.replace(str(decided.out_folder), "OUT")
    lean = spark.read.parquet(str(out / "decisions"))
    full = spark.read.parquet(str(decided.out_folder / "decisions"))
    assert lean.schema == full.schema, "one table's schema: a catalog table takes both kinds of run"
    rows = [row.asDict(recursive=True) for row in lean.collect()]
    assert all(row["allowed_by"] is None for row in rows)
    assert any(row["allowed_by"] for row in decided.decisions), "the default run names grants"

    def without_grants(table: list[dict[str, Any]]) -> collections.Counter[str]:
        return collections.Counter(json.dumps({**r, "allowed_by": None}, sort_keys=True, default=str) for r in table)

    assert without_grants(rows) == without_grants(decided.decisions)
    assert json.loads((out / "run.json").read_text())["allowed_by"] is False
    assert json.loads((decided.out_folder / "run.json").read_text())["allowed_by"] is True


def test_decide_prints_allowed_denied_and_unmet_per_operation(decided: Decided) -> None:
    counts = collections.Counter((r["operation"], r["decision"]) for r in decided.decisions)
    unmet = collections.Counter(
        (r["operation"], u["requirement"]) for r in decided.decisions for u in r["unmet"] if r["decision"] == "deny"
    )
    lines = decided.out.splitlines()
    assert lines[0].split()[:3] == ["operation", "allowed", "denied"]
    operations = {op for op, _ in counts}
    body = [line for line in lines[1:] if line.split()[0] in operations]
    assert len(body) == len(operations)
    for line in body:
        operation, allowed, denied, *rest = line.split()
        assert (int(allowed.replace(",", "")), int(denied.replace(",", ""))) == (
            counts[(operation, "allow")],
            counts[(operation, "deny")],
        ), line
        if counts[(operation, "deny")]:
            top = max(n for (op, _), n in unmet.items() if op == operation)
            assert rest[0].startswith("#") and re.findall(r"\(([\d,]+)\)", line)[0] == f"{top:,}", line
    summary = json.loads((decided.out_folder / "run.json").read_text())["summary"]
    assert {(s["operation"], s["allowed"], s["denied"]) for s in summary} == {
        (op, counts[(op, "allow")], counts[(op, "deny")]) for op in operations
    }


def test_privilog_decide_writes_the_pipeline_s_rows_without_spark(
    decided: Decided, deployment: Deployment, tmp_path: Path
) -> None:
    """``privilog decide`` (in process, no Spark) over the same log: the same rows, column for column
    (the grant named for each requirement included), and the same rows rejected."""
    world = tmp_path / "world"
    world.mkdir()
    for table in ("entities", "grants", "members"):
        rows = deployment.good[table]
        with (world / f"{table}.csv").open("w", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    out, rejects = tmp_path / "decisions.jsonl", tmp_path / "rejects.csv"
    requests = table_path(deployment.folders["csv"], "requests", "csv")
    argv = ["decide", str(requests), "--world", str(world), "--out", str(out), "--rejects", str(rejects)]
    assert main(argv) == 0

    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        return (
            *(row[c] or None for c in ("principal", "operation", "entity", "args", "timestamp", "decision")),
            tuple((u["requirement"], u["text"], tuple(u["lacking"])) for u in row["unmet"]),
            tuple(row["bypass"]),
            tuple(row["denied_by"]),
            tuple((g["requirement"], g["principal"], g["action"], g["entity"]) for g in row["allowed_by"]),
        )

    mine = [json.loads(line) for line in out.read_text().splitlines()]
    assert collections.Counter(map(key, mine)) == collections.Counter(map(key, decided.decisions))
    theirs = {r["row_number"] for r in decided.rejects if r["table"] == "requests"}
    assert {int(r["line"]) - 1 for r in _rows(rejects)} == theirs  # a line, after the header; a row of data


def test_an_allowed_decision_names_grants_of_the_world(decided: Decided, deployment: Deployment) -> None:
    granted = {(r["principal"], r["action"], r["entity"]) for r in deployment.good["grants"]}
    allowed = [r for r in decided.decisions if r["decision"] == "allow"]
    assert sum(bool(r["allowed_by"]) for r in allowed) > len(allowed) / 2
    for row in allowed:
        for grant in row["allowed_by"]:
            held = (grant["principal"], grant["action"], grant["entity"])
            assert held in granted or (grant["principal"], "ALL", grant["entity"]) in granted, row


def test_show_prints_the_decide_run(decided: Decided, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "pipeline", "show", str(decided.out_folder))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith("decide run ")
    assert lines[1].startswith("  policy   cdap (sha256 ")
    assert any(line.startswith("operation ") and "most often unmet" in line for line in lines)
    assert f"decisions (the first 5 of {REQUESTS:,} rows)" in lines
    assert lines[lines.index(f"decisions (the first 5 of {REQUESTS:,} rows)") + 1].split() == decided.columns


# ---- visibility -----------------------------------------------------------------------


def test_visibility_lists_what_the_reference_engine_shows(
    deployment: Deployment, spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys,
        "pipeline",
        "visibility",
        *deployment.paths("json", "entities", "grants", "members"),
        "--out",
        str(tmp_path / "out"),
        "--out-format",
        "csv",
        "--quiet",
    )
    assert code == 0
    assert sorted(p.name for p in (tmp_path / "out" / "visibility").glob("part-*"))[0].endswith(".csv")
    rows = _shown(tmp_path / "out", "visibility")
    assert list(rows[0]) == ["principal", "entity", "type", "action", "granted_entity", "holder"]
    bad = sum(len(deployment.bad[t]) for t in ("entities", "grants", "members"))
    assert out.startswith(f"{len(rows):,} (principal, entity) pairs visible; {bad} rows rejected;")
    assert len(_shown(tmp_path / "out", "rejects")) == bad
    authz = _reference(deployment)
    busiest = [p for p, _ in collections.Counter(r["principal"] for r in rows).most_common(2)]
    quiet = sorted(authz.world.principals() - set(busiest))[:1]
    for principal in [*busiest, *quiet]:
        expected = {str(v.entity) for t in authz.listable_types() for v in authz.visible(principal, t)}
        assert {r["entity"] for r in rows if r["principal"] == principal} == expected, principal


# ---- impact ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Impact:
    code: int
    out: str
    changes: list[dict[str, Any]]
    by_operation: list[dict[str, Any]]
    rejects: list[dict[str, Any]]


@pytest.fixture(scope="module")
def impact(deployment: Deployment, spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Impact:
    """``privilog pipeline impact cdap-4.2 cdap`` over the Parquet deployment, written as JSON lines."""
    out = tmp_path_factory.mktemp("impact") / "out"
    code, printed = _main(
        [
            "pipeline",
            "impact",
            "cdap-4.2",
            "cdap",
            *deployment.paths("parquet", *TABLES),
            "--out",
            str(out),
            "--out-format",
            "json",
            "--quiet",
        ]
    )
    return Impact(code, printed, _shown(out, "changes"), _shown(out, "by_operation"), _shown(out, "rejects"))


def test_impact_counts_by_operation_agree_with_its_changes(impact: Impact) -> None:
    assert impact.changes, "cdap-4.2 and cdap decide some requests differently"
    assert impact.code == 1
    assert set(impact.changes[0]) == {
        *("principal", "operation", "entity", "args", "requests"),
        *("decision_a", "decision_b", "unmet_a", "unmet_b"),
    }
    assert set(impact.by_operation[0]) == {"operation", "compared", "allow_to_deny", "deny_to_allow", "log_rows"}
    for row in impact.by_operation:
        mine = [c for c in impact.changes if c["operation"] == row["operation"]]
        assert row["allow_to_deny"] == sum(c["decision_a"] == "allow" for c in mine), row
        assert row["deny_to_allow"] == sum(c["decision_a"] == "deny" for c in mine), row
        assert row["log_rows"] == sum(c["requests"] for c in mine), row
        assert row["compared"] >= row["log_rows"], row
    assert {c["operation"] for c in impact.changes} <= {r["operation"] for r in impact.by_operation}
    assert sum(r["compared"] for r in impact.by_operation) <= REQUESTS
    assert f"\n{len(impact.changes):,} changed; {len(impact.rejects):,} rows rejected;" in impact.out


def test_impact_changes_agree_with_decide_and_with_the_reference_engine(
    impact: Impact, decided: Decided, deployment: Deployment
) -> None:
    # cdap's side of each change is what `decide` decided for the same request (read from CSV, not Parquet)
    decisions = collections.defaultdict(set)
    for row in decided.decisions:
        decisions[(row["principal"], row["operation"], row["entity"], row["args"] or None)].add(row["decision"])
    for change in impact.changes:
        assert change["decision_a"] != change["decision_b"], change
        key = (change["principal"], change["operation"], change["entity"], change["args"] or None)
        assert decisions[key] == {change["decision_b"]}, change
    # and cdap-4.2's side is what the reference engine decides under cdap-4.2
    authz = _reference(deployment, "cdap-4.2")
    for change in impact.changes:
        args = json.loads(change["args"] or "{}")
        decision = authz.check(authz.request(change["principal"], change["operation"], change["entity"], args))
        assert ("allow" if decision.allowed else "deny", sorted(o.id for o in decision.unmet)) == (
            change["decision_a"],
            sorted(u["requirement"] for u in change["unmet_a"]),
        ), change


def test_impact_rejects_each_bad_row_once(impact: Impact, deployment: Deployment) -> None:
    """A bad row of the world is rejected once, however many policies read it; a request once per policy."""
    world = collections.Counter(
        (r["table"], json.dumps(_plain(json.loads(r["row"])), sort_keys=True))
        for r in impact.rejects
        if r["table"] != "requests"
    )
    expected = collections.Counter(
        (table, json.dumps(_plain(row), sort_keys=True))
        for table in ("entities", "grants", "members")
        for row in deployment.bad[table]
    )
    assert world == expected
    authz = _reference(deployment, "cdap-4.2")
    by_policy = collections.defaultdict(list)
    for reject in impact.rejects:
        if reject["table"] == "requests":
            policy = reject["reason"].partition(": ")[0]
            by_policy[policy].append(json.loads(reject["row"]))
    assert set(by_policy) == {"cdap-4.2", "cdap"}
    bad = sorted(json.dumps(_plain(r), sort_keys=True) for r in deployment.bad["requests"])
    assert sorted(json.dumps(_plain(r), sort_keys=True) for r in by_policy["cdap"]) == bad
    for row in by_policy["cdap-4.2"]:
        with pytest.raises(RequestError):
            authz.request(row["principal"], row["operation"], row["entity"], json.loads(row.get("args") or "{}"))


# ---- bad input ------------------------------------------------------------------------


def test_a_missing_input_file_is_one_line_and_exit_2(
    deployment: Deployment, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere" / "grants.csv"
    code, _, err = run(
        capsys,
        "pipeline",
        "decide",
        *deployment.paths("csv", "entities", "requests"),
        "--grants",
        str(missing),
        "--out",
        str(tmp_path / "out"),
        "--quiet",
    )
    assert code == 2
    assert err == f"privilog: {missing}: no such file or folder (the grants table)\n"


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_missing_column_is_one_line_and_exit_2(
    fmt: str, deployment: Deployment, spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    grants = table_path(tmp_path, "grants", fmt)
    if fmt == "csv":
        grants.write_text("principal,entity\nuser:a,namespace:ns1\n", encoding="utf-8")
    elif fmt == "json":
        grants.write_text('{"principal": "user:a", "entity": "namespace:ns1"}\n', encoding="utf-8")
    else:
        spark.createDataFrame([("user:a", "namespace:ns1")], "principal string, entity string").write.parquet(
            str(grants)
        )
    code, out, err = run(
        capsys,
        "pipeline",
        "visibility",
        "--entities",
        str(table_path(deployment.folders["csv"], "entities", "csv")),
        "--grants",
        str(grants),
        "--out",
        str(tmp_path / "out"),
        "--quiet",
    )
    assert code == 2, out + err
    assert err.count("\n") == 1 and err.startswith(f"privilog: {grants}: the grants table needs the columns"), err
    assert "missing action" in err


def _decide_small(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], world: dict[str, Any], requests: list[tuple[str, str, str, str]],
    *options: str,
) -> dict[tuple[str, str, str, str], str]:
    """``pipeline decide`` over a small world and log written as CSV: each request's decision, by
    (principal, operation, entity, args)."""
    tables = {
        "entities": (["entity"], [[e] for e in world["entities"]]),
        "grants": (["principal", "action", "entity"], world["grants"]),
        "members": (["principal", "group"], world.get("members", [])),
        "requests": (["principal", "operation", "entity", "args"], [list(r) for r in requests]),
    }
    for name, (header, rows) in tables.items():
        with (tmp_path / f"{name}.csv").open("w", newline="") as f:
            csv.writer(f).writerows([header, *rows])
    out = tmp_path / "run"
    argv = [f"--{name}={tmp_path / f'{name}.csv'}" for name in tables]
    code, _, err = run(capsys, "pipeline", "decide", *argv, *options, "--out", str(out), "--out-format", "json", "--quiet")
    assert code == 0, err
    return {(r["principal"], r["operation"], r["entity"], r["args"] or ""): r["decision"] for r in _shown(out, "decisions")}


def _agree(decided: dict[tuple[str, str, str, str], str], reference: Authorizer, requests: list[tuple[str, str, str, str]]) -> None:
    for principal, operation, entity, args in requests:
        expected = reference.check(reference.request(principal, operation, entity, json.loads(args) if args else {}))
        assert decided[(principal, operation, entity, args)] == ("allow" if expected.allowed else "deny"), (principal, entity)


def _decisions_under(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], policy: Path, world: dict[str, Any], requests: list[tuple[str, str, str, str]]
) -> list[str]:
    """The pipeline's decision of each request under a policy file, each checked against the reference's."""
    decided = _decide_small(tmp_path, capsys, world, requests, "--policy", str(policy))
    _agree(decided, privilog.load(str(policy), world), requests)
    return [decided[r] for r in requests]


def test_settings_and_wildcard_grants_decide_as_the_reference_decides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--config` (a superuser) and wildcard grants (a group's, a create's, an argument's), end to end."""
    world = {
        "config": {"superusers": ["user:root"]},
        "entities": ["dataset:ns1.sales.2024", "dataset:ns1.hr", "program:ns1.app.service.api", "artifact:ns1.etl"],
        "grants": [
            ["user:alice", "READ", "dataset:ns1.sales.*"],
            ["group:eng", "EXECUTE", "program:ns1.app.*.*"],
            ["user:carol", "ADMIN", "dataset:ns?.new*"],
            ["user:dave", "ADMIN", "application:ns1.*"],
            ["user:dave", "READ", "artifact:ns1.e?l"],
        ],
        "members": [["user:bob", "group:eng"]],
    }
    requests = [
        ("user:alice", "dataset.read", "dataset:ns1.sales.2024", ""),
        ("user:alice", "dataset.read", "dataset:ns1.hr", ""),
        ("user:bob", "program.start", "program:ns1.app.service.api", ""),
        ("user:carol", "dataset.create", "dataset:ns2.newone", ""),
        ("user:carol", "dataset.create", "dataset:ns2.old", ""),
        ("user:dave", "application.deploy", "application:ns1.new", '{"artifact": "artifact:ns1.etl"}'),
        ("user:dave", "application.deploy", "application:ns1.new", '{"artifact": "artifact:ns1.other"}'),
        ("user:root", "namespace.delete", "namespace:ns1", ""),
        ("user:alice", "namespace.get", "namespace:ns1", ""),
    ]
    (tmp_path / "config.yaml").write_text("superusers: [user:root]\n")
    decided = _decide_small(tmp_path, capsys, world, requests, "--config", str(tmp_path / "config.yaml"))
    _agree(decided, privilog.load("cdap", world), requests)
    assert sorted(decided.values()).count("allow") == 6
    bypass = {(r["principal"], r["entity"]): r["bypass"] for r in _shown(tmp_path / "run", "decisions")}
    assert bypass[("user:root", "namespace:ns1")] == ["superuser"]
    assert sum(1 for reasons in bypass.values() if reasons) == 1, "only the superuser's decision names a bypass"
    code, _, err = run(
        capsys, "pipeline", "decide", f"--entities={tmp_path / 'entities.csv'}", f"--grants={tmp_path / 'grants.csv'}",
        f"--requests={tmp_path / 'requests.csv'}", "--config", str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "r2"),
    )  # fmt: skip
    assert code == 2 and "nope.yaml" in err and err.count("\n") == 1


def test_requirements_met_by_the_policys_rules_decide_as_the_reference_decides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`by NAME` options (tests/engine/test_by_rules.py's policy): met by a rule, by a grant, or neither."""
    here = Path(__file__).parents[1] / "engine"
    policy = here / "by_rules.policy"
    world = yaml.safe_load((here / "by_rules_world.yaml").read_text())
    owner = '{"owner": "kerberosprincipal:alice@EX.COM"}'
    requests = [
        ("user:alice", "namespace.create", "namespace:new", owner),
        ("user:bob", "namespace.create", "namespace:new", owner),
        ("user:carol", "namespace.get", "namespace:ns1", ""),
        ("user:dave", "namespace.get", "namespace:ns1", ""),
        ("user:dave", "dataset.read", "dataset:ns1.d", ""),
    ]
    assert _decisions_under(tmp_path, capsys, policy, world, requests) == ["allow", "deny", "allow", "deny", "allow"]


def test_a_policys_own_patterns_match_in_the_pipeline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`matches(E, "dataset:*.system.queue*")` in a policy's rule: the pipeline matches it as the reference does."""
    policy = Path(__file__).parents[1] / "engine" / "system_datasets.policy"
    world = {"entities": ["dataset:ns1.system.queue.a", "dataset:ns1.d"], "grants": [["user:y", "ADMIN", "dataset:ns1.*"]]}
    requests = [
        ("user:x", "dataset.create", "dataset:ns1.system.queue.a", ""),
        ("user:x", "dataset.create", "dataset:ns2.system.queue.b", ""),
        ("user:x", "dataset.create", "dataset:ns1.systemqueue", ""),
        ("user:y", "dataset.create", "dataset:ns1.systemqueue", ""),
        ("user:x", "dataset.read", "dataset:ns1.system.queue.a", ""),
    ]
    assert _decisions_under(tmp_path, capsys, policy, world, requests) == ["allow", "allow", "deny", "allow", "deny"]


def test_a_rule_comparing_names_decides_in_the_pipeline_as_the_reference_decides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`name_of(P, N), name_of(K, N)`: a principal's name against an argument's, ids the world does not name included."""
    policy = Path(__file__).parents[1] / "engine" / "own_principal.policy"
    world = {
        "entities": ["namespace:ns1"],
        "grants": [[p, "ADMIN", "namespace:new"] for p in ("user:alice@EX.COM", "user:bob", "user:carol@EX.COM")],
    }
    owner = '{"owner": "kerberosprincipal:%s"}'
    requests = [
        ("user:alice@EX.COM", "namespace.create", "namespace:new", owner % "alice@EX.COM"),
        ("user:bob", "namespace.create", "namespace:new", owner % "alice@EX.COM"),
        ("user:carol@EX.COM", "namespace.create", "namespace:new", owner % "carol@EX.COM"),
        ("user:dan@EX.COM", "namespace.create", "namespace:new", owner % "dan@EX.COM"),
    ]
    assert _decisions_under(tmp_path, capsys, policy, world, requests) == ["allow", "deny", "allow", "deny"]


def test_cdap_5_1_lists_and_bypasses_decide_as_the_reference_decides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """cdap-5.1 end to end: a deploy's lists of datasets and streams (each needs ADMIN), a policy's own
    bypass named in the decisions (CDAP's queue datasets), and the owner's rule reading no owners."""
    world = {
        "entities": ["namespace:ns1", "artifact:ns1.etl"],
        "grants": [
            ["user:ann", "ADMIN", "application:ns1.app"],
            ["user:ann", "READ", "artifact:ns1.etl"],
            ["user:ann", "ADMIN", "dataset:ns1.a$Inner"],
            ["user:ann", "ADMIN", "dataset:ns1.stage_*"],
            ["user:ann", "ADMIN", "stream:ns1.s"],
        ],
    }
    deploy = ("user:ann", "application.deploy", "application:ns1.app")
    requests = [
        (*deploy, json.dumps({"artifact": "artifact:ns1.etl", "datasets": ["dataset:ns1.a$Inner", "dataset:ns1.stage_1"]})),
        (*deploy, json.dumps({"artifact": "artifact:ns1.etl", "datasets": ["dataset:ns1.a$Inner", "dataset:ns1.b"]})),
        (*deploy, json.dumps({"artifact": "artifact:ns1.etl", "streams": ["stream:ns1.s"], "datasets": []})),
        (*deploy, json.dumps({"artifact": "artifact:ns1.etl", "streams": "stream:ns1.t"})),
        ("user:nobody", "dataset.create", "dataset:ns1.system.queue.q1", ""),
        ("user:nobody", "namespace.get", "namespace:ns1", ""),
    ]
    decided = _decide_small(tmp_path, capsys, world, requests, "--policy", "cdap-5.1")
    _agree(decided, privilog.load("cdap-5.1", world), requests)
    assert [decided[r] for r in requests] == ["allow", "deny", "allow", "deny", "allow", "deny"]
    rows = {(r["entity"], r["args"] or ""): r for r in _shown(tmp_path / "run", "decisions")}
    lacking = rows[("application:ns1.app", requests[1][3])]["unmet"]
    expected = [("ADMIN on every $datasets or by impersonated", ["dataset:ns1.b"])]  # no owner: not impersonated
    assert [(u["text"], u["lacking"]) for u in lacking] == expected
    assert rows[("dataset:ns1.system.queue.q1", "")]["bypass"] == ["CDAP's own dataset in a user namespace"]


def test_a_policys_own_deny_rules_are_named_in_the_decisions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A blocklist's two deny rules: a request denied by one, by the other, by both, by neither (allowed, or
    denied for an unmet requirement); denied_by names each rule's place as the reference's decision does."""
    policy = Path(__file__).parent / "blocklist.policy"
    world = {
        "entities": ["dataset:ns1.secret", "dataset:ns1.d"],
        "grants": [["user:mallory", "READ", "dataset:ns1.*"], ["user:alice", "READ", "dataset:ns1.*"]],
    }
    requests = [
        ("user:mallory", "dataset.read", "dataset:ns1.secret", ""),
        ("user:mallory", "dataset.read", "dataset:ns1.d", ""),
        ("user:alice", "dataset.read", "dataset:ns1.secret", ""),
        ("user:alice", "dataset.read", "dataset:ns1.d", ""),
        ("user:bob", "dataset.read", "dataset:ns1.d", ""),
    ]
    assert _decisions_under(tmp_path, capsys, policy, world, requests) == ["deny", "deny", "deny", "allow", "deny"]
    rows = {(r["principal"], r["entity"]): r for r in _shown(tmp_path / "run", "decisions")}
    blocked, quarantined = (f"{os.path.relpath(policy)}:{line}" for line in (11, 12))
    got = [rows[(p, e)]["denied_by"] for p, _, e, _ in requests]
    assert got == [[blocked, quarantined], [blocked], [quarantined], [], []]
    assert [rows[(p, e)]["unmet"] == [] for p, _, e, _ in requests] == [True, True, True, True, False]
    reference = privilog.load(str(policy), world)
    for principal, operation, entity, _ in requests:
        decision = reference.check(reference.request(principal, operation, entity))
        assert rows[(principal, entity)]["denied_by"] == sorted(d.at for d in decision.denied_by)


def test_a_dataset_type_resolved_by_its_last_name_decides_as_the_reference_decides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """cdap-5.1's `last_name_of`: a type of a system type's name needs no privilege in any namespace."""
    policy = Path(__file__).parents[2] / "rules" / "cdap-5.1.policy"
    world = {
        "entities": ["dataset_type:system.table", "dataset_type:ns1.kvTable", "dataset_type:ns1.Custom", "dataset:system.Meta"],
        "grants": [["user:alice", "ADMIN", "dataset:ns1.new"]],
    }
    kind = '{"dataset_type": "dataset_type:%s"}'
    requests = [
        ("user:alice", "dataset.create", "dataset:ns1.new", kind % t)
        for t in ("system.table", "ns1.table", "ns9.table", "ns1.Custom", "ns1.Meta", "ns1.kvTable")
    ]
    assert _decisions_under(tmp_path, capsys, policy, world, requests) == ["allow", "allow", "allow", "deny", "deny", "deny"]
