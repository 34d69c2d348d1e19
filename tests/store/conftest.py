"""Stores to test, each kind fresh per test: a SQLite file and a PostgreSQL database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from privilog.dsl.ir import Policy

from privilog import dsl
from privilog.store import open_store
from privilog.store.sql import SqlStore

KINDS = ["sqlite", "postgresql"]


@pytest.fixture(scope="session")
def policy() -> Policy:
    return dsl.load_policy("cdap")


@pytest.fixture(params=KINDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL naming a new, empty store: a SQLite file, or a new PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "authz.db")
    return str(request.getfixturevalue("fresh_postgres_url"))


@pytest.fixture
def store(store_url: str, policy: Policy) -> Iterator[SqlStore]:
    """A new store with one authorization admin, ``user:root``."""
    with open_store(store_url, policy.actions) as opened:
        opened.change("local:ops", "admin.add", ["user:root"], trusted=True)
        yield opened
