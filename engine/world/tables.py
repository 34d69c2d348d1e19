"""A world written as a folder of tables: the tables :func:`engine.world.readers.load_tables` reads.

``entities`` (``entity``), ``grants`` (``principal, action, entity``), ``members``
(``principal, group``) and ``admins`` (``principal``), each a CSV file with a header,
JSON lines, or Parquet (with pyarrow); a world's ``facts:`` as a folder ``facts`` of
``RELATION.csv`` (no header) or ``RELATION.jsonl`` files (CSV or JSON lines only). Read
back, the folder is the same world: a world's instance, settings and owners have no
table, so a world with any of them is refused rather than written without them.

The folder is written whole or not at all: into a temporary folder beside it, each
file fsynced, then renamed into place. The folder must not exist yet (or be empty).
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import tempfile
from pathlib import Path

from privilog.dsl.errors import OneLineError
from privilog.dsl.files import fsync_path
from privilog.engine.ids import DEFAULT_INSTANCE
from privilog.engine.world.formats import FACTS_FOLDER, WORLD_TABLES
from privilog.engine.world.model import World

TABLE_SUFFIX = {"csv": ".csv", "jsonl": ".jsonl", "parquet": ".parquet"}


class TablesRefused(OneLineError):
    """A world that tables cannot hold, or a folder they cannot be written to."""


def table_rows(world: World) -> dict[str, list[tuple[str, ...]]]:
    """The world's rows, table by table, each table sorted (its columns: ``WORLD_TABLES``)."""
    return {
        "entities": [(str(e),) for e in sorted(world.entities)],
        "grants": [(g.principal, g.action, str(g.entity)) for g in sorted(world.grants)],
        "members": sorted(world.members),
        "admins": [(a,) for a in sorted(world.admins)],
    }


def write_tables(world: World, folder: Path, fmt: str = "csv") -> list[Path]:
    """Write ``world`` as a folder of tables in ``fmt`` (csv, jsonl or parquet); the files written."""
    if fmt not in TABLE_SUFFIX:
        raise TablesRefused(f"tables are written as {', '.join(TABLE_SUFFIX)}, not `{fmt}`")
    left_out = [
        what
        for what, there in (
            (f"instance: {world.instance}", world.instance != DEFAULT_INSTANCE),
            ("config:", bool(world.config)),
            ("owners:", bool(world.owners)),
            ("facts: (as Parquet; write them as csv or jsonl)", bool(world.facts) and fmt == "parquet"),
        )
        if there
    ]
    if left_out:
        raise TablesRefused(
            f"{folder}: a folder of tables holds entities, grants, members and admins, not {', '.join(left_out)}; "
            "write this world as YAML or JSON instead"
        )
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise TablesRefused(f"{folder}: already there; name a new folder (its tables are written whole or not at all)")
    parent = folder.parent if str(folder.parent) else Path(".")
    if fmt == "parquet":
        try:
            import pyarrow  # type: ignore[import-not-found, unused-ignore]  # noqa: F401
        except ImportError:
            raise TablesRefused(
                "writing Parquet tables needs pyarrow: pip install 'privilog[parquet]', or write --format csv"
            ) from None
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=parent))
    try:
        written = []
        for table, rows in table_rows(world).items():
            path = staging / f"{table}{TABLE_SUFFIX[fmt]}"
            _write(path, WORLD_TABLES[table], rows, fmt)
            written.append(folder / path.name)
        if world.facts:
            (staging / FACTS_FOLDER).mkdir()
            for relation, facts in sorted(world.facts.items()):
                path = staging / FACTS_FOLDER / f"{relation}{TABLE_SUFFIX[fmt]}"
                _write_facts(path, sorted(facts), fmt)
                written.append(folder / FACTS_FOLDER / path.name)
            fsync_path(staging / FACTS_FOLDER)
        if folder.exists():
            folder.rmdir()  # empty: checked above
        os.rename(staging, folder)
        fsync_path(parent)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return written


def _write_facts(path: Path, rows: list[tuple[str, ...]], fmt: str) -> None:
    """One relation's facts: CSV without a header, or a JSON list a line."""
    out = io.StringIO()
    if fmt == "csv":
        if any(not row for row in rows):
            raise TablesRefused(f"{path}: a fact of no values has no CSV line; write the tables as jsonl")
        csv.writer(out, lineterminator="\n").writerows(rows)
    else:
        out.writelines(json.dumps(list(row)) + "\n" for row in rows)
    with open(path, "w", encoding="utf-8", newline="") as file:
        file.write(out.getvalue())
        file.flush()
        os.fsync(file.fileno())


def _write(path: Path, columns: tuple[str, ...], rows: list[tuple[str, ...]], fmt: str) -> None:
    if fmt == "parquet":
        import pyarrow as pa  # type: ignore[import-not-found, unused-ignore]
        import pyarrow.parquet as pq  # type: ignore[import-not-found, unused-ignore]

        table = pa.table({c: pa.array([r[i] for r in rows], pa.string()) for i, c in enumerate(columns)})
        pq.write_table(table, path)
        fsync_path(path)
        return
    out = io.StringIO()
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)
    else:
        for row in rows:
            out.write(json.dumps(dict(zip(columns, row, strict=True))) + "\n")
    with open(path, "w", encoding="utf-8", newline="") as file:
        file.write(out.getvalue())
        file.flush()
        os.fsync(file.fileno())
