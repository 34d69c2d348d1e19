"""Tables in the session's catalog: inputs named ``table:NAME``, a run's outputs as tables, a warehouse.

A data team's inventory, grants and access logs live as tables in a catalog (a Hive
metastore, or a warehouse behind one), and the decisions should land as tables their
dashboards read. So:

* any input may be ``table:NAME`` (``table:logs.access``, ``table:spark_catalog.logs.access``),
  read through the session's catalog with the same columns and checks as a file. A
  reject's ``file`` is then ``table:NAME`` and its ``row_number`` the row's place in the
  table as Spark scans it (partition by partition);
* ``--out-table DB.PREFIX`` writes the run's tables as ``DB.PREFIX_decisions``,
  ``DB.PREFIX_rejects``, ... (Parquet), each row with the run's id (``run_id``), and a table
  with a ``timestamp`` column (the decisions) partitioned by its day (``day``, UTC; null for
  a request without a readable timestamp). ``--table-mode append`` (the default) adds the
  run to what the tables hold, ``replace`` replaces them with it. The run's manifest, the
  same JSON as a run folder's ``run.json``, is written last, as a row of ``DB.PREFIX_runs``:
  a run is whole once its row is there, so a reader takes
  ``WHERE run_id IN (SELECT run_id FROM DB.PREFIX_runs)``;
* a session this process starts keeps its catalog in ``--warehouse DIR``: the tables under
  ``DIR/warehouse`` and the metastore (embedded Derby, one process at a time) in
  ``DIR/metastore_db``. Under ``spark-submit`` or ``--remote``, the catalog is the one that
  Spark was started with.
"""

from __future__ import annotations

import json
import os
import re
from typing import TYPE_CHECKING, Any

from privilog.pipeline.runs import Output, new_manifest, utc_now
from privilog.pipeline.tables import PipelineError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

PREFIX = "table:"  # an input named so is a table of the session's catalog, not a path
# catalog.database.table, or fewer parts: plain identifiers only (backquoted names are not taken)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}(\.[A-Za-z_][A-Za-z0-9_]{0,127}){0,2}")
MODES = ("append", "replace")
RUN_ID = "run_id"
DAY = "day"


def is_table(spec: str | None) -> bool:
    """Whether an input names a catalog table (``table:NAME``) rather than a path."""
    return spec is not None and spec.startswith(PREFIX)


def table_name(name: str, what: str) -> str:
    """``name`` if it is a table name the catalog takes (``db.table``), else one line saying what is."""
    if not _NAME.fullmatch(name):
        raise PipelineError(
            f"{what}: `{name}` is not a table name: give [CATALOG.]DATABASE.TABLE or TABLE, "
            "each part letters, digits and _ (not starting with a digit)"
        )
    return name


def require_catalog(remote: str | None, warehouse: str | None) -> None:
    """Refuse, before Spark starts, catalog tables that a session started here would have nowhere to keep."""
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit's session has its own catalog
    if remote is None and warehouse is None and not submitted:
        raise PipelineError(
            "catalog tables (table:NAME, --out-table) need a catalog: name a folder to keep one in with "
            "--warehouse DIR, or use the catalog of a Spark you connect to (--remote) or submit to (spark-submit)"
        )


def read_input(spark: SparkSession, spec: str, fmt: str | None, table: str) -> DataFrame:
    """An input as read_table reads a file, or, named ``table:NAME``, a table of the session's catalog."""
    from privilog.pipeline.tables import read_table

    return read_catalog_table(spark, spec, table) if is_table(spec) else read_table(spark, spec, fmt, table)


def read_catalog_table(spark: SparkSession, spec: str, table: str) -> DataFrame:
    """The input ``table:NAME`` as read_table reads a file: its columns as strings, and where each row was read."""
    from pyspark.sql import functions as F

    from privilog.pipeline.tables import columns_read

    name = table_name(spec[len(PREFIX) :], f"the {table} table")
    if not spark.catalog.tableExists(name):
        raise PipelineError(
            f"{spec}: no such table in the session's catalog (the {table} table); "
            "its catalog is --warehouse's, or the one Spark was started with"
        )
    df = spark.read.table(name)
    source = (
        F.lit(spec).alias("_file"),
        F.spark_partition_id().cast("long").alias("_block"),
        F.monotonically_increasing_id().alias("_mid"),
    )
    return columns_read(df, spec, table, source)


def write_catalog_tables(spark: SparkSession, tables: dict[str, DataFrame], prefix: str, mode: str) -> None:
    """Write ``tables`` (name -> rows) as ``PREFIX_NAME`` tables, replacing or appending (``privilog generate``)."""
    for name, df in tables.items():
        df.write.mode("overwrite" if mode == "replace" else "append").format("parquet").saveAsTable(f"{prefix}_{name}")


class CatalogRun:
    """One run being written as catalog tables: :class:`privilog.pipeline.runs.Staging`'s part for ``--out-table``.

    Each table is written as it is produced (appended, or replacing the table), its rows
    tagged with the run's id; :meth:`publish` writes the manifest last, as the run's row of
    ``PREFIX_runs``.
    """

    format = "table"

    def __init__(self, spark: SparkSession, prefix: str, command: str, mode: str = "append"):
        if mode not in MODES:
            raise PipelineError(f"unknown --table-mode `{mode}`: modes are {', '.join(MODES)}")
        self.spark = spark
        self.prefix = table_name(prefix, "--out-table")
        self.mode = mode
        self.manifest = {**new_manifest(command), "tables": {"prefix": self.prefix, "mode": mode}}
        self.id: str = self.manifest["id"]
        self.outputs: dict[str, Output] = {}
        database = self.prefix.rpartition(".")[0]
        if database and not spark.catalog.databaseExists(database):
            raise PipelineError(
                f"--out-table {prefix}: the catalog has no database `{database}`; create it "
                f"(CREATE DATABASE {database.rpartition('.')[2]}) or name one that exists"
            )

    @property
    def out(self) -> str:
        return f"{PREFIX}{self.prefix}_*"

    def keep(self) -> str:
        return f"the tables {self.out} (rows with {RUN_ID} {self.id}, a run not in {self.prefix}_runs)"

    def path(self, name: str) -> str:
        """The table ``name`` of the run, as the catalog names it."""
        return f"{self.prefix}_{name}"

    def write(self, name: str, df: DataFrame) -> list[dict[str, str]]:
        """Write the table ``name`` of the run; its columns (name, Spark type) as written."""
        from pyspark.sql import functions as F

        tagged = df.withColumn(RUN_ID, F.lit(self.id))
        writer_of = tagged
        partitioned = "timestamp" in df.columns
        if partitioned:
            day = F.to_date(F.try_to_timestamp(F.col("timestamp")))
            writer_of = tagged.withColumn(DAY, day)
        writer = writer_of.write.mode("overwrite" if self.mode == "replace" else "append").format("parquet")
        if partitioned:
            writer = writer.partitionBy(DAY)
        writer.saveAsTable(self.path(name))
        return [{"name": f.name, "type": f.dataType.simpleString()} for f in writer_of.schema.fields]

    def read_back(self, name: str) -> DataFrame:
        """The rows this run wrote to the table ``name``, without the run's columns."""
        from pyspark.sql import functions as F

        written = self.spark.read.table(self.path(name)).where(F.col(RUN_ID) == self.id).drop(RUN_ID)
        return written.drop(DAY) if DAY in written.columns else written

    def wrote(self, output: Output) -> None:
        self.outputs[output.name] = output

    def publish(self, **fields: Any) -> None:
        """Write the manifest (these fields and the outputs) as the run's row of ``PREFIX_runs``."""
        self.manifest.update(fields)
        self.manifest["outputs"] = {name: o.to_json() for name, o in self.outputs.items()}
        self.manifest["finished"] = utc_now()
        row = [(self.id, self.manifest["command"], self.manifest["started"], self.manifest["finished"],
                json.dumps(self.manifest, ensure_ascii=False))]  # fmt: skip
        schema = f"{RUN_ID} string, command string, started string, finished string, manifest string"
        runs = self.spark.createDataFrame(row, schema)
        runs.write.mode("overwrite" if self.mode == "replace" else "append").format("parquet").saveAsTable(
            self.path("runs")
        )

    def described(self, names: list[str]) -> str:
        """Where the run's tables went, for its last line."""
        verb = "replaced" if self.mode == "replace" else "appended to"
        return f"{verb} {', '.join(self.path(n) for n in names)} and {self.path('runs')} (run {self.id})"

