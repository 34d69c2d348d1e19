"""When the pipeline may read a decision from the unmet requirements instead of unfolding `allowed`.

``engine.spark.fused.allowed_from_unmet`` says yes only for the prelude's decision: a policy that
adds a deny rule, or a bypass whose reason is a variable, is decided through its own `allowed`
(tests/spark/test_differential.py decides a policy with a deny rule both ways against the reference).
"""

from __future__ import annotations

import pytest
from privilog.engine.program import by_rule_names, compile_policy
from privilog.engine.spark.fused import allowed_from_unmet

from privilog import dsl

SHIPPED = sorted(p.stem for p in dsl.rules_dir().glob("*.policy"))


def _shortcut(text: str) -> bool:
    program = compile_policy(dsl.parse_policy(text))
    rules: dict[str, list] = {}
    for rule in program.rules:
        rules.setdefault(rule.head.predicate, []).append(rule)
    return allowed_from_unmet(rules, bool(by_rule_names(program.policy)))


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_policy_is_decided_from_its_unmet_requirements(name: str) -> None:
    assert _shortcut((dsl.rules_dir() / f"{name}.policy").read_text(encoding="utf-8"))


def _cdap(extra: str) -> str:
    return (dsl.rules_dir() / "cdap.policy").read_text(encoding="utf-8") + extra


def test_a_deny_rule_keeps_allowed_unfolded() -> None:
    assert not _shortcut(_cdap('denied(R) :- request(R, P, _, E), grant(P, "WRITE", E).\n'))


def test_a_bypass_whose_reason_is_a_variable_keeps_allowed_unfolded() -> None:
    assert _shortcut(_cdap('bypass(R, "owner") :- request(R, P, _, E), owned_by(E, P).\n'))
    assert not _shortcut(_cdap("bypass(R, P) :- request(R, P, _, E), owned_by(E, P).\n"))
