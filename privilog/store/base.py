"""The grant store's vocabulary: changes, audit records, tokens, and the Store interface.

A store holds what a deployment's authorization is made of (entities, grants,
memberships of groups and roles, roles, authorization admins) and an
append-only log of every change asked of it, applied or refused. The log is
also how replicas follow each other: a change is applied by replaying the
log's applied entries in order (:mod:`privilog.store.deployment`).

Every change is one transaction that checks, in the store, that its actor is
an authorization admin (itself or through a group or role), so two replicas
(or two processes on one SQLite file) can never both act on a state that one
of them has not seen.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import secrets
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from privilog.dsl.errors import OneLineError
from privilog.engine.ids import EntityId, IdError, parse_principal
from privilog.engine.patterns import parse_pattern
from privilog.engine.world import NotAnAdmin, World, check_action, check_membership

SCHEMA_VERSION = 2

# kind -> the shape of one item; every change is a kind and a list of items
KINDS: dict[str, str] = {
    "grant": "[PRINCIPAL, ACTION, ENTITY]",
    "revoke": "[PRINCIPAL, ACTION, ENTITY]",
    # every grant anyone holds on exactly ENTITY (or a pattern's text), found in the change's own
    # transaction; the log's items are the [PRINCIPAL, ACTION, ENTITY] grants it took away
    "revoke.entity": "ENTITY",
    "member.add": "[PRINCIPAL, GROUP_OR_ROLE]",
    "member.remove": "[PRINCIPAL, GROUP_OR_ROLE]",
    "entity.add": "ENTITY",
    "entity.delete": "ENTITY",
    "admin.add": "PRINCIPAL",
    "admin.remove": "PRINCIPAL",
    "role.create": "ROLE",
    "role.drop": "ROLE",
    "token.create": "[TOKEN_ID, PRINCIPAL]",
    "token.revoke": "TOKEN_ID",
}
# the kinds a replica's engine applies; token changes only touch the store's token table.
# An ``import`` entry (a whole world added at once) makes a replica read the store anew.
ENGINE_KINDS = frozenset(KINDS) - {"token.create", "token.revoke"}
IMPORT = "import"
# entries only the store writes: the policy a server started (or reloaded) with, as [[NAME, VERSION]]
# (its text kept in the store's ``policies`` table); and the whole world at once (``effect``), where a
# store's history starts (written when a store made before revisions is upgraded)
POLICY_USE = "policy.use"
CHECKPOINT = "checkpoint"
MAX_ITEMS = 100_000  # items in one change; a bigger batch is an import


class StoreError(OneLineError):
    """A store that cannot be opened or used as asked, or a change that is malformed."""


def facts_refusal(world: World, name: str | None = None) -> str:
    """Why a world with ``facts:`` is not written into a store: one line naming its relations."""
    relations = ", ".join(sorted(world.facts))
    where = name or world.origin or "the world"
    return (
        f"{where}: a store cannot hold a world's `facts:` yet ({relations}); keep this world in a file "
        "(--world), or remove `facts:` to import the rest"
    )


class StoreUnavailable(StoreError):
    """The store cannot be reached now (its database is down, its file locked or unreadable): try again
    later. The server answers 503 with ``Retry-After``; nothing was changed."""

    retry_after = 1  # seconds a client waits before asking again


class BatchRefused(StoreError):
    """A batch of changes (:meth:`Store.change_many`) refused whole: nothing in it was applied.

    ``index`` is the change at fault (0-based; None when the batch as a whole was refused, as
    for an actor who is not an admin), ``error`` what that change alone would have raised
    (:class:`~engine.world.NotAnAdmin`, :class:`StoreError` or an ``IdError``).
    """

    def __init__(self, index: int | None, error: Exception):
        super().__init__(str(error))
        self.index, self.error = index, error


class StoreFull(StoreError):
    """The store's disk (or database) has no room for the change: nothing was changed. The server
    answers 507 naming the cause."""


@dataclass(frozen=True)
class Change:
    """One entry of the log: who asked what, when, and what it did.

    ``items`` are what the change did (for a grant, the grants that were new);
    ``asked`` what was asked. ``outcome`` is ``applied`` or ``refused: REASON``.
    ``revision``: for an applied change, the token of the revision it produced
    (:mod:`privilog.store.revision`); a reader handed it is answered at least as fresh.
    """

    seq: int
    at: str
    actor: str
    kind: str
    items: tuple[Any, ...]
    asked: tuple[Any, ...]
    request_id: str
    outcome: str
    revision: str = field(default="", compare=False)  # not kept in the log: the log's order is the revision

    @property
    def applied(self) -> bool:
        return self.outcome == "applied"

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "at": self.at,
            "actor": self.actor,
            "kind": self.kind,
            "items": [list(i) if isinstance(i, tuple) else i for i in self.items],
            "asked": [list(i) if isinstance(i, tuple) else i for i in self.asked],
            "request_id": self.request_id,
            "outcome": self.outcome,
            **({"revision": self.revision} if self.revision else {}),
        }


def now() -> str:
    """The time of a change: ISO 8601 in UTC, to the microsecond (sorts as text)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def check_items(kind: str, items: Iterable[Any], actions: Sequence[str] = ()) -> tuple[Any, ...]:
    """``items`` of a ``kind`` change, each checked as the world file's reader checks it, in canonical form.

    Entities become their canonical text; pairs become tuples. A malformed item
    is a StoreError or IdError naming it, so nothing written can fail to load.
    """
    if kind not in KINDS:
        raise StoreError(f"unknown change `{kind}` (the changes are: {', '.join(KINDS)})")
    out: list[Any] = []
    for item in items:
        out.append(_check_item(kind, item, actions))
        if len(out) > MAX_ITEMS:
            raise StoreError(
                f"a change has at most {MAX_ITEMS} items; import a world for more (`privilog store import`)"
            )
    return tuple(dict.fromkeys(out))


def _check_item(kind: str, item: Any, actions: Sequence[str]) -> Any:
    shape = KINDS[kind]
    if shape.startswith("["):
        width = shape.count(",") + 1
        if not isinstance(item, list | tuple) or len(item) != width or not all(isinstance(x, str) for x in item):
            raise StoreError(f"an item of `{kind}` is {shape}, not {item!r}")
        if kind in ("grant", "revoke"):
            return (parse_principal(item[0]), check_action(item[1], actions), str(parse_pattern(item[2])))
        if kind == "member.add":
            return check_membership(parse_principal(item[0]), parse_principal(item[1]))
        if kind == "member.remove":  # a membership there goes, whatever it is
            return (parse_principal(item[0]), parse_principal(item[1]))
        return (_token_id(item[0]), parse_principal(item[1]))
    if not isinstance(item, str):
        raise StoreError(f"an item of `{kind}` is {shape}, not {item!r}")
    if kind.startswith("entity."):
        return str(_entity(item))
    if kind == "revoke.entity":  # what a grant names: an entity (the instance too) or a pattern
        return str(parse_pattern(item))
    if kind.startswith("token."):
        return _token_id(item)
    principal = parse_principal(item)
    if kind.startswith("role.") and not principal.startswith("role:"):
        raise StoreError(f"a role is `role:NAME`, not `{principal}`")
    return principal


def _entity(text: str) -> EntityId:
    entity = EntityId.parse(text)
    if entity.type == "instance":
        raise IdError(f"`{text}` is the instance; it is neither created nor deleted")
    return entity


def _token_id(text: str) -> str:
    if not (isinstance(text, str) and 8 <= len(text) <= 32 and text.isalnum() and text.isascii()):
        raise StoreError(f"a token id is 8 to 32 letters and digits, not {text!r}")
    return text


# ---- refusals, as the log keeps them ----------------------------------------------------

REFUSED_KEPT = 20  # the items of a refused change the log keeps (an applied change keeps them all)
ITEM_CHARS = 200  # the characters of a text the log keeps of a malformed change's item
REASON_CHARS = 500  # the characters of a refusal's reason the log keeps


def refusal(asked: Sequence[Any], reason: str, raw: bool = False) -> tuple[tuple[Any, ...], str]:
    """What the log keeps of a refused change: its first :data:`REFUSED_KEPT` items, and the outcome
    ``refused: REASON``; when more were asked, the outcome says how many and gives the first 16 hex
    digits of the SHA-256 of the whole list's JSON text (``json.dumps(items)``), so that a refusal
    costs the log a bounded size however large the change. ``raw``: the items are a malformed
    change's, as given: those kept are cut to size (:func:`as_asked`), the digest is of them all.

    >>> refusal([["user:bob", "READ", "namespace:ns1"]], "user:bob is not an authorization admin")
    ((['user:bob', 'READ', 'namespace:ns1'],), 'refused: user:bob is not an authorization admin')
    >>> kept, outcome = refusal([f"user:u{n}" for n in range(10_000)], "user:bob is not an authorization admin")
    >>> len(kept), outcome  # doctest: +ELLIPSIS
    (20, 'refused: user:bob is not an authorization admin (10000 items asked, the first 20 kept; sha256 ...)')
    """
    reason = " ".join(str(reason).split())
    if len(reason) > REASON_CHARS:
        reason = reason[:REASON_CHARS] + "..."
    kept = tuple(as_asked(asked[:REFUSED_KEPT]) if raw else asked[:REFUSED_KEPT])
    if len(asked) <= REFUSED_KEPT:
        return kept, f"refused: {reason}"
    try:
        whole = json.dumps([list(i) if isinstance(i, tuple) else i for i in asked], default=repr)
    except (ValueError, RecursionError):  # a circular value, from a caller in Python
        whole = repr(asked)
    digest = hashlib.sha256(whole.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    note = f"{len(asked)} items asked, the first {REFUSED_KEPT} kept; sha256 {digest}"
    return kept, f"refused: {reason} ({note})"


def as_asked(items: Iterable[Any]) -> list[Any]:
    """A malformed change's items as the log keeps them: raw values, each of a bounded size.

    A text is cut to :data:`ITEM_CHARS` characters; a list of up to three scalars (the shape of
    an item) stays a list of them, each cut alike; anything else (a mapping, a nested or long
    list, a value JSON cannot write) becomes its JSON text, cut alike.

    >>> as_asked(["user:eve", ["user:eve", 7], {"a": [1]}, "x" * 300][:3])
    ['user:eve', ['user:eve', 7], '{"a": [1]}']
    >>> len(as_asked(["x" * 300])[0])
    203
    """
    return [_bounded(item, nested=True) for item in items]


def _bounded(value: Any, nested: bool = False) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int) and abs(value) < 2**63:
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    if isinstance(value, str):
        return value if len(value) <= ITEM_CHARS else value[:ITEM_CHARS] + "..."
    shaped = isinstance(value, list | tuple) and len(value) <= 3  # the shape of an item: a pair or a triple
    if nested and shaped and not any(isinstance(v, list | tuple | dict) for v in value):
        return [_bounded(v) for v in value]
    try:
        text = json.dumps(value, default=repr)
    except (ValueError, RecursionError):  # a circular value, from a caller in Python
        text = repr(type(value))
    return text if len(text) <= ITEM_CHARS else text[:ITEM_CHARS] + "..."


# ---- tokens ------------------------------------------------------------------------------

TOKEN_PREFIX = "plg"


def new_token() -> tuple[str, str, str]:
    """A new bearer token: (token_id, secret's hash, the token to hand out once).

    The token is ``plg_ID_SECRET``; the store keeps the id and a SHA-256 of the
    secret (256 random bits, so a plain hash is enough: nothing to brute-force).
    """
    token_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    return token_id, hash_secret(secret), f"{TOKEN_PREFIX}_{token_id}_{secret}"


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def split_token(token: str) -> tuple[str, str] | None:
    """(id, secret) of a well-formed token, else None."""
    parts = token.split("_", 2) if isinstance(token, str) and len(token) < 200 else []
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX or not parts[1].isalnum() or not parts[2]:
        return None
    return parts[1], parts[2]


def secret_matches(secret: str, digest: str) -> bool:
    return hmac.compare_digest(hash_secret(secret), digest)


@dataclass(frozen=True)
class Token:
    """A token as the store lists it (never its secret)."""

    token_id: str
    principal: str
    created: str
    revoked: str | None


# ---- history ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PolicyRecord:
    """A policy as the store recorded it: the log entry that did (``seq``), its name, version and
    canonical text (which parses back to the same policy: ``dsl.parse_policy(text, include_prelude=False)``)."""

    seq: int
    name: str
    version: str
    text: str


@dataclass(frozen=True)
class History:
    """The store as it stood at a log entry: its world, the entry (``seq``), the log entry that granted
    each grant held then (``granted``: (principal, action, entity) to its seq), and the policy recorded
    as in force then (None when no server recorded one by then)."""

    world: World
    seq: int
    granted: dict[tuple[str, str, str], int]
    policy: PolicyRecord | None
    at: str = ""  # the time of the entry ``seq`` ("" for 0: the empty store)


# ---- the interface -----------------------------------------------------------------------


class Store(ABC):
    """Entities, grants, memberships, roles, admins, tokens and the audit log, durably.

    Every method is one transaction. :meth:`change` returns only after the change
    is durable; a refused change is logged (``outcome`` ``refused: ...``) and then
    raised as :class:`~engine.world.NotAnAdmin` or :class:`StoreError`.
    """

    url: str

    @abstractmethod
    def snapshot(self) -> tuple[World, int]:
        """The whole store as a World, and the sequence number of the last change in it."""

    @abstractmethod
    def history(self, seq: int | None = None, granted: bool = True) -> History:
        """The store as it stood once log entry ``seq`` was applied (None: now), read by replaying its log
        from the latest checkpoint at or before it. A StoreError for an entry beyond the log's head, or
        before its history starts (a store upgraded from schema 1 starts at its checkpoint). ``granted``:
        False leaves :attr:`History.granted` empty, for a reader that does not need it."""

    @abstractmethod
    def seq_at(self, time: str) -> int:
        """The last log entry made at or before ``time`` (ISO 8601, UTC, as the log's ``at``); 0 for none."""

    @abstractmethod
    def record_policy(self, name: str, version: str, text: str, actor: str) -> PolicyRecord:
        """Record that ``actor`` (a server starting or reloading, a local operator) serves this policy: a
        ``policy.use`` log entry, unless the last one recorded is of the same version; that entry."""

    @abstractmethod
    def policy_at(self, seq: int | None = None) -> PolicyRecord | None:
        """The policy recorded as in force at log entry ``seq`` (None: now), or None if none was by then."""

    @abstractmethod
    def change(
        self, actor: str, kind: str, items: Iterable[Any], request_id: str = "", *, trusted: bool = False
    ) -> Change:
        """Apply one change as ``actor`` (an authorization admin) and log it; the log entry.

        ``trusted``: a local operator's command (``privilog store``, ``privilog token``),
        whose actor needs no admin grant in the store (how the first admin is made).
        """

    @abstractmethod
    def change_many(
        self,
        actor: str,
        changes: Iterable[tuple[str, Iterable[Any]]],
        request_id: str = "",
        *,
        trusted: bool = False,
        strict: bool = True,
    ) -> list[Change]:
        """Apply several changes (``(kind, items)``, of any kinds) as ``actor`` in ONE transaction, all or
        nothing; their log entries, one each, in order, as :meth:`change` logs one.

        If any change is refused (the actor no admin, an item malformed, the store's own rules; with
        ``strict``, an ``entity.delete`` of an entity the store does not hold), none is applied, every
        change asked is logged as refused (the one at fault with its reason, the others naming it), and
        :class:`BatchRefused` is raised.
        """

    @abstractmethod
    def roles(self) -> list[str]:
        """Every role created (or joined), sorted."""

    @abstractmethod
    def changes_since(self, seq: int, limit: int = 10_000) -> list[Change]:
        """Log entries after ``seq``, oldest first (applied and refused)."""

    @abstractmethod
    def last_seq(self) -> int:
        """The sequence number of the newest log entry (0 for none)."""

    def secret(self, name: str) -> str:
        """A random secret the store keeps under ``name`` (64 hex digits), made on first use: what only
        those who can read the store know (the decision log's HMAC key). A store without one raises."""
        raise StoreError(f"this store ({self.url}) keeps no secrets")

    poll_interval = 0.1  # seconds between looks at the log in wait_for_change, for a store that cannot notify

    def wait_for_change(self, after: int, timeout: float) -> bool:
        """Whether the log has an entry after ``after``, waiting up to ``timeout`` seconds for one.

        This looks at :meth:`last_seq` every ``poll_interval`` seconds, so another process's change
        to a SQLite file reaches a running server within about that; a store that can be told of
        a change (PostgreSQL: LISTEN/NOTIFY) overrides it.
        """
        deadline = time.monotonic() + timeout
        while self.last_seq() <= after:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            time.sleep(min(self.poll_interval, remaining))
        return True

    @abstractmethod
    def audit(
        self, principal: str | None = None, entity: str | None = None, since: str | None = None, limit: int = 1000
    ) -> list[Change]:
        """Log entries, newest last: by or about ``principal``, about ``entity``, at or after ``since``."""

    @abstractmethod
    def import_world(self, world: World, actor: str) -> dict[str, int]:
        """Add everything in ``world`` in one transaction (logged as one entry per kind); counts added."""

    @abstractmethod
    def create_token(self, principal: str, actor: str) -> tuple[str, str]:
        """A new token for ``principal``: (token_id, the token, shown once). Logged."""

    @abstractmethod
    def revoke_token(self, token_id: str, actor: str) -> bool:
        """Revoke a token; whether it was live. Logged."""

    @abstractmethod
    def tokens(self) -> list[Token]:
        """Every token, live and revoked."""

    @abstractmethod
    def token_principal(self, token: str) -> str | None:
        """The principal a live token stands for, or None."""

    @abstractmethod
    def close(self) -> None:
        """Release the connection."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = [
    "CHECKPOINT",
    "ENGINE_KINDS",
    "KINDS",
    "POLICY_USE",
    "SCHEMA_VERSION",
    "BatchRefused",
    "Change",
    "History",
    "NotAnAdmin",
    "PolicyRecord",
    "Store",
    "StoreError",
    "StoreFull",
    "StoreUnavailable",
    "Token",
    "as_asked",
    "check_items",
    "new_token",
    "now",
    "refusal",
    "secret_matches",
    "split_token",
]
