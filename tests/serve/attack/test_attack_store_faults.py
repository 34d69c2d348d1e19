"""The store under fault, against real `privilog serve` processes over 127.0.0.1 (issue 33, items 11 and 12).

Each fault is made for real: a PostgreSQL server of the module's own stopped and started
(``TemporaryPostgres.pause``/``resume``) or held up by a session that keeps the store's
advisory write lock; a SQLite file locked by another connection's ``BEGIN EXCLUSIVE``,
replaced or truncated under the server; a tmpfs of 16 MiB filled with junk beside the store.

In every case: no 500 and no traceback in an answer, never an allow that should not be,
``/health`` answers throughout, changes answer 503 with ``Retry-After`` while the store is
away (507 while its disk is full) and work again, without a restart, once the fault is gone.
Every wait is a bounded loop; ``PRIVILOG_STORE_TIMEOUT`` is 2 s for the servers here, so a
store that does not answer is noticed in about 2 s.
"""

from __future__ import annotations

import errno
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from privilog.store import open_store
from privilog.store.postgres import LOCK_KEY
from tests.pg import TemporaryPostgres, started_postgres
from tests.serve.conftest import Server, Setup

ACTIONS = ("READ", "WRITE", "EXECUTE", "ADMIN")
TIMEOUT = 2  # PRIVILOG_STORE_TIMEOUT for the servers of this module, seconds
BOUND = 20.0  # the longest any wait here may take, seconds
CHECK = {"principal": "user:alice", "operation": "dataset.read", "entity": "dataset:ns1.sales"}
OTHER = {"principal": "user:carol", "operation": "dataset.read", "entity": "dataset:ns1.sales"}


@pytest.fixture(autouse=True)
def _short_store_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """The servers started here wait 2 s (not 10) for a store that does not answer."""
    monkeypatch.setenv("PRIVILOG_STORE_TIMEOUT", str(TIMEOUT))


@pytest.fixture(scope="module")
def own_postgres() -> Iterator[TemporaryPostgres]:
    """A PostgreSQL server of this module's own: the tests stop it, and no other test may see that."""
    yield from started_postgres()


def wait_for(what: str, done: Callable[[], bool], bound: float = BOUND) -> float:
    """Seconds until ``done()`` holds, looking every 20 ms; a failure after ``bound`` seconds."""
    started = time.monotonic()
    while not done():
        assert time.monotonic() - started < bound, f"{what}: not within {bound} s"
        time.sleep(0.02)
    return time.monotonic() - started


def sane(answer: httpx.Response) -> httpx.Response:
    """An answer of a server under fault: never a 500, never a traceback, always one line of JSON."""
    assert answer.status_code != 500, answer.text
    assert "Traceback" not in answer.text and "\n" not in answer.text.strip(), answer.text
    return answer


def decision(client: httpx.Client, body: dict[str, Any] = CHECK) -> str:
    answer = sane(client.post("/v1/check", json=body))
    assert answer.status_code == 200, answer.text
    return str(answer.json()["decision"])


def grant(client: httpx.Client, principal: str, entity: str = "dataset:ns1.sales") -> httpx.Response:
    return sane(client.post("/v1/changes", json={"kind": "grant", "items": [[principal, "READ", entity]]}))


def unavailable(answer: httpx.Response) -> bool:
    """A 503 as a store that is away answers it: Retry-After, and one line saying what to do."""
    if answer.status_code != 503:
        return False
    assert int(answer.headers["retry-after"]) >= 1, answer.headers
    error = answer.json()["error"]
    assert "try again" in error or "put it" in error, answer.text  # what to do
    return True


def grant_beside_checks(admin: httpx.Client, bob: httpx.Client) -> tuple[httpx.Response, float, float]:
    """A grant sent while the store's write lock is held elsewhere, and bob's checks asked while it waits
    (after his token has left the server's cache): the grant's answer, how long it waited, and how long
    the checks took. The checks are answered while the grant still waits: it holds up no check."""
    with ThreadPoolExecutor(1) as pool:
        started = time.monotonic()
        waiting = pool.submit(grant, admin, "user:carol")
        time.sleep(1.2)  # bob's token is out of the server's cache (1 s) while the grant waits
        asked = time.monotonic()
        assert decision(bob) == "allow" and decision(bob, OTHER) == "deny"
        answered = time.monotonic() - asked
        assert not waiting.done()
        refused = waiting.result(timeout=BOUND)
        return refused, time.monotonic() - started, answered


def healthy(server: Server) -> None:
    assert sane(httpx.get(f"{server.url}/health", timeout=10)).status_code == 200
    assert server.process is not None and server.process.poll() is None, "the server died"


def ready(server: Server) -> int:
    return sane(httpx.get(f"{server.url}/ready", timeout=30)).status_code


def seeded(url: str) -> tuple[str, str]:
    """An admin (user:root) and a plain user (user:bob) in the store at ``url``; their tokens."""
    with open_store(url, ACTIONS) as store:
        store.change("local:test", "admin.add", ["user:root"], trusted=True)
        _, root = store.create_token("user:root", "local:test")
        _, bob = store.create_token("user:bob", "local:test")
    return root, bob


# ---- PostgreSQL away, PostgreSQL slow ----------------------------------------------------------


def test_postgres_stopped_answers_503_then_recovers_without_a_restart(
    own_postgres: TemporaryPostgres, start_replica: Callable[[str], Server]
) -> None:
    url = own_postgres.create_database()
    root_token, bob_token = seeded(url)
    server = start_replica(url)
    root, bob = server.client(root_token), server.client(bob_token)
    assert grant(root, "user:alice").status_code == 200
    assert decision(bob) == decision(root) == "allow" and decision(bob, OTHER) == "deny"

    own_postgres.pause()
    try:
        stopped = time.monotonic()
        refused = grant(root, "user:carol")
        noticed = time.monotonic() - stopped
        assert unavailable(refused), refused.text
        assert "postgresql://postgres@127.0.0.1:" in refused.json()["error"], refused.text
        # longer than a token's cache (1 s): checks are answered from the engine in memory all along
        until = time.monotonic() + 2.5
        while time.monotonic() < until:
            assert decision(bob) == "allow" and decision(bob, OTHER) == "deny"
            healthy(server)
            time.sleep(0.05)
        assert unavailable(grant(root, "user:carol"))
        assert ready(server) == 503
    finally:
        own_postgres.resume()
    resumed = time.monotonic()
    recovered = wait_for("a grant after PostgreSQL came back", lambda: grant(root, "user:carol").status_code == 200)
    print(
        f"PostgreSQL stopped: a grant answered 503 after {noticed * 1000:.0f} ms; 200 again {recovered:.2f} s "
        f"after it started"
    )
    assert time.monotonic() - resumed < BOUND
    assert wait_for("/ready after PostgreSQL came back", lambda: ready(server) == 200) < BOUND
    assert decision(bob, OTHER) == "allow"  # the grant made after the outage is in the engine
    audit = sane(root.get("/v1/audit", params={"principal": "user:carol"}))
    assert [c["outcome"] for c in audit.json()["changes"]] == ["applied"]  # the refused ones left nothing
    healthy(server)


def test_postgres_write_lock_held_answers_503_within_the_timeout_then_200(
    own_postgres: TemporaryPostgres, start_replica: Callable[[str], Server]
) -> None:
    url = own_postgres.create_database()
    root_token, bob_token = seeded(url)
    server = start_replica(url)
    root, bob = server.client(root_token), server.client(bob_token)
    assert grant(root, "user:alice").status_code == 200
    assert decision(bob) == "allow"
    with psycopg.connect(url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
        refused, waited, answered = grant_beside_checks(server.client(root_token), bob)
        assert unavailable(refused), refused.text
        assert "did not answer within" in refused.json()["error"], refused.text
        assert TIMEOUT - 0.5 <= waited < TIMEOUT + 3, waited
        holder.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
    print(
        f"PostgreSQL write lock held: a grant waited {waited:.2f} s, then 503; a check meanwhile took "
        f"{answered * 1000:.0f} ms"
    )
    assert grant(root, "user:carol").status_code == 200
    assert decision(bob, OTHER) == "allow"
    healthy(server)


def test_postgres_frozen_answers_503_within_the_bound_then_recovers(
    own_postgres: TemporaryPostgres, start_replica: Callable[[str], Server]
) -> None:
    """Every process of the database stopped with SIGSTOP: connections stay open and the kernel acknowledges
    what is sent, but nothing answers, so no server-side timeout fires. The client's own bound (twice
    PRIVILOG_STORE_TIMEOUT and a second) cuts the connection: 503, then 200 once the database runs again."""
    url = own_postgres.create_database()
    root_token, bob_token = seeded(url)
    server = start_replica(url)
    root, bob = server.client(root_token), server.client(bob_token)
    assert grant(root, "user:alice").status_code == 200
    assert decision(bob) == "allow"
    master = int((own_postgres.data / "postmaster.pid").read_text().split()[0])
    children = subprocess.run(["pgrep", "-P", str(master)], capture_output=True, text=True).stdout.split()
    frozen = [master, *map(int, children)]
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        refused = grant(root, "user:carol")
        waited = time.monotonic() - started
        assert unavailable(refused), refused.text
        assert "did not answer" in refused.json()["error"], refused.text
        assert waited < 2 * TIMEOUT + 1 + 3, waited
        for _ in range(3):  # checks by a token seen before: answered from the engine in memory
            assert decision(bob) == "allow" and decision(bob, OTHER) == "deny"
            healthy(server)
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
    recovered = wait_for("a grant after the database runs again", lambda: grant(root, "user:carol").status_code == 200)
    print(f"PostgreSQL frozen: a grant answered 503 after {waited:.2f} s; 200 again {recovered:.2f} s after it ran")
    assert decision(bob, OTHER) == "allow"
    assert wait_for("/ready after the database runs again", lambda: ready(server) == 200) < BOUND


def test_postgres_disk_full_is_store_full(own_postgres: TemporaryPostgres) -> None:
    """PostgreSQL's SQLSTATE 53100 (a data file it cannot extend) is StoreFull; a connection lost,
    a statement cancelled by its timeout, an admin shutdown are StoreUnavailable."""
    from privilog.store.base import StoreFull, StoreUnavailable
    from privilog.store.postgres import PostgresStore

    store = open_store(own_postgres.create_database(), ACTIONS)
    assert isinstance(store, PostgresStore)
    with store:
        full = store._classify(psycopg.errors.DiskFull("could not extend file: No space left on device"))
        assert isinstance(full, StoreFull) and str(full).startswith("the store's disk is full: postgresql://")
        for error in (
            psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
            psycopg.errors.QueryCanceled("canceling statement due to statement timeout"),
            psycopg.OperationalError("the connection is lost"),
        ):
            assert isinstance(store._classify(error), StoreUnavailable), error
        assert store._classify(psycopg.errors.UniqueViolation("duplicate key")) is None  # a bug, not the store


# ---- SQLite locked, replaced, truncated, written behind its back -----------------------------------


def test_sqlite_locked_by_another_process_answers_503_then_200(setup: Setup) -> None:
    server = setup.serve()
    root, bob = server.client(setup.root), server.client(setup.bob)
    assert grant(root, "user:alice").status_code == 200
    assert decision(bob) == "allow"  # bob's token is known from before the fault
    holder = sqlite3.connect(setup.path, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        refused, waited, answered = grant_beside_checks(server.client(setup.root), bob)
        assert unavailable(refused), refused.text
        assert "locked by another process" in refused.json()["error"], refused.text
        assert TIMEOUT - 0.5 <= waited < TIMEOUT + 3, waited
        assert ready(server) == 200  # WAL: reading goes on while another holds the write lock
        healthy(server)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    print(f"SQLite locked: a grant waited {waited:.2f} s, then 503; a check meanwhile took {answered * 1000:.0f} ms")
    assert grant(root, "user:carol").status_code == 200 and decision(bob, OTHER) == "allow"


def test_sqlite_file_replaced_under_the_server_refuses_changes_until_it_is_back(setup: Setup, tmp_path: Path) -> None:
    server = setup.serve()
    root, bob = server.client(setup.root), server.client(setup.bob)
    assert grant(root, "user:alice").status_code == 200
    assert decision(bob) == "allow"  # bob's token is known from before the fault
    # another store, where carol may read and mallory is an admin, moved over the server's file
    other = tmp_path / "other" / "authz.db"
    other.parent.mkdir()
    with open_store(str(other), ACTIONS) as store:
        store.change("local:evil", "admin.add", ["user:mallory"], trusted=True)
        store.change("user:mallory", "grant", [["user:carol", "READ", "dataset:ns1.sales"]])
    kept = tmp_path / "kept.db"
    os.link(setup.path, kept)  # the server's file, kept under another name
    replacement = other.read_bytes()
    os.replace(other, setup.path)
    refused = grant(root, "user:dave")
    assert unavailable(refused), refused.text
    assert "removed or replaced" in refused.json()["error"], refused.text
    assert decision(bob) == "allow" and decision(bob, OTHER) == "deny"  # nothing of the other file
    assert ready(server) == 503
    healthy(server)
    # nothing was written to the file now there (not opened here either: the old file's WAL is beside it,
    # and SQLite would read its frames into this file: docs/guarantees.md, "Durability")
    assert setup.path.read_bytes() == replacement
    os.replace(kept, setup.path)  # the server's own file back: it works on again
    assert grant(root, "user:dave").status_code == 200
    assert ready(server) == 200
    healthy(server)


def test_sqlite_file_truncated_under_the_server_allows_nothing_new_and_recovers(setup: Setup, tmp_path: Path) -> None:
    server = setup.serve()
    root, bob = server.client(setup.root), server.client(setup.bob)
    assert grant(root, "user:alice").status_code == 200
    assert decision(bob) == "allow"  # bob's token is known from before the fault
    with open_store(str(setup.path), ACTIONS, create=False) as store:  # everything in the main file
        store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    saved = setup.path.read_bytes()
    os.truncate(setup.path, 0)
    refused = grant(root, "user:carol")  # acknowledged, it would be lost at the next checkpoint
    assert unavailable(refused), refused.text
    assert "shrank" in refused.json()["error"], refused.text
    assert ready(server) == 503
    assert decision(bob) == "allow"  # the engine in memory answers on
    assert decision(bob, {**OTHER, "principal": "user:mallory"}) == "deny"
    healthy(server)
    with open(setup.path, "r+b") as file:  # the file's bytes back, in place
        file.write(saved)
    wait_for("a grant after the file came back", lambda: grant(root, "user:erin").status_code == 200)
    assert ready(server) == 200
    healthy(server)


def test_another_process_writing_through_the_store_is_followed_within_a_second(setup: Setup) -> None:
    server = setup.serve()
    bob = server.client(setup.bob)
    assert decision(bob) == "deny"
    with setup.store() as store:  # type: ignore[attr-defined]
        store.change("user:root", "grant", [["user:alice", "READ", "dataset:ns1.sales"]])
    lag = wait_for("the server answering another process's grant", lambda: decision(bob) == "allow", bound=1.0)
    print(f"another process's grant answered after {lag * 1000:.0f} ms")


def test_an_admin_written_straight_into_the_table_bypasses_the_log_and_shows_in_the_audit(setup: Setup) -> None:
    """A row written into ``admins`` with sqlite3 bypasses the log: whoever can write the file can write
    any row, so the file's mode and owner are the guard (docs/guarantees.md, "Durability"). What it does, pinned:
    the store's admin check reads the table, so that principal's changes are applied at once, each
    logged under its name; the log has no `admin.add` of it, which is what an operator reading
    `privilog store audit` (or `/v1/audit`) sees; `privilog store export` shows it among the admins."""
    with setup.store() as store:  # type: ignore[attr-defined]
        _, mallory_token = store.create_token("user:mallory", "local:test")
    server = setup.serve()
    root, mallory = server.client(setup.root), server.client(mallory_token)
    with sqlite3.connect(setup.path) as conn:
        conn.execute("INSERT INTO admins(principal) VALUES ('user:mallory')")
    conn.close()
    made = grant(mallory, "user:mallory")
    assert made.status_code == 200, made.text
    assert made.json()["change"]["actor"] == "user:mallory"
    audit = sane(root.get("/v1/audit", params={"principal": "user:mallory"})).json()["changes"]
    assert [(c["kind"], c["actor"]) for c in audit] == [("token.create", "local:test"), ("grant", "user:mallory")]
    every = sane(root.get("/v1/audit")).json()["changes"]
    assert [c["items"] for c in every if c["kind"] == "admin.add"] == [["user:root"]]
    with setup.store() as store:  # type: ignore[attr-defined]
        world, _ = store.snapshot()
        assert "user:mallory" in world.admins
    healthy(server)


# ---- a full disk -----------------------------------------------------------------------------------


@contextmanager
def tmpfs(disk: Path, size: str = "16m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on ``disk`` (we run as root, as CI does), unmounted after."""
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.fail(
            f"could not mount a tmpfs for the full-disk test (run as root, as CI does): {mounted.stderr.strip()}",
            pytrace=False,
        )
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of 16 MiB for the test."""
    with tmpfs(tmp_path / "disk") as disk:
        yield disk


def fill(path: Path) -> int:
    """Write junk to ``path`` until the disk has no room left, down to the last byte; the bytes written."""
    written = 0
    with open(path, "ab", buffering=0) as file:
        for size in (1 << 20, 1 << 16, 1 << 12, 1 << 8, 1):
            while True:
                try:
                    written += file.write(b"\xa5" * size)
                except OSError as error:
                    assert error.errno == errno.ENOSPC, error
                    break
    return written


def test_a_full_disk_answers_507_keeps_nothing_and_recovers(small_disk: Path) -> None:
    setup = Setup(small_disk)
    try:
        server = setup.serve()
        root, bob = server.client(setup.root), server.client(setup.bob)
        assert grant(root, "user:alice").status_code == 200
        junk = small_disk / "junk"
        fill(junk)
        full = None
        for round_ in range(40):  # the WAL may have room left in pages it reuses: grant more until it has none
            items = [[f"user:u{round_}x{i}", "READ", f"dataset:ns1.d{i}"] for i in range(300)]
            answer = sane(
                root.post(
                    "/v1/changes", json={"kind": "grant", "items": items}, headers={"X-Request-Id": f"full-{round_}"}
                )
            )
            if answer.status_code == 507:
                full = (round_, answer)
                break
            assert answer.status_code == 200, answer.text
        assert full is not None, "the disk never filled"
        round_, answer = full
        error = answer.json()["error"]
        assert error.startswith("the store's disk is full: ") and "free space" in error, error
        print(f"SQLite's disk full after {round_ + 1} grants of 300: {error}")
        # nothing of that grant, in the engine or the store; others are answered meanwhile
        assert (
            decision(bob, {"principal": f"user:u{round_}x7", "operation": "dataset.read", "entity": "dataset:ns1.d7"})
            == "deny"
        )
        assert decision(bob) == "allow"
        audit = sane(root.get("/v1/audit", params={"principal": f"user:u{round_}x7"}))
        assert audit.status_code == 200 and audit.json()["changes"] == [], audit.text
        assert ready(server) == 200
        healthy(server)
        with setup.store() as store:  # type: ignore[attr-defined]
            assert not any(c.request_id == f"full-{round_}" for c in store.changes_since(0))
        junk.unlink()
        assert grant(root, "user:carol").status_code == 200  # no restart
        assert decision(bob, OTHER) == "allow"
        healthy(server)
    finally:
        setup.close()


def test_the_store_faults_leave_no_traceback_in_the_log_of_a_request(setup: Setup) -> None:
    """A store that is away is logged as one line per request, not a traceback (that is for bugs)."""
    server = setup.serve()
    root = server.client(setup.root)
    holder = sqlite3.connect(setup.path, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        assert unavailable(grant(root, "user:carol"))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    server.stop()
    assert not any("Traceback" in line for line in server.log), "".join(server.log)


def test_a_full_postgres_tablespace_answers_507_keeps_nothing_and_recovers(
    own_postgres: TemporaryPostgres, start_replica: Callable[[str], Server]
) -> None:
    """PostgreSQL's own full disk: the store's database in a tablespace on a 24 MiB tmpfs, filled with junk;
    a grant that needs a new page gets SQLSTATE 53100 (could not extend file), answered 507."""
    admin_url = own_postgres.url("postgres")
    with tmpfs(own_postgres.root / "small", "24m") as disk:
        if own_postgres.user is not None:
            os.chown(disk, own_postgres.user.pw_uid, own_postgres.user.pw_gid)
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f"CREATE TABLESPACE small LOCATION '{disk}'")  # ours, not user input
            conn.execute("CREATE DATABASE full_disk TABLESPACE small")
        try:
            url = own_postgres.url("full_disk")
            root_token, bob_token = seeded(url)
            server = start_replica(url)
            root, bob = server.client(root_token), server.client(bob_token)
            assert grant(root, "user:alice").status_code == 200
            assert decision(bob) == "allow"
            junk = disk / "junk"
            fill(junk)
            full = None
            for round_ in range(60):  # the tables' pages may have room left: grant more until they have none
                items = [[f"user:u{round_}x{i}", "READ", f"dataset:ns1.d{i}"] for i in range(300)]
                body = {"kind": "grant", "items": items}
                answer = sane(root.post("/v1/changes", json=body, headers={"X-Request-Id": f"full-{round_}"}))
                if answer.status_code == 507:
                    full = (round_, answer)
                    break
                assert answer.status_code == 200, answer.text
            assert full is not None, "the tablespace never filled"
            round_, answer = full
            error = answer.json()["error"]
            assert error.startswith("the store's disk is full: postgresql://postgres@127.0.0.1:"), error
            print(f"PostgreSQL's tablespace full after {round_ + 1} grants of 300: {error}")
            asked = {"principal": f"user:u{round_}x7", "operation": "dataset.read", "entity": "dataset:ns1.d7"}
            assert decision(bob, asked) == "deny" and decision(bob) == "allow"
            assert sane(root.get("/v1/audit", params={"principal": f"user:u{round_}x7"})).json()["changes"] == []
            assert ready(server) == 200
            healthy(server)
            junk.unlink()
            assert grant(root, "user:carol").status_code == 200  # no restart
            assert decision(bob, OTHER) == "allow"
            server.stop()
        finally:
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute("DROP DATABASE IF EXISTS full_disk WITH (FORCE)")
                conn.execute("DROP TABLESPACE IF EXISTS small")
