"""Fixtures every test folder may use: a real PostgreSQL server (``tests/pg.py``), and one Spark session's
cache emptied after each module that used it."""

import sys
from collections.abc import Iterator

import pytest

from tests.pg import fresh_postgres_url, postgres_server, postgres_url

__all__ = ["fresh_postgres_url", "postgres_server", "postgres_url"]


@pytest.fixture(autouse=True, scope="module")
def _spark_cache_emptied_after_the_module() -> Iterator[None]:
    """The test run shares one Spark session (one JVM of 4 GB). Pipeline commands run in this process
    persist their tables in it, as a run does; a run in its own process ends with them, here they would
    pile up module after module until a broadcast finds no memory. Emptied after each module."""
    yield
    if "pyspark.sql" in sys.modules:
        from privilog.engine.spark.session import collect_garbage
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is not None:
            active.catalog.clearCache()
            collect_garbage()
