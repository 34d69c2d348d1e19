"""Revisions: where in a store's log an answer was decided, as an opaque token a caller can hand back.

A revision names a position of the store's log (the sequence number of its last entry taken in)
and the policy in force there (the log entry that recorded it, and its version: the first 16 hex
digits of a SHA-256 of its canonical text). Every change the store acknowledges answers with the
revision it produced; every answer says the revision it was decided at; a read may ask to be
decided at a revision at least as fresh as one it was given (SpiceDB's ZedTokens, Zanzibar's
zookies: the "new enemy" problem).

The token is opaque to callers (URL-safe base64 of a version and the three fields), so that its
form may change; :func:`parse_revision` refuses anything it did not make with a one-line error.

>>> token = Revision(42, 7, "01a90b7bb0d680a3").token
>>> token
'plr1_NDI6NzowMWE5MGI3YmIwZDY4MGEz'
>>> parse_revision(token)
Revision(seq=42, policy_seq=7, policy_version='01a90b7bb0d680a3')
>>> parse_revision(token).covers(Revision(41, 7, "01a90b7bb0d680a3"))
True
>>> parse_revision("plr1_bm9wZQ")
Traceback (most recent call last):
...
privilog.store.base.StoreError: `plr1_bm9wZQ` is not a revision: hand back a `revision` privilog answered with
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime

from privilog.dsl.format import format_policy
from privilog.dsl.ir import Policy

from .base import StoreError

PREFIX = "plr1_"
MAX_TOKEN = 200  # characters of a revision token looked at; one is about 40
_FIELDS = re.compile(r"^(0|[1-9][0-9]{0,17}):(0|[1-9][0-9]{0,17}):([0-9a-f]{16}|)$")


def policy_version(policy: Policy) -> str:
    """A policy's version: the first 16 hex digits of a SHA-256 of its canonical text (so two servers on
    the same policy agree, whatever its file's comments and layout)."""
    return hashlib.sha256(format_policy(policy).encode()).hexdigest()[:16]


@dataclass(frozen=True, order=True)
class Revision:
    """A position of the store's log: its last entry taken in (``seq``), and the entry recording the
    policy in force there (``policy_seq``, 0 when none was recorded) with its version."""

    seq: int
    policy_seq: int = 0
    policy_version: str = ""

    @property
    def token(self) -> str:
        """The opaque token: ``plr1_`` and URL-safe base64, without padding."""
        text = f"{self.seq}:{self.policy_seq}:{self.policy_version}"
        return PREFIX + base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")

    def covers(self, other: Revision) -> bool:
        """Whether an answer decided here is at least as fresh as ``other`` asks: every change of the log
        up to ``other.seq`` taken in, under the policy recorded at ``other.policy_seq`` or a later one."""
        return self.seq >= other.seq and self.policy_seq >= other.policy_seq

    def to_json(self) -> dict[str, object]:
        return {"token": self.token, "seq": self.seq, "policy_seq": self.policy_seq, "policy": self.policy_version}

    def __str__(self) -> str:
        return self.token


def parse_revision(token: object) -> Revision:
    """The revision a token names; a StoreError for anything privilog did not hand out."""
    if not isinstance(token, str) or len(token) > MAX_TOKEN or not token.startswith(PREFIX):
        raise StoreError(f"{_shown(token)} is not a revision: hand back a `revision` privilog answered with")
    body = token[len(PREFIX) :]
    try:
        text = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode("ascii")
    except (binascii.Error, ValueError):
        text = ""
    match = _FIELDS.match(text)
    if match is None or Revision(int(match[1]), int(match[2]), match[3]).token != token:
        raise StoreError(f"{_shown(token)} is not a revision: hand back a `revision` privilog answered with")
    return Revision(int(match[1]), int(match[2]), match[3])


def _shown(value: object) -> str:
    text = value if isinstance(value, str) else repr(value)
    return f"`{text[:60]}...`" if len(text) > 60 else f"`{text}`"


# ---- as of ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AsOf:
    """A moment of the log asked about: a revision, a log entry's number, or a time (UTC)."""

    revision: Revision | None = None
    seq: int | None = None
    time: str | None = None  # ISO 8601 in UTC, to the microsecond (as the log's ``at``)

    def __str__(self) -> str:
        if self.revision is not None:
            return f"revision {self.revision.token} (log entry {self.revision.seq})"
        if self.seq is not None:
            return f"log entry {self.seq}"
        return f"{self.time}"


def parse_as_of(text: str) -> AsOf:
    """``--as-of``'s value: a revision token, a log entry's number (as ``privilog store audit`` shows
    it), or a time in ISO 8601 (a date alone is that day's start; a time without a zone is UTC).

    >>> parse_as_of("2026-10-01").time, parse_as_of("2026-10-01T09:30+02:00").time
    ('2026-10-01T00:00:00.000000+00:00', '2026-10-01T07:30:00.000000+00:00')
    >>> parse_as_of("17").seq
    17
    >>> parse_as_of("last tuesday")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    privilog.store.base.StoreError: --as-of takes a time (2026-10-01 or 2026-10-01T09:30:00Z), ... not `last tuesday`
    """
    text = text.strip() if isinstance(text, str) else ""
    if text.startswith(PREFIX):
        return AsOf(revision=parse_revision(text))
    if text.isdigit() and len(text) < 18:
        return AsOf(seq=int(text))
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            moment = datetime.combine(date.fromisoformat(text), datetime.min.time(), UTC)
        else:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
        return AsOf(time=moment.astimezone(UTC).isoformat(timespec="microseconds"))
    except (ValueError, OverflowError):  # not a time; or one whose zone takes it past year 1 or 9999
        raise StoreError(
            "--as-of takes a time (2026-10-01 or 2026-10-01T09:30:00Z), a log entry's number or a revision "
            f"token, not {_shown(text)}"
        ) from None


__all__ = ["AsOf", "Revision", "parse_as_of", "parse_revision", "policy_version"]
