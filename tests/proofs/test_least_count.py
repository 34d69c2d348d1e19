"""A case's world count is never more than its enumeration yields, so refusing a case by the count alone
refuses only what the enumeration would have refused at the limit (and skips enumerating it)."""

from __future__ import annotations

import pytest
from privilog.proofs.load import load_proved
from privilog.proofs.prover import Prover, build_cases
from privilog.proofs.worlds import BoundTooLarge, space_for


@pytest.mark.parametrize("name", ["cdap", "cdap-4.2"])
def test_the_count_is_a_lower_bound_of_the_enumeration(name: str) -> None:
    prover = Prover(load_proved(name))
    cases = build_cases(prover.proved.policy, prover.evaluator.authorizer)
    counted = 0
    for case in cases:
        for bound in (1, 2):
            space = space_for(prover.proved, case, bound, prover.context.changes_grants)
            least = space.least_count()
            if least > 50_000:
                with pytest.raises(BoundTooLarge):
                    space.representatives(50_000)
                continue
            assert least <= sum(1 for _ in space.points()), case.label
            counted += 1
    assert counted > len(cases)  # most cases are small enough to enumerate at bound 1 and some at 2
