"""A world in memory: the entities, grants, memberships and admins a policy is evaluated against.

Every change is checked here (ids, actions, memberships) and made only by an
authorization admin; a change read from a world file's log is checked as the
file's values are (:meth:`World._apply`). Whoever listens (an Authorizer) is told
each change made from outside (``world_changed(world, kind, items)``).

A world read from a file holds what keeps it in step with that file (its
``following``, :mod:`engine.world.following`); the model imports no reader or
writer of files, since they import it, and is told at import how a change to a
bound world is made (:func:`keep_bound_files`).
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from privilog.dsl.errors import OneLineError, did_you_mean
from privilog.engine.ids import DEFAULT_INSTANCE, PRINCIPAL_KINDS, EntityId, IdError, parse_principal
from privilog.engine.patterns import parse_pattern
from privilog.engine.world.log import Change, WorldFile

ALL = "ALL"


_NOTHING: AbstractContextManager[None] = nullcontext()  # World._changing for a world in memory

class WorldError(OneLineError):
    """A world file (or world value) that cannot be used, with where it is wrong."""

    located = True


class NotAnAdmin(OneLineError):
    """Someone who is not an authorization admin tried to change grants, memberships or entities."""


class BatchRefused(OneLineError):
    """A batch of changes (:meth:`World.change_many`) refused whole, nothing in it made: ``index`` is
    the change at fault (0-based), ``error`` what it raised (NotAnAdmin, WorldError, IdError)."""

    def __init__(self, index: int, error: Exception):
        super().__init__(str(error))
        self.index, self.error = index, error


_ACTION = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")  # a name, as the policy language writes one


def check_action(action: str, actions: Iterable[str] = ()) -> str:
    """An action's name, checked: one of ``actions`` when they are given, else a name the language writes."""
    known = tuple(actions)
    if not isinstance(action, str) or not _ACTION.match(action):
        raise IdError(f"malformed action {action!r}: an action is a name such as READ")
    if known and action not in known:
        hint = did_you_mean(action, known) or f"actions are {', '.join(known)}"
        raise IdError(f"unknown action `{action}`: {hint}")
    return action


FACT_RELATION = re.compile(r"[a-z_][A-Za-z0-9_]*\Z")  # a relation's name, as the policy language writes one
_FACT_VALUE = re.compile(r"[^\x00-\x1f\x7f]{0,1000}\Z")  # text without control characters, at most 1000


def check_fact(relation: object, row: object) -> tuple[str, ...]:
    """A row of a world's ``facts:``, checked: a relation's name, and a row of text values.

    >>> check_fact("blocked", ["user:eve", "dataset:ns1.*"])
    ('user:eve', 'dataset:ns1.*')
    >>> check_fact("blocked", ["user:eve", 12])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
      ...
    privilog.engine.world.model.WorldError: a value of a `blocked` fact must be text, not 12: quote it ...
    """
    if not isinstance(relation, str) or not FACT_RELATION.match(relation):
        raise WorldError(
            f"a relation of `facts` is a name such as `ranger_item` (letters, digits and `_`, "
            f"starting lower case), not {relation!r}"
        )
    if not isinstance(row, (list, tuple)):
        raise WorldError(f"a `{relation}` fact is a list of values, such as [\"policy 12\", allow], not {row!r}")
    for value in row:
        if isinstance(value, (list, tuple, dict)):
            raise WorldError(f"a value of a `{relation}` fact must be text, not a list or a mapping")
        if not isinstance(value, str):
            raise WorldError(
                f"a value of a `{relation}` fact must be text, not {value!r}: quote it (\"{value}\")"
                if isinstance(value, (int, float)) and not isinstance(value, bool)
                else f"a value of a `{relation}` fact must be text, not {value!r}"
            )
        if not _FACT_VALUE.match(value):
            raise WorldError(f"a value of a `{relation}` fact is text without control characters, "
                             f"at most 1000 characters, not {value[:40]!r}")
    return tuple(row)


def check_membership(member: str, group: str) -> tuple[str, str]:
    """A membership of two principals, checked: only a group or a role has members (a user is in
    no user: being "in" ``user:root`` would hold root's grants and admin rights).

    >>> check_membership("user:eve", "group:eng")
    ('user:eve', 'group:eng')
    >>> check_membership("user:eve", "user:root")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
      ...
    privilog.engine.ids.IdError: `user:eve` cannot be a member of `user:root`: only a group or a role has members ...
    """
    if not group.startswith(("group:", "role:")):
        raise IdError(
            f"`{member}` cannot be a member of `{group}`: only a group or a role has members (group:NAME, role:NAME)"
        )
    return member, group


@dataclass(frozen=True, order=True)
class Grant:
    """``principal`` holds ``action`` on ``entity``."""

    principal: str
    action: str
    entity: EntityId

    def __str__(self) -> str:
        return f"{self.principal} {self.action} {self.entity}"


class Keeper(Protocol):
    """What a world read from a file holds to keep in step with it (:class:`engine.world.following.Following`)."""

    file: WorldFile
    taken_in: int  # changes others made, read in since the file was read
    rereads: int  # times the file was replaced and read anew
    dropped: list[Change]  # unsaved changes given up: their actor is no longer an admin

    def log(self, change: Change) -> None:
        """Append a change to the file's log (the lock is held)."""

    def log_all(self, changes: list[Change]) -> None:
        """Append several changes to the file's log in one write (the lock is held)."""

    def grown(self) -> bool:
        """Whether the log has grown past its bound: time to compact it into the file."""

    def take_in(self, world: World, locked: bool = False) -> int:
        """Read into ``world`` what others changed in the file: :meth:`World.take_in`."""

    def save(self, world: World) -> None:
        """Others' changes taken in, then ``world`` written into the file: :meth:`World.save`."""


# How a change to a world bound to its file is made (under its lock, after others' changes, logged):
# engine.world.following says, when the package is imported (keep_bound_files).
_bound: Callable[[World], AbstractContextManager[None]] | None = None


def keep_bound_files(changing: Callable[[World], AbstractContextManager[None]]) -> None:
    """Make each change to a world bound to a file inside ``changing(world)``."""
    global _bound
    _bound = changing


@dataclass
class World:
    """Facts about a deployment. Entities that exist; grants, which need not name one."""

    entities: set[EntityId] = field(default_factory=set)
    grants: set[Grant] = field(default_factory=set)
    members: set[tuple[str, str]] = field(default_factory=set)
    admins: set[str] = field(default_factory=set)
    instance: str = DEFAULT_INSTANCE
    path: Path | None = None
    # a deployment's settings the policy's rules read as `config(KEY, VALUE)` (a list: a row each)
    config: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # who owns an entity (CDAP's owner principal: the kerberos principal it runs as), read by rules
    # as `owned_by(ENTITY, OWNER)`
    owners: dict[EntityId, EntityId] = field(default_factory=dict)
    # rows of relations the policy declares and derives by no rule (`facts:`), read by rules as
    # base facts; changed only by editing the file (no change of the world's log touches them)
    facts: dict[str, frozenset[tuple[str, ...]]] = field(default_factory=dict)
    # the policy's actions, when the world was read for one: a grant of any other is refused
    actions: tuple[str, ...] = field(default=(), compare=False, repr=False)
    # the name of the file (or folder of tables) the world was read from, as given: for messages
    origin: str | None = field(default=None, compare=False, repr=False)
    # the YAML text the world was read from (or last saved as): a save edits it in place
    source: str | None = field(default=None, compare=False, repr=False)
    # the file the world was read from, and how much of it and its log (engine.world.following)
    following: Keeper | None = field(default=None, compare=False, repr=False)
    # changes made here and not yet saved, for a world that follows a file it is not bound to (the REPL)
    journal: list[Change] | None = field(default=None, compare=False, repr=False)
    # told of each change read in from others (an Authorizer keeps its facts in step)
    observers: weakref.WeakSet[Any] = field(default_factory=weakref.WeakSet, compare=False, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        """A copy sent to another process (``prove --jobs``) has no observers: they live in this one."""
        state = dict(self.__dict__)
        state["observers"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.observers = weakref.WeakSet()

    def existing(self) -> set[EntityId]:
        """Every entity that exists: those listed, and everything that encloses them."""
        out: set[EntityId] = set()
        for entity in self.entities:
            out.add(entity)
            out.update(entity.ancestors(self.instance))
        return out

    def principals(self) -> set[str]:
        """Every principal the world mentions."""
        names = {g.principal for g in self.grants} | self.admins
        for member, group in self.members:
            names.update((member, group))
        names.update(v for values in self.config.values() for v in values if v.partition(":")[0] in PRINCIPAL_KINDS)
        named = (v for rows in self.facts.values() for row in rows for v in row)
        names.update(v for v in named if v.partition(":")[0] in PRINCIPAL_KINDS)
        return names

    def groups_of(self, principal: str) -> set[str]:
        """The groups and roles ``principal`` is in, directly or through other groups.

        One pass over the memberships to index them, then one visit a group: linear,
        however deep the nesting, and cycles end the walk.

        >>> world = World(members={("user:a", "group:x"), ("group:x", "group:y"), ("group:y", "group:x")})
        >>> sorted(world.groups_of("user:a"))
        ['group:x', 'group:y']
        """
        parents: dict[str, list[str]] = {}
        for member, group in self.members:
            parents.setdefault(member, []).append(group)
        found: set[str] = set()
        frontier = [principal]
        while frontier:
            for group in parents.get(frontier.pop(), ()):
                if group not in found:
                    found.add(group)
                    frontier.append(group)
        return found

    def is_admin(self, principal: str) -> bool:
        """Whether ``principal`` is an authorization admin (itself or through a group)."""
        return principal in self.admins or bool(self.groups_of(principal) & self.admins)

    def _require_admin(self, actor: str, what: str = "grants") -> None:
        if not isinstance(actor, str) or not self.is_admin(actor):
            admins = ", ".join(sorted(self.admins)) or "none are listed"
            raise NotAnAdmin(
                f"{actor} is not an authorization admin, so cannot change {what} "
                f"(admins: {admins}; list them under `admins:` in the world)"
            )

    def _valid_grants(self, grants: Iterable[Grant]) -> list[Grant]:
        """The grants, each checked as the world file's reader checks it (what is saved must load)."""
        out = list(grants)
        for grant in out:
            if not isinstance(grant, Grant):
                raise WorldError(f"a grant is a Grant(principal, action, entity), not {grant!r}")
            parse_principal(grant.principal)
            if not isinstance(grant.entity, EntityId):
                raise IdError(f"the entity of a grant is an EntityId, not {grant.entity!r}")
            check_action(grant.action, self.actions)
        return out

    def _valid_members(self, members: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        out = list(dict.fromkeys(members))
        for pair in out:
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise WorldError(f"a membership is (PRINCIPAL, GROUP_OR_ROLE), not {pair!r}")
            member, group = parse_principal(pair[0]), parse_principal(pair[1])
            try:
                check_membership(member, group)
            except IdError as error:
                raise WorldError(str(error)) from None
        return out

    def grant(self, actor: str, grants: Iterable[Grant]) -> list[Grant]:
        """Add grants as ``actor``; return those that were new. Logged at once if bound to a file."""
        checked = self._valid_grants(grants)
        with self._changing():
            self._require_admin(actor)
            new = [g for g in dict.fromkeys(checked) if g not in self.grants]
            self._record("grant", actor, [_grant_row(g) for g in new])
            self.grants.update(new)
        return new

    def revoke(self, actor: str, grants: Iterable[Grant]) -> list[Grant]:
        """Remove grants as ``actor``; return those that were there."""
        asked = list(dict.fromkeys(grants))
        with self._changing():
            self._require_admin(actor)
            gone = [g for g in asked if g in self.grants]
            self._record("revoke", actor, [_grant_row(g) for g in gone])
            self.grants.difference_update(gone)
        return gone

    def add_members(self, actor: str, members: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        """Put principals in groups or roles as ``actor``; return the memberships that were new."""
        checked = self._valid_members(members)
        with self._changing():
            self._require_admin(actor)
            new = [m for m in checked if m not in self.members]
            self._record("member.add", actor, new)
            self.members.update(new)
        return new

    def remove_members(self, actor: str, members: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        """Take principals out of groups or roles as ``actor``; return the memberships that were there."""
        asked = list(dict.fromkeys(members))
        with self._changing():
            self._require_admin(actor)
            gone = [m for m in asked if m in self.members]
            self._record("member.remove", actor, gone)
            self.members.difference_update(gone)
        return gone

    def add_admins(self, actor: str, principals: Iterable[str]) -> list[str]:
        """Make principals (users, groups or roles) authorization admins, as the admin ``actor``."""
        asked = [parse_principal(p) for p in dict.fromkeys(principals)]
        with self._changing():
            self._require_admin(actor, "admins")
            new = [p for p in asked if p not in self.admins]
            self._record("admin.add", actor, new)
            self.admins.update(new)
        return new

    def remove_admins(self, actor: str, principals: Iterable[str]) -> list[str]:
        """Take principals out of the authorization admins, as the admin ``actor``; never the last one."""
        asked = list(dict.fromkeys(principals))
        with self._changing():
            self._require_admin(actor, "admins")
            gone = [p for p in asked if p in self.admins]
            if gone and len(self.admins) <= len(gone):
                raise WorldError("that would leave no authorization admin; add another admin first")
            self._record("admin.remove", actor, gone)
            self.admins.difference_update(gone)
        return gone

    def forget_entities(self, actor: str, entities: Iterable[EntityId]) -> None:
        """Unlist entities as ``actor`` (their grants are kept); the caller knows which (see Inventory)."""
        asked = list(dict.fromkeys(entities))
        with self._changing():
            self._require_admin(actor, "entities")
            gone = [e for e in asked if e in self.entities]
            self._record("entity.remove", actor, [str(e) for e in gone])
            self.entities.difference_update(gone)

    def add_entity(self, actor: str, entity: EntityId) -> None:
        """Create an entity as ``actor``. Grants on it, made before or kept from an earlier life, apply."""
        if not isinstance(entity, EntityId):
            raise IdError(f"an entity is an EntityId, not {entity!r}")
        with self._changing():
            self._require_admin(actor, "entities")
            self._record("entity.add", actor, [str(entity)] if entity not in self.entities else [])
            self.entities.add(entity)

    def delete_entity(self, actor: str, entity: EntityId) -> set[EntityId]:
        """Delete an entity and everything inside it as ``actor``; grants are kept (seed 003)."""
        with self._changing():
            self._require_admin(actor, "entities")
            doomed = {e for e in self.existing() if e == entity or entity in e.ancestors(self.instance)}
            self._record("entity.remove", actor, sorted(str(e) for e in doomed & self.entities))
            self.entities.difference_update(doomed)
        return doomed

    def change_many(
        self, actor: str, changes: Iterable[tuple[str, Iterable[Any]]], trusted: bool = False
    ) -> list[list[Any]]:
        """Make several changes as ``actor``, all or none; what each changed, in order.

        ``changes`` are (kind, items): ``grant`` and ``revoke`` of Grants, ``member.add`` and
        ``member.remove`` of (member, group) pairs, ``entity.add`` and ``entity.delete`` of EntityIds
        (what a delete changed: every entity it deleted, the one named and those inside it). Each is
        made in turn on a scratch copy and checked as one change is (the actor an admin there, ids,
        actions, memberships; an ``entity.delete`` of an entity that does not exist is refused);
        only when every one passed are they made here, and for a world bound to its file logged in
        one append, under the file's lock, after others' changes are taken in; else
        :class:`BatchRefused` names the change at fault. ``trusted``: no admin check (a what-if,
        made on a copy that is never saved).
        """
        with self._changing():
            scratch = _Scratch(
                entities=set(self.entities),
                grants=set(self.grants),
                members=set(self.members),
                admins=set(self.admins),
                instance=self.instance,
                actions=self.actions,
                journal=[],
                trusting=trusted,
            )
            done = []
            for index, (kind, items) in enumerate(changes):
                try:
                    done.append(scratch._make(actor, kind, list(items)))
                except OneLineError as error:  # IdError, WorldError, NotAnAdmin: nothing made here
                    raise BatchRefused(index, error) from None
            logged = scratch.journal or []
            following = self.following
            if self.path is not None and following is not None and logged:
                following.log_all(logged)
            elif self.journal is not None:
                self.journal.extend(logged)
            for change in logged:
                self._tell(change.kind, self._apply(change, "<change>"))
        return done

    def _make(self, actor: str, kind: str, items: list[Any]) -> list[Any]:
        """One change of :meth:`change_many`, made here."""
        if kind == "grant":
            return self.grant(actor, items)
        if kind == "revoke":
            return self.revoke(actor, items)
        if kind == "member.add":
            return self.add_members(actor, items)
        if kind == "member.remove":
            return self.remove_members(actor, items)
        if kind == "entity.add":
            new = [e for e in dict.fromkeys(items) if e not in self.entities]
            for entity in dict.fromkeys(items):
                self.add_entity(actor, entity)
            return new
        if kind == "entity.delete":
            doomed: set[EntityId] = set()
            for entity in dict.fromkeys(items):
                if not isinstance(entity, EntityId) or entity not in self.existing():
                    raise WorldError(f"no entity {entity} in the world: nothing to delete")
                doomed |= self.delete_entity(actor, entity)
            return sorted(doomed)
        raise WorldError(f"unknown change `{kind}` (the changes are grant, revoke, member.add, member.remove, "
                         "entity.add, entity.delete)")

    # ---- changes made here, kept by what keeps the world's file (engine.world.following) ----------

    def _changing(self) -> AbstractContextManager[None]:
        """Around one change. For a world bound to a file, what keeps it holds the file's lock for
        the change, takes in what others wrote first, and compacts the log when it has grown
        (:func:`engine.world.following.changing_bound`); for one in memory, nothing (one shared
        context: measured, a generator's context was a tenth of an in-memory grant)."""
        if self.path is None:
            return _NOTHING
        return self._changing_bound()

    @contextmanager
    def _changing_bound(self) -> Iterator[None]:
        assert _bound is not None, "importing privilog.engine.world says how a bound file is kept"
        with _bound(self):
            yield

    def _record(self, kind: str, actor: str, items: list[Any]) -> None:
        """Log a change about to be made (nothing, when it changes nothing): in the bound file's
        log, fsynced, or in the journal of changes not yet saved."""
        if not items:
            return
        change = Change(kind, actor, tuple(items), Change.now())
        following = self.following
        if self.path is not None and following is not None:
            following.log(change)
        elif self.journal is not None:
            self.journal.append(change)

    def take_in(self, locked: bool = False) -> int:
        """Read into this world what other writers changed in its file since it last read it; the
        number of their changes (-1: the file itself was replaced, and read anew). Changes of this
        world not yet saved (its journal) stay on top; one whose actor is no longer an admin is
        dropped (and counted in ``following.dropped``). Observers (an Authorizer) are told each change.
        ``locked``: the caller holds the file's lock."""
        if self.following is None:
            return 0
        return self.following.take_in(self, locked)

    def save(self) -> None:
        """Write this world, with what others changed meanwhile taken in first, into the file it was
        read from, and empty the log (a compaction); for the REPL's `save world`, or to compact a
        bound world's log by hand."""
        if self.following is None:
            raise WorldError("this world was not read from a file: save it to one with save_world(world, path)")
        self.following.save(self)

    def _tell(self, kind: str, items: list[Any]) -> None:
        if items or kind == "reload":
            for observer in list(self.observers):
                observer.world_changed(self, kind, items)

    def _apply(self, change: Change, where: str) -> list[Any]:
        """Make a logged change here, as a set of facts added or removed (read and checked as the
        world file's values are); what it changed."""
        try:
            values = _values(change, self.actions)
        except (IdError, TypeError, ValueError) as error:
            raise WorldError(f"{where}: {error}") from None
        parts: dict[str, set[Any]] = {
            "grant": self.grants, "member": self.members, "admin": self.admins, "entity": self.entities,
        }
        part = parts["grant" if change.kind == "revoke" else change.kind.split(".")[0]]
        if change.kind in ("grant", "member.add", "admin.add", "entity.add"):
            changed = [v for v in dict.fromkeys(values) if v not in part]
            part.update(changed)
        else:
            changed = [v for v in dict.fromkeys(values) if v in part]
            part.difference_update(changed)
        return changed

    def to_data(self) -> dict[str, Any]:
        """The world as plain data, in the file format."""
        return {
            "instance": self.instance,
            "entities": sorted(str(e) for e in self.entities),
            "grants": [[g.principal, g.action, str(g.entity)] for g in sorted(self.grants)],
            "members": [list(m) for m in sorted(self.members)],
            "admins": sorted(self.admins),
        } | ({"config": {k: list(v) for k, v in sorted(self.config.items())}} if self.config else {}) | (
            {"owners": {str(e): str(o) for e, o in sorted(self.owners.items())}} if self.owners else {}
        ) | ({"facts": {k: [list(r) for r in sorted(v)] for k, v in sorted(self.facts.items())}} if self.facts else {})

    def fact_rows(self) -> int:
        """How many rows the world's ``facts:`` hold (counted against the world's limit of entries)."""
        return sum(len(rows) for rows in self.facts.values())


@dataclass
class _Scratch(World):
    """The copy :meth:`World.change_many` makes its changes on first; ``trusting``: of any actor."""

    trusting: bool = field(default=False, compare=False, repr=False)

    def _require_admin(self, actor: str, what: str = "grants") -> None:
        if not self.trusting:
            super()._require_admin(actor, what)


def _grant_row(grant: Grant) -> tuple[str, str, str]:
    return grant.principal, grant.action, str(grant.entity)


def _values(change: Change, actions: tuple[str, ...]) -> list[Any]:
    """A logged change's items as a world's values, each checked as the world file's are."""
    kind, items = change.kind, change.items
    width = {"grant": 3, "revoke": 3, "member.add": 2, "member.remove": 2}.get(kind, 0)
    for item in items:
        if ((isinstance(item, tuple) and len(item)) or 0) != width:
            shape = {3: "[PRINCIPAL, ACTION, ENTITY]", 2: "[PRINCIPAL, GROUP_OR_ROLE]", 0: "one id"}[width]
            written = list(item) if isinstance(item, tuple) else item
            raise ValueError(f"an item of a `{kind}` change is {shape}, not {written!r}")
    if kind in ("grant", "revoke"):
        out: list[Any] = []
        for principal, action, entity in items:
            # what a grant names: an entity, or a wildcard pattern (as the world file's reader reads it)
            out.append(Grant(parse_principal(principal), check_action(action, actions), parse_pattern(entity)))
        return out
    if kind == "member.add":
        return [check_membership(parse_principal(member), parse_principal(group)) for member, group in items]
    if kind == "member.remove":  # what is there may go, whatever it is
        return [(parse_principal(member), parse_principal(group)) for member, group in items]
    if kind in ("admin.add", "admin.remove"):
        return [parse_principal(p) for p in items]
    return [EntityId.parse(e) for e in items]
