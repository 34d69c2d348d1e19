"""Decision logs, as OPA keeps them: each decision (or a sample) as one JSON line.

A line holds the time, the request id, the caller (the token's principal), the
request, the result, the policy's name and version (a hash of its canonical
text, so two servers on the same policy agree) and the time the engine took.
Lines are appended; one request's lines are written together.

>>> import io, json
>>> out = io.StringIO()
>>> log = DecisionLog(out, sample=1.0)
>>> log.record("r1", "user:ops", "check", [({"principal": "user:a"}, True, 3.5)], ("cdap", "abc"))
>>> line = json.loads(out.getvalue())
>>> line["result"], line["policy"], line["policy_version"], line["latency_us"]
('allow', 'cdap', 'abc', 3.5)
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from .bodies import ServeError


class DecisionLog:
    """JSON lines of decisions, written to a file (appended) or any text stream."""

    def __init__(self, out: IO[str], sample: float = 1.0):
        if not 0.0 < sample <= 1.0:
            raise ServeError(f"--decision-log-sample is a fraction in (0, 1], not {sample}")
        self.out = out
        self.sample = sample
        self._random = random.Random()

    @classmethod
    def open(cls, path: str, sample: float = 1.0) -> DecisionLog:
        target = Path(path)
        if target.exists() and not target.is_file():
            raise ServeError(f"--decision-log {path}: not a regular file")
        try:
            out = target.open("a", encoding="utf-8", buffering=1 << 16)
        except OSError as error:
            raise ServeError(f"--decision-log {path}: {error.strerror}") from None
        return cls(out, sample)

    def record(
        self,
        request_id: str,
        caller: str,
        endpoint: str,
        decisions: Iterable[tuple[dict[str, Any], bool, float]],
        policy: tuple[str, str],
    ) -> None:
        """Log ``decisions``: (request, allowed, latency in microseconds) each, a sample if sampling."""
        at = datetime.now(UTC).isoformat(timespec="microseconds")
        lines = []
        for request, allowed, latency_us in decisions:
            if self.sample < 1.0 and self._random.random() >= self.sample:
                continue
            lines.append(
                json.dumps(
                    {
                        "time": at,
                        "request_id": request_id,
                        "caller": caller,
                        "endpoint": endpoint,
                        "request": request,
                        "result": "allow" if allowed else "deny",
                        "policy": policy[0],
                        "policy_version": policy[1],
                        "latency_us": round(latency_us, 2),
                    },
                    separators=(",", ":"),
                )
            )
        if lines:
            self.out.write("\n".join(lines) + "\n")
            self.out.flush()

    def close(self) -> None:
        self.out.close()
