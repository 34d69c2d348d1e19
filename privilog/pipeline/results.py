"""A pipeline run's output folder, read without Spark: which tables it holds, and each table (pyarrow).

``read_run`` opens a run through its manifest (``run.json``, :mod:`privilog.pipeline.runs`) and
reads each table as ``pipeline show`` does, in any format the run wrote; ``privilog pipeline
report`` reads through it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from privilog.pipeline import runs
from privilog.pipeline.tables import PipelineError

if TYPE_CHECKING:
    import pyarrow as pa

# What each command writes under --out; a run holds the first table of at least one of them.
WRITTEN = {
    "decide": ("decisions", "rejects"),
    "visibility": ("visibility", "rejects"),
    "impact": ("changes", "by_operation", "rejects"),
    "unused": ("principals", "unused", "sole", "removals", "rejects"),
}
RESULTS = ("decisions", "visibility", "changes", "by_operation", "principals", "unused", "sole", "removals", "rejects")


@dataclass(frozen=True)
class Run:
    """A finished run (its manifest checked) and the tables of :data:`RESULTS` it wrote."""

    run: runs.Run
    tables: tuple[str, ...]

    @property
    def folder(self) -> Path:
        return self.run.folder

    def read(self, table: str, columns: list[str] | None = None) -> pa.Table:
        """One table, or only ``columns`` of it (those it has), in whatever format the run wrote it."""
        from privilog.pipeline.show import read_arrow

        arrow = read_arrow(self.run, table)
        return arrow if columns is None else arrow.select([c for c in columns if c in arrow.column_names])

    def columns(self, table: str) -> list[str]:
        """The columns ``table`` has (from the manifest)."""
        return [c["name"] for c in self.run.tables[table]["columns"]]


def require_pyarrow() -> None:
    """One line naming the extra to install when pyarrow is not there."""
    from privilog.pipeline.show import require_pyarrow as required

    required("pipeline report")


def read_run(folder: Path | str) -> Run:
    """The run written to ``folder`` by ``privilog pipeline decide``, ``visibility``, ``impact`` or ``unused``.

    Opened through its manifest (:func:`privilog.pipeline.runs.open_run`: a folder without
    ``run.json`` is not a finished run); anything else is a one-line :class:`PipelineError`.
    """
    require_pyarrow()
    run = runs.open_run(folder)
    tables = tuple(name for name in RESULTS if name in run.tables)
    if not any(written[0] in tables for written in WRITTEN.values()):
        raise PipelineError(
            f"{run.folder} is not a pipeline run: it holds no decisions, visibility, changes or principals table "
            "(what privilog pipeline decide, visibility, impact and unused write under --out)"
        )
    return Run(run, tables)
