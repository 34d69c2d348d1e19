"""The store in one SQLite file: the embedded default (``--store privilog.db`` or ``sqlite:PATH``).

WAL journal with ``synchronous=FULL``: a change is acknowledged after its
commit is on disk, so it survives a kill -9 and a power cut. Writers take the
database's write lock for the whole change (``BEGIN IMMEDIATE``), so two
processes changing one file wait for each other instead of losing an update.

Faults are the store's, not the caller's: a file locked by another process for
longer than the busy timeout (``PRIVILOG_STORE_TIMEOUT``, 10 s), one that cannot
be opened, read or written, a damaged one, or one removed or replaced while it is
open is :class:`StoreUnavailable` (the server answers 503 with ``Retry-After``);
a full disk is :class:`StoreFull` (507). Nothing of a change that fails is kept.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .base import StoreError, StoreFull, StoreUnavailable
from .sql import STORE_TIMEOUT, SqlStore, schema_v1

_APPEND_ONLY = """
CREATE TRIGGER changes_{verb} BEFORE {verb} ON changes
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END
"""

# SQLite's primary result codes (https://sqlite.org/rescode.html): the low byte of an extended one
SQLITE_ERROR, SQLITE_PERM, SQLITE_BUSY, SQLITE_LOCKED, SQLITE_READONLY = 1, 3, 5, 6, 8
SQLITE_IOERR, SQLITE_CORRUPT, SQLITE_FULL, SQLITE_CANTOPEN, SQLITE_NOTADB = 10, 11, 13, 14, 26


class SqliteStore(SqlStore):
    """The store in one SQLite file."""

    def __init__(self, path: str | Path, actions: Iterable[str] = (), create: bool = True):
        self.path = Path(path)
        if not create and not self.path.exists():
            raise StoreError(f"{self.path}: no such store (create it with `privilog store init --store {self.path}`)")
        if self.path.exists() and not self.path.is_file():
            raise StoreError(f"{self.path}: a store is a file; this is not a regular file")
        if create and not self.path.exists():  # readable and writable by its owner only (and its -wal, -shm)
            try:
                os.close(os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            except FileExistsError:
                pass
            except OSError as error:
                raise StoreError(f"{self.path}: cannot create the store: {error.strerror or error}") from None
        self._identity: tuple[int, int] | None = None
        self._size = 0  # the file's size when last looked at: it never shrinks (privilog never vacuums)
        super().__init__(f"sqlite:{self.path}", actions)

    def _connect(self) -> Any:
        timeout = STORE_TIMEOUT.value()
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=timeout)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
            stat = os.stat(self.path)
        except sqlite3.DatabaseError as error:
            classified = self._classify(error)
            if classified is not None and _code(error) not in (SQLITE_CORRUPT, SQLITE_NOTADB):
                raise classified from None
            raise StoreError(f"{self.path}: not a privilog store ({error})") from None
        except OSError as error:
            raise StoreUnavailable(f"{self.path}: the store's file cannot be read ({error.strerror})") from None
        if self._identity is None:  # the file first opened (a reading connection opens the same)
            self._identity, self._size = (stat.st_dev, stat.st_ino), stat.st_size
        return conn

    # ---- faults ---------------------------------------------------------------------------

    def _classify(self, error: Exception) -> StoreError | None:
        if not isinstance(error, sqlite3.Error):
            return None
        code, text = _code(error), str(error)
        if code == SQLITE_FULL:
            return StoreFull(f"the store's disk is full: {self.path}: {text}; free space on its disk, then try again")
        if code in (SQLITE_BUSY, SQLITE_LOCKED):
            return StoreUnavailable(
                f"{self.path}: the store is locked by another process (waited {STORE_TIMEOUT.value()} s: {text}); "
                "try again, or find what holds it"
            )
        if code in (SQLITE_PERM, SQLITE_READONLY, SQLITE_IOERR, SQLITE_CANTOPEN):
            return StoreUnavailable(
                f"{self.path}: the store cannot be read or written ({text}); check its file, folder and disk"
            )
        if code in (SQLITE_CORRUPT, SQLITE_NOTADB) or (code == SQLITE_ERROR and text.startswith("no such table")):
            return StoreUnavailable(
                f"{self.path}: the store's file is damaged or not a privilog store ({text}); restore it from a backup"
            )
        return None

    def _same_file(self) -> None:
        """The file at the store's path is still the one this connection has open, and no shorter than
        it was; else every transaction is refused until it is so again. A change would otherwise go to
        a file no one else reads (replaced, removed), or be acknowledged into one whose pages are gone
        (truncated: SQLite's cache and WAL hide it until the next checkpoint writes a damaged file).
        A stat per transaction, a few microseconds."""
        try:
            stat = os.stat(self.path)
        except OSError:
            stat = None
        if stat is None or (stat.st_dev, stat.st_ino) != self._identity:
            raise StoreUnavailable(
                f"{self.path}: the store's file was removed or replaced while this process had it open; "
                "put it back, or restart privilog to open the file now there"
            )
        if stat.st_size < self._size:
            raise StoreUnavailable(
                f"{self.path}: the store's file shrank from {self._size} to {stat.st_size} bytes while this "
                "process had it open (truncated?); put its content back, or restore it and restart privilog"
            )
        self._size = stat.st_size

    # ---- the dialect ----------------------------------------------------------------------

    def _has_table(self, cur: Any, name: str) -> bool:
        cur.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
        return cur.fetchone() is not None

    def _begin_read(self, cur: Any) -> None:
        self._same_file()
        cur.execute("BEGIN")

    def _begin_write(self, cur: Any) -> None:
        self._same_file()
        cur.execute("BEGIN IMMEDIATE")

    def _schema(self) -> list[str]:
        return [
            *schema_v1(keyed=" WITHOUT ROWID", serial="INTEGER PRIMARY KEY AUTOINCREMENT"),
            _APPEND_ONLY.format(verb="UPDATE"),
            _APPEND_ONLY.format(verb="DELETE"),
        ]


def _code(error: sqlite3.Error) -> int:
    """The primary result code of a SQLite error (0 when the driver did not say)."""
    return int(getattr(error, "sqlite_errorcode", 0) or 0) & 0xFF
