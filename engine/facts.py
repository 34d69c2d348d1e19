"""A world as base facts: what the policy's rules are evaluated over."""

from __future__ import annotations

from collections.abc import Iterable

from privilog.engine.ids import EntityId
from privilog.engine.patterns import is_pattern, match_rows
from privilog.engine.program import Row
from privilog.engine.world import World


def name_rows(ids: Iterable[str]) -> set[Row]:
    """``name_of`` rows: each id (text with a kind: a principal's, an entity's) and its name.

    >>> sorted(name_rows(["user:alice", "kerberosprincipal:alice@EX.COM", "READ"]))
    [('kerberosprincipal:alice@EX.COM', 'alice@EX.COM'), ('user:alice', 'alice')]
    """
    return {(i, i.partition(":")[2]) for i in ids if ":" in i}


def within_rows(grants: Iterable[EntityId], instance: str) -> set[Row]:
    """``within`` rows: each plain entity a grant names, and each entity enclosing it by its id."""
    return {(str(g), str(a)) for g in grants if not is_pattern(g) for a in g.ancestors(instance)}


def world_facts(
    world: World, named: Iterable[EntityId] = (), with_names: bool = False, with_within: bool = False
) -> dict[str, set[Row]]:
    """``grant``, ``member_of``, ``admin``, and the hierarchy of existing entities.

    Only entities that exist (listed, or enclosing one that is) are in the
    hierarchy; a grant on an entity that does not exist is kept but makes
    nothing above it visible, and applies again once the entity is created.
    A wildcard grant's pattern, and each pattern of ``named`` (those the policy's rules
    name), gets a ``matches`` row for each of these entities it matches (engine.patterns).
    With ``with_names``, every principal and entity id gets its ``name_of`` row.
    """
    parents: dict[EntityId, EntityId | None] = {}  # each entity's parent, found once
    for entity in world.entities:
        while entity not in parents:
            parent = parents[entity] = entity.parent(world.instance)
            if parent is None:
                break
            entity = parent
    names = {e: str(e) for e in parents}
    patterns = {g.entity for g in world.grants if is_pattern(g.entity)} | set(named)
    owners = [str(o) for o in world.owners.values()]
    ids = [*world.principals(), *names.values(), *(str(g.entity) for g in world.grants), *owners] if with_names else []
    return {
        "within": within_rows({g.entity for g in world.grants}, world.instance) if with_within else set(),
        "name_of": name_rows(ids),
        "matches": match_rows(patterns, parents),
        "grant": {(g.principal, g.action, str(g.entity)) for g in world.grants},
        "member_of": set(world.members),
        "admin": {(a,) for a in world.admins},
        "config": {(key, value) for key, values in world.config.items() for value in values},
        "owned_by": {(str(e), str(o)) for e, o in world.owners.items()},
        "is_a": {(names[e], e.type) for e in parents},
        "child_of": {(names[e], names[p]) for e, p in parents.items() if p is not None},
    }
