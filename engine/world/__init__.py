"""Worlds: the entities, grants, memberships and admins a policy is evaluated against.

A world is written in YAML or JSON (DESIGN.md, "Files a user writes"), or as
a folder of tables (CSV, JSON lines, Parquet: :mod:`engine.world.formats`). Every
value is validated where it is read, and an error names the file, line and
column of the offending value. Grants change only through an authorization
admin. A world bound to its file logs each change beside it, under the file's
lock, after reading in what others changed (:mod:`engine.world.log`); every
reader replays that log, and it is compacted into the file in place.

A document is read first without positions (:func:`engine.world.formats.load_document`)
and its values checked as plain data; only when something is wrong is it read
again with a position on every value, for the message.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from privilog.engine.world.following import read_world_file, save_world
from privilog.engine.world.formats import is_table_path
from privilog.engine.world.located import Located, WorldReader, compose, parse_located
from privilog.engine.world.log import WorldFile
from privilog.engine.world.model import ALL, Grant, NotAnAdmin, World, WorldError, check_action, check_membership
from privilog.engine.world.readers import load_tables, parse_world, read_config, world_from_data

__all__ = [
    "ALL",
    "Grant",
    "Located",
    "NotAnAdmin",
    "World",
    "WorldError",
    "WorldReader",
    "check_action",
    "check_membership",
    "compose",
    "load_world",
    "parse_located",
    "parse_world",
    "read_config",
    "save_world",
    "world_from_data",
]


def load_world(path: str | Path, actions: Iterable[str], bind: bool = False) -> World:
    """Read a world file or folder. With ``bind``, changes made through the world are saved back to it.

    A world file's change log (``world.yaml.log``, :mod:`engine.world.log`) is replayed on top of
    it: every reader sees every acknowledged change. Only a regular file (or a folder of tables)
    within ``PRIVILOG_MAX_WORLD_BYTES`` is read.
    """
    path = Path(path)
    try:
        exists = path.exists()
    except (OSError, ValueError):  # a name the system refuses: too long, a NUL in it
        exists = False
    if not exists:
        raise WorldError(f"{path}: no such world file")
    if is_table_path(path):
        if bind:
            raise WorldError(f"{path}: a world of tables is not changed in place; write it as YAML to change it")
        return load_tables(path, actions)
    return read_world_file(WorldFile(path), actions, path if bind else None, str(path))


