"""A world file's change log and its lock: what lets several processes change one world file,
each change costing what it changes and none lost.

Beside ``world.yaml`` (the world as a person writes it) live:

* ``world.yaml.log``: the changes made since the world file was last compacted, one JSON
  line each (kind, actor, items, time and a CRC-32 of the rest), appended and fsynced
  before the change is acknowledged. Every reader of the world replays it on top of the
  file. A last line cut short by a crash (no newline, bad JSON, wrong checksum) was never
  acknowledged: readers ignore it and the next writer cuts it off. A damaged line with
  good lines after it is not a crash's doing, and is an error.
* ``world.yaml.lock``: held (``flock``, exclusive) by a writer for the length of one change
  or one compaction. A writer takes in what others wrote since it last read the file
  before it decides anything, so it never overwrites a change it has not seen.

Compaction writes the world into the file (in place, :mod:`engine.world.yamlsave`; atomically)
and then removes the log. A crash between the two leaves a log whose changes the file
already holds: replaying them again changes nothing, since each change is a set of
facts added or removed, and the last change to touch a fact decides it.

A file is recognized by its :class:`Identity` (device, inode, size, modification time):
a compaction's rename, or an edit by hand, changes it, and then a reader reads it anew.

>>> change = Change("grant", "user:root", (("user:bob", "READ", "dataset:ns1.d"),), "2026-11-25T10:00:00.000+00:00")
>>> line = change.line()
>>> line.decode()[:60]
'{"at":"2026-11-25T10:00:00.000+00:00","by":"user:root","item'
>>> Change.read(line) == change, Change.read(line[:-3] + b"}\\n")
(True, None)
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from privilog.dsl.errors import OneLineError
from privilog.dsl.files import fsync_path, limit

# What a change does: each is a set of facts added to or removed from one part of a world.
KINDS = ("grant", "revoke", "member.add", "member.remove", "admin.add", "admin.remove", "entity.add", "entity.remove")
LOG_BYTES_VAR = "PRIVILOG_WORLD_LOG_BYTES"
LOG_SHARE = 8  # by default the log is compacted once it is an eighth of the world file's size


class LogDamaged(OneLineError):
    """A change log with a damaged line that is not its last: not a crash's doing."""

    located = True


_SECOND: tuple[int, str] = (-1, "")  # Change.now's last second: its number and its text


@dataclass(frozen=True)
class Change:
    """One change as the log keeps it: ``kind`` (one of :data:`KINDS`), made by ``actor``, of
    ``items`` (grants as [principal, action, entity], memberships as [member, group], admins
    and entities as their text), at ``at`` (ISO 8601, UTC)."""

    kind: str
    actor: str
    items: tuple[Any, ...]
    at: str = ""

    @staticmethod
    def now() -> str:
        """This moment as ``datetime.now(UTC).isoformat(timespec="milliseconds")`` writes it; the
        date and time to the second made once a second (measured: a tenth of an in-memory grant)."""
        global _SECOND
        second, milli = divmod(time.time_ns() // 1_000_000, 1000)
        known = _SECOND  # read once: another thread may set it meanwhile
        if known[0] != second:
            known = _SECOND = (second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S"))
        return f"{known[1]}.{milli:03d}+00:00"

    def _body(self) -> str:
        data = {"at": self.at, "by": self.actor, "items": [list(i) if isinstance(i, tuple) else i for i in self.items]}
        data["kind"] = self.kind
        return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    def line(self) -> bytes:
        """The change as one line of the log, its checksum last."""
        body = self._body()
        return f'{body[:-1]},"sum":"{zlib.crc32(body.encode()):08x}"}}\n'.encode()

    @classmethod
    def read(cls, line: bytes) -> Change | None:
        """The change a line of the log holds; None when the line is damaged or cut short."""
        if not line.endswith(b"\n"):
            return None
        try:
            data = json.loads(line)
            written = data.pop("sum")
            change = cls(data["kind"], data["by"], tuple(_items(data["items"])), data["at"])
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
        if change.kind not in KINDS or not isinstance(change.actor, str) or not isinstance(change.at, str):
            return None
        if written != f"{zlib.crc32(change._body().encode()):08x}":
            return None
        return change


def _items(raw: Any) -> Iterator[Any]:
    if not isinstance(raw, list):
        raise TypeError
    for item in raw:
        if isinstance(item, list) and all(isinstance(part, str) for part in item):
            yield tuple(item)
        elif isinstance(item, str):
            yield item
        else:
            raise TypeError


@dataclass(frozen=True)
class Identity:
    """Which version of a file: a rename or a write changes it."""

    device: int
    inode: int
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Logged:
    """What a read of the log found: the whole changes, each with its line number, and the byte
    offset just past the last of them (a line cut short after it is left out)."""

    changes: tuple[tuple[int, Change], ...]
    end: int
    size: int  # the log's size when read: more than ``end`` when its last line was cut short


class WorldFile:
    """A world file, its change log and its lock, by the file's real path (a symbolic link to a
    world and the world itself share them)."""

    def __init__(self, path: Path | str):
        self.path = Path(os.path.realpath(path))
        self.log = self.path.with_name(self.path.name + ".log")
        self.lock = self.path.with_name(self.path.name + ".lock")

    def identity(self) -> Identity | None:
        """The world file's identity now; None when there is none."""
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return None
        return Identity(info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)

    def log_size(self) -> int:
        try:
            return os.stat(self.log).st_size
        except FileNotFoundError:
            return 0

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the world's lock (exclusive; waits for another writer to finish its change)."""
        fd = os.open(self.lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def read(self, offset: int = 0, first_line: int = 1) -> Logged:
        """The whole changes in the log from byte ``offset`` (which starts line ``first_line``).

        A damaged line followed by whole ones is :class:`LogDamaged`; a damaged last line is
        left out (a change whose writer died before acknowledging it).
        """
        try:
            with open(self.log, "rb") as log:
                log.seek(offset)
                data = log.read()
        except FileNotFoundError:
            return Logged((), 0, 0)
        changes: list[tuple[int, Change]] = []
        end, number, damaged = offset, first_line, 0
        for line in data.splitlines(keepends=True):
            change = Change.read(line)
            if change is None:
                damaged = damaged or number
            elif damaged:
                raise LogDamaged(
                    f"{self.log}:{damaged}: a change in the world's log is damaged, and changes follow it; "
                    f"restore the log from a backup, or delete line {damaged} to give up that change"
                )
            else:
                changes.append((number, change))
                end += len(line)
            number += 1
        return Logged(tuple(changes), end, offset + len(data))

    def append(self, changes: list[Change], end: int) -> int:
        """Write ``changes`` at byte ``end`` of the log (cutting off a torn line there), fsynced;
        the new end. The caller holds the lock."""
        created = not self.log.exists()
        fd = os.open(self.log, os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
        try:
            if created:
                _copy_mode(self.path, fd)
            if os.fstat(fd).st_size != end:
                os.ftruncate(fd, end)
            data = b"".join(c.line() for c in changes)
            os.lseek(fd, end, os.SEEK_SET)
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            fsync_path(self.path.parent)
        return end + len(data)

    def remove_log(self) -> None:
        """Remove the log once the world file holds its changes (the caller holds the lock)."""
        try:
            os.unlink(self.log)
        except FileNotFoundError:
            return
        fsync_path(self.path.parent)



def log_bound(world_bytes: int) -> int:
    """The size past which a log is compacted into its world file of ``world_bytes``:
    ``PRIVILOG_WORLD_LOG_BYTES``, or an eighth of the world file (compaction costs the file's
    size, so it is paid once per so many bytes of changes: a change costs what it changes)."""
    return limit(LOG_BYTES_VAR, max(1, world_bytes // LOG_SHARE))


def _copy_mode(world: Path, fd: int) -> None:
    """A new log is as readable as its world (and no more)."""
    try:
        mode = os.stat(world).st_mode & 0o666
    except FileNotFoundError:
        return
    os.fchmod(fd, mode)
