"""The REPL on a request a rule of the policy denies (issue 32, item 4): `check` names the rule,
`why` and `whynot` draw its proof, and `whynot`'s commands, followed, allow the request."""

from __future__ import annotations

from pathlib import Path

import pytest

from privilog.repl.session import Session

POLICY = (Path(__file__).parents[1] / "engine" / "blocklist.policy").read_text(
    encoding="utf-8"
)  # shared by the deny-rule tests

WORLD = """admins: [user:root]
entities:
  - namespace:ns1
  - dataset:ns1.a
grants:
  - [user:mallory, READ, dataset:ns1.a]
  - [group:bad, READ, dataset:ns1.a]
members:
  - [user:eve, group:bad]
"""

RULE = "denied(R) :- request(R, P, _, _), blocked(P) (deny.policy:6)"


@pytest.fixture
def session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Session:
    monkeypatch.chdir(tmp_path)  # the policy's place shows as deny.policy:LINE
    (tmp_path / "deny.policy").write_text(POLICY)
    (tmp_path / "world.yaml").write_text(WORLD)
    return Session(str(tmp_path / "deny.policy"), str(tmp_path / "world.yaml"))


def test_check_names_the_rule(session: Session) -> None:
    assert session.one_shot("check user:mallory dataset.read dataset:ns1.a") == (
        f"DENY user:mallory dataset.read dataset:ns1.a: denied by the policy's rule {RULE}"
    )


def test_why_draws_the_proof_and_whynot_the_commands_that_take_a_premise_away(session: Session) -> None:
    request = "user:eve dataset.read dataset:ns1.a"
    why = session.one_shot(f"why {request}").splitlines()
    assert f"└─ denied by the policy's rule {RULE}" in why
    assert "      ├─ member_of(user:eve, group:bad): in the world" in why
    whynot = session.one_shot(f"whynot {request}").splitlines()
    assert "READ: met" not in "\n".join(whynot)  # cut to what denies it
    assert whynot[1] == f"└─ denied by the policy's rule {RULE}"
    assert whynot[-3:] == [
        "To follow a suggestion in this session (as an authorization admin):",
        "  1. member remove user:eve group:bad as user:root",
        "  1. grant user:eve READ dataset:ns1.a as user:root",
    ]
    for command in whynot[-2:]:
        assert not session.one_shot(command.split(". ", 1)[1]).startswith("error")
    assert session.one_shot(f"check {request}") == f"ALLOW {request}"


def test_whynot_on_a_fact_of_the_policy_says_to_retract_it(session: Session) -> None:
    out = session.one_shot("whynot user:mallory dataset.read dataset:ns1.a").splitlines()
    assert out[-1] == (
        "Taking a premise away needs a change of the policy: retract its fact blocked(user:mallory) (deny.policy:3)."
    )
