"""Decision logs, as OPA keeps them: each decision (or a sample) as one JSON line, with its proof.

A line holds the time, the request id, the caller (the token's principal), the
request, the result, the policy's name and version (a hash of its canonical
text, so two servers on the same policy agree), the time the engine took, the
revision it was decided at (``revision``, its log entry ``seq``) and, with
reasons on, why (``reason``): for an allow, each requirement met and the grant
that met it, named by the log entry that made it, and the bypasses; for a
deny, the unmet requirements (and what an ``every`` requirement lacks) and the
policy's deny rules that hold (FILE:LINE). ``privilog verify-log`` decides each
line again at its revision and compares.

Each line is also chained: ``stream`` (one per log opened: per server process),
``n`` (1, 2, ... within the stream) and ``mac``, an HMAC-SHA256 keyed by a
secret the store keeps over the previous line's ``mac`` and this line's
canonical JSON without ``mac`` (:func:`mac_of`). Lines are appended; one
request's lines are written together.

>>> import io, json
>>> out = io.StringIO()
>>> log = DecisionLog(out, key=b"k", sample=1.0)
>>> at = {"revision": "plr1_x", "seq": 3}
>>> log.record("r1", "user:ops", "check", [({"principal": "user:a"}, True, 3.5, at)], ("cdap", "abc"))
>>> line = json.loads(out.getvalue())
>>> line["result"], line["policy"], line["policy_version"], line["latency_us"], line["seq"], line["n"]
('allow', 'cdap', 'abc', 3.5, 3, 1)
>>> mac = line.pop("mac"); mac == mac_of(b"k", "", line)
True
"""

from __future__ import annotations

import hashlib
import hmac
import json
import random
import threading
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from privilog.dsl.ir import Policy
from privilog.engine.authorizer.tabling import Tabled, requirement_text

KEY_NAME = "decision_log_key"  # the store's secret (Store.secret) that keys the lines' HMACs

Decided = tuple[dict[str, Any], bool, float, "dict[str, Any] | None"]  # request, allowed, microseconds, why


def canonical(line: Mapping[str, Any]) -> str:
    """A line's canonical JSON: keys sorted, no spaces, UTF-8 as is (what its ``mac`` is over)."""
    return json.dumps(line, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def mac_of(key: bytes, previous: str, line: Mapping[str, Any]) -> str:
    """The HMAC-SHA256 (hex) of a line (without its ``mac``) chained to the previous line's ``mac``
    (``""`` for a stream's first line)."""
    return hmac.new(key, (previous + "\n" + canonical(line)).encode(), hashlib.sha256).hexdigest()


def requirement_texts(policy: Policy) -> dict[str, str]:
    """Each requirement's id (``operation#n``) and its text, as the decisions table words them."""
    return {
        f"{op.qualified}#{n}": requirement_text(r)
        for op in policy.operations
        for n, r in enumerate(op.requirements, start=1)
    }


def reason_of(row: Tabled, granted: Mapping[tuple[str, str, str], int], texts: Mapping[str, str]) -> dict[str, Any]:
    """Why, as a line says it: for an allow, each requirement met, its text, the grant that met it and the
    log entry that made that grant (None when not known: a grant older than the store's history), and the
    bypasses; for a deny, the unmet requirements (and what each lacks) and the deny rules (FILE:LINE)."""
    if row.allowed:
        return {
            "allowed_by": [
                {
                    "requirement": rid,
                    "text": texts.get(rid, ""),
                    "grant": [holder, action, entity],
                    "entry": granted.get((holder, action, entity)),
                }
                for rid, holder, action, entity in row.allowed_by
            ],
            "bypass": list(row.bypass),
        }
    return {
        "unmet": [{"requirement": rid, "text": text, "lacking": list(lacking)} for rid, text, lacking in row.unmet],
        "denied_by": list(row.denied_by),
    }


class DecisionLog:
    """JSON lines of decisions, written to a file (appended) or any text stream, chained by HMAC."""

    def __init__(self, out: IO[str], key: bytes, sample: float = 1.0, reasons: bool = True):
        if not 0.0 < sample <= 1.0:
            from .bodies import ServeError

            raise ServeError(f"--decision-log-sample is a fraction in (0, 1], not {sample}")
        self.out = out
        self.key = key
        self.sample = sample
        self.reasons = reasons
        self.stream = uuid.uuid4().hex[:16]
        self.n = 0
        self.mac = ""
        self._random = random.Random()
        self._lock = threading.Lock()  # the chain: lines of requests decided in threads come one at a time

    @classmethod
    def open(cls, path: str, key: bytes, sample: float = 1.0, reasons: bool = True) -> DecisionLog:
        from .bodies import ServeError

        target = Path(path)
        if target.exists() and not target.is_file():
            raise ServeError(f"--decision-log {path}: not a regular file")
        try:
            out = target.open("a", encoding="utf-8", buffering=1 << 16)
        except OSError as error:
            raise ServeError(f"--decision-log {path}: {error.strerror}") from None
        return cls(out, key, sample, reasons)

    def record(
        self,
        request_id: str,
        caller: str,
        endpoint: str,
        decisions: Iterable[Decided],
        policy: tuple[str, str],
    ) -> None:
        """Log ``decisions``: (request, allowed, latency in microseconds, why: the revision and reason
        fields) each, a sample if sampling."""
        at = datetime.now(UTC).isoformat(timespec="microseconds")
        kept = [d for d in decisions if self.sample >= 1.0 or self._random.random() < self.sample]
        if not kept:
            return
        with self._lock:
            lines = []
            for request, allowed, latency_us, why in kept:
                line: dict[str, Any] = {
                    "time": at,
                    "request_id": request_id,
                    "caller": caller,
                    "endpoint": endpoint,
                    "request": request,
                    "result": "allow" if allowed else "deny",
                    "policy": policy[0],
                    "policy_version": policy[1],
                    "latency_us": round(latency_us, 2),
                }
                if why:
                    line.update(why)
                self.n += 1
                line["stream"], line["n"] = self.stream, self.n
                self.mac = line["mac"] = mac_of(self.key, self.mac, line)
                lines.append(canonical(line))
            self.out.write("\n".join(lines) + "\n")
            self.out.flush()

    def close(self) -> None:
        self.out.close()
