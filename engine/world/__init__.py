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

import gc
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from privilog.dsl.errors import PrivilogError, did_you_mean
from privilog.dsl.files import FileRefused, read_world_text, write_atomically
from privilog.engine.ids import (
    INSTANCE_NAME,
    EntityId,
    IdError,
    parse_principal,
)
from privilog.engine.patterns import parse_pattern
from privilog.engine.world.formats import TableError, TableFile, Unreadable, find_tables, is_table_path, load_document
from privilog.engine.world.located import (
    CONFIG_KEY,
    CONFIG_VALUE,
    Located,
    WorldReader,
    compose,
    parse_located,
)
from privilog.engine.world.log import Change, Identity, LogDamaged, Logged, WorldFile, log_bound
from privilog.engine.world.model import (
    ALL,
    Grant,
    NotAnAdmin,
    World,
    WorldError,
    check_action,
    check_membership,
    keep_bound_files,
)
from privilog.engine.world.yamlsave import Facts, edited

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


# ---- a world following its file: its log, its lock, others' changes ----------------------------

@dataclass
class Following:
    """The file a world was read from, and how much of it: where the next read of it starts; and
    what keeps the world in step with it (others' changes taken in, its own logged, compaction).

    ``taken_in`` counts the changes others made that were read in since, ``rereads`` the times the
    file itself was replaced (compacted or edited) and read anew, ``dropped`` the unsaved changes
    given up because their actor is no longer an admin: what a program tells its user.
    """

    file: WorldFile
    seen: Identity | None
    end: int  # bytes of the log read: every whole change before it
    lines: int  # lines of the log read
    taken_in: int = 0
    rereads: int = 0
    dropped: list[Change] = field(default_factory=list)

    def log(self, change: Change) -> None:
        """Append a change to the file's log, fsynced (the lock is held)."""
        self.end = self.file.append([change], self.end)
        self.lines += 1

    def grown(self) -> bool:
        """Whether the log has grown past its bound (:func:`engine.world.log.log_bound`): time to compact it."""
        return self.end > log_bound(self.seen.size if self.seen else 0)

    def take_in(self, world: World, locked: bool = False) -> int:
        """:meth:`World.take_in`: others' changes to the file read into ``world``."""
        file = self.file
        if file.identity() != self.seen or file.log_size() < self.end:
            taken = self._read_again(world, locked)
        else:
            logged = file.read(self.end, self.lines + 1)
            for number, change in logged.changes:
                world._tell(change.kind, world._apply(change, f"{file.log}:{number}"))
            self.end, self.lines = logged.end, self.lines + len(logged.changes)
            taken = len(logged.changes)
            self.taken_in += taken
        if taken and world.journal and not self._reapply_journal(world):
            # a change given up was made here: start again from the file, with the rest on top
            self._read_again(world, locked)
            self._reapply_journal(world)
        return taken

    def _read_again(self, world: World, locked: bool) -> int:
        """Read the file and its log anew, in place of the world's facts (the file was replaced)."""
        file = self.file
        fresh, read = _read_file(file, world.actions, world.path, str(world.path or file.path), locked)
        world.instance, world.entities, world.grants = fresh.instance, fresh.entities, fresh.grants
        world.members, world.admins, world.source = fresh.members, fresh.admins, fresh.source
        self.seen, self.end, self.lines = read.seen, read.end, read.lines
        self.rereads += 1
        world._tell("reload", [])
        return -1

    def _reapply_journal(self, world: World) -> bool:
        """The world's unsaved changes made again, in order, on top of others'; False when one
        was given up (its actor is no longer an admin)."""
        kept: list[Change] = []
        for change in world.journal or []:
            if not world.is_admin(change.actor):
                self.dropped.append(change)
                continue
            world._tell(change.kind, world._apply(change, "<unsaved change>"))
            kept.append(change)
        whole = len(kept) == len(world.journal or [])
        world.journal = kept
        return whole

    def save(self, world: World) -> None:
        """:meth:`World.save`: others' changes taken in, then the world compacted into its file."""
        with self.file.locked():
            self.take_in(world, locked=True)
            compact(world, self.file)
        if world.journal is not None:
            world.journal = []


@contextmanager
def changing_bound(world: World) -> Iterator[None]:
    """Around one change of a world bound to a file: the file's lock held for the change, what
    others wrote since the world last read it taken in before anything is decided; the change is
    logged (:meth:`Following.log`) before it is made. The log is compacted into the file when it
    has grown past its bound (:func:`engine.world.log.log_bound`), and at once when the world was
    made in memory and has no log yet."""
    assert world.path is not None
    file = world.following.file if world.following is not None else WorldFile(world.path)
    with file.locked():
        if world.following is not None:
            world.following.take_in(world, locked=True)
        yield
        following = world.following
        if following is None or following.grown():
            compact(world, file)


def compact(world: World, file: WorldFile) -> None:
    """Write the world into its file and remove the log, which the file now holds (the lock is held)."""
    text = world_text(world)
    try:
        write_atomically(file.path, text, "world")
    except FileRefused as error:
        raise WorldError(str(error)) from None
    file.remove_log()
    if world.source is not None:
        world.source = text
    previous = world.following
    following = Following(file, file.identity(), 0, 0)
    if previous is not None:
        following.taken_in, following.rereads = previous.taken_in, previous.rereads
    world.following = following


keep_bound_files(changing_bound)


def save_world(world: World, path: Path) -> None:
    """Write ``world`` to ``path`` atomically, in place of what is there: a crash leaves the old
    file or the new, never half. The file's change log, if it has one, is removed (the world
    written is the whole truth); the world's lock is held meanwhile.

    A world read from YAML is saved into the text it was read from, changing only
    the entries that changed (:mod:`engine.world.yamlsave`), so that a world file kept in
    git diffs cleanly; any other world is written out in full. A symbolic link stays
    a link (its target is replaced), and the file keeps its permissions and, where
    the process may set it, its owner (:func:`dsl.files.write_atomically`).

    To write a world back into the file it follows without overwriting others' changes,
    use :meth:`World.save`.
    """
    file = WorldFile(path)
    follows = world.path is None or WorldFile(world.path).path == file.path
    try:
        with file.locked():
            if follows:
                compact(world, file)
                if world.journal is not None:
                    world.journal = []
                return
            text = world_text(world)
            write_atomically(file.path, text, "world")
            file.remove_log()
    except FileRefused as error:
        raise WorldError(str(error)) from None


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
    same = (again.instance, again.entities, again.grants, again.members, again.admins) == (
        world.instance,
        world.entities,
        world.grants,
        world.members,
        world.admins,
    )
    return text if same else None


# ---- reading, with positions ----------------------------------------------------------


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


def read_config(path: str | Path) -> dict[str, tuple[str, ...]]:
    """A deployment's settings from a YAML or JSON file: a mapping of KEY to a value or a list of
    values, as a world's ``config:`` (a mistake is placed at its file:line:col)."""
    root = compose(read_world_text(path, "config"), str(path))
    if root is None:
        return {}
    return WorldReader(()).config(root)


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


READ_TRIES = 8  # reads of a world file and its log that a compaction may spoil before the lock is taken


def read_world_file(
    file: WorldFile, actions: Iterable[str], bound: Path | None, name: str, locked: bool = False
) -> World:
    """A world file and its log, read as of one moment, without the lock when nobody compacts meanwhile.

    The file's identity is taken before and after: a compaction replaces the file before it
    removes the log, so when the file is unchanged the log read belongs to it. (A log read
    that a compaction has just emptied goes with the new file; one read before, with either:
    replaying changes the file holds already changes nothing.)
    """
    world, following = _read_file(file, actions, bound, name, locked)
    world.following = following
    return world


def _read_file(
    file: WorldFile, actions: Iterable[str], bound: Path | None, name: str, locked: bool
) -> tuple[World, Following]:
    actions = tuple(actions)
    for _ in range(1 if locked else READ_TRIES):
        seen, text, logged = _read_once(file, name)
        if locked or file.identity() == seen:
            break
    else:
        with file.locked():
            seen, text, logged = _read_once(file, name)
    world = parse_world(text, actions, name, bound)
    for number, change in logged.changes:
        world._apply(change, f"{file.log}:{number}")
    if file.path.suffix.lower() != ".json" and not text.lstrip().startswith("{"):
        world.source = text  # YAML: saved by editing this text (JSON is written afresh, as YAML)
    return world, Following(file, seen, logged.end, len(logged.changes))


def _read_once(file: WorldFile, name: str) -> tuple[Identity | None, str, Logged]:
    seen = file.identity()
    try:
        text = read_world_text(name)
    except FileRefused as error:
        raise WorldError(str(error)) from None
    try:
        logged = file.read()
    except LogDamaged as error:
        raise WorldError(str(error)) from None
    return seen, text, logged


def load_tables(path: str | Path, actions: Iterable[str]) -> World:
    """Read a world of tables: a folder of them, or one table file (:func:`engine.world.formats.find_tables`)."""
    try:
        files = find_tables(Path(path))
        with _collector_paused():
            world = _TableReader(actions).read(files)
    except TableError as error:
        raise WorldError(str(error)) from None
    world.actions = tuple(actions)
    return world


# ---- reading, fast --------------------------------------------------------------------


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
        return world

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
