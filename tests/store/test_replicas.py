"""Replicas on one store follow each other: PostgreSQL (LISTEN/NOTIFY) and a SQLite file (polling).

The lag is measured and printed (``-s`` shows it); the only bound asserted is a
liveness one, 10 s, so a loaded machine does not make the test flaky.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from privilog.dsl.ir import Policy

from privilog.store import open_store
from privilog.store.deployment import Deployment
from tests.store.random_changes import ACTIONS, random_change, state

ROOT = Path(__file__).resolve().parents[2]
LIVENESS = 10.0  # seconds: a bound on following, not a target (the target, 1 s, is measured in benchmarks/)


def eventually(condition: Callable[[], bool], within: float = LIVENESS) -> float:
    """Seconds until ``condition`` held (polled every millisecond); fails after ``within``."""
    start = time.perf_counter()
    while not condition():
        if time.perf_counter() - start > within:
            pytest.fail(f"not within {within} s")
        time.sleep(0.001)
    return time.perf_counter() - start


@pytest.fixture
def replicas(store_url: str, policy: Policy) -> Iterator[tuple[Deployment, Deployment]]:
    """Two deployments on one store, each with a connection of its own, both following."""
    with open_store(store_url, ACTIONS) as first:
        first.change("local:ops", "admin.add", ["user:root"], trusted=True)
    stores = [open_store(store_url, ACTIONS) for _ in range(2)]
    pair = (Deployment(stores[0], policy), Deployment(stores[1], policy))
    for deployment in pair:
        deployment.start_following()
    try:
        yield pair
    finally:
        for deployment in pair:
            deployment.stop_following()
            deployment.store.close()


def test_a_change_through_one_replica_reaches_the_other(replicas: tuple[Deployment, Deployment],
                                                         store_url: str) -> None:
    a, b = replicas
    lags = []
    for i in range(5):
        entry = a.change("user:root", "grant", [[f"user:u{i}", "ADMIN", "namespace:ns1"]])
        lags.append(eventually(lambda seq=entry.seq: b.seq >= seq))
        assert b.authorizer.allows(f"user:u{i}", "namespace.update", "namespace:ns1")
    kind = store_url.split(":")[0] if "://" in store_url else "sqlite"
    print(f"\n{kind}: a change visible on the other replica after {', '.join(f'{x * 1000:.1f}' for x in lags)} ms")


def test_replicas_agree_after_random_changes(replicas: tuple[Deployment, Deployment], store_url: str,
                                             policy: Policy) -> None:
    a, b = replicas
    rng = random.Random(14)
    with open_store(store_url, ACTIONS) as cli:  # a third writer, as `privilog store` on the command line
        for step in range(60):
            kind, items = random_change(rng)
            writer = [a.change, b.change, lambda *args: cli.change(*args)][step % 3]
            writer("user:root", kind, items)
        last = cli.last_seq()
    eventually(lambda: a.seq == last and b.seq == last)
    fresh = Deployment(open_store(store_url, ACTIONS), policy)  # read whole, not replayed
    try:
        assert state(a) == state(b) == state(fresh)
        assert sorted(a.authorizer.world.grants) == sorted(b.authorizer.world.grants)
    finally:
        fresh.store.close()


def test_following_stops_promptly_and_restarts(replicas: tuple[Deployment, Deployment]) -> None:
    a, b = replicas
    started = time.perf_counter()
    b.stop_following()
    assert not b.following and time.perf_counter() - started < LIVENESS
    entry = a.change("user:root", "entity.add", ["namespace:ns1"])
    time.sleep(0.3)
    assert b.seq < entry.seq  # not following: nothing moves it
    b.start_following()
    b.start_following()  # a second call does nothing
    eventually(lambda: b.seq >= entry.seq)


def test_a_follower_survives_errors(store_url: str, policy: Policy, capfd: pytest.CaptureFixture[str]) -> None:
    with open_store(store_url, ACTIONS) as store:
        deployment = Deployment(store, policy)
        calls = []

        def failing(after: int, timeout: float) -> bool:
            calls.append(after)
            if len(calls) <= 2:
                raise RuntimeError("the database went away")
            return type(store).wait_for_change(store, after, timeout)

        store.wait_for_change = failing  # type: ignore[method-assign]
        deployment.start_following(interval=0.1)
        try:
            entry = store.change("local:ops", "admin.add", ["user:root"], trusted=True)
            eventually(lambda: deployment.seq >= entry.seq)
        finally:
            deployment.stop_following()
    err = capfd.readouterr().err
    assert err.count("the database went away (retrying in") == 2 and "Traceback" not in err


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_two_processes_on_one_sqlite_file(store_url: str, policy: Policy) -> None:
    with open_store(store_url, ACTIONS) as first:
        first.change("local:ops", "admin.add", ["user:root"], trusted=True)
    with open_store(store_url, ACTIONS) as store:
        here = Deployment(store, policy)
        here.start_following()
        try:
            started = time.perf_counter()
            child = subprocess.run(
                [sys.executable, "-m", "tests.store.random_changes", store_url, "7", "40"],
                cwd=ROOT, capture_output=True, text=True, timeout=120,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
            assert child.returncode == 0, child.stderr
            last = store.last_seq()
            assert last == 41
            lag = eventually(lambda: here.seq == last)
            print(f"\nsqlite: the other process's 40 changes ({time.perf_counter() - started:.2f} s), "
                  f"followed {lag * 1000:.0f} ms after the last")
            probe = subprocess.run(
                [sys.executable, "-c", _STATE_OF.format(url=store_url)],
                cwd=ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
            assert probe.returncode == 0, probe.stderr
            assert json.loads(probe.stdout) == json.loads(json.dumps(state(here)))
        finally:
            here.stop_following()


_STATE_OF = """
import json, dsl
from privilog.store import open_store
from privilog.store.deployment import Deployment
from tests.store.random_changes import ACTIONS, state
print(json.dumps(state(Deployment(open_store({url!r}, ACTIONS), dsl.load_policy("cdap")))))
"""
