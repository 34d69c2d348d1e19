"""A deployment: an authorizer kept in step with a store.

Every change goes to the store first: it is checked there (the actor is an
authorization admin, in the change's own transaction), made durable and
logged. The authorizer then *replays the log* from where it was, in order —
its own change and any a replica or another process made meanwhile — each
applied incrementally (one grant costs what it changes). So a deployment
never shows a state the store has not committed, and every replica passes
through the same states in the same order.

The world an authorizer of a deployment holds refuses changes made to it
directly (``deployment.authorizer.grant(...)``): only the replay changes it.

>>> import tempfile, pathlib, dsl
>>> from privilog.store import open_store
>>> store = open_store(str(pathlib.Path(tempfile.mkdtemp()) / "authz.db"))
>>> _ = store.change("local:ops", "admin.add", ["user:root"], trusted=True)
>>> deployment = Deployment(store, dsl.load_policy("cdap"))
>>> _ = deployment.change("user:root", "grant", [["user:alice", "ADMIN", "namespace:ns1"]])
>>> deployment.authorizer.allows("user:alice", "namespace.update", "namespace:ns1")
True

A deployment also follows changes others make (another replica, another process
on the same SQLite file, `privilog store` on the command line): in the
background with :meth:`Deployment.start_following`, within milliseconds on
PostgreSQL (LISTEN/NOTIFY) and about a tenth of a second on SQLite (polling).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from privilog.dsl.ir import Policy
from privilog.engine.authorizer import Authorizer
from privilog.engine.ids import EntityId
from privilog.engine.patterns import parse_pattern
from privilog.engine.world import Grant, World, WorldError

from .affected import EVERYTHING, Affected, Feed, Scoped, Scoper, policy_use_scope
from .base import CHECKPOINT, IMPORT, POLICY_USE, Change, Store, StoreError, StoreUnavailable, now
from .revision import Revision, policy_version


@dataclass
class FollowingWorld(World):
    """A world that only the replay of a store's log changes."""

    store_url: str = field(default="", compare=False, repr=False)
    replaying: bool = field(default=False, compare=False, repr=False)

    def _require_admin(self, actor: str, what: str = "grants") -> None:
        if not self.replaying:
            raise WorldError(
                f"this world follows the store {self.store_url}: change {what} through the store "
                "(`privilog store`, the REPL, or the server), where admins are checked and changes audited"
            )

    @classmethod
    def of(cls, world: World, store_url: str) -> FollowingWorld:
        return cls(
            entities=world.entities,
            grants=world.grants,
            members=world.members,
            admins=world.admins,
            instance=world.instance,
            actions=world.actions,
            store_url=store_url,
        )


class Stale(StoreError):
    """A read asked for a revision this deployment cannot answer at: the log does not reach it (a token of
    another store), or it was made under a policy this deployment does not serve. The server answers 409."""


class Deployment:
    """One policy over one store's world, kept current by replaying the store's log.

    ``seq`` is the last log entry replayed; ``policy_seq`` the entry that recorded the policy served
    (:meth:`record_policy`; 0 when none is recorded for it); :attr:`revision` the two together, what
    every answer is decided at. ``granted`` (with ``track_grants``): the entry that made each grant
    held, kept in step by the replay (what a decision log's reasons name). ``at``: the store as it stood
    at that log entry, to be rolled forward with ``catch_up(until=...)`` (``privilog verify-log``).
    """

    def __init__(
        self,
        store: Store,
        policy: Policy,
        backend: str = "compiled",
        track_grants: bool = False,
        at: int | None = None,
        preloaded: Any = None,
    ):
        self.store = store
        self.pinned = at is not None  # made at a past entry, rolled forward by catch_up(until=...) (verify-log)
        self.backend = backend
        self.track_grants = track_grants
        self.lock = threading.RLock()  # held while the authorizer changes; take it to read across threads
        self.granted: dict[tuple[str, str, str], int] = {}
        self.load_seconds: dict[str, float] = {}  # the last whole read's phases: the store read, the engine built
        self.policy = policy
        self.policy_version = policy_version(policy)
        # preloaded: the engine's state captured at an earlier load (privilog/serve/snapshot.py), the start of this one
        self.authorizer, self.seq = self._load(policy, at, preloaded)
        self.policy_seq = self._recorded_seq()
        # the scope of each entry replayed, for caches that follow changes (store/affected.py, GET /v1/watch)
        self.scoper = Scoper(self.authorizer.world, policy)
        self.feed = Feed(self.seq)
        self._follower: threading.Thread | None = None
        self._stop_following = threading.Event()

    def _load(self, policy: Policy, seq: int | None = None, preloaded: Any = None) -> tuple[Authorizer, int]:
        started = time.perf_counter()
        history = self.store.history(seq, granted=self.track_grants)
        self.granted = history.granted
        read = time.perf_counter()
        world = FollowingWorld.of(history.world, self.store.url)
        authorizer = Authorizer(policy, world, self.backend, preloaded=preloaded)
        self.load_seconds = {"store_read": read - started, "authorizer_build": time.perf_counter() - read}
        return authorizer, history.seq

    def reopen(self, store: Store) -> None:
        """Take ``store`` (the same store, opened anew) in place of the one this deployment was made with: in
        a process forked after the load (``privilog serve --workers N``), whose connections, follower thread
        and locks must be its own. Call it before anything else in that process, then :meth:`catch_up`
        (the log may have moved on since the load)."""
        self.store = store
        self.lock = threading.RLock()
        self._follower = None
        self._stop_following = threading.Event()

    def _recorded_seq(self) -> int:
        """The entry that recorded this deployment's policy as in force, if the last one recorded is it."""
        record = self.store.policy_at(None)
        return record.seq if record is not None and record.version == self.policy_version else 0

    # ---- revisions ------------------------------------------------------------------------------

    @property
    def revision(self) -> Revision:
        """Where this deployment's answers are decided now (read it holding :attr:`lock`, with the answer)."""
        return Revision(self.seq, self.policy_seq, self.policy_version)

    def record_policy(self, actor: str = "local:serve") -> Revision:
        """Record in the store that this deployment serves its policy (a ``policy.use`` entry, unless the last
        recorded is the same version), so that answers about the past use the policy then in force and a
        revision names it; then catch up with the log (the entry included)."""
        from privilog.dsl.format import format_policy

        record = self.store.record_policy(self.policy.name, self.policy_version, format_policy(self.policy), actor)
        self.catch_up()
        with self.lock:
            self.policy_seq = record.seq
            return self.revision

    def at_least(self, wanted: Revision) -> Revision:
        """Bring this deployment up to ``wanted`` (replaying the store's log up to it) and return the revision
        reached, which covers it; :class:`Stale` when it cannot: the log does not reach ``wanted.seq``, or
        ``wanted`` was made under a later policy than this deployment serves. A store that cannot be read
        raises StoreUnavailable (a caller retries). The caller bounds the time (the server: in a thread)."""
        with self.lock:
            if self.revision.covers(wanted):
                return self.revision
        if self.seq < wanted.seq:
            self.catch_up(until=wanted.seq)
        with self.lock:
            if self.seq < wanted.seq:
                raise Stale(
                    f"revision {wanted.token} names log entry {wanted.seq}, but the store's log ends at {self.seq}: "
                    "it is a revision of another store"
                )
            if self.policy_seq < wanted.policy_seq:
                raise Stale(
                    f"revision {wanted.token} was made under policy version {wanted.policy_version or '?'} "
                    f"(recorded at log entry {wanted.policy_seq}); this server serves version {self.policy_version}: "
                    "reload its policy (POST /v1/admin/reload or SIGHUP), or ask another server"
                )
            return self.revision

    def fully(self) -> Revision:
        """Bring this deployment up to the store's log head, read now (a fully consistent read); the revision."""
        head = self.store.last_seq()
        if self.seq < head:
            self.catch_up(until=head)
        with self.lock:
            return self.revision

    # ---- changes ----------------------------------------------------------------------------

    def change(self, actor: str, kind: str, items: Iterable[Any], request_id: str = "") -> Change:
        """Make a change in the store as ``actor`` (durable and audited; refused unless an admin),
        then bring the authorizer up to it. The log entry."""
        entry = self.store.change(actor, kind, items, request_id)
        try:
            self.catch_up(until=entry.seq)
        except StoreUnavailable as error:  # the change is made; reading the log back is what failed
            with self.lock:
                if self.seq == entry.seq - 1:  # nothing of anyone else's between: apply it from the answer
                    self._replay(entry)
                    self.seq = entry.seq
                    return entry
            raise StoreUnavailable(
                f"the change was made (log entry {entry.seq}) but this server could not read the log to apply "
                f"it, so its decisions do not show it yet; they will once the store is back ({error})"
            ) from None
        return entry

    def catch_up(self, until: int | None = None) -> int:
        """Replay the store's log after the last entry applied; the number of entries replayed.

        ``until``: stop once that entry is applied (entries after it wait for the next call).
        """
        count = 0
        with self.lock:
            while until is None or self.seq < until:
                entries = self.store.changes_since(self.seq, limit=1000)
                if not entries:
                    break
                for entry in entries:
                    count += 1
                    if entry.kind in (IMPORT, CHECKPOINT) and entry.applied:  # a whole world: read the store anew
                        # a pinned deployment stops at `until`: the world as of there, not the log's head
                        self.authorizer, self.seq = self._load(self.policy, until if self.pinned else None)
                        self._reset(entry.kind, entry.at)
                        break
                    self._replay(entry)
                    self.seq = entry.seq
                    if until is not None and self.seq >= until:
                        break
        return count

    def reload(self, policy: Policy | None = None) -> None:
        """Read the whole store anew (and take ``policy``, when given): the old authorizer serves
        until the new one is ready."""
        authorizer, seq = self._load(policy or self.policy)
        with self.lock:
            skipped = seq != self.seq
            self.authorizer, self.seq = authorizer, seq
            if policy is not None and policy_version(policy) != self.policy_version:
                self.feed.restart(self.seq)  # every answer may differ: a watcher from before resets
            if policy is not None:
                self.policy, self.policy_version = policy, policy_version(policy)
                self.policy_seq = self._recorded_seq()
                self.scoper.serve(policy)
            if skipped:  # entries taken in whole, not replayed one by one: their scope is everything
                self._reset("reload", now())
            else:
                self.scoper.reset(authorizer.world)
        self.catch_up()

    # ---- following ---------------------------------------------------------------------------

    def start_following(self, interval: float = 0.5) -> None:
        """Keep the authorizer current in the background: a daemon thread that waits for the
        store's next change (:meth:`Store.wait_for_change`) and replays it (:meth:`catch_up`).

        Changes made by anyone (another replica, another process, this deployment) are applied
        in log order under :attr:`lock`. An error (the database unreachable, say) is one line on
        stderr and retried with a growing pause (up to 10 s); the thread never ends the process.
        ``interval``: the longest wait before the thread looks at whether it should stop.
        Calling it while following does nothing.
        """
        if self._follower is not None and self._follower.is_alive():
            return
        self._stop_following = threading.Event()
        self._follower = threading.Thread(
            target=self.follow, args=(self._stop_following, interval), name="privilog-follower", daemon=True
        )
        self._follower.start()

    def stop_following(self, timeout: float = 5.0) -> None:
        """Stop the thread :meth:`start_following` started, waiting up to ``timeout`` seconds
        for it (it stops within ``interval``, or within a database call in progress).
        Calling it when not following does nothing; following can be started again."""
        self._stop_following.set()
        follower, self._follower = self._follower, None
        if follower is not None and follower is not threading.current_thread():
            follower.join(timeout)

    @property
    def following(self) -> bool:
        """Whether a follower thread is running."""
        return self._follower is not None and self._follower.is_alive()

    def follow(self, stop: threading.Event, interval: float = 0.5) -> None:
        """Replay the store's changes as they come until ``stop`` is set (the loop behind
        :meth:`start_following`; run it in a thread of your own to manage the thread yourself)."""
        pause = 0.1
        while not stop.is_set():
            try:
                if self.store.wait_for_change(self.seq, timeout=interval) and not stop.is_set():
                    self.catch_up()
                pause = 0.1
            except Exception as error:  # a follower outlives a database that is away for a while
                print(
                    f"privilog: following {self.store.url}: {error} (retrying in {pause:.1f} s)",
                    file=sys.stderr,
                    flush=True,
                )
                stop.wait(pause)
                pause = min(pause * 2, 10.0)

    @contextmanager
    def _replaying(self) -> Iterator[None]:
        world = self.authorizer.world
        assert isinstance(world, FollowingWorld)
        world.replaying = True
        try:
            yield
        finally:
            world.replaying = False

    def _reset(self, kind: str, at: str) -> None:
        """The world was read anew at :attr:`seq` (an import, a checkpoint, a reload): a reset's scope."""
        self.scoper.reset(self.authorizer.world)
        self._scoped(self.seq, kind, at, EVERYTHING)

    def _scoped(self, seq: int, kind: str, at: str, affected: Affected) -> None:
        if not affected.nothing:
            revision = Revision(seq, self.policy_seq, self.policy_version).token
            self.feed.record(Scoped(seq, revision, at, kind, affected))

    def _replay(self, entry: Change) -> None:
        if not entry.applied or not entry.items:
            return
        if entry.kind == POLICY_USE:  # another server recorded a policy: ours stays in force here, if it is the one
            self.policy_seq = entry.seq if entry.items[0][1] == self.policy_version else self.policy_seq
            self._scoped(entry.seq, entry.kind, entry.at, policy_use_scope(entry, self.policy_version))
            return
        if self.track_grants:
            self._track(entry)
        affected = self.scoper.around(entry, self.authorizer.world, lambda: self._apply(entry))
        self._scoped(entry.seq, entry.kind, entry.at, affected)

    def _apply(self, entry: Change) -> None:
        a, kind, items, actor = self.authorizer, entry.kind, entry.items, entry.actor
        with self._replaying():
            if kind in ("grant", "revoke", "revoke.entity"):  # revoke.entity's items: the grants it took
                grants = [Grant(p, action, parse_pattern(e)) for p, action, e in items]
                (a.grant if kind == "grant" else a.revoke)(actor, grants)
            elif kind == "member.add":
                a.add_members(actor, items)
            elif kind == "member.remove":
                a.remove_members(actor, items)
            elif kind == "admin.add":
                a.add_admins(actor, items)
            elif kind == "admin.remove":
                a.remove_admins(actor, items)
            elif kind == "entity.add":
                for text in items:
                    a.add_entity(actor, EntityId.parse(text))
            elif kind == "entity.delete":
                for text in items:
                    a.delete_entity(actor, EntityId.parse(text))
            elif kind == "role.drop":  # as the store dropped it: members, memberships, grants, admin row
                for role in items:
                    a.remove_members(actor, [m for m in a.world.members if role in m])
                    a.revoke(actor, [g for g in a.world.grants if g.principal == role])
                    if role in a.world.admins:
                        a.remove_admins(actor, [role])
            # role.create, token.*: nothing the engine holds

    def _track(self, entry: Change) -> None:
        if entry.kind == "grant":
            for grant in entry.items:
                self.granted[grant] = entry.seq
        elif entry.kind in ("revoke", "revoke.entity"):
            for grant in entry.items:
                self.granted.pop(grant, None)
        elif entry.kind == "role.drop":
            for grant in [g for g in self.granted if g[0] in entry.items]:
                del self.granted[grant]
