"""A world as base facts: what the policy's rules are evaluated over."""

from __future__ import annotations

from engine.program import Row
from engine.world import World


def world_facts(world: World) -> dict[str, set[Row]]:
    """``grant``, ``member_of``, ``admin``, and the hierarchy of existing entities.

    Only entities that exist (listed, or enclosing one that is) are in the
    hierarchy; a grant on an entity that does not exist is kept but makes
    nothing above it visible, and applies again once the entity is created.
    """
    existing = world.existing()
    child_of: set[Row] = set()
    for entity in existing:
        parent = entity.parent(world.instance)
        if parent is not None:
            child_of.add((str(entity), str(parent)))
    return {
        "grant": {(g.principal, g.action, str(g.entity)) for g in world.grants},
        "member_of": set(world.members),
        "admin": {(a,) for a in world.admins},
        "is_a": {(str(e), e.type) for e in existing},
        "child_of": child_of,
    }
