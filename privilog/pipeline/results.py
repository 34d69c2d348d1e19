"""A pipeline run's output folder, read without Spark: which tables it holds, and each table (pyarrow).

``read_run`` is the one place that decides whether a folder is a run and where its
tables are; ``privilog pipeline report`` reads through it (and ``pipeline show`` can).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from privilog.pipeline.tables import PipelineError

if TYPE_CHECKING:
    import pyarrow as pa

# What each command writes under --out; a run holds the first table of at least one of them.
WRITTEN = {
    "decide": ("decisions", "rejects"),
    "visibility": ("visibility", "rejects"),
    "impact": ("changes", "by_operation", "rejects"),
}
RESULTS = ("decisions", "visibility", "changes", "by_operation", "rejects")


@dataclass(frozen=True)
class Run:
    """A run's folder and the tables found in it (names from :data:`RESULTS`)."""

    folder: Path
    tables: tuple[str, ...]

    def read(self, table: str, columns: list[str] | None = None) -> pa.Table:
        """One table, or only ``columns`` of it (those it has)."""
        import pyarrow.parquet as pq

        path = self.folder / table
        try:
            present = set(pq.ParquetDataset(str(path)).schema.names)
            wanted = None if columns is None else [c for c in columns if c in present]
            return pq.read_table(str(path), columns=wanted)
        except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError
            first = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise PipelineError(f"{path}: not a readable Parquet table ({first})") from None

    def columns(self, table: str) -> list[str]:
        """The columns ``table`` has."""
        import pyarrow.parquet as pq

        return list(pq.ParquetDataset(str(self.folder / table)).schema.names)


def require_pyarrow() -> None:
    """One line naming the extra when pyarrow (which reads the tables) is not installed."""
    from importlib.util import find_spec

    if find_spec("pyarrow") is None:
        raise PipelineError(
            "reading a run's tables needs pyarrow, which is not installed: install privilog with its "
            "spark extra, `pip install 'privilog[spark]'` (or `pip install pyarrow`)"
        )


def read_run(folder: Path | str) -> Run:
    """The run written to ``folder`` by ``privilog pipeline decide``, ``visibility`` or ``impact``.

    A table is a folder of Parquet part files (as Spark writes them) named as in
    :data:`RESULTS`. Anything else is a one-line :class:`PipelineError`.
    """
    require_pyarrow()
    folder = Path(folder)
    if not folder.is_dir():
        what = "not a folder" if folder.exists() else "no such folder"
        raise PipelineError(f"{folder}: {what}; give the --out folder of a privilog pipeline run")
    tables = tuple(name for name in RESULTS if _is_table(folder / name))
    if not any(written[0] in tables for written in WRITTEN.values()):
        raise PipelineError(
            f"{folder} is not a pipeline run: it holds no decisions, visibility or changes table "
            "(what privilog pipeline decide, visibility and impact write under --out)"
        )
    return Run(folder, tables)


def _is_table(path: Path) -> bool:
    return path.is_dir() and any(p.suffix == ".parquet" for p in path.iterdir())
