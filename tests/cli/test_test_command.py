"""`privilog test` as a policy author uses it: -v, -k, --json, --junit-xml, --coverage, and the
`who` and `because` expectations."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from privilog.cli import main
from privilog.testing.select import SelectionError, parse_selection

WORLD = """\
policy: cdap
world:
  entities: [namespace:ns1, dataset:ns1.ds, dataset:ns1.logs]
  grants:
    - [user:alice, ADMIN, namespace:ns1]
    - [user:alice, ADMIN, dataset:ns1.ds]
    - [user:alice, ADMIN, dataset:ns1.logs]
    - [user:bob, READ, dataset:ns1.ds]
    - [group:eng, WRITE, dataset:ns1.ds]
  members:
    - [user:carol, group:eng]
cases:
"""

TINY_POLICY = """\
policy tiny "A small policy for coverage"

actions READ, WRITE, ADMIN

entity instance
entity namespace in instance
entity dataset in namespace

namespace:
  get requires READ
dataset:
  read requires READ
  write requires WRITE
  drop requires ADMIN,
                ADMIN on parent

# reads are logged for who holds READ on a namespace
read_logged(P, E) :- grant(P, "READ", E), is_a(E, "namespace").
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def located(err: str) -> str:
    """A located error without the command's name, which it may start with (`privilog: FILE:LINE:COL: ...`)."""
    return err.removeprefix("privilog: ")


def bad_case_error(out: str, path: Path) -> str:
    """The error of the one case of a run that could not be run (named bad): its line says where the case is."""
    line, summary = out.strip().splitlines()
    assert summary == "0 passed, 0 failed, 1 error"
    prefix = f"{path}:"
    assert line.startswith(prefix) and ": ERROR bad: " in line, line
    return line.split(": ERROR bad: ", 1)[1]


def scenario(tmp_path: Path, cases: str, head: str = WORLD, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(head + cases)
    return path


def _where(path: Path, key: str, token: str) -> str:
    """``LINE:COL`` of the first ``token`` on the case's ``request:`` or ``expect:`` line."""
    lines = path.read_text().splitlines()
    number = next(i for i, line in enumerate(lines, start=1) if line.startswith(f"    {key}: "))
    return f"{number}:{lines[number - 1].index(token) + 1}"


THREE = """\
  - name: bob reads ds
    request: {principal: user:bob, operation: dataset.read, entity: dataset:ns1.ds}
    expect: allow
  - name: bob writes ds
    request: {principal: user:bob, operation: dataset.write, entity: dataset:ns1.ds}
    expect: allow
  - name: carol writes ds through eng
    request: {principal: user:carol, operation: dataset.write, entity: dataset:ns1.ds}
    expect: allow
"""


# ---- -v ---------------------------------------------------------------------------


def test_verbose_prints_every_case_with_pass_or_fail_and_its_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = scenario(tmp_path, THREE)
    code, out, _ = run(capsys, "test", "-v", str(path))
    assert code == 1
    lines = out.splitlines()
    assert re.fullmatch(rf"{re.escape(str(path))}:13:5: PASS bob reads ds \(\d+\.\d ms\)", lines[0])
    assert re.fullmatch(
        rf"{re.escape(str(path))}:16:5: FAIL bob writes ds \(\d+\.\d ms\): expected allow, got DENY .*unmet: WRITE",
        lines[1],
    )
    assert lines[2].startswith(f"{path}:19:5: PASS carol writes ds through eng (")
    assert lines[3] == "2 passed, 1 failed"


def test_without_verbose_only_failures_are_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "test", str(scenario(tmp_path, THREE)))
    assert code == 1
    assert [line.split(": ")[1] for line in out.splitlines()[:-1]] == ["FAIL bob writes ds"]


# ---- -k ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "ran"),
    [
        ("bob", ["bob reads ds", "bob writes ds"]),
        ("BOB WRITES", ["bob writes ds"]),  # words joined by a space are one substring, any case
        ("writes and not bob", ["carol writes ds through eng"]),
        ("reads or carol", ["bob reads ds", "carol writes ds through eng"]),
        ("not (bob and writes)", ["bob reads ds", "carol writes ds through eng"]),
    ],
)
def test_k_selects_cases_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], expression: str, ran: list[str]
) -> None:
    code, out, _ = run(capsys, "test", "--json", "-k", expression, str(scenario(tmp_path, THREE)))
    result = json.loads(out)
    assert [c["name"] for c in result["cases"]] == ran
    assert result["totals"]["deselected"] == 3 - len(ran)
    assert code == (1 if "bob writes ds" in ran else 0)


def test_k_counts_the_deselected_in_the_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "test", "-k", "reads", str(scenario(tmp_path, THREE)))
    assert code == 0
    assert out.strip() == "1 passed, 0 failed, 2 deselected"


def test_a_k_that_selects_nothing_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "test", "--json", "-k", "nobody", str(scenario(tmp_path, THREE)))
    assert (code, out) == (2, "")
    assert err.strip() == "privilog: test: -k `nobody` selects none of the 3 cases"


@pytest.mark.parametrize("expression", ["", "bob and", "(bob", "and bob", "bob )", "not"])
def test_a_bad_k_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], expression: str
) -> None:
    code, out, err = run(capsys, "test", "-k", expression, str(scenario(tmp_path, THREE)))
    assert code == 2
    assert out == ""
    assert err.startswith(f"privilog: -k `{expression}`: ")
    assert len(err.strip().splitlines()) == 1
    with pytest.raises(SelectionError):
        parse_selection(expression)


# ---- --json ----------------------------------------------------------------------


def test_json_is_one_object_with_cases_and_totals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = scenario(tmp_path, THREE)
    code, out, _ = run(capsys, "test", "--json", str(path))
    assert code == 1
    result = json.loads(out)
    assert list(result) == ["cases", "totals"]
    first, second, _ = result["cases"]
    assert set(first) == {"name", "file", "line", "where", "status", "message", "seconds"}
    assert (first["name"], first["file"], first["line"], first["status"], first["message"]) == (
        "bob reads ds", str(path), 13, "passed", ""
    )
    assert second["where"] == f"{path}:16:5"
    assert second["status"] == "failed"
    assert second["message"].startswith("expected allow, got DENY")
    assert {k: v for k, v in result["totals"].items() if k != "seconds"} == {
        "passed": 2,
        "failed": 1,
        "errors": 0,
        "deselected": 0,
    }
    assert result["totals"]["seconds"] >= 0


# ---- --junit-xml ----------------------------------------------------------------------


def test_junit_xml_has_a_suite_per_file_a_case_per_case_and_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = scenario(tmp_path, THREE, name="a.yaml")
    second = scenario(tmp_path, THREE.split("  - name: bob writes")[0], name="b.yaml")
    report = tmp_path / "out" / "junit.xml"
    report.parent.mkdir()
    code, out, _ = run(capsys, "test", "--junit-xml", str(report), "-k", "not carol", str(first), str(second))
    assert code == 1
    assert out.strip().endswith("2 passed, 1 failed, 1 deselected")  # the text is printed as well
    root = ET.parse(report).getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("3", "1", "0")
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [str(first), str(second)]
    assert [(s.get("tests"), s.get("failures")) for s in suites] == [("2", "1"), ("1", "0")]
    cases = suites[0].findall("testcase")
    assert [(c.get("name"), c.get("classname"), c.get("file"), c.get("line")) for c in cases] == [
        ("bob reads ds", str(first), str(first), "13"),
        ("bob writes ds", str(first), str(first), "16"),
    ]
    assert all(float(c.get("time", "x")) >= 0 for c in root.iter("testcase"))
    assert cases[0].find("failure") is None
    failure = cases[1].find("failure")
    assert failure is not None
    assert failure.get("message", "").startswith("expected allow, got DENY")
    assert (failure.text or "").startswith(f"{first}:16:5: FAIL bob writes ds: expected allow")
    assert len(list(root.iter("failure"))) == 1


def test_junit_xml_to_a_folder_that_does_not_exist_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "test", "--junit-xml", str(tmp_path / "no" / "j.xml"), str(scenario(tmp_path, THREE)))
    assert code == 2
    assert err.startswith(f"privilog: test: cannot write {tmp_path / 'no' / 'j.xml'}: ")


@pytest.mark.parametrize("option", [["-v"], ["-k", "x"], ["--json"], ["--junit-xml", "j.xml"], ["--coverage"]])
def test_scenario_options_need_scenarios(capsys: pytest.CaptureFixture[str], option: list[str]) -> None:
    code, _, err = run(capsys, "test", "--report", *option)
    assert code == 2
    assert "applies to scenario files" in err or "--json" in err


# ---- expect: {who: [...]} ------------------------------------------------------------


def test_who_passes_on_the_exact_set_of_principals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = """\
  - name: who writes ds
    request: {operation: dataset.write, entity: dataset:ns1.ds}
    expect: {who: [user:carol, group:eng]}
  - name: nobody deletes logs but alice
    request: {operation: dataset.drop, entity: dataset:ns1.logs}
    expect: {who: [user:alice]}
"""
    code, out, _ = run(capsys, "test", str(scenario(tmp_path, cases)))
    assert (code, out.strip()) == (0, "2 passed, 0 failed")


def test_who_fails_naming_the_missing_and_the_unexpected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = """\
  - name: who reads ds
    request: {operation: dataset.read, entity: dataset:ns1.ds}
    expect: {who: [user:carol]}
"""
    path = scenario(tmp_path, cases)
    code, out, _ = run(capsys, "test", str(path))
    assert code == 1
    assert out.splitlines()[0] == (
        f"{path}:13:5: FAIL who reads ds: who may differs: missing ['user:carol']; unexpected ['user:bob']"
    )


@pytest.mark.parametrize(
    ("request_", "expect", "at", "message"),
    [
        (
            "{principal: user:bob, operation: dataset.read, entity: dataset:ns1.ds}",
            "{who: [user:bob]}",
            ("request", "user:bob"),
            "a `who` case names no principal",
        ),
        ("{operation: dataset.read, entity: dataset:ns1.ds}", "{who: [bob]}", ("expect", "bob]"), "bob"),
        ("{operation: dataset.read, entity: dataset:ns1.ds}", "{who: user:bob}", ("expect", "user:bob"), "`who` is a list of principals"),
        ("{operation: dataset.read}", "{who: [user:bob]}", ("request", "{"), "needs `entity`"),
        ("{operation: dataset.read, entity: dataset:ns1.ds}", "{who: [user:bob], allow: true}", ("expect", "{"),
         "one of `allow`, `visible` or `who`"),
    ],
)
def test_a_bad_who_case_is_located_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], request_: str, expect: str, at: tuple[str, str], message: str
) -> None:
    path = scenario(tmp_path, f"  - name: bad\n    request: {request_}\n    expect: {expect}\n")
    where = _where(path, *at)
    code, out, err = run(capsys, "test", str(path))
    assert code == 2 and err == ""
    assert bad_case_error(out, path).startswith(f"{path}:{where}: ")
    assert message in out


# ---- expect: {allow: true, because: [...]} --------------------------------------------


def test_because_passes_when_the_proof_uses_each_grant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = """\
  - name: bob reads through his own grant
    request: {principal: user:bob, operation: dataset.read, entity: dataset:ns1.ds}
    expect: {allow: true, because: [grant user:bob READ dataset:ns1.ds]}
  - name: carol writes through her group's grant
    request: {principal: user:carol, operation: dataset.write, entity: dataset:ns1.ds}
    expect: {allow: true, because: [grant group:eng WRITE dataset:ns1.ds]}
  - name: alice deletes ns1 with ADMIN on it and on everything in it
    request: {principal: user:alice, operation: namespace.delete, entity: namespace:ns1}
    expect: {allow: true, because: [grant user:alice ADMIN namespace:ns1, grant user:alice ADMIN dataset:ns1.logs]}
  - name: allow false is deny
    request: {principal: user:bob, operation: dataset.write, entity: dataset:ns1.ds}
    expect: {allow: false}
"""
    code, out, _ = run(capsys, "test", str(scenario(tmp_path, cases)))
    assert (code, out.strip()) == (0, "4 passed, 0 failed")


def test_because_fails_naming_the_grants_the_proof_used_instead(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = """\
  - name: bob gets ns1
    request: {principal: user:bob, operation: namespace.get, entity: namespace:ns1}
    expect: {allow: true, because: [grant user:bob READ namespace:ns1, grant user:bob READ dataset:ns1.ds]}
  - name: bob writes
    request: {principal: user:bob, operation: dataset.write, entity: dataset:ns1.ds}
    expect: {allow: true, because: [grant user:bob READ dataset:ns1.ds]}
"""
    path = scenario(tmp_path, cases)
    code, out, _ = run(capsys, "test", str(path))
    assert code == 1
    first, second, summary = out.splitlines()
    assert first == (
        f"{path}:13:5: FAIL bob gets ns1: allowed, but the proof does not use grant user:bob READ "
        "namespace:ns1; it used: grant user:bob READ dataset:ns1.ds"
    )
    assert second.startswith(f"{path}:16:5: FAIL bob writes: expected allow, got DENY")
    assert summary == "0 passed, 2 failed"


@pytest.mark.parametrize(
    ("expect", "at", "message"),
    [
        ("{allow: false, because: [grant user:bob READ dataset:ns1.ds]}", ("expect", "[grant"), "`because` goes with `allow: true`"),
        ("{allow: true, because: [user:bob READ dataset:ns1.ds]}", ("expect", "user:bob"), "`grant PRINCIPAL ACTION ENTITY`"),
        ("{allow: true, because: [grant user:bob RAED dataset:ns1.ds]}", ("expect", "grant"), "did you mean `READ`"),
        ("{allow: true, because: [grant bob READ dataset:ns1.ds]}", ("expect", "grant"), "bob"),
        ("{allow: true, because: [grant user:bob READ dataset:ns1]}", ("expect", "grant"), "dataset:ns1"),
        ("{allow: yes please}", ("expect", "yes"), "`allow` is true or false"),
        ("{because: [grant user:bob READ dataset:ns1.ds]}", ("expect", "{"), "one of `allow`, `visible` or `who`"),
    ],
)
def test_a_bad_because_is_located_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], expect: str, at: tuple[str, str], message: str
) -> None:
    request = "{principal: user:bob, operation: dataset.read, entity: dataset:ns1.ds}"
    path = scenario(tmp_path, f"  - name: bad\n    request: {request}\n    expect: {expect}\n")
    where = _where(path, *at)
    code, out, err = run(capsys, "test", str(path))
    assert code == 2 and err == ""
    assert bad_case_error(out, path).startswith(f"{path}:{where}: ")
    assert message in out


# ---- --coverage ------------------------------------------------------------------------


def tiny(tmp_path: Path) -> Path:
    (tmp_path / "tiny.policy").write_text(TINY_POLICY)
    head = """\
policy: tiny.policy
world:
  entities: [namespace:ns1, dataset:ns1.ds]
  grants: [[user:a, READ, dataset:ns1.ds], [group:g, WRITE, dataset:ns1.ds]]
  members: [[user:b, group:g]]
cases:
"""
    cases = """\
  - name: a reads
    request: {principal: user:a, operation: dataset.read, entity: dataset:ns1.ds}
    expect: allow
  - name: who writes
    request: {operation: dataset.write, entity: dataset:ns1.ds}
    expect: {who: [user:b, group:g]}
"""
    return scenario(tmp_path, cases, head=head)


def test_coverage_reports_what_decided_and_lists_what_never_did(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tiny(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "test", "--coverage", path.name)
    assert code == 0
    lines = out.splitlines()
    assert lines[:4] == [
        "coverage of policy tiny (tiny.policy):",
        "  operations: 2 of 4 covered (50%)",
        "  requirements: 2 of 5 covered (40%)",
        lines[3],
    ]
    assert re.fullmatch(r"  rules: \d+ of \d+ covered \(\d+%\)", lines[3])
    assert "  operations never decided (2):" in lines
    assert "    tiny.policy:10:3  namespace.get (1 requirement)" in lines
    assert "    tiny.policy:14:3  dataset.drop (2 requirements)" in lines
    # the policy's own rule never derived anything: nobody holds READ on a namespace
    assert '    tiny.policy:18:1  read_logged(P, E) :- grant(P, "READ", E), is_a(E, namespace).' in lines
    assert lines[-1] == "2 passed, 0 failed"


def test_coverage_counts_a_requirement_once_it_applies_met_or_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tiny(tmp_path)
    path.write_text(
        path.read_text()
        + """\
  - name: a may not drop ds
    request: {principal: user:a, operation: dataset.drop, entity: dataset:ns1.ds}
    expect: deny
  - name: the namespace's READ holder is logged
    request: {principal: user:n, operation: namespace.get, entity: namespace:ns1}
    grants: [[user:n, READ, namespace:ns1]]
    expect: allow
"""
    )
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "test", "--coverage", "--json", path.name)
    assert code == 0
    (coverage,) = json.loads(out)["coverage"]
    assert coverage["policy"] == "tiny"
    assert coverage["totals"]["operations"] == {"covered": 4, "total": 4}
    assert coverage["totals"]["requirements"] == {"covered": 5, "total": 5}
    drop = next(o for o in coverage["operations"] if o["operation"] == "dataset.drop")
    assert drop == {
        "operation": "dataset.drop",
        "where": "tiny.policy:14:3",
        "covered": True,
        "requirements": [
            {"id": "dataset.drop#1", "requirement": "ADMIN", "where": drop["requirements"][0]["where"], "covered": True},
            {
                "id": "dataset.drop#2",
                "requirement": "ADMIN on parent",
                "where": drop["requirements"][1]["where"],
                "covered": True,
            },
        ],
    }
    assert drop["requirements"][1]["where"].startswith("tiny.policy:15:")
    own = next(r for r in coverage["rules"] if r["where"] == "tiny.policy:18:1")
    assert own["covered"] is True  # the case world's grant on the namespace made it derive
    assert coverage["totals"]["rules"]["covered"] == sum(r["covered"] for r in coverage["rules"])


def test_a_requirement_its_condition_excludes_decides_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    sample = str(Path(__file__).resolve().parents[2] / "privilog" / "samples" / "scenario.yaml")

    def deploy(*select: str) -> list[bool]:
        code, out, _ = run(capsys, "test", "--coverage", "--json", *select, sample)
        assert code == 0
        (coverage,) = json.loads(out)["coverage"]
        assert coverage["policy"] == "cdap"
        found = next(o for o in coverage["operations"] if o["operation"] == "application.deploy")
        return [r["covered"] for r in found["requirements"]]

    # ADMIN, ADMIN on $artifact if $new_artifact, any on $artifact if not $new_artifact, ADMIN on $owner if $owner
    assert deploy() == [True, True, True, False]  # no case gives an owner
    assert deploy("-k", "new artifact") == [True, True, False, False]


def test_a_visible_case_covers_the_listing(capsys: pytest.CaptureFixture[str]) -> None:
    sample = str(Path(__file__).resolve().parents[2] / "privilog" / "samples" / "scenario.yaml")
    code, out, _ = run(capsys, "test", "--coverage", "--json", "-k", "sees the sales", sample)
    assert code == 0
    (coverage,) = json.loads(out)["coverage"]
    assert [o["operation"] for o in coverage["operations"] if o["covered"]] == ["namespace.list"]


def test_the_docs_scenario_runs_and_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The scenario file of docs/scenarios.md, with its world, run in process (the page's test runs it too)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "scenarios.md").read_text()
    for name in ("world.yaml", "ns1.yaml"):
        block = page.split(f'```yaml title="{name}"\n', 1)[1].split("```", 1)[0]
        (tmp_path / name).write_text(block)
    code, out, _ = run(capsys, "test", "-v", str(tmp_path / "ns1.yaml"))
    assert out.splitlines()[-1] == "5 passed, 0 failed", out
    assert code == 0


# ---- the engine held to itself ---------------------------------------------------------


@pytest.mark.parametrize("path", ["allows", "decide"])
def test_a_case_fails_when_the_served_answer_differs_from_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """privilog serve answers with allows() and decide(); a case whose check() answer they do
    not give fails, whatever it expects (here they are made to say the opposite)."""
    from privilog.engine.authorizer import Authorizer

    answered = getattr(Authorizer, path)
    monkeypatch.setattr(Authorizer, path, lambda self, *a, **k: not answered(self, *a, **k))
    code, out, _ = run(capsys, "test", str(scenario(tmp_path, THREE)))
    assert code == 1
    lines = out.splitlines()
    assert lines[-1] == "0 passed, 3 failed"
    assert lines[0].endswith(
        f"FAIL bob reads ds: check() allows, but {path}() denies (what privilog serve answers with): "
        "the engine disagrees with itself; please report it"
    )


def test_who_and_visible_cases_fail_when_the_served_answer_differs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from privilog.engine.authorizer import Authorizer
    from privilog.engine.ids import EntityId

    cases = """\
  - name: who reads
    request: {operation: dataset.read, entity: dataset:ns1.ds}
    expect: {who: [user:bob]}
  - name: bob lists
    request: {principal: user:bob, operation: dataset.list, in: namespace:ns1}
    expect: {visible: [dataset:ns1.ds]}
"""
    path = scenario(tmp_path, cases)
    assert run(capsys, "test", str(path))[0] == 0
    monkeypatch.setattr(Authorizer, "allows", lambda self, *a, **k: False)
    listed = Authorizer.visible_entities
    logs = EntityId.parse("dataset:ns1.logs")  # a listing that shows one more than check() allows
    monkeypatch.setattr(Authorizer, "visible_entities", lambda self, *a, **k: [*listed(self, *a, **k), logs])
    code, out, _ = run(capsys, "test", str(path))
    assert code == 1
    who, listing, summary = out.splitlines()
    assert who.endswith("FAIL who reads: user:bob: check() allows, but allows() denies (what privilog serve "
                        "answers with): the engine disagrees with itself; please report it")
    assert listing.endswith("FAIL bob lists: the visible set privilog serve lists (visible_entities()) differs: "
                            "unexpected ['dataset:ns1.logs']: the engine disagrees with itself; please report it")
    assert summary == "0 passed, 2 failed"


def test_the_conformance_report_names_a_row_the_served_answer_differs_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from privilog.engine.authorizer import Authorizer

    from privilog.testing.conformance import Bench, check_row
    from privilog.testing.table import load_table

    table = load_table(Path(__file__).resolve().parents[1] / "conformance" / "cdap.yaml")
    row = table.row("dataset.read")
    assert row is not None
    assert check_row(Bench(table), row).passed
    monkeypatch.setattr(Authorizer, "decide", lambda self, request: not Authorizer.check(self, request).allowed)
    problems = check_row(Bench(table), row).problems
    assert problems and all("(the engine disagrees with itself)" in p for p in problems), problems
    assert problems[0] == (
        "user:alice dataset.read dataset:ns1.sales.2024: check() allows, but decide() denies (the engine disagrees with itself)"
    )


def test_a_case_adding_grants_keeps_the_worlds_owners_and_config(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A case's `grants:` add to the file's world: its `owners:` and `config:` stay (they were dropped)."""
    scenario = tmp_path / "owners.yaml"
    scenario.write_text(
        "policy: cdap-5.1\n"
        "world:\n"
        "  entities: [namespace:ns1, dataset:system.meta]\n"
        "  owners: {namespace:ns1: kerberosprincipal:alice}\n"
        "  config: {master_user: user:cdap}\n"
        "cases:\n"
        "  - name: the owner reads its namespace, a grant added elsewhere\n"
        "    grants: [[user:bob, READ, namespace:ns1]]\n"
        "    request: {principal: user:alice, operation: namespace.get, entity: namespace:ns1}\n"
        "    expect: allow\n"
        "  - name: the master user, a grant added elsewhere\n"
        "    grants: [[user:bob, READ, namespace:ns1]]\n"
        "    request: {principal: user:cdap, operation: dataset.drop, entity: dataset:system.meta}\n"
        "    expect: allow\n"
    )
    code, out, _ = run(capsys, "test", str(scenario))
    assert (code, out.splitlines()[-1]) == (0, "2 passed, 0 failed")
