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
``n`` (1, 2, ... within the stream) and ``mac``, the line's last field: an
HMAC-SHA256 keyed by a secret the store keeps, over the previous line's ``mac``
and this line's text without its ``mac`` field (:func:`mac_of`, :func:`split_mac`):
the bytes written, so neither the server nor ``privilog verify-log`` encodes a
line twice. Lines are appended; one request's lines are written together.

Measured (benchmarks/README.md): encoding a line costs a few microseconds, so a line's text is made
by hand from pieces encoded once (a batch's constant fields, each requirement's text) rather than by
``json.dumps`` of a dict, and the reason's text straight from the engine's row.

>>> import io, json
>>> out = io.StringIO()
>>> log = DecisionLog(out, key=b"k", sample=1.0)
>>> log.record("r1", "user:ops", "check", [({"principal": "user:a"}, True, 3.5, ("plr1_x", 3, None))], ("cdap", "abc"))
>>> text = out.getvalue().strip()
>>> line = json.loads(text)
>>> line["result"], line["policy"], line["policy_version"], line["latency_us"], line["seq"], line["n"]
('allow', 'cdap', 'abc', 3.5, 3, 1)
>>> body, mac = split_mac(text); mac == mac_of(b"k", "", body) == line["mac"]
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
MAC_FIELD = ',"mac":"'

Why = tuple[str, int, "str | None"]  # the revision's token, its log entry, the reason's JSON text (None: off)
Decided = tuple[dict[str, Any], bool, float, "Why | None"]  # request, allowed, microseconds, why

_string = json.encoder.encode_basestring  # a str as JSON text (C)
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def mac_of(key: bytes, previous: str, body: str) -> str:
    """The HMAC-SHA256 (hex) of a line's text without its ``mac`` field, chained to the previous line's
    ``mac`` (``""`` for a stream's first line)."""
    return hmac.new(key, (previous + "\n" + body).encode(), hashlib.sha256).hexdigest()


def split_mac(text: str) -> tuple[str, str | None]:
    """A line's text without its ``mac`` field (its last), and the mac; (text, None) for a line without."""
    at = text.rfind(MAC_FIELD)
    if at < 0 or not text.endswith('"}'):
        return text, None
    return text[:at] + "}", text[at + len(MAC_FIELD) : -2]


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


class ReasonText:
    """:func:`reason_of`'s JSON text, made straight from the row (what the server writes: the same value,
    without a dict made and encoded per decision); each requirement's id and text encoded once."""

    def __init__(self, policy: Policy):
        self._texts = requirement_texts(policy)
        self._head: dict[str, str] = {}

    def _requirement(self, rid: str) -> str:
        head = self._head.get(rid)
        if head is None:
            head = self._head[rid] = f'{{"requirement":{_string(rid)},"text":{_string(self._texts.get(rid, ""))}'
        return head

    def __call__(self, row: Tabled, granted: Mapping[tuple[str, str, str], int]) -> str:
        if row.allowed:
            met = []
            for rid, holder, action, entity in row.allowed_by:
                entry = granted.get((holder, action, entity))
                met.append(
                    f'{self._requirement(rid)},"grant":[{_string(holder)},{_string(action)},{_string(entity)}],'
                    f'"entry":{"null" if entry is None else entry}}}'
                )
            return f'{{"allowed_by":[{",".join(met)}],"bypass":[{",".join(map(_string, row.bypass))}]}}'
        unmet = [
            f'{{"requirement":{_string(rid)},"text":{_string(text)},"lacking":[{",".join(map(_string, lacking))}]}}'
            for rid, text, lacking in row.unmet
        ]
        return f'{{"unmet":[{",".join(unmet)}],"denied_by":[{",".join(map(_string, row.denied_by))}]}}'


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
        self._hmac = hmac.new(key, digestmod=hashlib.sha256)  # copied per line: the key's pads made once
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
        """Log ``decisions``: (request, allowed, latency in microseconds, why: the revision's token, its log
        entry and the reason's JSON text) each, a sample if sampling."""
        kept = [d for d in decisions if self.sample >= 1.0 or self._random.random() < self.sample]
        if not kept:
            return
        at = datetime.now(UTC).isoformat(timespec="microseconds")
        head = f'{{"time":"{at}","stream":"{self.stream}","n":'
        middle = (
            f',"request_id":{_string(request_id)},"caller":{_string(caller)},"endpoint":{_string(endpoint)},'
            f'"policy":{_string(policy[0])},"policy_version":{_string(policy[1])},"request":'
        )
        with self._lock:
            lines = []
            mac, n = self.mac, self.n
            for request, allowed, latency_us, why in kept:
                n += 1
                body = (
                    f'{head}{n}{middle}{_encode(request)},"result":"{"allow" if allowed else "deny"}",'
                    f'"latency_us":{round(latency_us, 2)!r}'
                )
                if why is not None:
                    body += f',"revision":"{why[0]}","seq":{why[1]}'
                    if why[2] is not None:
                        body += f',"reason":{why[2]}'
                hashed = self._hmac.copy()
                hashed.update(f"{mac}\n{body}}}".encode())
                mac = hashed.hexdigest()
                lines.append(f'{body}{MAC_FIELD}{mac}"}}')
            self.mac, self.n = mac, n
            self.out.write("\n".join(lines) + "\n")
            self.out.flush()

    def close(self) -> None:
        self.out.close()
