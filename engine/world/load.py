"""Loading a world: the one way in from a path, in a straight line.

A folder of tables (or one table file) is read by :func:`engine.world.readers.load_tables`.
A world file is read as of one moment with its change log
(:func:`engine.world.following.read_world_file`): its text (:mod:`dsl.files`), a document of
plain values (:mod:`engine.world.formats`), a :class:`World` (:mod:`engine.world.readers`, or
:mod:`engine.world.located` for a message), the log replayed on top (:mod:`engine.world.following`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from privilog.engine.world.following import read_world_file
from privilog.engine.world.formats import is_table_path
from privilog.engine.world.log import WorldFile
from privilog.engine.world.model import World, WorldError
from privilog.engine.world.readers import load_tables


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
