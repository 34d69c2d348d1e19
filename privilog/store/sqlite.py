"""The store in one SQLite file: the embedded default (``--store privilog.db`` or ``sqlite:PATH``).

WAL journal with ``synchronous=FULL``: a change is acknowledged after its
commit is on disk, so it survives a kill -9 and a power cut. Writers take the
database's write lock for the whole change (``BEGIN IMMEDIATE``), so two
processes changing one file wait for each other instead of losing an update.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .base import StoreError
from .sql import SqlStore, schema_v1

_APPEND_ONLY = """
CREATE TRIGGER changes_{verb} BEFORE {verb} ON changes
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END
"""


class SqliteStore(SqlStore):
    """The store in one SQLite file."""

    def __init__(self, path: str | Path, actions: Iterable[str] = (), create: bool = True):
        self.path = Path(path)
        if not create and not self.path.exists():
            raise StoreError(f"{self.path}: no such store (create it with `privilog store init --store {self.path}`)")
        if self.path.exists() and not self.path.is_file():
            raise StoreError(f"{self.path}: a store is a file; this is not a regular file")
        super().__init__(f"sqlite:{self.path}", actions)

    def _connect(self) -> Any:
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("PRAGMA busy_timeout=30000")
        except sqlite3.DatabaseError as error:
            raise StoreError(f"{self.path}: not a privilog store ({error})") from None
        return conn

    def _has_table(self, cur: Any, name: str) -> bool:
        cur.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
        return cur.fetchone() is not None

    def _begin_write(self, cur: Any) -> None:
        cur.execute("BEGIN IMMEDIATE")

    def _schema(self) -> list[str]:
        return [
            *schema_v1(keyed=" WITHOUT ROWID", serial="INTEGER PRIMARY KEY AUTOINCREMENT"),
            _APPEND_ONLY.format(verb="UPDATE"),
            _APPEND_ONLY.format(verb="DELETE"),
        ]
