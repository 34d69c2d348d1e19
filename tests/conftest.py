"""Fixtures every test folder may use: a real PostgreSQL server (``tests/pg.py``), and a Spark session in a
JVM of each module's own."""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

from tests import tiers
from tests.pg import fresh_postgres_url, postgres_server, postgres_url

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["fresh_postgres_url", "postgres_server", "postgres_url"]

# `--hypothesis-profile=long`: the program-level differential tests (tests/property/test_programs.py,
# tests/spark/test_engine.py) draw thousands of programs instead of the suite's few hundred; `mutation`:
# a few, for each mutant of a mutation run (tests/README.md, "Programs" and "Mutation testing").
settings.register_profile("long", max_examples=5000, deadline=None)
settings.register_profile("mutation", max_examples=40, deadline=None, derandomize=True)
# `quick` (PRIVILOG_HYPOTHESIS=quick, for the fast tier): a tenth of each test's own examples (tests/tiers.py).
tiers.register()

# The checked-policy cache (privilog/dsl/cache.py) of this run, its own: the suite never reads or fills
# the cache of the user running it, and every privilog process it starts shares this one. Set before
# any test loads a policy (the cache's folder is read once a process); removed when the run ends.
if "PRIVILOG_CACHE_DIR" not in os.environ:
    os.environ["PRIVILOG_CACHE_DIR"] = tempfile.mkdtemp(prefix="privilog-test-cache-")
    atexit.register(shutil.rmtree, os.environ["PRIVILOG_CACHE_DIR"], True)


def pytest_configure(config: pytest.Config) -> None:
    """The Hypothesis profile ``PRIVILOG_HYPOTHESIS`` names (``quick``, ``ci``: the default, ``long``)."""
    tiers.load(config)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test slow by nature is marked with its kind and ``slow`` (tests/tiers.py: the fast tier is
    ``-m "not slow"``; every test of tests/serve/attack is ``attack``); under ``quick``, each ``@given``
    test draws a tenth of its examples."""
    tiers.mark_kinds(items)
    tiers.scale_given_tests(items)


PARTITIONS = 2
# With 2g, a tiny deployment with every relation in Spark ran out of memory. With 4g, the pipeline's
# commands run in this process one after another (tests/spark/test_pipeline.py, test_unused.py)
# ran out while building a broadcast: Catalyst's trees of the fused plans (thousands of nodes, each
# analysed many times) took about 1 GB live between runs and more during one. A run of its own
# gets a quarter of the machine's memory (engine.spark.session.local_driver_memory).
DRIVER_MEMORY = "6g"


@pytest.fixture(scope="module")
def spark() -> Iterator["SparkSession"]:
    """A SparkSession for one test module, in a JVM started for it and ended after it.

    A SparkSession takes seconds to start, so the tests of a module share one, made with few
    shuffle partitions and the driver memory set before its JVM starts. Sharing one JVM across modules
    filled its heap: a full suite ran out of memory in the last module of pipeline runs, though each
    module passed alone, and whichever folder made the JVM first set its memory for every later one
    (tests/pipeline_report made it with 4g, so tests/spark never had the 6g it asked for)."""
    import pyspark  # noqa: F401  (the test extra installs it: without it the test fails, it is not skipped)
    from privilog.engine.spark.session import make_session

    yield make_session(partitions=PARTITIONS, driver_memory=DRIVER_MEMORY, app_name="privilog-tests")


@pytest.fixture(autouse=True, scope="module")
def _spark_ended_after_the_module() -> Iterator[None]:
    """Whatever Spark a module started (through the ``spark`` fixture, or a pipeline command run in this
    process) is stopped after it, JVM and all, so that the next module starts from an empty heap."""
    yield
    if "pyspark" not in sys.modules:
        return
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    if SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()
    _end_the_jvm()


def _end_the_jvm() -> None:
    """End the JVM PySpark launched, so that the next session launches a new one.

    PySpark's gateway JVM exits when its stdin closes (pyspark/java_gateway.py); PySpark keeps the
    gateway on ``SparkContext`` and launches a new JVM only when that is None."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return
    gateway.shutdown()
    process = getattr(gateway, "proc", None)
    if process is not None:
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    SparkContext._gateway = None
    SparkContext._jvm = None
