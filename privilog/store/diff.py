"""What changed between two moments of a store: the accesses gained and lost, each with the change that did it.

``privilog store diff --from T1 --to T2`` asks it. The store as it stood at ``T1``
(:meth:`Store.history`) is stepped forward through the log's applied changes up to ``T2``, each
applied as a replica's replay applies it (:class:`~privilog.store.deployment.Deployment`): to a copy
of the world (:func:`steps`), and incrementally to one authorizer over the whole world. For each
change, the engine's what-if bound (:func:`engine.whatif.reach`: the users and entities the change
can reach, read from the policy's rules) says which accesses to decide, and they are decided on
that authorizer just before and just after it; a change the bound cannot hold (of admins a rule
reads, say) is decided by :func:`engine.whatif.impact` whole. For every access that flipped, the
last change that flipped it is kept; an access that flipped and flipped back is no difference. The
accesses compared are those of the principals and entities of either end (as ``privilog whatif``
compares a world before and after), so the net result equals :func:`~engine.whatif.impact_whole` of
the two ends; what this adds is the log entry that explains each.

>>> import tempfile, pathlib
>>> from privilog import dsl
>>> from privilog.store import open_store
>>> store = open_store(str(pathlib.Path(tempfile.mkdtemp()) / "authz.db"))
>>> _ = store.change("local:ops", "admin.add", ["user:root"], trusted=True)
>>> _ = store.change("user:root", "entity.add", ["namespace:ns1"])
>>> _ = store.change("user:root", "grant", [["user:alice", "ADMIN", "namespace:ns1"]])
>>> found = diff(store, dsl.load_policy("cdap"), 1, 3)
>>> [(str(a.entity), a.operation, c.seq) for a, c in found.gained][:2]
[('namespace:ns1', 'namespace.create', 3), ('namespace:ns1', 'namespace.delete', 3)]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from privilog.dsl.ir import Policy
from privilog.engine.authorizer import Authorizer
from privilog.engine.ids import EntityId
from privilog.engine.patterns import is_pattern, parse_pattern
from privilog.engine.whatif import Access, impact, reach
from privilog.engine.world import Grant, World

from .base import CHECKPOINT, ENGINE_KINDS, IMPORT, Change, Store, StoreError
from .deployment import FollowingWorld

PAGE = 1000  # log entries read at a time


@dataclass(frozen=True)
class StoreDiff:
    """The accesses gained and lost from log entry ``start`` to ``end``, each with the change (the log
    entry) that last flipped it; ``flipped_back``: accesses that changed and came back within the window;
    ``steps``: the changes stepped through."""

    start: int
    end: int
    gained: tuple[tuple[Access, Change], ...]
    lost: tuple[tuple[Access, Change], ...]
    flipped_back: int
    steps: int

    def to_json(self) -> dict[str, Any]:
        def row(access: Access, change: Change) -> dict[str, Any]:
            return access.to_json() | {"change": _change_json(change)}

        return {
            "from": self.start,
            "to": self.end,
            "changes": self.steps,
            "gained": [row(a, c) for a, c in self.gained],
            "lost": [row(a, c) for a, c in self.lost],
            "flipped_back": self.flipped_back,
        }


def _change_json(change: Change) -> dict[str, Any]:
    return {
        "seq": change.seq,
        "at": change.at,
        "actor": change.actor,
        "kind": change.kind,
        "items": [list(i) if isinstance(i, tuple) else i for i in change.items],
    }


def copied(world: World, url: str) -> FollowingWorld:
    """A world of its own (its sets copied) that the replay may change."""
    out = FollowingWorld(
        entities=set(world.entities),
        grants=set(world.grants),
        members=set(world.members),
        admins=set(world.admins),
        instance=world.instance,
        actions=world.actions,
        store_url=url,
    )
    out.replaying = True
    return out


def apply(world: Any, entry: Change) -> None:
    """An applied log entry made to ``world`` (a :class:`FollowingWorld` replaying, or an authorizer over
    one) as a deployment's replay makes it."""
    kind, items, actor = entry.kind, entry.items, entry.actor
    rows = world.world if isinstance(world, Authorizer) else world
    if kind in ("grant", "revoke", "revoke.entity"):  # revoke.entity's items: the grants it took
        grants = [Grant(p, action, parse_pattern(e)) for p, action, e in items]
        (world.grant if kind == "grant" else world.revoke)(actor, grants)
    elif kind == "member.add":
        world.add_members(actor, items)
    elif kind == "member.remove":
        world.remove_members(actor, items)
    elif kind == "admin.add":
        world.add_admins(actor, items)
    elif kind == "admin.remove":
        world.remove_admins(actor, items)
    elif kind == "entity.add":
        for text in items:
            world.add_entity(actor, EntityId.parse(text))
    elif kind == "entity.delete":
        for text in items:
            world.delete_entity(actor, EntityId.parse(text))
    elif kind == "role.drop":  # as the store drops it: its memberships, its grants, its admin row
        for role in items:
            world.remove_members(actor, [m for m in rows.members if role in m])
            world.revoke(actor, [g for g in rows.grants if g.principal == role])
            if role in rows.admins:
                world.remove_admins(actor, [role])


def steps(store: Store, start: int, end: int) -> Iterator[tuple[Change, World, World]]:
    """Each applied change of the log after ``start`` up to ``end`` that changes the world, with the world
    before and after it (the first from :meth:`Store.history`; a whole world's entry, an import or a
    checkpoint, read anew from the store)."""
    world: World = store.history(start, granted=False).world
    seq = start
    while seq < end:
        entries = store.changes_since(seq, limit=min(PAGE, end - seq))
        if not entries:
            break
        for entry in entries:
            if entry.seq > end:
                return
            seq = entry.seq
            if not entry.applied or entry.kind not in ENGINE_KINDS | {IMPORT, CHECKPOINT}:
                continue
            if entry.kind in (IMPORT, CHECKPOINT):
                after: World = store.history(entry.seq, granted=False).world
            else:
                if not entry.items:
                    continue
                after = copied(world, store.url)
                apply(after, entry)
            yield entry, world, after
            world = after


def _universe(*worlds: World) -> tuple[set[str], set[EntityId]]:
    """The users and entities of the ends, as the what-if compares them: every user the worlds mention;
    every entity that exists or is granted on."""
    users = {p for w in worlds for p in w.principals() if p.startswith("user:")}
    entities = {e for w in worlds for e in w.existing()}
    entities |= {g.entity for w in worlds for g in w.grants if not is_pattern(g.entity)}
    return users, entities


def diff(
    store: Store,
    policy: Policy,
    start: int,
    end: int,
    backend: str = "compiled",
    keep: Callable[[Access], bool] | None = None,
    progress: Callable[[int, int], None] | None = None,
    principal: str | None = None,
) -> StoreDiff:
    """The accesses gained and lost from log entry ``start`` to ``end`` under ``policy``, each with the last
    change in the window that flipped it. ``keep``: only the accesses it says yes to. ``progress``: told
    (changes done, entries of the window) as the window is stepped through. ``principal``: only that
    user's accesses (a change that cannot reach the user, by :func:`engine.whatif.reach`, is not decided)."""
    if not 0 <= start <= end:
        raise StoreError(f"the window runs from log entry {start} to {end}: --from must not be after --to")
    first: dict[Access, bool] = {}  # each access that flipped: whether its first flip gave it
    last: dict[Access, tuple[bool, Change]] = {}
    ends: list[World] = []
    operations: dict[str, list[str]] = {}
    for op in policy.operations:
        operations.setdefault(op.entity_type, []).append(op.qualified)
    authorizer: Authorizer | None = None
    count = 0
    for entry, before, after in steps(store, start, end):
        if authorizer is None:
            ends.append(before)
            authorizer = Authorizer(policy, copied(before, store.url), backend)
        count += 1
        ends[1:] = [after]
        if progress is not None:
            progress(count, entry.seq - start)
        reached = reach(policy, before, after)
        if reached is None or entry.kind in (IMPORT, CHECKPOINT):  # decided whole; the authorizer anew
            changed = impact(policy, before, after, backend)
            flips = [(True, a) for a in changed.gained] + [(False, a) for a in changed.lost]
            authorizer = Authorizer(policy, copied(after, store.url), backend)
        else:
            asked = [
                (p, e, op)
                for p, entities in reached.items()
                if principal in (None, p)
                for e in entities
                for op in operations.get(e.type, ())
            ]
            old = {(p, e, op) for p, e, op in asked if authorizer.allows(p, op, e)}
            apply(authorizer, entry)
            new = {(p, e, op) for p, e, op in asked if authorizer.allows(p, op, e)}
            flips = [(True, Access(p, op, e)) for p, e, op in new - old]
            flips += [(False, Access(p, op, e)) for p, e, op in old - new]
        for gave, access in flips:
            if (keep is not None and not keep(access)) or principal not in (None, access.principal):
                continue
            first.setdefault(access, gave)
            last[access] = (gave, entry)
    users, entities = _universe(*ends) if ends else (set(), set())
    gained: list[tuple[Access, Change]] = []
    lost: list[tuple[Access, Change]] = []
    back = 0
    for access, (gave, entry) in sorted(last.items()):
        if access.principal not in users or access.entity not in entities:
            continue  # of a principal or an entity neither end knows: made and gone within the window
        if first[access] != gave:
            back += 1
        else:
            (gained if gave else lost).append((access, entry))
    return StoreDiff(start, end, tuple(gained), tuple(lost), back, count)


__all__ = ["StoreDiff", "apply", "copied", "diff", "steps"]
