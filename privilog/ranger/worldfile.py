"""A world with a ``facts:`` section, read and written: the import's output, the export's input.

The engine reads a world's ``facts:`` (``World.facts``; docs/worlds.md); the import writes its
file in full, Ranger's relations first with sorted rows, so that an import is the same text each
time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from privilog.dsl.files import write_atomically
from privilog.engine.world import World, WorldFile, load_world
from privilog.ranger.servicedef import ACCESSES
from privilog.ranger.translate import RELATIONS, Facts, no_facts

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's, when PyYAML has it: ten times faster
_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
ACTIONS = tuple(ACCESSES.values())  # CDAP's actions: what a grant of the world may name (and ALL)


def read_world(path: str | Path) -> tuple[World, Facts]:
    """A world file and its ``facts:`` (each of :data:`RELATIONS` present, empty when the file has none)."""
    return _held(load_world(Path(path), ACTIONS))


def _held(world: World) -> tuple[World, Facts]:
    """A world read by the engine, and the facts it holds."""
    facts = no_facts()
    for relation, rows in world.facts.items():
        facts.setdefault(relation, set()).update(rows)
    return world, facts


def world_text(world: World, facts: Facts) -> str:
    """The world file's text: the world's entries, then ``facts:`` with every Ranger relation (sorted rows)."""
    data = world.to_data()
    data.pop("facts", None)
    data["facts"] = {relation: [list(row) for row in sorted(facts.get(relation, ()))] for relation in RELATIONS}
    others = {r: [list(row) for row in sorted(rows)] for r, rows in sorted(facts.items()) if r not in RELATIONS}
    data["facts"].update(others)
    header = "# written by `privilog ranger import` (docs/ranger.md); the facts: rows are Ranger's policies\n"
    return header + yaml.dump(data, Dumper=_DUMPER, sort_keys=False, default_flow_style=None, width=200,
                              allow_unicode=True)


def write_world(world: World, facts: Facts, path: str | Path) -> None:
    """Write the world and its facts to ``path`` atomically (in full), under the file's lock; a change log
    left beside an earlier file of that name is removed (the world written is the whole truth), as
    ``save_world`` does."""
    file = WorldFile(Path(path))
    with file.locked():
        write_atomically(file.path, world_text(world, facts), "world")
        file.remove_log()
