"""Fixtures every test folder may use: a real PostgreSQL server (``tests/pg.py``), and a Spark session
shared by the modules that use it one after another, its state reset after each module."""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

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


# The shared session and its runtime settings as made (by the `spark` fixture), so that the session a
# module leaves is told apart from one a pipeline command made in this process, and reset.
_SHARED: list[tuple["SparkSession", dict[str, str]]] = []
# Each module's path -> whether a module of its folder run after it asks for `spark` (pytest_collection_finish).
_SPARK_LATER: dict[Path, bool] = {}


def pytest_collection_finish(session: pytest.Session) -> None:
    """For each module, in the order they run (the selection made): whether a later module of its folder asks
    for ``spark`` (the shared session is kept for it)."""
    order: list[list[Any]] = []  # [path, asks for spark]
    for item in session.items:
        asks = "spark" in getattr(item, "fixturenames", ())
        if order and order[-1][0] == item.path:
            order[-1][1] = order[-1][1] or asks
        else:
            order.append([item.path, asks])
    _SPARK_LATER.clear()
    for i, (path, _) in enumerate(order):
        _SPARK_LATER[path] = any(asks for later, asks in order[i + 1 :] if later.parent == path.parent)


@pytest.fixture(scope="module")
def spark() -> "SparkSession":
    """A SparkSession shared by the modules of a folder (tests/spark's), in one JVM made with the driver
    memory the tests ask for and few shuffle partitions; reset after each module, and stopped, JVM and
    all, after the folder's last module that asks for it.

    A JVM of each module's own cost each module its start-up and its JIT's warm-up (a module's first
    pipeline run took about twice as long as its next ones). One JVM once ran out of memory in a full
    suite because tests/pipeline_report made it first with 4g (the JVM that starts first sets the memory
    of every later session): this one is made with DRIVER_MEMORY whichever module asks first, after
    stopping any session a pipeline command made in this process before (with its own memory). What a
    module leaves in it (cached tables, checkpoints, temporary views, runtime settings) is removed after
    the module (:func:`_spark_after_the_module`), and its JVM's garbage collected."""
    import pyspark  # noqa: F401  (the test extra installs it: without it the test fails, it is not skipped)
    from privilog.engine.spark.session import make_session
    from pyspark import SparkContext

    if _SHARED and SparkContext._active_spark_context is _SHARED[0][0].sparkContext:
        return _SHARED[0][0]
    _SHARED.clear()
    _stop_spark()
    session = make_session(partitions=PARTITIONS, driver_memory=DRIVER_MEMORY, app_name="privilog-tests")
    _SHARED.append((session, dict(session.conf.getAll)))
    return session


@pytest.fixture(autouse=True, scope="module")
def _spark_after_the_module(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each module: the shared session reset to the state it was made in (:func:`_reset`), or stopped,
    JVM and all, when no later module of its folder asks for it; any other Spark the module started (a pipeline
    command run in this process with no shared session) stopped, as at the end of its own process."""
    yield
    if "pyspark" not in sys.modules:
        return
    from pyspark import SparkContext

    shared = bool(_SHARED) and SparkContext._active_spark_context is _SHARED[0][0].sparkContext
    if shared and _SPARK_LATER.get(request.path, False):
        _reset(*_SHARED[0])
    else:
        _SHARED.clear()
        _stop_spark()


def _reset(session: "SparkSession", made: dict[str, str]) -> None:
    """Remove what a module left in the run's session: jobs still running, cached tables and persisted RDDs
    (the local checkpoints of runs made outside ``released()``), temporary views, runtime settings
    changed since the session was made (a pipeline run turns off Spark's own broadcasts); then collect
    the JVM's garbage. Checked, so that leftovers fail the module that left them, not a later one."""
    from privilog.engine.spark.session import collect_garbage

    context = session.sparkContext
    assert context._jsc is not None
    context.cancelAllJobs()
    session.catalog.clearCache()
    for rdd in list(context._jsc.getPersistentRDDs().values()):
        rdd.unpersist(True)
    for table in session.catalog.listTables():
        if table.isTemporary:
            session.catalog.dropTempView(table.name)
    for key, value in dict(session.conf.getAll).items():
        if key not in made and session.conf.isModifiable(key):
            session.conf.unset(key)
        elif key in made and value != made[key] and session.conf.isModifiable(key):
            session.conf.set(key, made[key])
    for key, value in made.items():
        if session.conf.get(key, None) is None:
            session.conf.set(key, value)
    collect_garbage()
    now = dict(session.conf.getAll)
    changed = {k: (made.get(k), now.get(k)) for k in made.keys() | now.keys() if made.get(k) != now.get(k)}
    assert changed == {}, f"Spark settings a module changed and the reset could not undo: {changed}"
    assert len(context._jsc.getPersistentRDDs()) == 0
    assert [t.name for t in session.catalog.listTables()] == [], "a module left tables in the catalog"


def _stop_spark() -> None:
    """Stop the active session and context, and end the JVM PySpark launched."""
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
