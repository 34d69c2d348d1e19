"""`privilog prove` as a user meets it: what it prints, its exit codes, its JSON."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from proof_policies import HEADER, SOUND

from privilog.cli import main


def _policy(tmp_path: Path, body: str, name: str = "mine") -> str:
    path = tmp_path / f"{name}.policy"
    path.write_text(HEADER.format(name=name) + body)
    return str(path)


def test_a_policy_that_keeps_its_promises_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _policy(tmp_path, SOUND)
    assert main(["prove", path, "--examples", "5"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{path}: 7 of 7 promises kept (every world up to 1 entity of each kind, then 5 generated; ")
    assert "  default_deny                 held (" in out
    assert "worlds checked)" in out and "BROKEN" not in out


def test_a_broken_promise_exits_1_with_its_counterexample_explained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = SOUND.replace("drop requires ADMIN", "drop requires ADMIN on self | namespace")
    assert main(["prove", _policy(tmp_path, body), "--examples", "0"]) == 1
    out = capsys.readouterr().out
    assert "  no_hierarchical_enforcement  BROKEN by 1 operation\n" in out
    assert (
        "no_hierarchical_enforcement: a privilege on an enclosing entity never allows an operation "
        "that the entity's own grants do not\n"
        "  broken by dataset.drop\n"
        "  counterexample: user:u1 may dataset.drop dataset:ns1.ds only through its grants on namespace:ns1, "
        "which enclose it\n"
        "  1. allowed in this world\n"
        "       entities: dataset:ns1.ds\n"
        "       grants: user:u1 ADMIN namespace:ns1\n"
        "     ALLOW user:u1 dataset.drop dataset:ns1.ds  (policy mine)\n"
        "     └─ ADMIN on self | namespace: met\n"
        "        └─ user:u1 holds ADMIN on namespace:ns1\n"
        "  2. denied without the grants on namespace:ns1\n"
        "       entities: dataset:ns1.ds\n"
        "       grants: none\n"
        "     DENY user:u1 dataset.drop dataset:ns1.ds  (policy mine)\n"
    ) in out


def test_json_is_one_object_per_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = SOUND.replace("  get requires any\n", "  get requires READ\n")
    args = ["prove", _policy(tmp_path, SOUND, "a"), _policy(tmp_path, body, "b"), "--examples", "0", "--json"]
    assert main(args) == 1
    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert set(first) == {"policy", "max_entities", "examples", "held", "seconds", "notes", "properties"}
    assert first["held"] is True and second["held"] is False
    (broken,) = [p for p in second["properties"] if not p["held"]]
    assert set(broken) == {"name", "sentence", "checker", "held", "worlds", "operations", "counterexample"}
    assert broken["name"] == "list_get_agree" and broken["operations"] == ["dataset.get"]
    scene = broken["counterexample"]["scenes"][0]
    assert scene["world"] == {"entities": ["dataset:ns1.ds"], "grants": [["user:u1", "WRITE", "dataset:ns1.ds"]]}
    assert scene["decision"]["decision"] == "allow"


def test_a_table_of_promises(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = SOUND.replace("delete requires ADMIN, ADMIN on every descendant", "delete requires ADMIN")
    a, b = _policy(tmp_path, SOUND, "a"), _policy(tmp_path, body, "b")
    assert main(["prove", a, b, "--examples", "0", "--table"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"| promise | `{a}` | `{b}` |"
    assert "| multi_entity_delete | kept | **broken** (1 op) |" in lines


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["prove", "no-such-policy"], "no policy `no-such-policy`"),
        (["prove", "cdap", "--max-entities", "0"], "--max-entities is at least 1"),
        (["prove", "cdap", "--proof", "nowhere.proof"], "no proof file nowhere.proof"),
    ],
)
def test_bad_input_exits_2_with_one_line(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_proof_that_names_an_unknown_checker_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    proof = tmp_path / "odd.proof"
    proof.write_text('property fast "it is fast" by stopwatch\n')
    assert main(["prove", _policy(tmp_path, SOUND), "--proof", str(proof)]) == 2
    err = capsys.readouterr().err
    assert "unknown checker `stopwatch`" in err and "checkers are monotonic" in err


def test_a_property_without_its_relation_is_a_policy_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    proof = tmp_path / "odd.proof"
    proof.write_text('property nothing_leaks "nothing leaks"\n')
    assert main(["prove", _policy(tmp_path, SOUND), "--proof", str(proof)]) == 2
    err = capsys.readouterr().err
    assert "odd.proof:1:1: error: property `nothing_leaks` names no relation" in err


def test_a_promise_of_ones_own(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The example of docs/proofs.md, "Writing a promise", with the shipped promises included."""
    common = Path(__file__).resolve().parents[2] / "proofs" / "common.proof"
    proof = tmp_path / "mine.proof"
    proof.write_text(
        f'include "{common}"\n'
        'property no_write_without_read "nobody may write a dataset they cannot read"\n'
        'no_write_without_read(R) :- request(R, P, "dataset.write", E), allowed(R), not has_grant(P, "READ", E).\n'
    )
    body = SOUND + "  write requires WRITE\n"
    assert main(["prove", _policy(tmp_path, body), "--proof", str(proof), "--examples", "0"]) == 1
    out = capsys.readouterr().out
    assert "  no_write_without_read        BROKEN by 1 operation\n" in out
    assert (
        "counterexample: user:u1 dataset.write dataset:ns1.ds is allowed, and no_write_without_read(the request)" in out
    )


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_without_v_is_one_line_rewritten_and_cleared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _policy(tmp_path, SOUND)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setenv("COLUMNS", "400")
    assert main(["prove", path, "--examples", "2"]) == 0
    shown = terminal.getvalue()
    assert shown.startswith(f"\r\x1b[K{path}: [1/")
    assert f"\r\x1b[K{path}: then 2 larger worlds generated by hypothesis" in shown
    assert shown.endswith("\r\x1b[K") and "\n" not in shown  # cleared before the report
    assert capsys.readouterr().out.startswith(f"{path}: 7 of 7 promises kept")
    monkeypatch.setenv("COLUMNS", "30")  # a narrow terminal: the line is cut, never wrapped
    terminal.seek(0)
    terminal.truncate()
    assert main(["prove", path, "--examples", "0"]) == 0
    assert {len(step) for step in terminal.getvalue().split("\r\x1b[K")} <= set(range(30))


def test_progress_is_quiet_when_piped_or_with_q_and_a_line_per_step_with_v(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _policy(tmp_path, SOUND)
    assert main(["prove", path, "--examples", "0"]) == 0
    assert capsys.readouterr().err == ""  # stderr is not a terminal here
    assert main(["prove", path, "--examples", "0", "-v"]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines and all(line.startswith(f"{path}: [") for line in lines)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["prove", path, "--examples", "0", "-q"]) == 0
    assert terminal.getvalue() == ""
