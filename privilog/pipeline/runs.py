"""A pipeline run's folder: written whole beside ``--out``, moved into place at the end, with its manifest.

A run writes every table into a staging folder beside its ``--out`` (``.OUT.ID.staging``,
on the same filesystem) and only when every table is written, and the manifest
``run.json`` after them, moves the folder into place: one atomic exchange of the two
folders where the filesystem has one (Linux's ``renameat2``), else the previous run
renamed aside, the new one renamed in, the previous one deleted. A run killed at any
moment leaves ``OUT`` holding the previous run whole, or the new one whole; never a
mix, never nothing (a run killed between the two renames of the fallback leaves the
previous run aside, and the next run, or :func:`open_run`'s message, puts it back).

One run at a time writes an ``OUT`` (a lock file ``.OUT.lock`` beside it); the next run
removes what a killed one left. A run refuses an ``OUT`` that holds something other
than an earlier run, since it replaces the folder whole.

Every reader of results opens the folder with :func:`open_run`, which refuses a folder
without a manifest. The manifest says what the run read and wrote: its command, the
policy (name and SHA-256 of the file's text), each input (path, format, rows read,
used and rejected), each output table (format, rows, columns), start and end (ISO 8601,
UTC), privilog's and Spark's versions and the run's id.

``PRIVILOG_PIPELINE_HOLD=MOMENT`` makes a run stop at a moment of its writing, say so
on stderr, and wait to be killed (the crash tests use it): ``staging``, ``table:NAME``
(before writing a table), ``manifest``, ``publish`` and ``aside`` (between the renames
of the fallback).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privilog.dsl.files import fsync_path
from privilog.pipeline.tables import FORMATS, PipelineError

MANIFEST = "run.json"
KIND = "privilog pipeline run"
VERSION = 1
HOLD = "PRIVILOG_PIPELINE_HOLD"


def hold(moment: str) -> None:
    """With ``PRIVILOG_PIPELINE_HOLD`` set to ``moment``, say so on stderr and wait to be killed."""
    if os.environ.get(HOLD) == moment:
        print(f"privilog: holding at {moment} ({HOLD})", file=sys.stderr, flush=True)
        while True:
            signal.pause()


def utc_now() -> str:
    """The time now, ISO 8601 in UTC to the second: ``2026-11-25T15:30:57Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def policy_record(name: str, path: Path) -> dict[str, str]:
    """A policy as a manifest names it: as written, its file, and the SHA-256 of the file's text."""
    return {"name": name, "file": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


# ---- the names beside OUT -------------------------------------------------------------


def _beside(out: Path, suffix: str) -> list[Path]:
    """The folders a run of ``out`` keeps beside it with this suffix (``staging``, ``previous``)."""
    return sorted(out.parent.glob(f".{out.name}.*.{suffix}"))


def _is_run(folder: Path) -> bool:
    return (folder / MANIFEST).is_file()


def _exchange(a: Path, b: Path) -> bool:
    """Swap two folders in one step (Linux's renameat2 with RENAME_EXCHANGE); False where there is none."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_cwd, rename_exchange = -100, 2
    if renameat2(at_cwd, os.fsencode(a), at_cwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False  # a filesystem without it (some network and overlay filesystems)
    raise OSError(code, os.strerror(code), str(a))


def publish(staging: Path, out: Path, exchange: bool = True) -> None:
    """Move a written run into place, then delete the run it replaces."""
    parent = out.parent
    if not out.exists():
        os.rename(staging, out)
    elif exchange and _exchange(staging, out):
        fsync_path(parent)
        shutil.rmtree(staging)  # it holds the previous run now
    else:
        aside = parent / f".{out.name}.{staging.name.split('.')[-2]}.previous"
        os.rename(out, aside)
        hold("aside")
        os.rename(staging, out)
        fsync_path(parent)
        shutil.rmtree(aside)
    fsync_path(parent)


def _recover(out: Path) -> None:
    """Put back a previous run that a run killed between its two renames left aside, and remove
    what killed runs left (their staging folders; previous runs already replaced)."""
    previous = [p for p in _beside(out, "previous") if _is_run(p)]
    if not out.exists() and previous:
        os.rename(previous[-1], out)
        fsync_path(out.parent)
    for left in [*_beside(out, "staging"), *_beside(out, "previous")]:
        shutil.rmtree(left, ignore_errors=True)


# ---- writing a run --------------------------------------------------------------------


@dataclass
class Output:
    """A table the run wrote: where, in which format, its columns (name, Spark type) and rows."""

    name: str
    format: str
    columns: list[dict[str, str]]
    rows: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"format": self.format, "rows": self.rows, "columns": self.columns}


def new_manifest(command: str) -> dict[str, Any]:
    """A run's manifest as it starts: a new id (the time, UTC, and 6 random hex digits), its command."""
    return {
        "kind": KIND,
        "version": VERSION,
        "id": f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{secrets.token_hex(3)}",
        "command": command,
        "started": utc_now(),
    }


class Staging:
    """One run being written: the lock on its ``OUT``, its staging folder, and its manifest.

    Used as a context manager: leaving it with an error removes the staging folder (the
    previous run stays as it was) unless :meth:`keep` said to keep it; :meth:`publish`
    writes the manifest and moves the run into place.
    """

    def __init__(self, out: Path, command: str, out_format: str = "parquet", exchange: bool = True):
        if out_format not in FORMATS:
            raise PipelineError(f"unknown output format `{out_format}`: formats are {', '.join(FORMATS)}")
        self.out = Path(os.path.abspath(out))
        self.format = out_format
        self.exchange = exchange  # False: the fallback of two renames, even where the exchange exists
        self.manifest = new_manifest(command)
        self.id: str = self.manifest["id"]
        self.folder = self.out.parent / f".{self.out.name}.{self.id}.staging"
        self.outputs: dict[str, Output] = {}
        self._lock: int | None = None
        self._kept = False

    def __enter__(self) -> Staging:
        if not self.out.parent.is_dir():
            raise PipelineError(f"{self.out.parent}: no such folder (the folder --out is written in)")
        lock = self.out.parent / f".{self.out.name}.lock"
        self._lock = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._release()
            raise PipelineError(
                f"{self.out}: another run is writing it now; wait for it, or choose another --out"
            ) from None
        try:
            _recover(self.out)
            if self.out.exists() and not (self.out.is_dir() and (_is_run(self.out) or not any(self.out.iterdir()))):
                raise PipelineError(
                    f"{self.out} is not an earlier run's folder (it has no {MANIFEST}), and a run replaces its "
                    "--out whole: give a new folder, or an earlier run's"
                )
            self.folder.mkdir()
        except BaseException:
            self._release()
            raise
        hold("staging")
        return self

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        if error is not None and not self._kept:
            shutil.rmtree(self.folder, ignore_errors=True)
        self._release()

    def _release(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def keep(self) -> Path:
        """Keep the staging folder when the run fails (to look at what it wrote); its path."""
        self._kept = True
        return self.folder

    def table(self, name: str) -> Path:
        """Where to write the table ``name`` (in the staging folder), about to be written."""
        hold(f"table:{name}")
        return self.path(name)

    def path(self, name: str) -> Path:
        """Where the table ``name`` is written (in the staging folder)."""
        return self.folder / name

    def wrote(self, output: Output) -> None:
        self.outputs[output.name] = output

    def publish(self, **fields: Any) -> None:
        """Write the manifest (these fields and the outputs), then move the run into place."""
        hold("manifest")
        for path in sorted(self.folder.rglob("*")):
            if path.is_file():
                fsync_path(path)
        self.manifest.update(fields)
        self.manifest["outputs"] = {name: o.to_json() for name, o in self.outputs.items()}
        self.manifest["finished"] = utc_now()
        text = json.dumps(self.manifest, indent=2, ensure_ascii=False) + "\n"
        manifest = self.folder / MANIFEST
        with manifest.open("w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        fsync_path(self.folder)
        hold("publish")
        publish(self.folder, self.out, self.exchange)


def balance(inputs: Mapping[str, Mapping[str, Any]]) -> None:
    """The rows-in check: each input's rows read are its rows used plus its rows rejected.

    ``inputs``: table -> ``rows`` (read), ``used`` and ``rejected``: counts, or counts per
    policy where several policies read the table (impact reads the requests under two).

    >>> balance({"requests": {"rows": 5, "used": 4, "rejected": 1}})
    >>> balance({"requests": {"rows": 5, "used": {"a": 4, "b": 3}, "rejected": {"a": 1, "b": 1}}})
    Traceback (most recent call last):
    ...
    privilog.pipeline.tables.PipelineError: rows lost: requests under b: 5 read, but 3 used + 1 rejected = 4
    """
    for table, counts in inputs.items():
        read, used, rejected = counts["rows"], counts["used"], counts["rejected"]
        pairs = [("", used, rejected)] if isinstance(used, int) else [(k, used[k], rejected[k]) for k in used]
        for policy, kept, refused in pairs:
            if kept + refused != read:
                raise PipelineError(
                    f"rows {'lost' if kept + refused < read else 'gained'}: {table}"
                    f"{f' under {policy}' if policy else ''}: {read:,} read, but {kept:,} used + {refused:,} "
                    f"rejected = {kept + refused:,}"
                )


# ---- reading a run --------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """A finished run's folder and its manifest."""

    folder: Path
    manifest: dict[str, Any]

    @property
    def tables(self) -> dict[str, dict[str, Any]]:
        """The tables it wrote: name -> format, rows, columns."""
        return dict(self.manifest["outputs"])

    def path(self, table: str) -> Path:
        return self.folder / table


def open_run(folder: Path | str) -> Run:
    """A run's folder with its manifest checked; one line saying what is missing otherwise."""
    folder = Path(folder)
    if not folder.exists():
        aside = [p for p in _beside(Path(os.path.abspath(folder)), "previous") if _is_run(p)]
        if aside:
            raise PipelineError(
                f"{folder}: no such folder; a run stopped while moving its results in left the previous run in "
                f"{aside[-1]} (the next run into {folder} puts it back; or rename it to {folder})"
            )
        raise PipelineError(f"{folder}: no such folder (a pipeline run's --out)")
    manifest = folder / MANIFEST
    if not manifest.is_file():
        raise PipelineError(
            f"{folder} has no {MANIFEST}: it is not the folder of a finished pipeline run (decide, visibility and "
            f"impact write {MANIFEST} last, when every table is written)"
        )
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise PipelineError(f"{manifest}: not a pipeline run's manifest ({error})") from None
    if not isinstance(data, dict) or data.get("kind") != KIND or not isinstance(data.get("outputs"), dict):
        raise PipelineError(f"{manifest}: not a pipeline run's manifest (no kind `{KIND}` and outputs)")
    if data.get("version") != VERSION:
        raise PipelineError(
            f"{manifest}: a run's manifest of version {data.get('version')}; this privilog reads version {VERSION}"
        )
    for table in data["outputs"]:
        if not (folder / table).is_dir():
            raise PipelineError(f"{folder}: the run's manifest names the table {table}, which is not there")
    return Run(folder, data)
