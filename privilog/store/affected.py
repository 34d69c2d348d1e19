"""What a change of the store can affect: the scope a cache of decisions drops, and the feed of scopes.

A client that caches decisions (CDAP caches each for 300 s) keeps showing an allow after its grant
is revoked. A deployment knows, as it replays each log entry, which decisions the entry may have
changed: :func:`Scoper.around` computes an :class:`Affected` from the world just before and just
after, and the :class:`Feed` keeps the last few (``GET /v1/watch`` answers from it; docs/caches.md).

A cached decision ``(principal, operation, entity, args)`` is to be dropped when
:meth:`Affected.covers` it: its principal is one of ``principals`` (None: every principal), and its
entity, or an entity one of its ``args`` names, is *related* to one of ``entities`` (None: every
entity): the same id, inside it, or enclosing it. The scope of each kind of change:

* ``grant``, ``revoke``, ``revoke.entity`` of (P, A, E): P and every principal that is a member of P,
  directly or through groups; E, or for a wildcard pattern the nearest entity enclosing it that has no
  wildcard (none at all for ``kerberosprincipal:*``: every entity);
* ``member.add``, ``member.remove`` of (M, G): M and its members (in the world before and after); what
  the grants of G and of every group G is in can affect (before and after);
* ``admin.add``, ``admin.remove`` of M: M and its members, every entity, when a rule of the policy reads
  ``admin`` (no rule of rules/ does: then nothing);
* ``role.drop`` of R: R and its members (the world before); what the grants of R and of its groups can
  affect;
* ``entity.add``, ``entity.delete`` of E: every principal, E (what a delete takes is inside E);
* ``import``, ``checkpoint``, a ``policy.use`` of a version other than the one served, a reload:
  everything (a reset); ``role.create``, ``token.*``, a ``policy.use`` of the version served: nothing.

Why related *both ways*: the shipped policies (rules/*.policy) reach across the hierarchy. A grant on
an entity inside the request's entity meets ``list``/``get`` (``any on self or within``) and a delete's
``ADMIN on every descendant``; a grant on an enclosing one meets ``ADMIN on application`` (a
schedule's), ``on parent``, ``on instance``; creating or deleting an entity changes what exists
inside what encloses it. Why the ``args`` too: a requirement may name an argument's entity
(``application.deploy``'s ``$artifact``, ``$datasets``; ``dataset.create``'s ``$dataset_type``;
``schedule.resume``'s ``$program``, a sibling of the schedule, neither inside the other). Every
requirement of the shipped policies is on the request's entity, an entity related to it, or an
argument's entity. A policy's own rules are read by the what-if analysis
(:func:`engine.whatif.locality`, request arguments included): rules that read a principal's grants
on entities not tied to the request's make a grant's or a membership's scope every entity (of the
principals it names); rules it cannot place at all (another principal's grants, say) make every
scope everything. So a cache drops more under such a policy, never less. A world's ``config``,
``owners`` and ``facts`` are not in a store, so no log entry changes them.

>>> scope = Affected(frozenset({"user:ann"}), frozenset({"dataset:ns1.orders"}))
>>> scope.covers("user:ann", "dataset.read", "dataset:ns1.orders")
True
>>> scope.covers("user:ann", "namespace.get", "namespace:ns1")  # encloses the entity: `any on self or within`
True
>>> scope.covers("user:ann", "dataset.read", "dataset:ns1.clicks")
False
>>> scope.covers("user:bob", "dataset.read", "dataset:ns1.orders")
False
>>> scope.covers("user:ann", "application.deploy", "application:ns1.etl", {"datasets": ["dataset:ns1.orders"]})
True
>>> literal_ancestor("dataset:ns1.sales_*"), literal_ancestor("kerberosprincipal:*")
('namespace:ns1', None)
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from privilog.dsl.ir import Atom, Policy
from privilog.engine.ids import DEFAULT_INSTANCE, EntityId, IdError
from privilog.engine.patterns import is_pattern, parse_pattern
from privilog.engine.whatif import locality
from privilog.engine.world import World

from .base import CHECKPOINT, IMPORT, Change

FEED_SIZE = 10_000  # scopes a deployment keeps; a watcher further behind is told to reset
MAX_PRINCIPALS = 1_000  # principals named in one scope; more (a group of thousands): every principal
MAX_ENTITIES = 1_000  # entities named in one scope; more: every entity


@dataclass(frozen=True)
class Affected:
    """The decisions a change may have changed: those of ``principals`` about entities related to
    ``entities`` (None: all of either)."""

    principals: frozenset[str] | None
    entities: frozenset[str] | None

    @property
    def everything(self) -> bool:
        return self.principals is None and self.entities is None

    @property
    def nothing(self) -> bool:
        return self.principals == frozenset() or self.entities == frozenset()

    def covers(
        self,
        principal: str,
        operation: str,
        entity: str,
        args: Mapping[str, Any] | None = None,
        instance: str = DEFAULT_INSTANCE,
    ) -> bool:
        """Whether a decision about this request is to be dropped (``operation`` does not narrow it)."""
        if self.principals is not None and principal not in self.principals:
            return False
        if self.entities is None:
            return True
        named = [entity, *entities_named(args)]
        return any(related(n, a, instance) for n in named for a in self.entities)

    def union(self, other: Affected) -> Affected:
        principals = None if self.principals is None or other.principals is None else self.principals | other.principals
        entities = None if self.entities is None or other.entities is None else self.entities | other.entities
        return Affected(principals, entities)

    def to_json(self) -> dict[str, list[str] | None]:
        return {
            "principals": None if self.principals is None else sorted(self.principals),
            "entities": None if self.entities is None else sorted(self.entities),
        }


EVERYTHING = Affected(None, None)
NOTHING = Affected(frozenset(), frozenset())


def entities_named(args: Mapping[str, Any] | None) -> list[str]:
    """The arguments' values that are entity ids (text, or lists of text)."""
    out: list[str] = []
    for value in (args or {}).values():
        for item in value if isinstance(value, list | tuple) else [value]:
            if isinstance(item, str) and ":" in item:
                out.append(item)
    return out


@lru_cache(maxsize=65_536)
def _chain(text: str, instance: str) -> frozenset[str] | None:
    """An id and every id enclosing it; None for text that is not an id."""
    try:
        entity = EntityId.parse(text)
    except IdError:
        return None
    return frozenset([text, *(str(a) for a in entity.ancestors(instance))])


def related(a: str, b: str, instance: str = DEFAULT_INSTANCE) -> bool:
    """Whether two ids are the same, or one encloses the other (text that is no id: related to all)."""
    if a == b:
        return True
    chain_a, chain_b = _chain(a, instance), _chain(b, instance)
    if chain_a is None or chain_b is None:
        return True
    return b in chain_a or a in chain_b


def literal_ancestor(text: str, instance: str = DEFAULT_INSTANCE) -> str | None:
    """What a grant's entity can affect: the entity, or for a wildcard pattern the nearest entity
    enclosing every entity it matches (a pattern's wildcards stay within their level); None when
    there is none (a pattern of a top-level type)."""
    if not is_pattern(text):
        return text
    current: EntityId | None = parse_pattern(text)
    while current is not None and is_pattern(current):
        current = current.parent(instance)
    return None if current is None else str(current)


class Scoper:
    """The scopes of log entries, as a deployment replays them. It keeps indexes in step with the
    replay (a group's direct members, a principal's direct groups, a principal's own grants), to find
    a principal's members, a group's groups and what they hold without a pass over the world."""

    def __init__(self, world: World, policy: Policy | None = None):
        self.reset(world)
        self.serve(policy)

    def serve(self, policy: Policy | None) -> None:
        """Scope for ``policy``: whether a rule of it reads ``admin`` (none in rules/ does; then who is an
        authorization admin changes no decision), and how far its rules reach (:func:`engine.whatif.locality`
        with request arguments): a policy whose own rules read what the analysis cannot place makes every
        change's scope everything; one whose rules read a principal's grants on entities not tied to the
        request's makes a grant's or a membership's scope every entity (of the principals it names).
        None: assume the worst."""
        self.reads_admin = policy is None or any(
            isinstance(literal, Atom) and literal.predicate == "admin" for rule in policy.rules for literal in rule.body
        )
        reach = locality(policy, args=True) if policy is not None else None
        self.bounded = reach is not None and reach.bounded
        self.anywhere = reach is None or reach.held_anywhere

    def reset(self, world: World) -> None:
        self.instance = world.instance
        self._members: dict[str, set[str]] = {}
        self._groups: dict[str, set[str]] = {}
        self._grants: dict[str, set[tuple[str, str]]] = {}
        self._add(world.members)
        for grant in world.grants:
            self._grants.setdefault(grant.principal, set()).add((grant.action, str(grant.entity)))

    def members(self, principals: Iterable[str]) -> frozenset[str] | None:
        """The principals and every principal in them, through any depth of groups (None past
        :data:`MAX_PRINCIPALS`)."""
        return _closure(principals, self._members)

    def held(self, groups: Iterable[str]) -> frozenset[str] | None:
        """What a member of ``groups`` holds through them: the entities that the grants of the groups, and
        of every group they are in, can affect (None when one can affect any, or past :data:`MAX_ENTITIES`)."""
        closure = _closure(groups, self._groups)
        if closure is None:
            return None
        entities: set[str] = set()
        for group in closure:
            for _, entity in self._grants.get(group, ()):
                ancestor = literal_ancestor(entity, self.instance)
                if ancestor is None:
                    return None
                entities.add(ancestor)
                if len(entities) > MAX_ENTITIES:
                    return None
        return frozenset(entities)

    def around(self, entry: Change, world: World, apply: Callable[[], None]) -> Affected:
        """Apply ``entry`` (``apply()``) to ``world`` and return its scope, from the world before and after.

        A membership (M, G) changes what M and its members hold through G and the groups G is in, so
        its entities are what those groups' grants can affect; a role dropped, what the role's grants
        and its groups' can (its members lose them)."""
        scope = self._around(entry, world, apply)
        if not self.bounded and not scope.nothing:
            return EVERYTHING
        if self.anywhere and scope.entities is not None and entry.kind not in ("entity.add", "entity.delete"):
            return Affected(scope.principals, None)
        return scope

    def _around(self, entry: Change, world: World, apply: Callable[[], None]) -> Affected:
        kind, items = entry.kind, entry.items
        if kind == "role.drop":
            dropped = [m for m in world.members if m[0] in items or m[1] in items]
            scope = Affected(self.members(items), self.held(items))
            apply()
            self._drop(dropped)
            for role in items:
                self._grants.pop(role, None)
            return scope
        if kind in ("member.add", "member.remove"):
            groups = [g for _, g in items]
            before = Affected(self.members(m for m, _ in items), self.held(groups))
            apply()
            self._add(items) if kind == "member.add" else self._drop(items)
            return before.union(Affected(self.members(m for m, _ in items), self.held(groups)))
        apply()
        if kind in ("grant", "revoke", "revoke.entity"):
            for principal, action, entity in items:
                if kind == "grant":
                    self._grants.setdefault(principal, set()).add((action, entity))
                else:
                    self._grants.get(principal, set()).discard((action, entity))
            ancestors = {literal_ancestor(e, self.instance) for _, _, e in items}
            entities = None if None in ancestors else frozenset(a for a in ancestors if a is not None)
            return Affected(self.members(p for p, _, _ in items), entities)
        if kind in ("admin.add", "admin.remove"):
            return Affected(self.members(items), None) if self.reads_admin else NOTHING
        if kind in ("entity.add", "entity.delete"):
            return Affected(None, frozenset(items))
        if kind in (IMPORT, CHECKPOINT):
            self.reset(world)
            return EVERYTHING
        return NOTHING  # role.create, token.*: nothing the engine holds

    def _add(self, pairs: Iterable[Any]) -> None:
        for member, group in pairs:
            self._members.setdefault(group, set()).add(member)
            self._groups.setdefault(member, set()).add(group)

    def _drop(self, pairs: Iterable[Any]) -> None:
        for member, group in pairs:
            self._members.get(group, set()).discard(member)
            self._groups.get(member, set()).discard(group)


def _closure(start: Iterable[str], edges: dict[str, set[str]]) -> frozenset[str] | None:
    """``start`` and everything reached along ``edges`` (None past :data:`MAX_PRINCIPALS`)."""
    found = set(start)
    frontier = list(found)
    while frontier:
        for other in edges.get(frontier.pop(), ()):
            if other not in found:
                found.add(other)
                frontier.append(other)
                if len(found) > MAX_PRINCIPALS:
                    return None
    return frozenset(found)


@dataclass(frozen=True)
class Scoped:
    """One log entry replayed, and its scope: the revision it produced, its time and kind."""

    seq: int
    revision: str
    at: str
    kind: str
    affected: Affected

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "revision": self.revision, "at": self.at, "kind": self.kind,
                "affected": self.affected.to_json()}


class Feed:
    """The last :data:`FEED_SIZE` scopes a deployment recorded, and who waits for the next.

    ``floor``: the oldest log entry from which every later change is kept: a watcher at an earlier
    one has missed some and drops its whole cache (a reset). Listeners are called (from the replaying
    thread) after each scope is recorded; they must be quick and never raise.
    """

    def __init__(self, start: int, size: int = FEED_SIZE):
        self._lock = threading.Lock()
        self._scopes: deque[Scoped] = deque(maxlen=size)
        self.floor = start
        self._listeners: set[Callable[[], None]] = set()

    def record(self, scoped: Scoped) -> None:
        with self._lock:
            if self._scopes.maxlen is not None and len(self._scopes) == self._scopes.maxlen:
                self.floor = self._scopes[0].seq  # the one about to be dropped: a watcher before it resets
            self._scopes.append(scoped)
            listeners = list(self._listeners)
        for listener in listeners:
            listener()

    def restart(self, seq: int) -> None:
        """Forget every scope: a watcher before ``seq`` resets (a new policy served)."""
        with self._lock:
            self._scopes.clear()
            self.floor = seq
            listeners = list(self._listeners)
        for listener in listeners:
            listener()

    def after(self, seq: int, limit: int = FEED_SIZE) -> list[Scoped] | None:
        """The scopes of the entries after ``seq`` (at most ``limit``, oldest first); None when some
        were forgotten (``seq`` is before :attr:`floor`)."""
        with self._lock:
            if seq < self.floor:
                return None
            out: list[Scoped] = []
            for scoped in reversed(self._scopes):
                if scoped.seq <= seq:
                    break
                out.append(scoped)
        out.reverse()
        return out[:limit]

    def listen(self, listener: Callable[[], None]) -> None:
        with self._lock:
            self._listeners.add(listener)

    def unlisten(self, listener: Callable[[], None]) -> None:
        with self._lock:
            self._listeners.discard(listener)


def policy_use_scope(entry: Change, served_version: str) -> Affected:
    """A ``policy.use`` entry: nothing when it records the version this deployment serves, else a reset."""
    return NOTHING if entry.items and entry.items[0][1] == served_version else EVERYTHING


__all__ = [
    "EVERYTHING",
    "FEED_SIZE",
    "NOTHING",
    "Affected",
    "Feed",
    "Scoped",
    "Scoper",
    "entities_named",
    "literal_ancestor",
    "policy_use_scope",
    "related",
]
