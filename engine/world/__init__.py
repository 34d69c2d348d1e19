"""Worlds: the entities, grants, memberships and admins a policy is evaluated against (and the
rows of relations the policy leaves to the world, its ``facts:``).

A world is written in YAML or JSON (docs/worlds.md), or as a folder of
tables (CSV, JSON lines, Parquet). Every value is validated where it is read, and an error
names the file, line and column of the offending value. Grants change only through an
authorization admin. The package, in the order a world is read:

* :mod:`~engine.world.load`: ``load_world``, from a path: tables, or a file and its log;
* :mod:`~engine.world.formats`: a file's text to plain values (YAML, JSON, tables), fast;
* :mod:`~engine.world.readers`: plain values to a :class:`World`, each id checked once;
* :mod:`~engine.world.located`: the same with a ``file:line:col`` on every value, for messages;
* :mod:`~engine.world.model`: the :class:`World` in memory, each change checked;
* :mod:`~engine.world.following`: a world following its file (its log replayed, others'
  changes taken in, its own logged under the file's lock, compacted), and ``save_world``;
* :mod:`~engine.world.writing` and :mod:`~engine.world.yamlsave`: a world as its file's text,
  edited in place; :mod:`~engine.world.log`: the change log and the lock;
* :mod:`~engine.world.tables`: a world written as a folder of tables (CSV, JSON lines, Parquet).

A world bound to its file is not a store dialect (:mod:`privilog.store`), though both keep
the same changes durably: a store is a deployment's database of record, with an audit log of
refused changes, tokens, roles and sequence numbers that replicas follow, and keeps no
``config:``, ``owners:`` or ``facts:``, while a world file is a person's YAML in git, edited in place
with its comments kept, that a program or a REPL changes under a lock (and the REPL keeps
unsaved changes, which a store has no place for). As a dialect the file would share none of
the SQL written once in ``privilog/store/sql.py`` and would have to refuse half the interface.
"""

from __future__ import annotations

# importing following (for save_world) also tells the model how a bound file is kept (keep_bound_files)
from privilog.engine.world.following import save_world
from privilog.engine.world.load import load_world
from privilog.engine.world.located import Located, WorldReader, compose, parse_located
from privilog.engine.world.log import WorldFile
from privilog.engine.world.model import (
    ALL,
    BatchRefused,
    Grant,
    NotAnAdmin,
    World,
    WorldError,
    check_action,
    check_membership,
)
from privilog.engine.world.readers import parse_world, read_config, read_facts, world_from_data
from privilog.engine.world.tables import TABLE_SUFFIX, write_tables

__all__ = [
    "ALL",
    "TABLE_SUFFIX",
    "BatchRefused",
    "Grant",
    "Located",
    "NotAnAdmin",
    "World",
    "WorldError",
    "WorldFile",
    "WorldReader",
    "check_action",
    "check_membership",
    "compose",
    "load_world",
    "parse_located",
    "parse_world",
    "read_config",
    "read_facts",
    "save_world",
    "world_from_data",
    "write_tables",
]
