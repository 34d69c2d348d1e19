"""The pipeline's tables: their columns and formats, reading and writing them, and the Spark session.

Shared by the pipeline's commands and by ``privilog generate``, which writes the
tables these read.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privilog.dsl.errors import PrivilogError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType


TABLES: dict[str, tuple[str, ...]] = {
    "entities": ("entity",),
    "grants": ("principal", "action", "entity"),
    "members": ("principal", "group"),
    "requests": ("principal", "operation", "entity", "args", "timestamp"),
}
FORMATS = ("csv", "json", "parquet")


class PipelineError(PrivilogError):
    """Input tables that cannot be read as the pipeline needs them."""


# ---- progress -------------------------------------------------------------------------


class Progress:
    """Timed progress lines on stderr (Spark's own progress bar is off)."""

    def __init__(self, quiet: bool = False, stream: Any = None):
        self.started = time.monotonic()
        self.last = self.started  # when the last line was printed
        self.quiet = quiet
        self.stream = stream or sys.stderr

    def __call__(self, line: str) -> None:
        self.last = time.monotonic()
        if not self.quiet:
            print(f"[{self.last - self.started:7.1f}s] {line}", file=self.stream, flush=True)


# ---- Spark and tables -----------------------------------------------------------------


def require_spark() -> None:
    """One line naming the extra to install when PySpark is not there (it is not installed with privilog)."""
    from importlib.util import find_spec

    if find_spec("pyspark") is None:
        raise PipelineError(
            "this runs on Spark, and PySpark is not installed: install privilog with its spark extra, "
            "`pip install 'privilog[spark]'` (Spark also needs Java 17)"
        )


def spark_session(
    master: str | None = None,
    driver_memory: str | None = None,
    partitions: int | None = None,
    remote: str | None = None,
    warehouse: str | None = None,
) -> SparkSession:
    """The pipeline's Spark session (engine.spark.session.start): local or ``master``'s, or over
    Spark Connect to ``remote`` (else ``SPARK_REMOTE``); ``warehouse``: a folder keeping the
    catalog's tables and its metastore (privilog.pipeline.catalog), for a session made here.
    The options are checked here, before Spark starts."""
    require_spark()
    from privilog.engine.spark.session import start

    remote = remote or os.environ.get("SPARK_REMOTE") or None
    if remote is not None:
        check_remote(remote, master, driver_memory, warehouse)
        require_connect()
        return start(remote=remote, partitions=partitions, app_name="privilog-pipeline")
    folder = warehouse_folder(warehouse) if warehouse is not None else None
    return start(master, driver_memory, partitions, warehouse=folder, app_name="privilog-pipeline")


def warehouse_folder(folder: str | Path) -> Path:
    """``--warehouse``'s folder, made if it is not there (engine.spark.session.catalog_settings says
    what the session keeps in it)."""
    root = Path(os.path.abspath(folder))
    if root.exists() and not root.is_dir():
        raise PipelineError(f"--warehouse {folder}: not a folder")
    root.mkdir(parents=True, exist_ok=True)
    return root


def spark_options(q: argparse.ArgumentParser) -> None:
    """Where Spark runs: --master, --remote, --driver-memory, --warehouse (pipeline commands and generate)."""
    q.add_argument("--master", help="Spark master URL (default local[*]; spark-submit sets its own)")
    q.add_argument(
        "--remote",
        metavar="sc://HOST:PORT",
        help="run on a Spark Connect server instead of starting Spark here (default: $SPARK_REMOTE)",
    )
    q.add_argument("--driver-memory", help="Spark driver memory (default: a quarter of the machine's, 2g-16g)")
    q.add_argument(
        "--warehouse",
        metavar="DIR",
        help="keep the catalog (tables and metastore) of the Spark started here in DIR, for table:NAME and "
        "--out-table",
    )


def check_remote(remote: str, master: str | None, driver_memory: str | None, warehouse: str | None) -> None:
    """Refuse, in one line, a Spark Connect address that is not one, or options that only a driver
    started here would take; and a server that does not answer (the client would retry for minutes)."""
    import socket
    from urllib.parse import urlparse

    for option, value, why in (
        ("--master", master, "the server runs on its own master"),
        ("--driver-memory", driver_memory, "the driver is the server's, its memory set where it starts"),
        ("--warehouse", warehouse, "the catalog is the server's"),
    ):
        if value is not None:
            raise PipelineError(f"{option} cannot be used with --remote (Spark Connect): {why}")
    where = urlparse(remote)
    try:
        port = where.port or 15002
    except ValueError:
        port = None
    if where.scheme != "sc" or not where.hostname or port is None:
        raise PipelineError(f"--remote {remote}: a Spark Connect address is sc://HOST:PORT (such as sc://127.0.0.1:15002)")
    try:
        socket.create_connection((where.hostname, port), timeout=CONNECT_TIMEOUT).close()
    except OSError as error:
        raise PipelineError(
            f"--remote {remote}: no Spark Connect server answers at {where.hostname}:{port} "
            f"({error.strerror or error}); start one (start-connect-server.sh) or check the address"
        ) from None


CONNECT_TIMEOUT = 10.0  # seconds to wait for the Spark Connect server's port to answer


def require_connect() -> None:
    """One line naming what to install when Spark Connect's client libraries are not there."""
    try:
        import grpc  # noqa: F401
        import pandas  # noqa: F401
        from google.rpc import status_pb2  # noqa: F401
    except ImportError as error:
        raise PipelineError(
            f"--remote needs Spark Connect's client libraries ({error.name} is missing): "
            "install privilog with its spark extra, `pip install 'privilog[spark]'`"
        ) from None


def infer_format(path: Path) -> str:
    """A table's format from its name: ``.csv``, ``.json``/``.jsonl``, else Parquet."""
    name = path.name.lower()
    if name.endswith(".csv"):
        return "csv"
    if name.endswith((".json", ".jsonl", ".ndjson")):
        return "json"
    if path.is_dir():
        files = [p.name.lower() for p in path.iterdir() if not p.name.startswith((".", "_"))]
        for fmt, suffixes in (("csv", (".csv",)), ("json", (".json", ".jsonl"))):
            if files and all(f.endswith(suffixes) for f in files):
                return fmt
    return "parquet"


def read_table(spark: SparkSession, path: Path | str, fmt: str | None, table: str) -> DataFrame:
    """A table's columns as strings; ``args`` and ``timestamp`` of requests may be absent.

    ``path`` is a file or folder, or a URI every executor reaches (``hdfs://``, ``s3a://``, ...);
    privilog.pipeline.catalog.read_input reads ``table:NAME`` too.
    """
    from pyspark.sql import functions as F

    local = not is_uri(str(path))
    if local and not Path(path).exists():
        raise PipelineError(f"{path}: no such file or folder (the {table} table)")
    fmt = fmt or infer_format(Path(path) if local else Path(str(path).rstrip("/")))
    if fmt == "csv":
        df = spark.read.option("header", True).option("escape", '"').option("mode", "PERMISSIVE").csv(str(path))
    elif fmt == "json":
        # columns inferred (as strings), so that a missing one is reported rather than read as nulls
        df = spark.read.option("primitivesAsString", True).option("mode", "PERMISSIVE").json(str(path))
    elif fmt == "parquet":
        df = spark.read.parquet(str(path))
    else:
        raise PipelineError(f"unknown format `{fmt}`: formats are {', '.join(FORMATS)}")
    # Where each row was read, for its reject: the file, the split of it, and an id that grows
    # with the row within the split (see privilog.pipeline.inputs.located).
    source = (
        F.col("_metadata.file_path").alias("_file"),
        F.col("_metadata.file_block_start").alias("_block"),
        F.monotonically_increasing_id().alias("_mid"),
    )
    return columns_read(df, str(path), table, source)


def is_uri(path: str) -> bool:
    """Whether ``path`` names its filesystem (``hdfs://...``, ``s3a://...``, ``file:///...``)."""
    return "://" in path


def columns_read(df: DataFrame, where: str, table: str, source: tuple[Column, ...]) -> DataFrame:
    """The columns of ``table`` from ``df`` as strings (a missing optional one as nulls), and ``source``:
    where each row was read. A missing required column is one line naming what was found."""
    from pyspark.sql import functions as F

    columns = TABLES[table]
    optional = ("args", "timestamp") if table == "requests" else ()
    missing = [c for c in columns if c not in df.columns and c not in optional]
    if missing:
        raise PipelineError(
            f"{where}: the {table} table needs the columns {', '.join(columns)}; "
            f"missing {', '.join(missing)} (found {', '.join(df.columns) or 'none'})"
        )
    present = (F.col(c).cast("string").alias(c) if c in df.columns else None for c in columns)
    return df.select(
        *(c if c is not None else F.lit(None).cast("string").alias(n) for c, n in zip(present, columns, strict=True)),
        *source,
    )


SOURCE = ("_file", "_block", "_mid")  # the columns read_table adds to say where a row was read
REJECT_SCHEMA = "table string, row string, reason string, file string, row_number long"


def write_table(df: DataFrame, path: Path, fmt: str = "parquet") -> list[dict[str, str]]:
    """Write a table in a format (Parquet, CSV with a header, JSON lines); its columns (name, Spark type).

    CSV holds no lists or structs: such a column is written as JSON text, its quotes doubled
    (RFC 4180). JSON lines keep null fields, so that every row names every column.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StructType

    columns = [{"name": f.name, "type": f.dataType.simpleString()} for f in df.schema.fields]
    writer = df.write.mode("overwrite")
    if fmt == "csv":
        nested = (ArrayType, MapType, StructType)
        flat = [F.to_json(f.name).alias(f.name) if isinstance(f.dataType, nested) else F.col(f.name) for f in df.schema]
        df.select(*flat).write.mode("overwrite").option("header", True).option("escape", '"').csv(str(path))
    elif fmt == "json":
        writer.option("ignoreNullFields", False).json(str(path))
    elif fmt == "parquet":
        writer.parquet(str(path))
    else:
        raise PipelineError(f"unknown output format `{fmt}`: formats are {', '.join(FORMATS)}")
    return columns


def read_written(spark: SparkSession, path: Path, fmt: str, schema: StructType | None = None) -> DataFrame:
    """A table as :func:`write_table` wrote it (a CSV's nested columns stay JSON text). JSON lines
    of no rows say no columns: with the written ``schema``, an empty table has its columns."""
    if fmt == "csv":
        return spark.read.option("header", True).option("escape", '"').option("multiLine", True).csv(str(path))
    if fmt == "json":
        found = spark.read.json(str(path))
        if not found.columns and schema is not None:
            return spark.createDataFrame([], schema)
        return found
    return spark.read.parquet(str(path))
