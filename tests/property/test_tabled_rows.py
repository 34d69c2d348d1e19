"""``privilog decide``'s rows (``Authorizer.tabled``: the compiled backend's plans) against the
reference's (the row read off pyDatalog's checked Decision), on the worlds and requests
test_oracle.py draws: pre-grants, wildcards, whole namespaces with holes, cyclic memberships,
creates, arguments. Every column must be identical: the decision, the unmet requirements with
what they lack, the bypasses, and the grant named for each requirement met."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from privilog.engine.authorizer import tabled
from test_oracle import SETTINGS, requests, worlds

import privilog
from privilog.api import load_world_for

_SHARED: dict[str, privilog.Authorizer] = {}


def _authorizer(backend: str, world: dict[str, Any]) -> privilog.Authorizer:
    if backend not in _SHARED:
        _SHARED[backend] = privilog.load("cdap", backend=backend)
    authz = _SHARED[backend]
    authz.world = load_world_for(authz.policy, dict(world))
    authz.refresh()
    return authz


@SETTINGS
@given(world=worlds(), data=st.data())
def test_rows_by_plans_are_the_reference_rows(world: dict[str, Any], data: st.DataObject) -> None:
    fast, reference = _authorizer("compiled", world), _authorizer("pydatalog", world)
    for principal, operation, entity, args in data.draw(st.lists(requests(world), min_size=1, max_size=8)):
        want = tabled(reference.check(reference.request(principal, operation, entity, args)), reference.policy)
        assert fast.tabled(principal, operation, entity, args) == want, (principal, operation, entity, args)
