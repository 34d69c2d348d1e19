"""Two `privilog serve` replicas on one PostgreSQL store, over real HTTP: a change made through
either is answered by the other within a bound, and both read one audit log in one order."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from privilog.store import open_store

ACTIONS = ("READ", "WRITE", "EXECUTE", "ADMIN")
CHECK = {"principal": "user:alice", "operation": "dataset.read", "entity": "dataset:ns1.sales"}
GRANT = [["user:alice", "READ", "dataset:ns1.sales"]]
BOUND = 10.0  # liveness, not a timing: benchmarks/store measures the lag


def _decision(client: httpx.Client) -> str:
    answer = client.post("/v1/check", json=CHECK)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["decision"])


def _until(client: httpx.Client, wanted: str) -> float:
    """Seconds until ``client``'s server decides ``wanted`` (bounded)."""
    started = time.monotonic()
    while _decision(client) != wanted:
        assert time.monotonic() - started < BOUND, f"the replica did not decide {wanted} within {BOUND} s"
        time.sleep(0.005)
    return time.monotonic() - started


def test_two_replicas_on_postgresql_follow_each_other(
    fresh_postgres_url: str, start_replica: Callable[[str], Any]
) -> None:
    with open_store(fresh_postgres_url, ACTIONS) as store:
        store.change("local:test", "admin.add", ["user:root"], trusted=True)
        _, token = store.create_token("user:root", "local:test")
    first, second = start_replica(fresh_postgres_url), start_replica(fresh_postgres_url)
    a, b = first.client(token), second.client(token)
    assert _decision(a) == _decision(b) == "deny"
    granted = a.post("/v1/changes", json={"kind": "grant", "items": GRANT})
    assert granted.status_code == 200, granted.text
    assert _decision(a) == "allow"  # at once on the replica that made it
    lag_in = _until(b, "allow")
    revoked = b.post("/v1/changes", json={"kind": "revoke", "items": GRANT})
    assert revoked.status_code == 200, revoked.text
    lag_out = _until(a, "deny")
    print(f"a change seen by the other replica after {lag_in * 1000:.0f} ms and {lag_out * 1000:.0f} ms")
    for client in (a, b):  # one log, in one order, read through either replica
        audit = client.get("/v1/audit", params={"principal": "user:alice"})
        assert audit.status_code == 200, audit.text
        assert [entry["kind"] for entry in audit.json()["changes"]] == ["grant", "revoke"]
