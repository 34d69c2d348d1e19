"""Hostile REPL lines (issue 18): a line may not change who is allowed, nor run without bound."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from privilog.dsl.check import prelude_relations

from privilog.repl import Session

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "privilog" / "samples" / "world.yaml"
EVE_REQUEST = "check user:eve namespace.delete namespace:sales"


@pytest.fixture
def session(tmp_path: Path) -> Session:
    path = tmp_path / "world.yaml"
    shutil.copy(SAMPLE, path)
    return Session("cdap", str(path))


def test_a_rule_for_a_prelude_relation_is_refused_and_allows_nothing(session: Session) -> None:
    assert session.one_shot(EVE_REQUEST).startswith("DENY")
    reply = session.run('rule holds(user:eve, "ADMIN", E, user:eve) :- is_a(E, _).')
    assert reply.error and not reply.internal
    assert reply.text.startswith("`holds` is defined by the prelude")
    assert "\n" not in reply.text
    for line in (
        "rule allowed(R) :- request(R, user:eve, _, _).",
        "rule in_group(user:eve, group:admins) :- is_a(_, _).",
        'rule grant(user:eve, "ADMIN", namespace:sales).',
        "rule admin(user:eve).",
    ):
        assert session.run(line).error, line
    assert session.one_shot(EVE_REQUEST).startswith("DENY")
    assert session.one_shot("rule").startswith("no rules added")


_PRELUDE_BASE, _PRELUDE_DERIVED = prelude_relations(Session("cdap").policy)
_ARITY = dict(Session("cdap").authorizer.program.relations)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(_PRELUDE_BASE | _PRELUDE_DERIVED)), st.booleans())
def test_fuzz_no_rule_for_a_prelude_relation_is_taken(relation: str, fact: bool) -> None:
    session = Session("cdap", str(SAMPLE))
    terms = ", ".join(["user:eve"] + ["namespace:sales"] * (_ARITY[relation] - 1))
    line = f"rule {relation}({terms})." if fact else f"rule {relation}({terms}) :- is_a(namespace:sales, _)."
    reply = session.run(line)
    assert reply.error and not reply.internal and "\n" not in reply.text
    assert session.one_shot(EVE_REQUEST).startswith("DENY")


def test_entities_change_only_as_an_admin(session: Session) -> None:
    reply = session.run("entity delete namespace:sales")
    assert reply.error and reply.text.startswith("entity delete needs `as ADMIN`")
    reply = session.run("entity delete namespace:sales as user:eve")
    assert reply.error and "user:eve is not an authorization admin, so cannot change entities" in reply.text
    reply = session.run("entity add dataset:sales.new as user:eve")
    assert reply.error
    assert "namespace:sales" in session.one_shot('?- is_a(E, "namespace").')
    assert session.one_shot("entity add dataset:sales.new as user:root") == "added dataset:sales.new"


def test_a_query_joining_many_unrelated_literals_is_stopped(session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVILOG_QUERY_ROWS", "10000")
    body = ", ".join(f"is_a(E{i}, T{i})" for i in range(300))
    reply = session.run(f"?- {body}, E0 == E299, E0 != E299.")
    assert reply.error and not reply.internal
    assert reply.text.startswith("stopped after looking at 10000 rows")
    assert session.one_shot('?- is_a(namespace:sales, T).').endswith("(1 row)")  # the session goes on


def test_a_query_past_its_time_is_stopped(session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVILOG_QUERY_SECONDS", "0.2")
    body = ", ".join(f"is_a(E{i}, T{i})" for i in range(300))
    reply = session.run(f"?- {body}, E0 == E299, E0 != E299.")
    assert reply.error and reply.text.startswith("stopped after 0.2 seconds")


def test_a_rule_joining_many_unrelated_literals_is_stopped(session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    body = ", ".join(f"is_a(E{i}, T{i})" for i in range(300))
    reply = session.run(f"rule wide(E0) :- {body}.")
    assert reply.error and not reply.internal
    assert reply.text.startswith("a rule in the session has at most 64 literals, not 300")
    monkeypatch.setenv("PRIVILOG_QUERY_SECONDS", "0.2")
    body = ", ".join(f"is_a(E{i}, T{i})" for i in range(12))
    reply = session.run(f"rule wide(E0) :- {body}.")
    assert reply.error and not reply.internal
    assert reply.text.startswith("stopped after 0.2 seconds")
    assert session.one_shot("rule").startswith("no rules added")
    assert session.one_shot(EVE_REQUEST).startswith("DENY")


def test_a_bad_limit_is_a_clear_error(session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVILOG_QUERY_SECONDS", "soon")
    reply = session.run('?- is_a(E, "namespace").')
    assert reply.error and reply.text == "PRIVILOG_QUERY_SECONDS must be a positive number, not `soon`"
