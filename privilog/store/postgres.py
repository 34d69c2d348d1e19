"""The store in PostgreSQL (``--store postgresql://...``), shared by several replicas.

Every write transaction first takes one transaction-level advisory lock
(``pg_advisory_xact_lock``), so changes are serialized: a change is checked
against every change committed before it, and the log's sequence numbers are
handed out in commit order (a replica reading ``seq > N`` never skips an entry
that commits later with a smaller number). Reads run in REPEATABLE READ, so a
snapshot and its sequence number agree.

A change notifies ``privilog_changes`` (payload: its seq) when it commits;
:meth:`PostgresStore.wait_for_change` listens on a connection of its own, so
a replica learns of another's change within milliseconds. Creating the schema
takes the same lock, so replicas starting at once create it once.

Errors reaching the server are one line naming the URL without its password. A
database that cannot be reached (stopped, refusing connections, shutting down, a
lost connection) or that does not answer in time (every session runs with
``lock_timeout`` and ``statement_timeout`` of ``PRIVILOG_STORE_TIMEOUT``, 10 s, so a
change waiting for the write lock gives up) is :class:`StoreUnavailable` (the
server answers 503 with ``Retry-After``); so is one that does not answer at all
(frozen, the network gone: no server-side timeout fires), whose connection is cut
on the client's side after twice that and a second (:meth:`PostgresStore._watch`).
A full disk (SQLSTATE 53100) is :class:`StoreFull` (507). The next call opens a
new connection: nothing to restart.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import Any
from urllib.parse import unquote, unquote_plus

import psycopg
import psycopg.errors
from psycopg.conninfo import conninfo_to_dict

from .base import StoreError, StoreFull, StoreUnavailable
from .sql import STORE_TIMEOUT, SqlStore, schema_v1

CHANNEL = "privilog_changes"
# the one write lock: pg_advisory_xact_lock's 64-bit key (the bytes of "privilog" as a number)
LOCK_KEY = int.from_bytes(b"privilog", "big") & 0x7FFF_FFFF_FFFF_FFFF
CONNECT_TIMEOUT = 10  # seconds, at most (PRIVILOG_STORE_TIMEOUT, when smaller)

_APPEND_ONLY = [
    "CREATE FUNCTION privilog_append_only() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN RAISE EXCEPTION 'the audit log is append-only'; END $$",
    "CREATE TRIGGER changes_append_only BEFORE UPDATE OR DELETE ON changes "
    "FOR EACH ROW EXECUTE FUNCTION privilog_append_only()",
    "CREATE TRIGGER changes_no_truncate BEFORE TRUNCATE ON changes "
    "FOR EACH STATEMENT EXECUTE FUNCTION privilog_append_only()",
]


class _Watchdog:
    """One thread for the process that calls each armed ``cut`` whose deadline passed (started on first use)."""

    def __init__(self) -> None:
        self._due = threading.Condition()
        self._deadlines: dict[int, tuple[float, Callable[[], None]]] = {}
        self._thread: threading.Thread | None = None

    def arm(self, key: int, seconds: float, cut: Callable[[], None]) -> None:
        with self._due:
            self._deadlines[key] = (time.monotonic() + seconds, cut)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="privilog-store-watchdog", daemon=True)
                self._thread.start()
            self._due.notify()

    def disarm(self, key: int) -> None:
        with self._due:
            self._deadlines.pop(key, None)

    def forget(self) -> None:
        """In a process just forked: its parent's thread is not here (and its condition may have been held
        there), so start again empty; the next :meth:`arm` starts this process's own thread."""
        self._due = threading.Condition()
        self._deadlines = {}
        self._thread = None

    def _run(self) -> None:
        with self._due:
            while True:
                now = time.monotonic()
                for key in [k for k, (deadline, _) in self._deadlines.items() if deadline <= now]:
                    self._deadlines.pop(key)[1]()
                soonest = min((deadline for deadline, _ in self._deadlines.values()), default=None)
                self._due.wait(None if soonest is None else max(0.0, soonest - now))


_WATCHDOG = _Watchdog()
os.register_at_fork(after_in_child=_WATCHDOG.forget)  # privilog serve --workers N forks after loading


def redact(url: str) -> str:
    """``url`` with its password (in the authority or a ``password=`` parameter) replaced by ``***``.

    >>> redact("postgresql://alice:s3cret@db.example:5432/authz?sslmode=require&password=x%21")
    'postgresql://alice:***@db.example:5432/authz?sslmode=require&password=***'
    >>> redact("postgresql://db.example/authz")
    'postgresql://db.example/authz'
    """
    scheme, sep, rest = url.partition("://")
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, tail = rest[:cut], rest[cut:]
    userinfo, at, host = authority.rpartition("@")
    if at and ":" in userinfo:
        authority = f"{userinfo.partition(':')[0]}:***@{host}"
    return scheme + sep + authority + re.sub(r"([?&]password=)[^&#]*", r"\1***", tail)


def _mask(text: str, url: str) -> str:
    """``text`` with ``url`` and every form of its passwords masked (a message may quote either)."""
    text = text.replace(url, redact(url))
    for secret in sorted(_secrets(url), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def _secrets(url: str) -> set[str]:
    """Every form of the passwords in ``url``, as written and decoded; read by hand, so a URL
    too malformed to parse has its password found all the same."""
    authority = url.partition("://")[2].split("/", 1)[0].split("?", 1)[0]
    userinfo, at, _ = authority.rpartition("@")
    found = {userinfo.partition(":")[2]} if at and ":" in userinfo else set()
    found.update(re.findall(r"[?&]password=([^&#]*)", url))
    return {form for secret in found if secret for form in (secret, unquote(secret), unquote_plus(secret))}


class PostgresStore(SqlStore):
    """The store in a PostgreSQL database, for replicas sharing it."""

    placeholder = "%s"
    contains = "strpos"

    def __init__(self, url: str, actions: Iterable[str] = ()):
        self._dsn = url
        self._listener: psycopg.Connection[Any] | None = None
        self._quiet_until = 0.0  # after the database stopped answering: fail at once until then
        super().__init__(redact(url), actions)

    # ---- connections ------------------------------------------------------------------------

    def _failure(self, error: BaseException) -> StoreError:
        """One line saying what failed, never the password: :class:`StoreFull` for a full disk,
        :class:`StoreUnavailable` for a database away, lost or too slow, else :class:`StoreError`."""
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        text = _mask("; ".join(lines[:2]) or type(error).__name__, self._dsn)
        if isinstance(error, psycopg.errors.DiskFull):
            return StoreFull(f"the store's disk is full: {self.url}: {text}; free space on the database's disk")
        if isinstance(error, psycopg.errors.QueryCanceled | psycopg.errors.LockNotAvailable):
            return StoreUnavailable(
                f"{self.url}: the store did not answer within {STORE_TIMEOUT.value()} s ({text}); try again"
            )
        if isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
            return StoreUnavailable(f"{self.url}: {text} (the store is unavailable; try again)")
        return StoreError(f"{self.url}: {text}")

    def _classify(self, error: Exception) -> StoreError | None:
        if isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
            return self._failure(error)
        return None

    def _open(self) -> psycopg.Connection[Any]:
        """A new connection whose every statement and lock wait is bounded (``PRIVILOG_STORE_TIMEOUT``);
        ``options`` the URL (or ``PGOPTIONS``) gives come after, so they win."""
        try:
            timeout = STORE_TIMEOUT.value() * 1000
            given = conninfo_to_dict(self._dsn).get("options") or os.environ.get("PGOPTIONS", "")
            options = f"-c lock_timeout={timeout} -c statement_timeout={timeout} {given}".strip()
            return psycopg.connect(
                self._dsn,
                autocommit=True,
                connect_timeout=min(CONNECT_TIMEOUT, max(2, STORE_TIMEOUT.value())),
                application_name="privilog",
                options=options,
            )
        except (psycopg.Error, ValueError) as error:
            if "timeout expired" in str(error):  # accepted, never answered: a database frozen or cut off
                self._quiet_until = time.monotonic() + StoreUnavailable.retry_after
            raise self._failure(error) from None

    def _connect(self) -> Any:
        return self._open()

    def _connection(self, write: bool) -> Any:
        """The base class's connection, opened anew if the last one broke (a database that went
        away and came back needs no restart)."""
        if self._closed:
            raise StoreError(f"{self.url}: the store is closed")
        if time.monotonic() < self._quiet_until:  # callers queued behind a call that waited in vain fail at once
            raise StoreUnavailable(f"{self.url}: the database did not answer a moment ago; try again")
        if write and self._conn.closed:
            self._conn = self._open()
        if not write and self._reader is not None and self._reader.closed:
            self._reader = self._open()
        return super()._connection(write)

    @contextmanager
    def _watch(self, conn: Any) -> Iterator[None]:
        """Bound a transaction's time on the client's side too: the server's timeouts bound a statement
        and a lock wait, but a database that does not answer at all (its server frozen, the network to
        it gone) would hold a request for ever. After twice ``PRIVILOG_STORE_TIMEOUT`` and a second, the
        connection's socket is shut down, the blocked call fails, and the transaction is
        :class:`StoreUnavailable`; calls made in the next second fail at once, and the next one after
        opens a new connection. A snapshot or an import (:meth:`_unbounded`) is not watched."""
        limit = 2 * STORE_TIMEOUT.value() + 1
        guard = threading.Lock()
        state = {"done": False, "cut": False}

        def cut() -> None:
            with guard:
                if state["done"]:
                    return
                state["cut"] = True
                with suppress(OSError, psycopg.Error):
                    sock = socket.socket(fileno=os.dup(conn.fileno()))
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    finally:
                        sock.close()

        _WATCHDOG.arm(id(conn), limit, cut)
        try:
            yield
        except Exception:
            if not state["cut"]:
                raise
            self._quiet_until = time.monotonic() + StoreUnavailable.retry_after
            raise StoreUnavailable(
                f"{self.url}: the database did not answer within {limit} s (stopped, or the network to it "
                "gone?); try again"
            ) from None
        finally:
            with guard:
                state["done"] = True
            _WATCHDOG.disarm(id(conn))
            if state["cut"]:
                with suppress(Exception):
                    conn.close()  # shut down under it: the next call opens a new one

    def close(self) -> None:
        with self._lock:
            if self._listener is not None:
                self._listener.close()
                self._listener = None
        super().close()

    # ---- the dialect --------------------------------------------------------------------------

    def _has_table(self, cur: Any, name: str) -> bool:
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", (name,))
        return bool(cur.fetchone()[0])

    def _begin_write(self, cur: Any) -> None:
        cur.execute("BEGIN")
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))

    def _begin_read(self, cur: Any) -> None:
        cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")

    def _unbounded(self, cur: Any) -> None:
        _WATCHDOG.disarm(id(cur.connection))
        cur.execute("SET LOCAL statement_timeout = 0")

    def _after_change(self, cur: Any, seq: int) -> None:
        cur.execute("SELECT pg_notify(%s, %s)", (CHANNEL, str(seq)))

    def _schema(self) -> list[str]:
        return [*schema_v1(keyed="", serial="BIGSERIAL PRIMARY KEY"), *_APPEND_ONLY]

    def _bulk_insert(self, cur: Any, table: str, columns: str, rows: list[tuple[Any, ...]]) -> int:
        """COPY into a temporary table, then one INSERT of what is new: a million rows in seconds."""
        if not rows:
            return 0
        cur.execute(f"CREATE TEMPORARY TABLE incoming (LIKE {table}) ON COMMIT DROP")
        with cur.copy(f"COPY incoming({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        cur.execute(
            f"INSERT INTO {table}({columns}) SELECT {columns} FROM incoming ORDER BY {columns} ON CONFLICT DO NOTHING"
        )
        added = int(cur.rowcount)
        cur.execute("DROP TABLE incoming")
        return added

    # ---- following ------------------------------------------------------------------------------

    def wait_for_change(self, after: int, timeout: float) -> bool:
        """Whether the log has an entry after ``after``, waiting up to ``timeout`` seconds for one.

        Listens for the notification a change sends when it commits, on a connection of its
        own (opened on first use, and again after it breaks), so one replica learns of another's
        change as soon as it commits. Call it from one thread (a deployment's follower).
        """
        deadline = time.monotonic() + timeout
        if self._closed:
            raise StoreError(f"{self.url}: the store is closed")
        try:
            if self._listener is None or self._listener.closed:
                self._listener = self._open()
                self._listener.execute(f"LISTEN {CHANNEL}")
            # listening before looking: a change committed after this read is notified
            row = self._listener.execute("SELECT coalesce(max(seq), 0) FROM changes").fetchone()
            if row is not None and int(row[0]) > after:
                return True
            remaining = deadline - time.monotonic()
            while remaining > 0:
                for notice in self._listener.notifies(timeout=remaining, stop_after=1):
                    if not notice.payload.isdigit() or int(notice.payload) > after:
                        return True
                remaining = deadline - time.monotonic()
            return False
        except psycopg.Error as error:
            listener, self._listener = self._listener, None
            if listener is not None:
                listener.close()
            raise self._failure(error) from None
