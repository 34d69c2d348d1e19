"""Fixtures every test folder may use: a real PostgreSQL server (``tests/pg.py``)."""

from tests.pg import fresh_postgres_url, postgres_server, postgres_url

__all__ = ["fresh_postgres_url", "postgres_server", "postgres_url"]
