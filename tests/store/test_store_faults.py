"""A store's faults, classified (issue 33, items 11 and 12): what is the store's fault is StoreUnavailable
(503, try again) or StoreFull (507), never a plain StoreError (400) or a driver's exception (500); a
malformed change stays a StoreError; nothing of a change that failed is kept, and the next one works.

The servers' side of the same faults: tests/serve/attack/test_attack_store_faults.py."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import psycopg
import pytest

from privilog.store import StoreError, open_store
from privilog.store.base import StoreFull, StoreUnavailable
from privilog.store.postgres import LOCK_KEY
from privilog.store.sql import SqlStore
from privilog.store.sqlite import SqliteStore

GRANT = [["user:alice", "READ", "namespace:ns1"]]


@pytest.fixture(autouse=True)
def _short_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVILOG_STORE_TIMEOUT", "1")


def test_a_malformed_change_is_still_a_store_error_not_the_stores_fault(store: SqlStore) -> None:
    with pytest.raises(StoreError) as caught:
        store.change("user:root", "grnat", GRANT)
    assert not isinstance(caught.value, StoreUnavailable | StoreFull)


def hold_the_write_lock(store: SqlStore, store_url: str) -> tuple[sqlite3.Connection | psycopg.Connection, str]:
    """Another connection holding the store's write lock (SQLite: an exclusive transaction; PostgreSQL:
    the advisory lock every change takes), and the statement that lets it go."""
    if isinstance(store, SqliteStore):
        holder: sqlite3.Connection | psycopg.Connection = sqlite3.connect(store.path, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        return holder, "ROLLBACK"
    holder = psycopg.connect(store_url, autocommit=True)
    holder.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
    return holder, f"SELECT pg_advisory_unlock({LOCK_KEY})"


def test_a_write_lock_held_past_the_timeout_is_unavailable_then_the_next_change_works(
    store: SqlStore, store_url: str
) -> None:
    holder, release = hold_the_write_lock(store, store_url)
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailable) as caught:
            store.change("user:root", "grant", GRANT)
        waited = time.monotonic() - started
        assert 0.5 <= waited < 5, waited
        message = str(caught.value)
        assert "\n" not in message and "try again" in message and message.startswith(store.url.split("sqlite:")[-1])
        assert store.last_seq() == 1  # reading goes on; nothing of the change was kept
    finally:
        holder.execute(release)
        holder.close()
    assert store.change("user:root", "grant", GRANT).items == (tuple(GRANT[0]),)


def test_a_sqlite_file_removed_or_truncated_is_unavailable_until_it_is_back(tmp_path: Path) -> None:
    path = tmp_path / "authz.db"
    with open_store(str(path)) as store:
        store.change("local:ops", "admin.add", ["user:root"], trusted=True)
        store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        kept = tmp_path / "kept.db"
        os.link(path, kept)
        path.unlink()
        for call in (store.last_seq, lambda: store.change("user:root", "grant", GRANT)):
            with pytest.raises(StoreUnavailable, match="removed or replaced"):
                call()
        os.replace(kept, path)
        saved = path.read_bytes()
        os.truncate(path, 0)
        with pytest.raises(StoreUnavailable, match="shrank from"):
            store.change("user:root", "grant", GRANT)
        with open(path, "r+b") as file:
            file.write(saved)
        assert store.change("user:root", "grant", GRANT).seq == 2


def test_sqlite_errors_are_classified_by_their_code(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "authz.db")) as store:

        def error(code: int, text: str) -> sqlite3.Error:
            made = sqlite3.OperationalError(text)
            made.sqlite_errorcode = code  # type: ignore[attr-defined]
            return made

        full = store._classify(error(13, "database or disk is full"))
        assert isinstance(full, StoreFull) and str(full).startswith("the store's disk is full: ")
        for code, text in [
            (5, "database is locked"),
            (6, "database table is locked"),
            (14, "unable to open"),
            (10 | (4 << 8), "disk I/O error"),
            (26, "file is not a database"),
            (11, "database disk image is malformed"),
            (1, "no such table: changes"),
        ]:
            assert isinstance(store._classify(error(code, text)), StoreUnavailable), (code, text)
        assert store._classify(error(1, 'near "SELEC": syntax error')) is None  # a bug: a 500 and its traceback
        assert store._classify(ValueError("x")) is None


def test_a_store_with_no_database_server_is_unavailable_without_a_password(postgres_server: object) -> None:
    from tests.pg import free_port

    with pytest.raises(StoreUnavailable) as caught:
        open_store(f"postgresql://bob:hunter2@127.0.0.1:{free_port()}/authz")
    assert "hunter2" not in str(caught.value) and "try again" in str(caught.value)


def test_postgres_options_of_the_url_come_after_the_timeouts(fresh_postgres_url: str) -> None:
    with open_store(fresh_postgres_url) as store:
        assert store._conn.execute("SHOW statement_timeout").fetchone()[0] == "1s"
        assert store._conn.execute("SHOW lock_timeout").fetchone()[0] == "1s"
    url = fresh_postgres_url + "?options=-c%20statement_timeout%3D7s"
    with open_store(url) as store:
        assert store._conn.execute("SHOW statement_timeout").fetchone()[0] == "7s"
        assert store._conn.execute("SHOW lock_timeout").fetchone()[0] == "1s"


def test_a_change_waiting_for_the_write_lock_holds_up_no_reader(
    store: SqlStore, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads have a connection of their own: a token looked up, or the log followed, while a change waits
    for another writer (up to the timeout) is answered at once."""
    import threading

    monkeypatch.setenv("PRIVILOG_STORE_TIMEOUT", "3")
    _, token = store.create_token("user:bob", "local:ops")
    holder, release = hold_the_write_lock(store, store_url)
    failed: list[BaseException] = []

    def write() -> None:
        try:
            store.change("user:root", "grant", GRANT)
        except StoreUnavailable as error:
            failed.append(error)

    writer = threading.Thread(target=write)
    try:
        writer.start()
        deadline = time.monotonic() + 5
        while store._lock.acquire(blocking=False):  # until the writer holds the writing connection
            store._lock.release()
            assert time.monotonic() < deadline, "the writer did not start"
            time.sleep(0.005)
        assert store.token_principal(token) == "user:bob" and store.last_seq() == 2
        assert writer.is_alive()  # answered while the change still waited (3 s): it held up no reader
    finally:
        writer.join(10)
        holder.execute(release)
        holder.close()
    assert len(failed) == 1 and store.last_seq() == 2


def test_a_statement_over_the_bound_is_unavailable_but_a_whole_store_may_take_longer(fresh_postgres_url: str) -> None:
    """statement_timeout bounds each statement (1 s here); a snapshot or an import (millions of rows) lifts it,
    and the client's watch, for its own transaction only; the connection stays usable after a cancelled one."""
    with open_store(fresh_postgres_url) as store:
        with pytest.raises(StoreUnavailable, match="did not answer within 1 s"), store._transaction(False) as cur:
            cur.execute("SELECT pg_sleep(1.5)")
        assert store.last_seq() == 0
        with store._transaction(write=False) as cur:
            store._unbounded(cur)
            cur.execute("SELECT pg_sleep(3.5)")  # past the client's own bound (2 x 1 s + 1 s) too
        with store._transaction(write=False) as cur:
            assert cur.execute("SHOW statement_timeout").fetchone()[0] == "1s"  # SET LOCAL: that transaction only
