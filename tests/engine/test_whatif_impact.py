"""What a change would do: the accesses it takes away and gives, on the sample world."""

from __future__ import annotations

from privilog.engine.whatif import Access, impact, redecide
from privilog.engine.world import Grant

from privilog import dsl
from privilog.api import load_world_for

WORLD = "privilog/samples/world.yaml"


def _worlds():  # type: ignore[no-untyped-def]
    policy = dsl.load_policy("cdap")
    return policy, load_world_for(policy, WORLD), load_world_for(policy, WORLD)


def test_revoking_a_groups_grant_loses_its_members_accesses_and_nothing_else() -> None:
    policy, before, after = _worlds()
    grant = Grant("group:analysts", "READ", sorted(after.grants)[0].entity)
    assert grant in after.grants
    after.grants.discard(grant)
    found = impact(policy, before, after)
    assert not found.gained
    assert Access("user:dave", "dataset.read", grant.entity) in found.lost
    assert {a.principal for a in found.lost} <= {m for m, g in before.members if g == "group:analysts"}
    # and back again: the same accesses, gained
    back = impact(policy, after, before)
    assert back.gained == found.lost and not back.lost


def test_no_change_no_impact_and_redecide_keeps_only_changed_requests() -> None:
    policy, before, after = _worlds()
    assert not impact(policy, before, after).changes
    from privilog.engine.authorizer import Authorizer

    entity = sorted(before.grants)[0].entity
    asked = [
        Authorizer(policy, before).request("user:dave", "dataset.read", entity),
        Authorizer(policy, before).request("user:dave", "dataset.read", "dataset:marketing.other"),
    ]
    after.grants.discard(sorted(after.grants)[0])
    changed = redecide(policy, before, after, asked)
    assert [(r.operation, a, b) for r, a, b in changed] == [("dataset.read", True, False)]
