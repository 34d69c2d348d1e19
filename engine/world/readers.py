"""Reading a world, fast: a document's plain values, or a folder of tables, to a :class:`World`.

A document (:func:`engine.world.formats.load_document`) is read first without
positions and its values checked as plain data; only when something is wrong is
it read again with a position on every value (:mod:`engine.world.located`), for
the message. Each distinct id is parsed once. A world of tables is read row by
row, and a bad row is an error naming its file and line.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from privilog.dsl.errors import PrivilogError, did_you_mean
from privilog.dsl.files import read_world_text
from privilog.engine.ids import INSTANCE_NAME, EntityId, IdError, parse_principal
from privilog.engine.patterns import parse_pattern
from privilog.engine.world.formats import (
    FACTS_FOLDER,
    TableError,
    TableFile,
    Unreadable,
    fact_rows,
    fact_tables,
    find_tables,
    load_document,
)
from privilog.engine.world.located import CONFIG_KEY, CONFIG_VALUE, WorldReader, compose, parse_located
from privilog.engine.world.model import ALL, Grant, World, WorldError, check_fact, check_membership


def parse_world(text: str, actions: Iterable[str], file: str = "<world>", path: Path | None = None) -> World:
    """Read a world from YAML or JSON text."""
    with _collector_paused():
        try:
            data = load_document(text)
        except Unreadable:
            pass
        else:
            try:
                world = _PlainReader(actions).read(data, path)
            except _NOT_READ:
                pass
            else:
                world.actions = tuple(actions)
                return world
    return parse_located(text, actions, file, path)


def world_from_data(data: dict[str, Any], actions: Iterable[str]) -> World:
    """A world from plain data in the file format; an error is placed as in that data written as YAML."""
    with _collector_paused():
        try:
            world = _PlainReader(actions).read(data, None)
        except _NOT_READ:
            pass
        else:
            world.actions = tuple(actions)
            return world
    return parse_located(yaml.safe_dump(data), actions, "<world>")


def read_config(path: str | Path) -> dict[str, tuple[str, ...]]:
    """A deployment's settings from a YAML or JSON file: a mapping of KEY to a value or a list of
    values, as a world's ``config:`` (a mistake is placed at its file:line:col)."""
    root = compose(read_world_text(path, "config"), str(path))
    if root is None:
        return {}
    return WorldReader(()).config(root)


def load_tables(path: str | Path, actions: Iterable[str]) -> World:
    """Read a world of tables: a folder of them, or one table file (:func:`engine.world.formats.find_tables`)."""
    try:
        files = find_tables(Path(path))
        with _collector_paused():
            world = _TableReader(actions).read(files)
            if (Path(path) / FACTS_FOLDER).is_dir():
                world.facts = _fact_tables(Path(path) / FACTS_FOLDER)
    except TableError as error:
        raise WorldError(str(error)) from None
    world.actions, world.origin = tuple(actions), str(path)
    return world


def read_facts(path: str | Path) -> dict[str, frozenset[tuple[str, ...]]]:
    """A world's ``facts:`` from a folder of ``RELATION.csv`` (no header) and ``RELATION.jsonl`` files
    (the ``facts`` folder of a world of tables, or one given alone: ``privilog pipeline --facts``);
    a bad row is an error naming its file and line."""
    folder = Path(path)
    if not folder.is_dir():
        raise WorldError(f"{folder}: no such folder of facts (one file a relation, such as ranger_item.csv)")
    try:
        with _collector_paused():
            return _fact_tables(folder)
    except TableError as error:
        raise WorldError(str(error)) from None


def _fact_tables(folder: Path) -> dict[str, frozenset[tuple[str, ...]]]:
    """A world's ``facts`` folder: each relation's rows, a bad one named by its file and line."""
    out: dict[str, frozenset[tuple[str, ...]]] = {}
    for relation, (path, fmt) in fact_tables(folder).items():
        try:
            check_fact(relation, ())
        except WorldError as error:
            raise TableError(f"{path}: {error}") from None
        rows = []
        for line, row in fact_rows(path, fmt):
            try:
                rows.append(check_fact(relation, row))
            except WorldError as error:
                raise TableError(f"{path}:{line}: {error}") from None
        out[relation] = frozenset(rows)
    return out


# ---- the plain reader and the tables reader ---------------------------------------------


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Reading makes millions of objects and no cycles: the cycle collector would only rescan them."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class _Invalid(Exception):
    """A value the plain reader does not take; the located reader says what is wrong with it."""


# What makes the plain reader give up (a value of the wrong type or shape, an unknown
# action or key, a bad id); then the located reader reads it and decides.


_NOT_READ = (_Invalid, PrivilogError, TypeError, KeyError)


class _EntityIds(dict[str, EntityId]):
    """Entity ids by their text, each parsed once; one that is not here is parsed (or raises :class:`IdError`)."""

    def __missing__(self, text: str) -> EntityId:
        entity = self[text] = EntityId.parse(text)
        return entity


class _GrantedIds(dict[str, EntityId]):
    """What grants name, by text: an entity id, or a wildcard pattern (engine.patterns)."""

    def __missing__(self, text: str) -> EntityId:
        entity = self[text] = parse_pattern(text)
        return entity


class _Principals(dict[str, str]):
    """Principals by their text, each checked once and kept as one string (or raises :class:`IdError`)."""

    def __missing__(self, text: str) -> str:
        principal = self[text] = sys.intern(parse_principal(text))
        return principal


class _Ids:
    """The ids a world names, each distinct one read once, and the policy's actions."""

    def __init__(self, actions: Iterable[str]):
        self.actions = tuple(actions)
        # an action's name to the actions it grants (ALL: every one)
        self.action: dict[str, tuple[str, ...]] = {a: (a,) for a in self.actions}
        self.action[ALL] = self.actions
        self.entities = _EntityIds()
        self.granted = _GrantedIds()
        self.principals = _Principals()

    def unknown_action(self, name: str) -> str:
        hint = did_you_mean(name, [*self.actions, ALL]) or f"actions are {', '.join(self.actions)} and ALL"
        return f"unknown action `{name}`: {hint}"


class _PlainReader:
    """:class:`WorldReader` over plain values, without positions: takes what it takes, or raises."""

    GRANT_KEYS = frozenset({"principal", "action", "actions", "entity"})
    MEMBER_KEYS = frozenset({"principal", "group"})

    def __init__(self, actions: Iterable[str]):
        self.ids = _Ids(actions)

    def read(self, data: Any, path: Path | None) -> World:
        world = World(path=path)
        if data is None:
            return world
        if type(data) is not dict or any(type(k) is not str or k not in WorldReader.KEYS for k in data):
            raise _Invalid
        if "instance" in data:
            instance = data["instance"]
            if type(instance) is not str or not INSTANCE_NAME.fullmatch(instance):
                raise _Invalid
            world.instance = instance
        entities, principals = self.ids.entities, self.ids.principals
        world.entities = {entities[e] for e in self._items(data.get("entities"))}
        world.grants = self._grants(self._items(data.get("grants")))
        world.members = {self._member(m) for m in self._items(data.get("members"))}
        world.admins = {principals[a] for a in self._items(data.get("admins"))}
        if "config" in data:
            world.config = self._config(data["config"])
        if "owners" in data:
            owners = data["owners"]
            if type(owners) is not dict or any(type(k) is not str or type(v) is not str for k, v in owners.items()):
                raise _Invalid
            world.owners = {entities[k]: entities[v] for k, v in owners.items()}
        if "facts" in data:
            world.facts = self._facts(data["facts"])
        return world

    @staticmethod
    def _facts(value: Any) -> dict[str, frozenset[tuple[str, ...]]]:
        """``facts``: each relation's rows (a bad one raises; the located reader says where)."""
        if value is None:
            return {}
        if type(value) is not dict:
            raise _Invalid
        out: dict[str, frozenset[tuple[str, ...]]] = {}
        for relation, rows in value.items():
            if rows is not None and type(rows) is not list:
                raise _Invalid
            out[relation] = frozenset(check_fact(relation, row) for row in rows or ())
        return out

    @staticmethod
    def _config(value: Any) -> dict[str, tuple[str, ...]]:
        if type(value) is not dict:
            raise _Invalid
        out: dict[str, tuple[str, ...]] = {}
        for key, values in value.items():
            values = values if type(values) is list else [values]
            if type(key) is not str or not CONFIG_KEY.fullmatch(key):
                raise _Invalid
            if any(type(v) is not str or not CONFIG_VALUE.fullmatch(v) for v in values):
                raise _Invalid
            out[key] = tuple(dict.fromkeys(values))
        return out

    @staticmethod
    def _items(value: Any) -> list[Any]:
        if value is None:
            return []
        if type(value) is not list:
            raise _Invalid
        return value

    def _grants(self, items: list[Any]) -> set[Grant]:
        entities, principals, action = self.ids.granted, self.ids.principals, self.ids.action
        grants: set[Grant] = set()
        add = grants.add
        for item in items:
            if type(item) is list and len(item) == 3:
                who, actions, what = item
            elif type(item) is dict:
                who, actions, what = self._grant_fields(item)
            else:
                raise _Invalid
            principal, entity = principals[who], entities[what]
            if type(actions) is str:
                names = action[actions]
            elif type(actions) is list:
                names = tuple(name for one in actions for name in action[one])
            else:
                raise _Invalid
            for name in names:
                add(Grant(principal, name, entity))
        return grants

    def _grant_fields(self, fields: dict[Any, Any]) -> tuple[Any, Any, Any]:
        if not fields.keys() <= self.GRANT_KEYS or "principal" not in fields or "entity" not in fields:
            raise _Invalid
        if "actions" in fields:
            return fields["principal"], fields["actions"], fields["entity"]
        if "action" in fields:
            return fields["principal"], fields["action"], fields["entity"]
        raise _Invalid

    def _member(self, pair: Any) -> tuple[str, str]:
        if type(pair) is dict and pair.keys() == self.MEMBER_KEYS:
            pair = [pair["principal"], pair["group"]]
        if type(pair) is not list or len(pair) != 2:
            raise _Invalid
        return check_membership(self.ids.principals[pair[0]], self.ids.principals[pair[1]])


class _TableReader:
    """Rows of world tables to a :class:`World`; a bad row is an error naming its file and line."""

    def __init__(self, actions: Iterable[str]):
        self.ids = _Ids(actions)

    def read(self, files: list[TableFile]) -> World:
        world = World()
        for table in files:
            if table.table == "entities":
                world.entities.update(self._entities(table))
            elif table.table == "grants":
                world.grants.update(self._grants(table))
            elif table.table == "members":
                world.members.update(self._members(table))
            else:
                world.admins.update(self._admins(table))
        return world

    def _entities(self, table: TableFile) -> Iterator[EntityId]:
        entities = self.ids.entities
        for n, (text,) in table.rows():
            try:
                entity = entities[text]
            except (PrivilogError, TypeError):
                entity = self.entity(table, n, text)
            yield entity

    def _members(self, table: TableFile) -> Iterator[tuple[str, str]]:
        principals = self.ids.principals
        for n, (member, group) in table.rows():
            try:
                pair = principals[member], principals[group]
            except (PrivilogError, TypeError):
                pair = self.principal(table, n, "principal", member), self.principal(table, n, "group", group)
            try:
                checked = check_membership(*pair)
            except IdError as error:
                raise table.fail(n, str(error)) from None
            yield checked

    def _admins(self, table: TableFile) -> Iterator[str]:
        principals = self.ids.principals
        for n, (text,) in table.rows():
            try:
                admin = principals[text]
            except (PrivilogError, TypeError):
                admin = self.principal(table, n, "principal", text)
            yield admin

    def _grants(self, table: TableFile) -> Iterator[Grant]:
        entities, principals, actions = self.ids.granted, self.ids.principals, self.ids.action
        for n, (who, action, what) in table.rows():
            try:
                principal, entity, names = principals[who], entities[what], actions[action]
            except (PrivilogError, KeyError, TypeError):
                principal = self.principal(table, n, "principal", who)
                entity = self.entity(table, n, what, granted=True)
                names = self.action(table, n, action)
            for name in names:
                yield Grant(principal, name, entity)

    def action(self, table: TableFile, n: int, value: Any) -> tuple[str, ...]:
        name = self._text(table, n, "action", value)
        names = self.ids.action.get(name)
        if names is None:
            raise table.fail(n, self.ids.unknown_action(name))
        return names

    @staticmethod
    def _text(table: TableFile, n: int, column: str, value: Any) -> str:
        if value is None or value == "":
            raise table.fail(n, f"the `{column}` column is empty")
        if type(value) is not str:
            raise table.fail(n, f"the `{column}` column must be text, not {value!r}")
        return value

    def entity(self, table: TableFile, n: int, value: Any, granted: bool = False) -> EntityId:
        try:
            return (self.ids.granted if granted else self.ids.entities)[self._text(table, n, "entity", value)]
        except IdError as error:
            raise table.fail(n, str(error)) from None

    def principal(self, table: TableFile, n: int, column: str, value: Any) -> str:
        try:
            return self.ids.principals[self._text(table, n, column, value)]
        except IdError as error:
            raise table.fail(n, str(error)) from None
