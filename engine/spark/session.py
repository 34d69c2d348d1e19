"""A SparkSession set up for evaluating programs on a small machine, or a cluster.

ENGINES.md: start-up takes tens of seconds on these machines, about half that
with ``SPARK_LOCAL_IP=127.0.0.1``; driver memory must be set before the JVM
starts; 200 shuffle partitions make small jobs many times slower than a few; the
console progress bar garbles a command's own progress lines.

The engine keeps relations keyed by a request id hash-partitioned by it, so that
their joins and ``distinct`` need no shuffle (engine.spark.plan). Spark keeps a
cached relation's partitioning only with adaptive execution off, and co-partitions
a join on more keys than the partitioning only when told it need not require them
all; :data:`SETTINGS` says both. An existing session (a test suite's, or one
``spark-submit`` made) is used as it is, with those settings applied.

Over Spark Connect (``sc://HOST:PORT``: a notebook's, Databricks', a server started with
``SparkConnectServer``) there is no JVM here: the session's runtime settings are sent to
the server, and what has no Connect equivalent is done otherwise (:func:`is_connect`
says which session this is; each use of the JVM says what stands in for it).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


DEFAULT_MASTER = "local[*]"
DEFAULT_DRIVER_MEMORY = "4g"  # when the machine's memory cannot be read
# The DataFrames persisted (by persist) during the run under way (released), to unpersist at its end.
_PERSISTED: ContextVar[list[DataFrame] | None] = ContextVar("privilog_persisted", default=None)


def persist(df: DataFrame) -> DataFrame:
    """``df`` computed now and kept (in memory, spilling to disk) with its plan cut to the rows (a local
    checkpoint), and remembered by the run under way (:func:`released`).

    Cut, not merely cached: Spark analyses the whole plan of every DataFrame again for each action on
    anything derived from it, a cached part and all, and the engine's fused plans are thousands of
    nodes. Over Spark Connect the server does so for every request the client sends: deciding 2,000
    requests took minutes of its planning and ran its heap out. In local mode, cutting took a 10^5
    ``decide`` from 78 s to 55 s, and 10^6 from 196 s to 101 s (benchmarks/README.md). A checkpoint
    lives in the executors' block stores: on a cluster, a lost executor fails the job rather than
    recomputing its part (run it again).
    """
    from pyspark import StorageLevel

    kept = df.localCheckpoint(eager=True, storageLevel=StorageLevel.MEMORY_AND_DISK)
    run = _PERSISTED.get()
    if run is not None:
        run.append(kept)
    return kept


@contextlib.contextmanager
def released() -> Iterator[None]:
    """Unpersist, on leaving, every DataFrame :func:`persist` kept inside.

    A pipeline run in its own process ends with its caches; one run in a session that outlives it
    (a test suite's, a notebook's) would otherwise leave them in the JVM's memory, run after run,
    until a broadcast or a cache finds none. What the caller persisted itself is left as it was.
    """
    token = _PERSISTED.set([])
    try:
        yield
    finally:
        kept = _PERSISTED.get() or []
        _PERSISTED.reset(token)
        for df in kept:
            df.unpersist()
        collect_garbage()


def is_connect(session: SparkSession) -> bool:
    """Whether ``session`` is a Spark Connect client's (no JVM, no SparkContext here)."""
    return type(session).__module__.startswith("pyspark.sql.connect")


def collect_garbage() -> None:
    """Let Spark free what a finished run left: its broadcasts and shuffles are cleaned once the
    JVM's collector finds nothing refers to them, which it may not do for half an hour (Spark's
    periodic GC) while the driver's heap fills. Python's references to JVM objects go first.

    Over Spark Connect the driver is the server's: what a session cached is released when the
    client drops its references (``unpersist``, done by :func:`released`), and its collector
    is the server's own to run."""
    import gc

    from pyspark.sql import SparkSession

    gc.collect()
    active = SparkSession.getActiveSession()
    if active is not None and not is_connect(active):
        active.sparkContext._jvm.System.gc()  # type: ignore[union-attr]


def local_driver_memory() -> str:
    """A quarter of this machine's memory, at least 2g and at most 16g: in local mode the driver does
    all the work, and what it keeps spills to disk when its share is full.

    Not more: the JVM grows its heap towards the most it may have whatever a run needs. On this
    project's 2-core, 23.5 GiB machine, 10^7 requests were decided in 380 s and a peak of 12.1 GiB
    with half the machine's (11g), and in 302 s and 6.9 GiB with 6g (benchmarks/README.md).
    """
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return DEFAULT_DRIVER_MEMORY
    return f"{max(2048, min(16384, total // 4 // 2**20))}m"


DEFAULT_PARTITIONS = 4

# Runtime SQL settings the engine's plans rely on for speed (never for correctness).
SETTINGS = {
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.requireAllClusterKeysForCoPartition": "false",
    "spark.sql.unionOutputPartitioning": "true",
    # a JSON object naming a key twice means its last value, as Python's json reads it
    "spark.sql.mapKeyDedupPolicy": "LAST_WIN",
}


def connect_session(remote: str, partitions: int | None = None, app_name: str = "privilog") -> SparkSession:
    """A Spark Connect session with the server at ``remote`` (``sc://HOST:PORT``), the engine's settings sent.

    Only runtime settings cross: the driver's memory, the master, the UI and the catalog are the
    server's, set where it was started.
    """
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.remote(remote).appName(app_name)
    for key, value in {"spark.sql.shuffle.partitions": str(partitions or DEFAULT_PARTITIONS), **SETTINGS}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def make_session(
    master: str | None = None,
    driver_memory: str | None = None,
    partitions: int | None = None,
    app_name: str = "privilog",
    catalog: dict[str, str] | None = None,
) -> SparkSession:
    """The active session, or a new one: ``master`` (default ``local[*]``), UI and progress bar off;
    ``catalog``: static settings of the session's catalog (a warehouse and metastore, see
    privilog.pipeline.catalog), applied only to a session made here."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        if partitions is not None:
            active.conf.set("spark.sql.shuffle.partitions", str(partitions))
        for key, value in SETTINGS.items():
            active.conf.set(key, value)
        return active
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName(app_name)
    # Under spark-submit the JVM is already up with its --master (PySpark's gateway is in the environment).
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    if master is not None or not (submitted or "SPARK_MASTER" in os.environ):
        builder = builder.master(master or DEFAULT_MASTER)
    settings = {
        "spark.driver.memory": driver_memory or local_driver_memory(),
        "spark.sql.shuffle.partitions": str(partitions or DEFAULT_PARTITIONS),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.maxResultSize": "0",  # broadcasts of large relations are collected on the driver
        "spark.driver.extraJavaOptions": "-Dlog4j2.level=error",
        # Spark keeps every finished job's, stage's, task's and query's record (with its plan) for its
        # UI, even with the UI off: a fused plan is thousands of nodes and a run hundreds of stages, so
        # a session that outlives its runs (a test suite, a notebook) filled its heap with them.
        "spark.sql.ui.retainedExecutions": "20",
        "spark.ui.retainedJobs": "100",
        "spark.ui.retainedStages": "100",
        "spark.ui.retainedTasks": "10000",
        "spark.ui.retainedDeadExecutors": "10",
        **SETTINGS,
        **(catalog or {}),
    }
    if submitted and driver_memory is None:
        del settings["spark.driver.memory"]  # spark-submit's own --driver-memory holds
    for key, value in settings.items():
        builder = builder.config(key, value)
    if catalog:
        builder = builder.enableHiveSupport()
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def catalog_settings(root: Path) -> dict[str, str]:
    """A session's static settings keeping its catalog in the folder ``root``: the tables under
    ``root/warehouse``, the metastore (embedded Derby) in ``root/metastore_db``, Derby's log there too."""
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(root / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root / 'metastore_db'};create=true",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={root}",
    }


def start(
    master: str | None = None,
    driver_memory: str | None = None,
    partitions: int | None = None,
    remote: str | None = None,
    warehouse: Path | None = None,
    app_name: str = "privilog",
) -> SparkSession:
    """A session for evaluating a whole deployment: over Spark Connect to ``remote``, else
    :func:`make_session`'s (``warehouse``: an absolute folder keeping its catalog, for a session made here).

    Spark's own choice of what to broadcast is off: it judges a cached table by its
    compressed size, and at 10^7 requests broadcast the decisions table it was about to
    write (out of memory). The engine and the pipeline say what to broadcast themselves.
    """
    if remote is not None:
        session = connect_session(remote, partitions, app_name=app_name)
    else:
        catalog = catalog_settings(warehouse) if warehouse is not None else None
        session = make_session(master, driver_memory, partitions, app_name=app_name, catalog=catalog)
    session.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    return session
