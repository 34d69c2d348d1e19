"""Answers about the past: an authorizer over the store as it stood at a moment, under the policy then in force.

``--as-of TIME|ENTRY|REVISION`` (the command line, the REPL, the server's ``as_of``) names a moment
(:func:`~privilog.store.revision.parse_as_of`); :func:`resolve` turns it into a log entry, and
:func:`as_of` builds an :class:`~engine.authorizer.Authorizer` over :meth:`Store.history` at that
entry. The policy is the one the store recorded as in force there (``policy.use``): the caller's
own policy when it is that version (so rules keep their files and lines), else the recorded text
parsed again; with none recorded by then, the caller's policy, and the answer says so.

>>> import tempfile, pathlib
>>> from privilog import dsl
>>> from privilog.store import open_store
>>> store = open_store(str(pathlib.Path(tempfile.mkdtemp()) / "authz.db"))
>>> _ = store.change("local:ops", "admin.add", ["user:root"], trusted=True)
>>> granted = store.change("user:root", "grant", [["user:alice", "ADMIN", "namespace:ns1"]])
>>> _ = store.change("user:root", "revoke", [["user:alice", "ADMIN", "namespace:ns1"]])
>>> then = as_of(store, str(granted.seq), dsl.load_policy("cdap"))
>>> then.authorizer.allows("user:alice", "namespace.update", "namespace:ns1"), then.seq
(True, 2)
>>> as_of(store, "now", dsl.load_policy("cdap")).authorizer.allows("user:alice", "namespace.update", "namespace:ns1")
False
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from privilog.dsl.ir import Policy
from privilog.engine.authorizer import Authorizer

from .base import History, Store, StoreError
from .revision import AsOf, Revision, parse_as_of, policy_version

CACHED = 4  # authorizers of past moments kept per process (building one costs a world's load)


@dataclass(frozen=True)
class Past:
    """An authorizer over the store at ``seq``, the history it was built from, and the policy used."""

    authorizer: Authorizer
    history: History
    policy: Policy
    recorded: bool  # the policy is the one the store recorded as in force then (else: the caller's, none was)

    @property
    def seq(self) -> int:
        return self.history.seq

    @property
    def revision(self) -> Revision:
        record = self.history.policy
        return Revision(self.history.seq, record.seq if record else 0, policy_version(self.policy))

    def note(self) -> str:
        """One line saying the moment answered at (and the policy used, when none was recorded then)."""
        text = f"as of log entry {self.seq}" + (f" ({self.history.at})" if self.history.at else "")
        text += f", policy {self.policy.name} version {policy_version(self.policy)}"
        if not self.recorded:
            text += " (no policy was recorded as served by then: the one given is used)"
        return text


def resolve(store: Store, moment: AsOf | str) -> int:
    """The log entry a moment names: a revision's, an entry's number, or the last entry at or before a
    time ("now": the log's head). A StoreError for a moment the log does not reach (a time before its
    first entry; an entry beyond its head is refused by :meth:`Store.history`)."""
    if isinstance(moment, str):
        if moment.strip().lower() == "now":
            return store.last_seq()
        moment = parse_as_of(moment)
    if moment.revision is not None:
        return moment.revision.seq
    if moment.seq is not None:
        return moment.seq
    assert moment.time is not None
    seq = store.seq_at(moment.time)
    if seq == 0 and store.last_seq():
        raise StoreError(
            f"{moment.time} is before the store's first log entry: ask about a later moment "
            "(`privilog store audit` shows the log's times)"
        )
    return seq


def policy_then(history: History, given: Policy) -> tuple[Policy, bool]:
    """The policy in force at ``history``: ``given`` if it is the version recorded then, else the recorded
    text parsed again; ``given`` when nothing was recorded by then. And whether it was the recorded one."""
    record = history.policy
    if record is None:
        return given, False
    if record.version == policy_version(given):
        return given, True
    from privilog import dsl

    policy = dsl.parse_policy(record.text, f"<policy {record.name} version {record.version}>", include_prelude=False)
    if policy_version(policy) != record.version:  # pragma: no cover - the canonical text is a fixed point
        raise StoreError(f"the policy recorded at entry {record.seq} does not read back as version {record.version}")
    return policy, True


_versions: dict[int, tuple[Policy, str]] = {}  # id(policy) -> (policy, its version): the text's hash costs ~10 ms


def _version(policy: Policy) -> str:
    """``policy_version(policy)``, remembered for the policy objects asked about (a warm as-of costs no hash)."""
    known = _versions.get(id(policy))
    if known is None or known[0] is not policy:
        if len(_versions) > 16:
            _versions.clear()
        known = _versions[id(policy)] = (policy, policy_version(policy))
    return known[1]


_cache: OrderedDict[tuple[str, int, str, str], Past] = OrderedDict()
_cache_lock = threading.Lock()


def as_of(store: Store, moment: AsOf | str, given: Policy, backend: str = "compiled") -> Past:
    """An authorizer over the store at ``moment`` under the policy then in force (see the module's text).
    The last few are kept (:data:`CACHED`): asking about one moment again costs nothing. Its world refuses
    changes like a deployment's: the past is read, never changed."""
    seq = resolve(store, moment)
    key_start = (store.url, seq, _version(given), backend)
    with _cache_lock:
        if key_start in _cache:
            _cache.move_to_end(key_start)
            return _cache[key_start]
    history = store.history(seq)
    policy, recorded = policy_then(history, given)
    from .deployment import FollowingWorld

    world = FollowingWorld.of(history.world, f"{store.url} as of log entry {seq}")
    past = Past(Authorizer(policy, world, backend), history, policy, recorded)
    with _cache_lock:
        _cache[key_start] = past
        while len(_cache) > CACHED:
            _cache.popitem(last=False)
    return past


__all__ = ["Past", "as_of", "policy_then", "resolve"]
