"""Crash safety: the server killed with SIGKILL at random moments, 100 times, under grants and revokes
from several clients. After each kill, every acknowledged change (HTTP 200) is in the store, every
unacknowledged one is wholly there or wholly absent, and the tables are what the audit log replays to."""

from __future__ import annotations

import random
import threading

import httpx
import pytest

KILLS = 100
CLIENTS = 3
KEYS = 8  # (principal, dataset) pairs per client
ACTIONS = ("READ", "WRITE", "EXECUTE")  # each change grants or revokes all three at once


def _items(key: tuple[str, str]) -> list[list[str]]:
    return [[key[0], action, key[1]] for action in ACTIONS]


def _client(n: int, seed: float, shared: tuple) -> None:
    """Grant or revoke (whichever changes something) on random keys of its own until the server dies."""
    token, url, lock, believed, pending, counts, acked = shared
    mine = random.Random(seed)
    http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    try:
        while True:
            key = (f"user:c{n}_{mine.randrange(KEYS)}", f"dataset:ns1.d{mine.randrange(KEYS)}")
            with lock:
                want = not believed.get(key, False)
                pending[key] = want
            kind = "grant" if want else "revoke"
            try:
                response = http.post("/v1/changes", json={"kind": kind, "items": _items(key)})
            except httpx.TransportError:
                return  # killed: this change is unacknowledged
            if response.status_code != 200:
                counts["failed"] += 1  # the test asserts there were none
                return
            with lock:
                believed[key] = want
                del pending[key]
                counts["acknowledged"] += 1
            acked.release()
    finally:
        http.close()


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_no_acknowledged_change(setup):
    rng = random.Random(14)
    believed: dict[tuple[str, str], bool] = {}  # key -> granted, as the store must have it
    counts = {"kills": 0, "acknowledged": 0, "unacknowledged": 0, "unacknowledged_applied": 0, "failed": 0}
    for _ in range(KILLS):
        server = setup.serve()
        acked = threading.Semaphore(0)
        pending: dict[tuple[str, str], bool] = {}  # key -> what an unanswered change asked
        lock = threading.Lock()

        shared = (setup.root, server.url, lock, believed, pending, counts, acked)
        threads = [threading.Thread(target=_client, args=(n, rng.random(), shared)) for n in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for _ in range(rng.randrange(0, 25)):  # a random moment: after a random number of acknowledgements
            assert acked.acquire(timeout=60), "no change was acknowledged"
        server.kill()
        counts["kills"] += 1
        for thread in threads:
            thread.join(timeout=60)
            assert not thread.is_alive()
        with setup.store() as store:
            world, _ = store.snapshot()
            log = store.changes_since(0, limit=1_000_000)
        held = {(g.principal, g.action, str(g.entity)) for g in world.grants}
        for key, granted in believed.items():
            if key not in pending:
                assert all((tuple(item) in held) == granted for item in _items(key)), (key, granted)
        for key, asked in pending.items():
            there = [tuple(item) in held for item in _items(key)]
            assert all(there) or not any(there), f"half-applied: {key} {there}"
            counts["unacknowledged"] += 1
            counts["unacknowledged_applied"] += there[0] == asked and believed.get(key, False) != asked
            believed[key] = there[0]
        replayed: set[tuple[str, ...]] = set()
        for entry in log:
            if entry.applied and entry.kind in ("grant", "revoke"):
                for item in entry.items:
                    (replayed.add if entry.kind == "grant" else replayed.discard)(tuple(item))
        assert replayed == held
    print(f"\ncrash test: {counts}")
    assert counts["kills"] == KILLS and counts["acknowledged"] > KILLS and counts["failed"] == 0
