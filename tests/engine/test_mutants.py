"""Tests written for mutants that survived mutation testing (tests/mutation.md), on both backends.

Each test names the mutant it kills: the change to the engine's source that makes it fail.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import privilog

BACKENDS = ("compiled", "pydatalog")

# Two request arguments read in one body, and an argument read by a name the rule does not fix.
POLICY = """
policy mutants "request arguments in the decision plans"
actions READ, WRITE
entity instance
entity namespace in instance
entity dataset in namespace
moved(R) :- request(R, P, _, _), request_arg(R, from, F), request_arg(R, to, T), grant(P, "READ", F), grant(P, "WRITE", T).
tagged(R) :- request(R, P, _, _), request_arg(R, N, D), grant(P, "READ", D), N != to.
dataset:
  move($from: dataset in namespace, $to: dataset in namespace) requires by moved
  tag($from: dataset in namespace, $to: dataset in namespace) requires by tagged
"""

ALICE = "user:alice"
D1, D2 = "dataset:ns1.d1", "dataset:ns1.d2"


def answers(tmp_path: Path, backend: str, operation: str, args: dict[str, str]) -> bool:
    path = tmp_path / "mutants.policy"
    path.write_text(POLICY, encoding="utf-8")
    authz = privilog.load(str(path), {"entities": [D1, D2], "grants": [[ALICE, "READ", D1], [ALICE, "WRITE", D2]]}, backend)
    request = authz.request(ALICE, operation, D1, args)
    allowed = authz.check(request).allowed
    assert authz.decide(request) == allowed
    assert authz.allows(ALICE, operation, D1, args) == allowed
    return allowed


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_request_arguments_in_one_body(tmp_path: Path, backend: str) -> None:
    """Kills specialize `_Writer._argument` mutants 2 and 3 (`self.counter += 1` written `= 1`
    or `-= 1`): the two arguments' values share one name in the plan, and from is read as to."""
    assert answers(tmp_path, backend, "dataset.move", {"from": D1, "to": D2})
    assert not answers(tmp_path, backend, "dataset.move", {"from": D2, "to": D1})


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_request_argument_read_by_any_name(tmp_path: Path, backend: str) -> None:
    """Kills specialize `_Writer._argument` mutants 8 and 9 (the loop over every argument,
    `for n, v in g.items()`, written as `None`, or the name's variable bound to `None`)."""
    assert answers(tmp_path, backend, "dataset.tag", {"from": D1})
    assert not answers(tmp_path, backend, "dataset.tag", {"to": D1})
    assert not answers(tmp_path, backend, "dataset.tag", {"from": D2})


# `X if $arg else Y`: the else branch applies only when the argument is not given.
GUARDED = """
policy guarded "a requirement and its else branch"
actions READ, WRITE
entity instance
entity namespace in instance
entity dataset in namespace
dataset:
  copy($deep: bool) requires READ if $deep else WRITE
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_else_branch_does_not_apply_when_the_argument_is_given(tmp_path: Path, backend: str) -> None:
    """Kills prelude mutant 139 (`applies(R, I) :- ..., guard(I, N, "absent")` without
    `not given(R, N)`): with `$deep` given, WRITE, the else branch, would apply too."""
    path = tmp_path / "guarded.policy"
    path.write_text(GUARDED, encoding="utf-8")
    authz = privilog.load(str(path), {"entities": [D1], "grants": [[ALICE, "READ", D1]]}, backend)
    for args, allowed in (({"deep": "true"}, True), ({}, False)):
        request = authz.request(ALICE, "dataset.copy", D1, args)
        decision = authz.check(request)
        assert decision.allowed is allowed, args
        assert authz.decide(request) is allowed and authz.allows(ALICE, "dataset.copy", D1, args) is allowed
