"""Reading a file a user names, with bounds: only a regular file, at most so many bytes, UTF-8.

A crafted path (``/dev/zero``, a FIFO, a folder, a file of many gigabytes)
must not hang or exhaust privilog: it is refused with a one-line error. The
caps are far above any real file and can be changed with environment
variables:

* ``PRIVILOG_MAX_WORLD_BYTES``: a world, a world table or a scenario file (default 1 GiB);
* ``PRIVILOG_MAX_POLICY_BYTES``: a policy file or an included one (default 16 MiB).

A file that is not UTF-8 is reported at the line and column of its first bad byte.

>>> where_in_bytes(b"ab\\ncd\\xff", 5)
(2, 3)
"""

from __future__ import annotations

import os
import stat
import tempfile
from contextlib import suppress
from pathlib import Path

from privilog.dsl.errors import OneLineError, PrivilogError, article

WORLD_BYTES_VAR = "PRIVILOG_MAX_WORLD_BYTES"
POLICY_BYTES_VAR = "PRIVILOG_MAX_POLICY_BYTES"
DEFAULT_WORLD_BYTES = 1 << 30  # 1 GiB
DEFAULT_POLICY_BYTES = 16 << 20  # 16 MiB


class FileRefused(OneLineError):
    """A file privilog will not read: not a regular file, too large, or not UTF-8 text."""

    located = True


def limit(variable: str, default: int) -> int:
    """The byte cap set by ``variable`` (a positive whole number), or ``default``."""
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise PrivilogError(f"{variable} must be a positive number of bytes, not `{raw}`")
    return value


def world_limit() -> int:
    return limit(WORLD_BYTES_VAR, DEFAULT_WORLD_BYTES)


def policy_limit() -> int:
    return limit(POLICY_BYTES_VAR, DEFAULT_POLICY_BYTES)


def check_regular(path: Path, what: str, variable: str, cap: int) -> int:
    """The size of ``path`` if it is a regular file within ``cap``; else :class:`FileRefused`."""
    try:
        info = os.stat(path)
    except (FileNotFoundError, ValueError):  # ValueError: a NUL byte in the name
        raise FileRefused(f"{path}: no such {what} file") from None
    except OSError as error:
        raise FileRefused(f"{path}: cannot read the {what}: {error.strerror or error}") from None
    _refuse_irregular(path, info.st_mode, what)
    _refuse_large(path, info.st_size, what, variable, cap)
    return info.st_size


def _refuse_irregular(path: Path, mode: int, what: str) -> None:
    if stat.S_ISREG(mode):
        return
    kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a device or special file"
    raise FileRefused(f"{path}: not a regular file ({kind}); {article(what)} is read only from a regular file")


def _refuse_large(path: Path, size: int, what: str, variable: str, cap: int) -> None:
    if size > cap:
        raise FileRefused(
            f"{path}: the {what} is larger than privilog reads ({size} bytes, the limit is {cap}; "
            f"set {variable} to raise it)"
        )


def read_bytes(path: Path, what: str, variable: str, cap: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``cap`` of them, else :class:`FileRefused`.

    The file is opened without blocking (a FIFO is refused, not waited on) and
    checked after opening, so a path swapped between a check and the read is caught.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except (FileNotFoundError, ValueError):  # ValueError: a NUL byte in the name
        raise FileRefused(f"{path}: no such {what} file") from None
    except IsADirectoryError:
        refused = f"{path}: not a regular file (a folder); {article(what)} is read only from a regular file"
        raise FileRefused(refused) from None
    except OSError as error:
        raise FileRefused(f"{path}: cannot read the {what}: {error.strerror or error}") from None
    try:
        info = os.fstat(fd)
        _refuse_irregular(path, info.st_mode, what)
        _refuse_large(path, info.st_size, what, variable, cap)
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 24, cap + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > cap:  # grew while being read
                _refuse_large(path, total, what, variable, cap)
    except OSError as error:
        raise FileRefused(f"{path}: cannot read the {what}: {error.strerror or error}") from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def where_in_bytes(data: bytes, offset: int) -> tuple[int, int]:
    """The 1-based line and column (in characters) of byte ``offset`` of ``data``."""
    line = data.count(b"\n", 0, offset) + 1
    start = data.rfind(b"\n", 0, offset) + 1
    column = len(data[start:offset].decode("utf-8", errors="replace")) + 1
    return line, column


def decode(data: bytes, path: Path | str, what: str) -> str:
    """``data`` as UTF-8 text, or :class:`FileRefused` naming the line and column of the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line, column = where_in_bytes(data, error.start)
        byte = data[error.start]
        raise FileRefused(f"{path}:{line}:{column}: the {what} is not UTF-8 text (byte 0x{byte:02x})") from None


def read_text(path: Path | str, what: str, variable: str = WORLD_BYTES_VAR, cap: int | None = None) -> str:
    """The UTF-8 text of a regular file, bounded (see the module's docstring)."""
    path = Path(path)
    if cap is None:
        cap = limit(variable, DEFAULT_POLICY_BYTES if variable == POLICY_BYTES_VAR else DEFAULT_WORLD_BYTES)
    return decode(read_bytes(path, what, variable, cap), path, what)


def read_policy_text(path: Path | str, what: str = "policy") -> str:
    """A policy file's text, within ``PRIVILOG_MAX_POLICY_BYTES``."""
    return read_text(path, what, POLICY_BYTES_VAR, policy_limit())


def read_world_text(path: Path | str, what: str = "world") -> str:
    """A world or scenario file's text, within ``PRIVILOG_MAX_WORLD_BYTES``."""
    return read_text(path, what, WORLD_BYTES_VAR, world_limit())


def write_atomically(path: Path, text: str, what: str, read: str | None = None) -> None:
    """Replace ``path`` with ``text`` atomically: a temporary file beside it, fsync, rename, fsync
    of the folder. A crash leaves the old file or the new one, never half.

    A symbolic link stays a link (its target is replaced); the file keeps its permissions
    and, where the process may set it, its owner; a new file gets what the umask gives.
    ``read``: the text the new one was made from; when the file no longer holds it (someone
    saved it meanwhile), nothing is written and :class:`FileRefused` says so.
    """
    target = Path(os.path.realpath(path))
    directory = target.parent
    try:
        before: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        before = None
    if before is not None and not stat.S_ISREG(before.st_mode):
        raise FileRefused(f"{path}: not a regular file; {article(what)} is written only to one")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            if before is not None:
                os.fchmod(out.fileno(), stat.S_IMODE(before.st_mode))
                if (before.st_uid, before.st_gid) != (os.geteuid(), os.getegid()):
                    with suppress(OSError):  # only where permitted
                        os.fchown(out.fileno(), before.st_uid, before.st_gid)
            else:
                os.fchmod(out.fileno(), 0o666 & ~_umask())
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        if read is not None and _current(target) != read:
            raise FileRefused(
                f"{path}: the {what} was changed by someone else meanwhile; nothing was written, run again"
            )
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_path(directory)


def fsync_path(path: Path | str) -> None:
    """fsync a file or a folder by its path (a folder's, so that a rename or a new entry in it is durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _current(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _umask() -> int:
    """The process's umask (from /proc where it says, without changing it)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
