"""Admins changing the same grants at once: no lost update, and the log replays to the state."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest
from privilog.engine.world import NotAnAdmin

from privilog.store import Change, open_store
from privilog.store.sql import SqlStore

ADMINS = [f"user:admin{i}" for i in range(4)]
SHARED = [[p, a, "dataset:ns1.shared"] for p in ("user:ann", "user:bob", "group:eng") for a in ("READ", "WRITE")]


def strict_replay(log: list[Change]) -> set[tuple[str, ...]]:
    """The grants the log's applied entries make, checking that each entry's items are exactly
    what it changed given every entry before it (a lost update would break this)."""
    held: set[tuple[str, ...]] = set()
    for entry in log:
        if not entry.applied or entry.kind not in ("grant", "revoke"):
            continue
        adding = entry.kind == "grant"
        assert entry.items == tuple(i for i in entry.asked if (i in held) != adding), entry
        (held.update if adding else held.difference_update)(entry.items)
    return held


def test_concurrent_admins_lose_no_update(store: SqlStore, store_url: str) -> None:
    store.change("user:root", "admin.add", ADMINS)
    acknowledged: list[Change] = []
    refused: list[tuple[str, int]] = []
    removed: list[Change] = []
    errors: list[BaseException] = []
    guard = threading.Lock()

    def admin(index: int) -> None:
        rng = random.Random(index)
        actor = ADMINS[index]
        try:
            with open_store(store_url) as own:  # a connection of its own, as another replica has
                for step in range(25):
                    if index == 0 and step == 12:  # admin3 loses its rights midway
                        entry = own.change(actor, "admin.remove", ["user:admin3"])
                        with guard:
                            removed.append(entry)
                    kind = rng.choice(["grant", "revoke"])
                    items = rng.sample(SHARED, rng.randint(1, 3))
                    try:
                        entry = own.change(actor, kind, items, request_id=f"{actor}-{step}")
                    except NotAnAdmin:
                        with guard:
                            refused.append((actor, step))
                        continue
                    with guard:
                        acknowledged.append(entry)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=admin, args=(i,)) for i in range(len(ADMINS))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    log = store.changes_since(0)
    by_seq = {entry.seq: entry for entry in log}
    assert [e.seq for e in log] == list(range(1, len(log) + 1))  # no gap
    for entry in acknowledged:  # every acknowledged change is in the log as acknowledged
        assert by_seq[entry.seq] == entry
    assert len(acknowledged) + len(refused) == 25 * len(ADMINS)
    world, _ = store.snapshot()
    assert strict_replay(log) == {(g.principal, g.action, str(g.entity)) for g in world.grants}
    # admin3's changes are applied before its removal and refused after, in log order
    (removal,) = removed
    for entry in log:
        if entry.actor == "user:admin3":
            assert entry.applied == (entry.seq < removal.seq), entry
    assert all(actor == "user:admin3" for actor, _ in refused)
    assert sorted(
        (e.actor, e.request_id) for e in log if e.actor == "user:admin3" and not e.applied
    ) == sorted((a, f"{a}-{s}") for a, s in refused)


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_replicas_starting_at_once_create_the_schema_once(store_url: str) -> None:
    opened: list[Any] = []
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def replica() -> None:
        try:
            start.wait(10)
            opened.append(open_store(store_url))
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=replica) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    try:
        assert not errors, errors
        assert len(opened) == 6 and all(s.last_seq() == 0 for s in opened)
    finally:
        for s in opened:
            s.close()
