"""The command line as a user meets it: exit codes, one-line errors, JSON, scenario runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from privilog.cli import main

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "privilog" / "samples" / "world.yaml")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_check_allows_with_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "check", "user:bob", "dataset.read", "dataset:sales.orders", "--world", SAMPLE)
    assert code == 0
    assert out.startswith("ALLOW user:bob dataset.read dataset:sales.orders")


def test_check_denies_with_exit_1_and_names_the_unmet_requirement(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "check", "user:bob", "dataset.write", "dataset:sales.orders", "--world", SAMPLE)
    assert code == 1
    assert out.strip() == "DENY user:bob dataset.write dataset:sales.orders: unmet: WRITE"


def test_check_json_has_stable_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "check", "user:carol", "application.deploy", "application:sales.reports",
        "--arg", "artifact=artifact:sales.etl-lib", "--world", SAMPLE, "--json",
    )
    assert code == 0
    data = json.loads(out)
    assert list(data) == ["request", "decision", "policy", "requirements", "fixes", "remaining"]
    assert data["decision"] == "allow"
    met = [r for r in data["requirements"] if r["applies"]]
    assert all(r["met"] for r in met)
    artifact = next(r for r in met if r["requirement"] == "any on $artifact")
    assert artifact["witnesses"][0] == {
        "action": "READ", "entity": "artifact:sales.etl-lib", "holder": "role:deployers",
        "groups": ["user:carol", "role:deployers"], "inside": [],
    }


def test_an_arg_given_again_is_a_list(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    world = tmp_path / "world.yaml"
    world.write_text(
        "grants:\n  - [user:u, ADMIN, application:ns1.app]\n  - [user:u, READ, artifact:ns1.etl]\n"
        "  - [user:u, ADMIN, 'dataset:ns1.d$Inner']\n",
        encoding="utf-8",
    )
    base = ["user:u", "application.deploy", "application:ns1.app", "--policy", "cdap-5.1", "--world", str(world)]
    base += ["--arg", "artifact=artifact:ns1.etl", "--arg", "datasets=dataset:ns1.d$Inner"]
    code, out, _ = run(capsys, "check", *base, "--json")
    assert code == 0 and json.loads(out)["request"]["args"]["datasets"] == ["dataset:ns1.d$Inner"]
    code, out, _ = run(capsys, "why", *base, "--arg", "datasets=dataset:ns1.e")
    assert code == 1
    assert "ADMIN on every $datasets or by impersonated: UNMET" in out
    assert "user:u lacks it on 1 of 2 entities: dataset:ns1.e" in out
    assert "grant ADMIN on dataset:ns1.e to user:u" in out
    code, _, err = run(capsys, "check", *base, "--arg", "artifact=artifact:ns1.other")
    assert code == 2
    assert err.strip() == "privilog: `$artifact` of `application.deploy` names one artifact, not a list"


def test_why_denied_lists_fix(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "why", "user:bob", "dataset.write", "dataset:sales.orders", "--world", SAMPLE)
    assert code == 1
    assert "WRITE: UNMET" in out
    assert "grant WRITE on dataset:sales.orders to user:bob" in out


def test_why_json_carries_fixes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "why", "user:bob", "dataset.write", "dataset:sales.orders", "--world", SAMPLE, "--json")
    assert code == 1
    assert json.loads(out)["fixes"] == [
        [{"grant": {"principal": "user:bob", "action": "WRITE", "entity": "dataset:sales.orders"}}]
    ]


def test_list_shows_each_entity_with_its_reason(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "list", "user:dave", "namespace", "--world", SAMPLE)
    assert code == 0
    assert out.strip() == (
        "namespace:marketing  (because user:dave is in group:analysts, which holds READ on "
        "dataset:marketing.campaigns, which is in namespace:marketing)"
    )


def test_list_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "list", "user:bob", "dataset", "--in", "namespace:sales", "--world", SAMPLE, "--json")
    assert code == 0
    data = json.loads(out)
    assert [v["entity"] for v in data["visible"]] == ["dataset:sales.orders"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["check", "user:bob", "dataset.reed", "dataset:ns1.ds"], "did you mean `dataset.read`?"),
        (["check", "user:bob", "reed", "dataset:ns1.ds"], "operations are written TYPE.NAME"),
        (["check", "user:bob", "dataset.read", "dataset:"], "malformed dataset id `dataset:`"),
        (["check", "user:bob", "dataset.read", "datset:ns1.ds"], "did you mean `dataset`?"),
        (["check", "user:bob", "dataset.read", "ns1.ds"], "expected TYPE:NAME"),
        (["check", "bob", "dataset.read", "dataset:ns1.ds"], "did you mean `user:bob`?"),
        (["check", "user:bob", "dataset.read", "stream:ns1.s"], "acts on a dataset, but `stream:ns1.s` is a stream"),
        (["check", "user:bob", "application.deploy", "application:ns1.a", "--arg", "artefact=artifact:ns1.x"],
         "takes $artifact, $new_artifact, $owner; not `$artefact`"),
        (["check", "user:bob", "application.deploy", "application:ns1.a", "--arg", "artifact=dataset:ns1.x"],
         "names an artifact, not `dataset:ns1.x`"),
        (["check", "user:bob", "application.deploy", "application:ns1.a", "--arg", "new_artifact=maybe"],
         "is true or false"),
        (["check", "user:bob", "application.deploy", "application:ns1.a", "--arg", "artifact"], "--arg takes NAME=VALUE"),
        (["check", "user:bob", "dataset.read", "dataset:ns1.ds", "--policy", "nope"], "no policy `nope`"),
        (["check", "user:bob", "dataset.read", "dataset:ns1.ds", "--world", "missing.yaml"], "no such world file"),
        (["check", "user:bob"], "the following arguments are required"),
        (["frobnicate"], "unknown command `frobnicate`: the commands are check, why"),
        (["list", "user:bob", "datasets"], "did you mean `dataset`?"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert message in err
    assert err.startswith("privilog: ")
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_world_with_a_wrong_action_names_file_line_and_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    world = tmp_path / "w.yaml"
    world.write_text("entities: [namespace:ns1]\ngrants:\n  - [user:alice, ADMN, namespace:ns1]\n")
    code, out, err = run(capsys, "check", "user:alice", "namespace.get", "namespace:ns1", "--world", str(world))
    assert code == 2
    assert out == ""
    assert err.strip() == f"privilog: {world}:3:18: unknown action `ADMN`: did you mean `ADMIN`?"


def test_world_with_a_bad_id_and_bad_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    world = tmp_path / "w.yaml"
    world.write_text("entities: [program:ns1.app.api]\n")
    code, _, err = run(capsys, "list", "user:a", "--world", str(world))
    assert code == 2
    assert err.startswith(f"privilog: {world}:1:12: malformed program id `program:ns1.app.api`")
    world.write_text("grants: [[user:a, READ\n")
    code, _, err = run(capsys, "list", "user:a", "--world", str(world))
    assert code == 2
    assert "not valid YAML or JSON" in err


def test_a_policy_with_a_typo_is_located_and_never_allows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "typo.policy"
    policy.write_text(
        "policy typo\nactions READ, ADMIN\nentity instance\nentity namespace in instance\n"
        "namespace:\n  get requires READD\n"
    )
    code, out, err = run(capsys, "check", "user:a", "namespace.get", "namespace:ns1", "--policy", str(policy))
    assert code == 2
    assert out == ""
    first = err.splitlines()[0]
    assert first == f"privilog: {policy}:6:16: error: unknown action `READD`"
    assert "did you mean `READ`?" in err


def test_fmt_prints_canonical_text_and_check_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "p.policy"
    policy.write_text("policy p\nactions READ\nentity instance\nentity namespace in instance\nnamespace:\n get   requires READ\n")
    code, out, _ = run(capsys, "fmt", "--check", str(policy))
    assert code == 1
    assert "not in canonical form" in out
    code, out, _ = run(capsys, "fmt", str(policy))
    assert code == 0
    assert "  get requires READ\n" in out
    policy.write_text(out)
    code, _, _ = run(capsys, "fmt", "--check", str(policy))
    assert code == 0


def test_test_command_reports_failures_and_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "policy: cdap\n"
        "world: {grants: [[user:a, READ, dataset:ns1.ds]]}\n"
        "cases:\n"
        "  - name: reads\n"
        "    request: {principal: user:a, operation: dataset.read, entity: dataset:ns1.ds}\n"
        "    expect: allow\n"
        "  - name: wrongly expects write\n"
        "    request: {principal: user:a, operation: dataset.write, entity: dataset:ns1.ds}\n"
        "    expect: allow\n"
    )
    code, out, _ = run(capsys, "test", str(scenario))
    assert code == 1
    lines = out.strip().splitlines()
    assert lines[-1] == "1 passed, 1 failed"
    assert lines[0].startswith(f"{scenario}:7:5: FAIL wrongly expects write: expected allow, got DENY")


def test_test_command_reports_a_bad_case_as_an_error_with_a_location(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text("cases:\n  - request: {principal: user:a, operation: dataset.read, entity: dataset:ns1.ds}\n    expect: alow\n")
    code, out, err = run(capsys, "test", str(scenario))
    assert code == 2 and err == ""
    first, summary = out.strip().splitlines()
    assert first == f"{scenario}:2:5: ERROR case 1: {scenario}:3:13: " + first.split(":3:13: ", 1)[1]
    assert first.split(":3:13: ", 1)[1].startswith("expect is `allow`, `deny`")
    assert summary == "0 passed, 0 failed, 1 error"


BAD_CASES = """\
policy: cdap
world: {entities: [dataset:ns1.ds], grants: [[user:a, READ, dataset:ns1.ds]]}
cases:
  - name: reads
    request: {principal: user:a, operation: dataset.read, entity: dataset:ns1.ds}
    expect: allow
  - name: a malformed id
    request: {principal: user:a, operation: dataset.read, entity: "dataset:ns1.d s"}
    expect: deny
  - name: an unknown action in its grants
    request: {principal: user:a, operation: dataset.read, entity: dataset:ns1.ds}
    grants: [[user:a, RAED, dataset:ns1.ds]]
    expect: allow
  - name: wrongly expects write
    request: {principal: user:a, operation: dataset.write, entity: dataset:ns1.ds}
    expect: allow
  - name: still runs after them
    request: {principal: user:b, operation: dataset.read, entity: dataset:ns1.ds}
    expect: deny
"""


def test_the_other_cases_and_files_run_after_a_bad_case_and_a_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(BAD_CASES)
    broken = tmp_path / "broken.yaml"
    broken.write_text("policy: no-such-policy\ncases: []\n")
    report = tmp_path / "junit.xml"
    code, out, _ = run(capsys, "test", str(broken), str(scenario), "--junit-xml", str(report))
    assert code == 2
    lines = out.strip().splitlines()
    assert lines[-1] == "2 passed, 1 failed, 3 errors"
    assert lines[0].startswith(f"{broken}:1:1: ERROR broken.yaml: ") and "no-such-policy" in lines[0]
    assert lines[1].startswith(f"{scenario}:7:5: ERROR a malformed id: ")
    assert lines[2].startswith(f"{scenario}:10:5: ERROR an unknown action in its grants: ") and "RAED" in lines[2]
    assert lines[3].startswith(f"{scenario}:14:5: FAIL wrongly expects write: expected allow, got DENY")
    import xml.etree.ElementTree as ET

    suites = ET.parse(report).getroot()
    assert (suites.get("tests"), suites.get("failures"), suites.get("errors")) == ("6", "1", "3")  # five cases and the file that could not run
    assert len(suites.findall(".//error")) == 3 and len(suites.findall(".//failure")) == 1

    code, out, _ = run(capsys, "test", str(scenario), "--json")
    cases = json.loads(out)["cases"]
    assert [c["status"] for c in cases] == ["passed", "error", "error", "failed", "passed"]
    assert json.loads(out)["totals"]["errors"] == 2


def test_shipped_scenarios_pass(capsys: pytest.CaptureFixture[str]) -> None:
    scenarios = sorted(str(p) for p in (ROOT / "tests" / "scenarios").glob("cdap*/*.yaml"))  # cdap, cdap-5.1
    scenarios.append(str(ROOT / "privilog" / "samples" / "scenario.yaml"))
    code, out, _ = run(capsys, "test", *scenarios)
    assert out.strip().endswith(" passed, 0 failed")
    assert code == 0


def test_console_script_runs_in_a_fresh_process() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "privilog", "check", "user:bob", "dataset.read", "dataset:sales.orders", "--world", SAMPLE],
        capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ALLOW")
