"""A world with a ``facts:`` section, read and written.

The world's ``facts:`` (a relation's name to its rows, each a list of text) are being added to
the engine's World (branch wt-facts). Until they are, the import keeps them beside the World as
a plain dict, and these two functions are the only ones that know how they reach the file: when
``World`` holds ``facts``, :func:`write_world` sets them and saves, :func:`read_world` takes them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from privilog.dsl.errors import PrivilogError
from privilog.dsl.files import read_world_text, write_atomically
from privilog.engine.world import World, WorldError, WorldFile, load_world, world_from_data
from privilog.ranger.servicedef import ACCESSES
from privilog.ranger.translate import RELATIONS, Facts, no_facts

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's, when PyYAML has it: ten times faster
_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
ACTIONS = tuple(ACCESSES.values())  # CDAP's actions: what a grant of the world may name (and ALL)


def _checked_facts(value: Any, where: str) -> Facts:
    facts = no_facts()
    if value is None:
        return facts
    if not isinstance(value, dict):
        raise PrivilogError(f"{where}: `facts` is a mapping of a relation to its rows")
    for relation, rows in value.items():
        if not isinstance(rows, list) or not all(
            isinstance(r, list) and all(isinstance(v, str) for v in r) for r in rows
        ):
            raise PrivilogError(f"{where}: facts `{relation}`: each row is a list of text values")
        facts.setdefault(str(relation), set()).update(tuple(r) for r in rows)
    return facts


def read_world(path: str | Path) -> tuple[World, Facts]:
    """A world file and its ``facts:`` (each of :data:`RELATIONS` present, empty when the file has none)."""
    path = Path(path)
    if "facts" in World.__dataclass_fields__:  # the engine reads `facts:` itself (wt-facts): its messages place a row
        return _held(load_world(path, ACTIONS))
    text = read_world_text(path)
    try:
        data = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as error:
        raise WorldError(f"{path}: not YAML: {str(error).splitlines()[0]}") from None
    if isinstance(data, dict) and "facts" in data:
        facts = _checked_facts(data.pop("facts"), str(path))
        try:
            world = world_from_data(data, ACTIONS)
        except PrivilogError as error:
            raise WorldError(f"{path}: {error}") from None
        world.path = None
        return world, facts
    return _held(load_world(path, ACTIONS))


def _held(world: World) -> tuple[World, Facts]:
    """A world read by the engine, and the facts it holds (none before the engine reads `facts:`)."""
    facts = no_facts()
    for relation, rows in (getattr(world, "facts", None) or {}).items():
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
