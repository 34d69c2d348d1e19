"""Which rules of a policy derive something while a request is decided (``privilog test --coverage``).

A rule derives something for a request when its body holds for at least one binding
with the request's facts asserted beside the world's: each rule's body is asked of the
backend as a conjunctive query (:func:`engine.query.solve`), so this holds for every
backend alike. World-derived rules (the hierarchy, group membership) count when the
world gives them something to derive.
"""

from __future__ import annotations

from privilog.dsl.ir import Rule
from privilog.engine.authorizer import Authorizer
from privilog.engine.decision import Request
from privilog.engine.query import solve


def deriving_rules(authorizer: Authorizer, request: Request, rules: tuple[Rule, ...] | None = None) -> set[int]:
    """The indexes (into ``rules``, default the policy's) of the rules whose body holds for ``request``."""
    chosen = authorizer.policy.rules if rules is None else rules
    derived: set[int] = set()
    with authorizer.asserted([request]):
        for index, rule in enumerate(chosen):
            if next(iter(solve(authorizer.backend.query, rule.body)), None) is not None:
                derived.add(index)
    return derived
