"""What a REPL session holds: a policy and the session's own rules, a world (from a file, a
mapping or a store), the authorizer over them, and whether the world has unsaved changes.

:class:`SessionState` also does what every command shares: a fresh authorizer when the policy
or world changes, a change remembered (or sent to the store), and the changes others made to
the session's world file taken in. The commands (``questions``, ``changes``, ``files``,
``rules``) take it as their first argument; ``session.Session`` is this state with the command
table over it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from privilog import dsl
from privilog.api import load_world_for
from privilog.dsl.errors import PrivilogError
from privilog.dsl.files import read_policy_text
from privilog.dsl.ir import Policy
from privilog.engine.authorizer import Authorizer
from privilog.engine.world import World
from privilog.store import open_store
from privilog.store.base import Change as LogEntry
from privilog.store.deployment import Deployment


class ReplError(PrivilogError):
    """A line the session cannot run as written; the message says what to type instead."""


class SessionState:
    """A policy, a world and an authorizer over them, changed and questioned one line at a time."""

    def __init__(
        self,
        policy: str = "cdap",
        world: str | Path | Mapping[str, Any] | None = None,
        store: str | None = None,
    ):
        self.policy_name = policy
        self.policy_path = dsl.resolve_policy_path(policy)
        self.policy_text = read_policy_text(self.policy_path)
        self.policy: Policy = dsl.load_policy(str(self.policy_path))
        self.world_path: Path | None = Path(world) if isinstance(world, str | Path) else None
        # with a store, every change goes to it (durable, admin-checked, audited) and the
        # session replays the store's log before each line, so it sees others' changes too
        self.deployment: Deployment | None = None
        if store is not None:
            if world is not None:
                raise ReplError("give a world or a store, not both")
            self.deployment = Deployment(open_store(store, self.policy.actions, create=False), self.policy)
            self.authorizer = self.deployment.authorizer
        else:
            loaded = load_world_for(self.policy, dict(world) if isinstance(world, Mapping) else world)
            loaded.journal = []  # the session's changes, kept until `save world` and re-applied on others'
            self.authorizer = Authorizer(self.policy, loaded)
        self.rules: list[str] = []  # the session's own rules, in the order added
        # `as of MOMENT` on a store: the questions answer as the store stood then (store.history.Past);
        # changes are refused until `as of now`
        self.past: Any = None
        self.last_entry: LogEntry | None = None  # the store's log entry of the line's last change
        self.finished = False
        self.unsaved = False
        self.warned_unsaved = False
        self.interrupted = False

    @property
    def asked(self) -> Authorizer:
        """The authorizer the questions ask: the past's after `as of MOMENT`, else the session's."""
        return self.past.authorizer if self.past is not None else self.authorizer

    @property
    def world(self) -> World:
        """The session's world, as changed by its grants, revokes and entity commands."""
        return self.authorizer.world

    def rebuild(self, policy: Policy | None = None, world: World | None = None, evaluate: Iterable[str] = ()) -> None:
        """A fresh authorizer (and backend) for the session's policy and world, with the
        relations of ``evaluate`` evaluated (a backend may otherwise wait until they are asked
        for); the session's own is replaced only when all that is done. On a store, the store's
        world is read anew; a world given leaves the store."""
        if self.deployment is not None and world is None:
            previous = self.deployment.policy
            self.deployment.reload(policy or self.policy)
            try:
                for relation in evaluate:
                    self.deployment.authorizer.backend.query(relation)
            except BaseException:
                self.deployment.reload(previous)
                raise
            authorizer = self.deployment.authorizer
        else:
            authorizer = Authorizer(policy or self.policy, world if world is not None else self.world)
            for relation in evaluate:
                authorizer.backend.query(relation)
            self.deployment = None
        if authorizer is not self.authorizer:
            self.world.observers.discard(self.authorizer)  # the old one no longer follows the world's file
        self.authorizer = authorizer
        self.policy = authorizer.policy
        if self.past is not None:  # the same moment under the new policy (gone with the store)
            from privilog.store.history import as_of

            store = self.deployment.store if self.deployment is not None else None
            self.past = as_of(store, str(self.past.seq), self.policy) if store is not None else None

    # ---- changes -------------------------------------------------------------------

    def store_change(self, actor: str, kind: str, items: list[Any]) -> LogEntry:
        """A change made in the session's store (durable, audited), then replayed here."""
        assert self.deployment is not None
        entry = self.deployment.change(actor, kind, items)
        self.authorizer = self.deployment.authorizer
        self.last_entry = entry
        return entry

    def changed(self) -> None:
        """The authorizer applied the change itself (incrementally); remember it is unsaved.
        A change made in a store is saved already."""
        if self.deployment is None:
            self.unsaved = True
            self.warned_unsaved = False

    # ---- others' changes -----------------------------------------------------------

    def take_in(self) -> list[str]:
        """Notes on what others changed in the session's world file since it was read, read in
        (the session's unsaved changes stay on top)."""
        following = self.world.following
        if following is None or self.deployment is not None:
            return []
        before = (following.taken_in, following.rereads, len(following.dropped))
        try:
            self.world.take_in()
        except PrivilogError as error:
            return [f"note: cannot read {self.world_path} again, so the session keeps its world: {error}"]
        return self.news(before)

    def news(self, before: tuple[int, int, int]) -> list[str]:
        """Notes on what the world's following read in since ``before`` (its counts of changes
        taken in, rereads and dropped changes then)."""
        following = self.world.following
        assert following is not None
        taken, rereads, dropped = following.taken_in - before[0], following.rereads - before[1], before[2]
        if not taken and following.rereads == before[1] and len(following.dropped) == dropped:
            return []
        path = self.world_path or following.file.path
        what = "read it again" if rereads else f"read in their {count(taken, 'change')}"
        kept = len(self.world.journal or [])
        on_top = f" (the session's {count(kept, 'unsaved change')} kept on top)" if kept else ""
        notes = [f"note: {path} was changed by someone else since this session read it; {what}{on_top}"]
        for change in following.dropped[dropped:]:
            notes.append(
                f"note: dropped this session's unsaved {change.kind} as {change.actor}: "
                f"{change.actor} is no longer an authorization admin"
            )
        return notes

    # ---- what the world knows ------------------------------------------------------

    def entity_names(self, entity_type: str | None = None) -> list[str]:
        """Every entity the world knows: those that exist and those that are granted."""
        known = self.world.existing() | {g.entity for g in self.world.grants}
        return sorted(str(e) for e in known if entity_type is None or e.type == entity_type)


def count(number: int, word: str, plural: str = "") -> str:
    """``1 grant``, ``2 grants``.

    >>> count(2, "entity", "entities")
    '2 entities'
    """
    return f"{number} {word if number == 1 else plural or word + 's'}"


def summary(world: World) -> str:
    """A world in one line: how many entities, grants and memberships, and its admins."""
    admins = ", ".join(sorted(world.admins)) or "none"
    return (
        f"{count(len(world.entities), 'entity', 'entities')}, {count(len(world.grants), 'grant')}, "
        f"{count(len(world.members), 'membership')}, admins: {admins}"
    )
