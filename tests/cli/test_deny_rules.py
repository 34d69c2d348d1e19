"""`privilog check` and `why` on a request a rule of the policy denies (issue 32, item 4): the
short form names the rule and its place, `why` draws the proof and the fixes that take a premise
away, `--json` carries `denied_by`, and the picture draws the rule and its premises. The
explanations' text is held by tests/golden (why-deny-rule-*)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from privilog.cli import main

POLICY = (Path(__file__).parents[1] / "engine" / "blocklist.policy").read_text(
    encoding="utf-8"
)  # shared by the deny-rule tests

WORLD = """admins: [user:root]
entities: [namespace:ns1, dataset:ns1.a]
grants:
  - [user:mallory, READ, dataset:ns1.a]
  - [group:bad, READ, dataset:ns1.a]
members:
  - [user:eve, group:bad]
"""

RULE = "denied(R) :- request(R, P, _, _), blocked(P) (deny.policy:6)"
BACKENDS = ["compiled", "pydatalog"]


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "deny.policy").write_text(POLICY)
    (tmp_path / "world.yaml").write_text(WORLD)
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main([*argv, "--policy", "deny.policy", "--world", "world.yaml"])
    out, _ = capsys.readouterr()
    return code, out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("principal", ["user:mallory", "user:eve"])
def test_check_names_the_denying_rule(
    here: Path, capsys: pytest.CaptureFixture[str], principal: str, backend: str
) -> None:
    code, out = run(capsys, "check", principal, "dataset.read", "dataset:ns1.a", "--backend", backend)
    assert code == 1
    assert out.strip() == f"DENY {principal} dataset.read dataset:ns1.a: denied by the policy's rule {RULE}"
    assert "does not apply" not in out


@pytest.mark.parametrize("backend", BACKENDS)
def test_why_draws_the_proof_and_the_fix(here: Path, capsys: pytest.CaptureFixture[str], backend: str) -> None:
    code, out = run(capsys, "why", "user:eve", "dataset.read", "dataset:ns1.a", "--backend", backend)
    assert code == 1
    assert out.splitlines()[3:] == [
        f"└─ denied by the policy's rule {RULE}",
        '   ├─ request(R, user:eve, "dataset.read", dataset:ns1.a): the request',
        "   └─ blocked(user:eve): by the rule blocked(P) :- member_of(P, G), blocked(G) (deny.policy:5)",
        "      ├─ member_of(user:eve, group:bad): in the world",
        "      └─ blocked(group:bad): the policy's fact (deny.policy:4)",
        "Would allow it:",
        "  1. remove user:eve from group:bad; grant READ on dataset:ns1.a to user:eve",
        "A change of the policy takes a premise away too: retract its fact blocked(group:bad) (deny.policy:4).",
    ]
    assert "No change of grants or memberships allows it" not in out


def test_the_suggested_fix_allows_it_from_the_command_line(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The fix, made in the world's file, and the same command allows the request."""
    world = here / "world.yaml"
    world.write_text(
        WORLD.replace("  - [user:eve, group:bad]\n", "  []\n").replace(
            "grants:\n", "grants:\n  - [user:eve, READ, dataset:ns1.a]\n"
        )
    )
    code, out = run(capsys, "check", "user:eve", "dataset.read", "dataset:ns1.a")
    assert (code, out.strip()) == (0, "ALLOW user:eve dataset.read dataset:ns1.a")


def test_json_carries_the_rule_and_its_proof(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "check", "user:eve", "dataset.read", "dataset:ns1.a", "--json")
    assert code == 1
    data = json.loads(out)
    assert list(data) == ["request", "decision", "policy", "requirements", "fixes", "remaining", "denied_by"]
    (denial,) = data["denied_by"]
    assert (denial["rule"], denial["at"]) == ("denied(R) :- request(R, P, _, _), blocked(P)", "deny.policy:6")
    assert [p["fact"] for p in denial["premises"]] == [
        'request(R, user:eve, "dataset.read", dataset:ns1.a)',
        "blocked(user:eve)",
    ]
    assert [c for fix in data["fixes"] for c in fix] == [
        {"grant": {"principal": "user:eve", "action": "READ", "entity": "dataset:ns1.a"}},
        {"remove_member": {"principal": "user:eve", "group": "group:bad"}},
    ]


def test_the_picture_draws_the_rule_and_its_premises(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "why", "user:eve", "dataset.read", "dataset:ns1.a", "--format", "dot")
    assert code == 1
    labels = dict(re.findall(r'^\t(n\d+) \[label="((?:[^"\\]|\\.)*)"', out, re.M))
    edges = {(labels[t], labels[h]) for t, h in re.findall(r"^\t(n\d+) -> (n\d+) \[label=\" denied by \"", out, re.M)}
    rule = r"the policy's rule\ndenied(R) :- request(R, P, _, _), blocked(P)\n(deny.policy:6)"
    assert [h for _, h in edges] == [rule]
    assert "member_of(user:eve, group:bad): in the world" in labels.values()
