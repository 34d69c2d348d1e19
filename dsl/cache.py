"""The user's cache of checked policies: parsing and checking a policy is most of a command's cold start.

``load_policy`` keeps each policy it checked, pickled, in the user's cache folder
(``$PRIVILOG_CACHE_DIR``, else ``$XDG_CACHE_HOME/privilog``, else ``~/.cache/privilog``), and
reads it back the next time instead of parsing it; the parser keeps the grammar's LALR tables there
too, as Lark saves them (``dsl/parser.py``), for what must still be parsed. ``PRIVILOG_CACHE=off``
turns the cache off.

Safe by construction:

* an entry's name is a hash of everything it is made from: for a policy, the policy's text and path,
  privilog's own dsl code and grammar, and Python's version; each included file is named in the entry
  with the hash of its text, and resolved and compared again before the entry is used, so a changed
  file, a changed include or a changed privilog is a miss, never a stale policy;
* entries are pickles, so only a folder the user owns that no one else may write is used, and only
  files in it the user owns;
* anything that goes wrong (no home, a read-only or full disk, a truncated or foreign entry) is a
  miss, or no cache at all: never an error, never a different answer. Writes are atomic (a temporary
  file renamed into place), so concurrent commands never read half an entry.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from privilog.dsl.ir import Policy

ENTRIES = 64  # entries kept: the oldest go when there are more (each is a policy or two of text)


@dataclass(frozen=True)
class Include:
    """One file a policy included: how it was named and from where, what it resolved to, its text's hash."""

    name: str
    base: str | None
    path: str
    digest: str


@dataclass(frozen=True)
class Entry:
    policy: Policy
    includes: tuple[Include, ...]


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@lru_cache(maxsize=1)
def _code() -> str:
    """A hash of what a checked policy depends on besides its files: the dsl's code and grammar, Python."""
    folder = Path(__file__).parent
    h = hashlib.sha256(f"{sys.version}|{pickle.HIGHEST_PROTOCOL}".encode())
    for path in sorted([*folder.glob("*.py"), *folder.glob("*.lark")]):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


@lru_cache(maxsize=1)
def folder() -> Path | None:
    """The cache folder, made if need be; None when the cache is off or the folder is not safe to read."""
    if os.environ.get("PRIVILOG_CACHE", "").lower() in ("off", "0", "no", "false"):
        return None
    try:
        given = os.environ.get("PRIVILOG_CACHE_DIR")
        if given:
            path = Path(given)
        else:
            base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
            path = Path(base) / "privilog"
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        return path if _ours(path) else None
    except (OSError, RuntimeError, ValueError):  # no home, a read-only disk, a name the system refuses
        return None


def _ours(path: Path) -> bool:
    """Whether ``path`` belongs to this user and no one else may write it (a pickle is code)."""
    status = path.lstat()
    if hasattr(os, "getuid") and status.st_uid != os.getuid():
        return False
    return not status.st_mode & 0o022


def key(*parts: str) -> str:
    """The name of the entry made from ``parts`` (and privilog's code)."""
    return digest("\0".join([_code(), *parts]))


def load(name: str) -> Entry | None:
    """The entry called ``name``, or None (no cache, no entry, or one that cannot be read)."""
    try:
        data = read(f"{name}.policy.pickle")
        entry = None if data is None else pickle.loads(data)
    except Exception:  # a truncated or foreign entry is a miss
        return None
    return entry if isinstance(entry, Entry) and isinstance(entry.policy, Policy) else None


def store(name: str, entry: Entry) -> None:
    """Keep ``entry`` as ``name``; nothing happens when it cannot be written."""
    try:
        data = pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # a policy that does not pickle: no cache, same answer
        return
    write(f"{name}.policy.pickle", data)


def read(file: str) -> bytes | None:
    """The bytes of ``file`` in the cache folder, or None (no cache, no such file, not the user's own)."""
    where = folder()
    if where is None:
        return None
    path = where / file
    try:
        with path.open("rb") as f:
            return f.read() if _ours(path) else None
    except OSError:
        return None


def write(file: str, data: bytes) -> None:
    """Write ``file`` in the cache folder atomically (a temporary file renamed into place); nothing happens
    when it cannot be written. The oldest files of its kind go past ``ENTRIES``."""
    where = folder()
    if where is None:
        return
    import tempfile  # only to write: a cache hit does not import it

    try:
        handle, temporary = tempfile.mkstemp(dir=where, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as f:
                f.write(data)
            os.replace(temporary, where / file)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        _prune(where, "*" + "".join(Path(file).suffixes))
    except Exception:  # a full or read-only disk: no cache, same answer
        return


def _prune(where: Path, pattern: str) -> None:
    entries = sorted(where.glob(pattern), key=lambda p: p.stat().st_mtime)
    for old in entries[:-ENTRIES]:
        old.unlink(missing_ok=True)
