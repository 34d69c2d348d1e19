"""`privilog ops --json` and `privilog fmt --diff`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from privilog import dsl
from privilog.cli import main

UNFORMATTED = (
    "policy t\nactions READ,ADMIN\nentity instance\nentity namespace in instance\nnamespace:\n   get requires READ\n"
)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_ops_json_lists_every_operation_with_stable_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "ops", "--json")
    assert (code, err) == (0, "")
    data = json.loads(out)
    assert list(data) == ["policy", "operations"]
    policy = dsl.load_policy("cdap")
    assert [op["operation"] for op in data["operations"]] == [op.qualified for op in policy.operations]
    create = data["operations"][0]
    assert create == {
        "operation": "namespace.create",
        "entity_type": "namespace",
        "verb": "requires",
        "requirements": ["ADMIN", "ADMIN on $owner if $owner"],
        "args": [{"name": "owner", "type": "kerberosprincipal", "in": None, "list": False}],
    }
    assert {op["verb"] for op in data["operations"]} == {"requires", "shows"}
    code, out, _ = run(capsys, "ops", "--policy", "cdap-5.1", "--json")
    (deploy,) = [op for op in json.loads(out)["operations"] if op["operation"] == "application.deploy"]
    assert {a["name"]: a["list"] for a in deploy["args"]}["datasets"] is True
    code, out, _ = run(capsys, "ops", "--policy", "cdap-5.1")
    assert "$datasets:[dataset]" in out


def test_fmt_diff_prints_what_write_would_change_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.policy"
    path.write_text(UNFORMATTED)
    code, out, err = run(capsys, "fmt", "--diff", str(path))
    assert (code, err) == (1, "")
    assert out.splitlines()[:2] == [f"--- {path}", f"+++ {path} (formatted)"]
    assert "-actions READ,ADMIN" in out.splitlines() and "+actions READ, ADMIN" in out.splitlines()
    assert path.read_text() == UNFORMATTED  # --diff changes nothing
    patched = tmp_path / "patched.policy"
    patched.write_text(UNFORMATTED)
    subprocess.run(["patch", "-s", str(patched)], input=out, text=True, check=True)
    assert main(["fmt", "--check", str(patched)]) == 0


def test_fmt_diff_of_a_formatted_file_is_empty_and_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.policy"
    path.write_text(dsl.format_text(UNFORMATTED, str(path)))
    assert run(capsys, "fmt", "--diff", str(path)) == (0, "", "")


def test_fmt_diff_and_write_do_not_go_together(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "fmt", "--diff", "--write", "x.policy")
    assert (code, out) == (2, "")
    assert err.startswith("privilog: ") and "not allowed with argument" in err
