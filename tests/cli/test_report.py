"""`privilog test --report`: every policy in rules/ against its conformance table."""

from __future__ import annotations

import contextlib
import io
import re
import shutil
from pathlib import Path

import pytest

from privilog import dsl
from privilog.cli import main
from privilog.testing.conformance import conformance_report, render_report

ROOT = Path(__file__).resolve().parents[2]
TABLES = ROOT / "tests" / "conformance"
SHIPPED = sorted(p.stem for p in dsl.rules_dir().glob("*.policy"))
ROW = re.compile(
    r"^\| `(?P<policy>[^`]+)` +\| (?P<seeds>[^|]+?) +\| (?P<rows>\d+) +\| (?P<covered>\d+) +\| "
    r"(?P<passing>\d+) +\| (?P<status>[^|]+?) +\|$"
)


@pytest.fixture(scope="module")
def shipped_report() -> tuple[int, str]:
    """The report of the shipped policies, run once, from the repository root as a user would."""
    out = io.StringIO()
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(out):
        code = main(["test", "--report"])
    return code, out.getvalue()


def rows_of(text: str) -> dict[str, dict[str, str]]:
    return {m["policy"]: m.groupdict() for line in text.splitlines() if (m := ROW.match(line))}


def test_every_shipped_policy_passes_its_table(shipped_report: tuple[int, str]) -> None:
    code, out = shipped_report
    assert code == 0, out
    table = rows_of(out)
    assert sorted(table) == SHIPPED
    for policy, row in table.items():
        assert row["status"] == "ok", policy
        assert int(row["rows"]) > 40, policy
        assert row["rows"] == row["covered"] == row["passing"], policy
    assert table["cdap"]["seeds"] == "003, 004"
    assert table["cdap-4.2"]["seeds"] == table["cdap-proposed"]["seeds"] == "001"
    assert "Failing" not in out


def test_the_report_is_a_markdown_table(shipped_report: tuple[int, str]) -> None:
    _, out = shipped_report
    lines = out.splitlines()
    assert lines[0].startswith("Conformance of the policies in ")
    header = next(i for i, line in enumerate(lines) if line.startswith("| policy"))
    assert [c.strip() for c in lines[header].strip("|").split("|")] == [
        "policy",
        "seed(s)",
        "documented rows",
        "covered",
        "passing",
        "status",
    ]
    assert set(lines[header + 1]) <= {"|", "-"}
    assert len({len(line) for line in lines[header : header + 2 + len(SHIPPED)]}) == 1  # aligned columns
    total = sum(int(r["rows"]) for r in rows_of(out).values())
    assert f"{len(SHIPPED)} policies, {total} documented rows, {total} passing" in out


# ---- a broken policy ----------------------------------------------------------------------------


def broken_rules(tmp_path: Path) -> Path:
    """A rules folder holding a copy of cdap-proposed that starts programs on READ and has no
    securekey.read, a policy without a table, and one that does not parse."""
    rules = tmp_path / "rules"
    shutil.copytree(dsl.rules_dir() / "prelude", rules / "prelude")
    text = (dsl.rules_dir() / "cdap-proposed.policy").read_text(encoding="utf-8")
    text = text.replace("  start requires EXECUTE\n", "  start requires READ\n")
    text = text.replace('  # "Read: Not Documented | READ (on the key)"\n  read requires READ\n', "")
    assert "start requires READ" in text and "securekey:\n" in text and "  read requires READ\n" in text
    (rules / "cdap-proposed.policy").write_text(text, encoding="utf-8")
    (rules / "mine.policy").write_text("actions READ\nentity namespace in instance\n", encoding="utf-8")
    (rules / "cdap-draft.policy").write_text(
        "actions READ\nentity namespace in instance\nnamespace:\n  get requires READ on\n"
    )
    return rules


def test_a_broken_copy_shows_its_failing_rows(tmp_path: Path) -> None:
    rules = broken_rules(tmp_path)
    reports = {r.policy: r for r in conformance_report(TABLES, rules)}
    assert sorted(reports) == ["cdap-draft", "cdap-proposed", "mine"]
    proposed = reports["cdap-proposed"]
    assert not proposed.ok and proposed.status == "FAIL"
    failing = {r.operation: r for r in proposed.results if not r.passed}
    assert proposed.rows == 56
    assert proposed.covered == proposed.rows - ("securekey.read" in failing)
    assert "program.start" in failing
    assert any("denied with EXECUTE on program:" in p for p in failing["program.start"].problems)
    assert failing["securekey.read"].problems == ("the policy has no such operation",)
    assert proposed.passing == proposed.rows - len(failing)
    assert reports["mine"].status == "no table"
    assert reports["cdap-draft"].status == "does not load"

    text = render_report(list(reports.values()))
    table = rows_of(text)
    assert table["cdap-proposed"]["status"] == "FAIL"
    assert table["cdap-proposed"]["covered"] == "55"
    assert table["mine"]["seeds"] == "-" and table["mine"]["rows"] == "0"
    below = text.split("Failing:")[1]
    assert "  cdap-proposed  program.start: denied with EXECUTE on program:ns1.app.service.api" in below
    assert "  cdap-proposed  securekey.read: the policy has no such operation" in below
    assert "  mine: no conformance table" in below
    assert re.search(r"  cdap-draft: .*cdap-draft\.policy:4", below)


def test_the_command_exits_1_when_a_row_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = broken_rules(tmp_path)
    (rules / "cdap-draft.policy").unlink()
    (rules / "mine.policy").unlink()
    monkeypatch.setattr(dsl, "rules_dir", lambda: rules)
    code = main(["test", "--report", "--tables", str(TABLES)])
    out, err = capsys.readouterr()
    assert code == 1, err
    assert rows_of(out)["cdap-proposed"]["status"] == "FAIL"
    assert "program.start" in out.split("Failing:")[1]


# ---- usage ----------------------------------------------------------------------------------------


def test_test_needs_scenarios_or_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["test"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip() == "privilog: test: give SCENARIO.yaml files, or --report (see `privilog test --help`)"


def test_a_missing_tables_folder_is_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # no tests/conformance here
    assert main(["test", "--report"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert "no conformance tables: `tests/conformance` is not a folder" in err


def test_a_table_that_cannot_be_read_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.yaml").write_text("policy: cdap\nworld: {}\nsubjects: {}\nrows:\n  - operation: x.y\n")
    assert main(["test", "--report", "--tables", str(tmp_path)]) == 2
    _, err = capsys.readouterr()
    assert "bad.yaml: row 1 (x.y): `requires` is a list of conjuncts" in err
