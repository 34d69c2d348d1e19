"""The durable grant store (``--store``): SQLite embedded, PostgreSQL shared by replicas.

>>> import tempfile, pathlib
>>> from privilog.store import open_store
>>> path = pathlib.Path(tempfile.mkdtemp()) / "authz.db"
>>> store = open_store(str(path))
>>> store.change("local:ops", "admin.add", ["user:root"], trusted=True).items
('user:root',)
>>> store.change("user:root", "grant", [["user:alice", "READ", "namespace:ns1"]]).items
(('user:alice', 'READ', 'namespace:ns1'),)
>>> world, seq = store.snapshot()
>>> sorted(str(g) for g in world.grants), seq
(['user:alice READ namespace:ns1'], 2)
>>> store.close()
"""

from __future__ import annotations

from collections.abc import Iterable

from .base import ENGINE_KINDS, KINDS, Change, Store, StoreError, Token
from .sql import SqlStore


def is_store_url(text: str) -> bool:
    """Whether ``text`` names a store by URL (``sqlite:PATH``, ``postgresql://...``)."""
    return text.startswith(("sqlite:", "postgresql://", "postgres://"))


def open_store(url: str, actions: Iterable[str] = (), create: bool = True) -> SqlStore:
    """The store at ``url``: ``postgresql://...``, ``sqlite:PATH`` or a plain path (SQLite).

    ``create``: make an empty store when there is none (``privilog store init``);
    otherwise a missing SQLite file is an error.
    """
    if url.startswith(("postgresql://", "postgres://")):
        from privilog.usage import require_extra

        require_extra("postgres", "a store at postgresql://...")
        from .postgres import PostgresStore

        return PostgresStore(url, actions)
    from .sqlite import SqliteStore

    return SqliteStore(url.removeprefix("sqlite:"), actions, create=create)


__all__ = ["ENGINE_KINDS", "KINDS", "Change", "Store", "StoreError", "Token", "is_store_url", "open_store"]
