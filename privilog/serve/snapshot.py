"""``privilog serve --snapshot PATH``: the engine's state after a load, kept in a file to start from next time.

A load of a large store spends most of its time deriving (engine/compiled/snapshot.py says what); the
file keeps what was derived, as plain data, so the next start reads it instead and brings it to the
store's head by the engine's own upkeep. The file is::

    privilog-snapshot\\n
    {"format": 1, "privilog": ..., "code": ..., "policy": ..., "seq": ..., "bytes": ...}\\n
    HMAC-SHA256 (hex) of the lines above and the payload, keyed with the store's own secret\\n
    payload: marshal of the captured state (tuples, dicts, strings, integers)

It is used only when all of these hold, else ignored with one line on stderr and the load is the
ordinary one (and a new file is written after it; also after a load from a file more than
:data:`REWRITE_AFTER` log entries behind the store):

* its HMAC checks out with the store's secret (``snapshot``, kept in the store's ``meta`` table like
  the decision log's key: only those who can read the store can make a file it accepts; a file of
  another store, truncated or altered fails here, before anything in it is read as data);
* it was made by this privilog (version and a hash of the engine's code) for this policy (its version)
  from this store's log: its log entry is not past the store's head.

``marshal`` runs no code on reading (unlike ``pickle``), and is only given bytes whose HMAC holds.
"""

from __future__ import annotations

import gc
import hashlib
import hmac
import json
import marshal
import os
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from privilog.engine.compiled.snapshot import FORMAT, Preloaded, SnapshotError, capture, code_version

from .bodies import ServeError

MAGIC = b"privilog-snapshot\n"
# log entries a snapshot read may be behind the store before the load writes a new one: the changes since are
# applied by the engine's upkeep (a grant's tens of microseconds), the write costs seconds (docs/serve.md)
REWRITE_AFTER = 10_000
KEY_NAME = "snapshot"  # the store's secret the file's HMAC is keyed with


def identity(policy_version: str) -> dict[str, Any]:
    """What a snapshot must have been made by and for: the layout, privilog, the engine's code, the policy."""
    try:
        version = metadata.version("privilog")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a checkout without installing
        version = "unknown"
    return {"format": FORMAT, "privilog": version, "code": code_version(), "policy": policy_version}


def _mac(key: bytes, head: bytes, payload: bytes | memoryview) -> str:
    mac = hmac.new(key, MAGIC, hashlib.sha256)
    mac.update(head)
    mac.update(payload)
    return mac.hexdigest()


def _say(line: str) -> None:
    print(f"privilog serve: {line}", file=sys.stderr, flush=True)


def read(path: str, key: bytes, expected: dict[str, Any], head_seq: int) -> tuple[Preloaded, int] | None:
    """The state in the snapshot at ``path`` and its log entry, if it may be used (see the module); else None,
    having said why in one line on stderr."""
    where = Path(path)
    try:
        data = where.read_bytes()
    except FileNotFoundError:
        _say(f"no snapshot at {path} yet: loading from the store, then writing one")
        return None
    except OSError as error:
        _say(f"snapshot {path} ignored: cannot read it ({error.strerror or error}); loading from the store")
        return None
    if not data.startswith(MAGIC) and not MAGIC.startswith(data):
        # not ours, nor a snapshot cut short (a write is renamed into place whole): a file given by mistake,
        # the store's own say, which a snapshot written after this load would replace
        raise ServeError(
            f"--snapshot {path}: the file is not a privilog snapshot; refusing to read it or to write over it "
            "(remove it if it is no longer needed, or give another path)"
        )
    found = _checked(data, key, expected, head_seq)
    if isinstance(found, str):
        _say(f"snapshot {path} ignored: {found}; loading from the store (a new one is written after)")
        return None
    return found


def _checked(data: bytes, key: bytes, expected: dict[str, Any], head_seq: int) -> tuple[Preloaded, int] | str:
    if not data.startswith(MAGIC):
        return "it is not a privilog snapshot"
    end = data.find(b"\n", len(MAGIC))
    mac_end = data.find(b"\n", end + 1) if end >= 0 else -1
    if end < 0 or mac_end < 0:
        return "it is truncated"
    head, mac, payload = data[len(MAGIC) : end + 1], data[end + 1 : mac_end], memoryview(data)[mac_end + 1 :]
    if not hmac.compare_digest(mac, _mac(key, head, payload).encode()):
        return "its HMAC does not match (truncated, altered, or written for another store)"
    try:
        meta = json.loads(head)
        seq = int(meta["seq"])
    except (ValueError, KeyError, TypeError):
        return "its header is not readable"
    for name, value in expected.items():
        if meta.get(name) != value:
            return f"it was made for another {name} ({meta.get(name)!r}, now {value!r})"
    if seq > head_seq:
        return f"it was made at log entry {seq}, past the store's last ({head_seq})"
    enabled = gc.isenabled()
    gc.disable()  # millions of new objects and no cycles: collecting meanwhile is quadratic
    try:
        found = Preloaded(marshal.loads(payload)), seq
    except (ValueError, EOFError, TypeError, SnapshotError) as error:
        return f"its state cannot be read ({error})"
    finally:
        if enabled:
            gc.enable()
    # measured: tens of millions of objects the collector would walk at each full collection of the rest of
    # the load (the store read took twice as long); out of its sight, as the load's own are (LoadedWorld.refresh)
    gc.freeze()
    return found


def write(path: str, key: bytes, expected: dict[str, Any], deployment: Any) -> tuple[int, int]:
    """Write the deployment's state to ``path`` (whole or not at all: a file beside it, then renamed),
    readable by its owner only. Its log entry and the file's bytes."""
    with deployment.lock:
        seq = deployment.seq
        state = capture(deployment.authorizer)
        enabled = gc.isenabled()
        gc.disable()
        try:
            payload = marshal.dumps(state)
        finally:
            if enabled:
                gc.enable()
    head = json.dumps({**expected, "seq": seq, "bytes": len(payload)}, sort_keys=True).encode() + b"\n"
    where = Path(path)
    partial = where.with_name(f".{where.name}.{os.getpid()}.partial")
    try:
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as out:
            out.write(MAGIC + head + _mac(key, head, payload).encode() + b"\n")
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, where)
    finally:
        partial.unlink(missing_ok=True)
    return seq, len(MAGIC) + len(head) + 65 + len(payload)


def save(path: str, key: bytes, expected: dict[str, Any], deployment: Any) -> float | None:
    """:func:`write`, saying what was written (or, on failure, why not: the server runs on without it);
    the seconds it took."""
    started = time.perf_counter()
    try:
        seq, size = write(path, key, expected, deployment)
    except (OSError, ValueError, SnapshotError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        _say(f"snapshot not written to {path}: {reason}")
        return None
    seconds = time.perf_counter() - started
    _say(f"snapshot written to {path} (log entry {seq}, {size / 2**20:.1f} MiB) in {seconds:.2f} s")
    return seconds
