"""A world as the text of its file: its source edited in place, or written out in full.

A world read from YAML is written into the text it was read from, changing only
the entries that changed (:mod:`engine.world.yamlsave`), so that a world file kept
in git diffs cleanly; the edited text is read back, and used only when it reads
back to exactly this world. Any other world is written out in full, as YAML.
"""

from __future__ import annotations

import yaml
from privilog.dsl.errors import PrivilogError
from privilog.engine.world.model import World
from privilog.engine.world.readers import parse_world
from privilog.engine.world.yamlsave import Facts, edited


def world_text(world: World) -> str:
    """The world as the text of its file: its source edited in place, or written out in full."""
    text = _edited_source(world)
    if text is None:
        text = yaml.safe_dump(world.to_data(), sort_keys=False, default_flow_style=None, width=100)
    return text


def _edited_source(world: World) -> str | None:
    """The world's source text edited to the world, if that text reads back to exactly this world."""
    if world.source is None:
        return None
    facts = Facts(
        world.instance,
        world.entities,
        {(g.principal, g.action, g.entity) for g in world.grants},
        world.members,
        world.admins,
        world.actions,
    )
    text = edited(world.source, facts)
    if text is None:
        return None
    try:
        again = parse_world(text, world.actions)
    except PrivilogError:
        return None
    same = (again.instance, again.entities, again.grants, again.members, again.admins, again.facts) == (
        world.instance,
        world.entities,
        world.grants,
        world.members,
        world.admins,
        world.facts,  # never changed by a change: the source's own, unless set otherwise in memory
    )
    return text if same else None
