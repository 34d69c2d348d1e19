"""How fresh a read must be, and as of when: the ``consistency`` and ``as_of`` of a request.

Every read (check, batch, why, list; CDAP's enforce and isVisible) may ask for

* ``any`` (the default): the server's engine as it is, which follows the store within its follow
  interval (milliseconds on PostgreSQL, about a tenth of a second on SQLite);
* ``full``: the store's log head is read first, and the answer is decided at it or later;
* ``at_least`` a revision token (one a change or an earlier answer carried): decided at a revision
  that covers it. When the engine already covers it, this costs a comparison under the lock; else
  the engine catches up from the store in a thread, within ``--consistency-timeout`` (past it 503
  with ``Retry-After``). A token beyond the store's log, or made under a policy this server does not
  serve, is a 409; a malformed one a 400.

privilog's JSON endpoints take a body field (``"consistency": "full"`` or ``{"at_least": TOKEN}``);
every endpoint takes the header ``Privilog-Consistency: any | full | at-least TOKEN`` (CDAP's bodies
cannot take a field of ours). Both on one request is a 400.

``as_of`` (check, batch, why, list) answers from the store's history at a moment (a time, a log
entry's number, a revision token) under the policy then in force (:func:`privilog.store.history.as_of`).

The decision itself is always made holding the deployment's lock, at :meth:`Asked.revision_now`, which
checks again that the engine covers what was asked (never a stale answer).

>>> from_header("at-least plr1_NDI6NzowMWE5MGI3YmIwZDY4MGEz").wanted
Revision(seq=42, policy_seq=7, policy_version='01a90b7bb0d680a3')
>>> from_body({"at_least": "nope"})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
privilog.serve.bodies.HttpError: body.consistency.at_least: `nope` is not a revision: ...
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool

from privilog.store.base import StoreError, StoreUnavailable
from privilog.store.deployment import Deployment, Stale
from privilog.store.history import Past, as_of
from privilog.store.revision import Revision, parse_as_of, parse_revision

from .bodies import HttpError, one_line, shown

if TYPE_CHECKING:
    from .service import Call

HEADER = "privilog-consistency"
REVISION_HEADER = "Privilog-Revision"
MODES = ("any", "full", "at_least")
# the body fields every read of privilog's own endpoints takes
READ_FIELDS: dict[str, Any] = {"consistency": (str, dict), "as_of": str}
CONSISTENCY_SCHEMA: dict[str, Any] = {
    "description": "how fresh the answer must be: `any` (default), `full` (the store's log head read first), or "
    "at least a revision token a change or an answer carried (header `Privilog-Consistency` instead: "
    "`any`, `full`, `at-least TOKEN`)",
    "oneOf": [
        {"type": "string", "enum": ["any", "full"]},
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["at_least"],
            "properties": {"at_least": {"type": "string", "example": "plr1_NDI6NzowMWE5MGI3YmIwZDY4MGEz"}},
        },
    ],
}
AS_OF_SCHEMA: dict[str, Any] = {
    "type": "string",
    "description": "answer as the store stood then: a time (ISO 8601, UTC unless given), a log entry's number, "
    "or a revision token; not with `consistency`",
    "example": "2026-10-01T09:30:00Z",
}
READ_PROPERTIES = {"consistency": CONSISTENCY_SCHEMA, "as_of": AS_OF_SCHEMA}


@dataclass(frozen=True)
class Consistency:
    """What a request asked: a mode, and for ``at_least`` the revision."""

    mode: str = "any"
    wanted: Revision | None = None


ANY = Consistency()


def _revision(token: Any, where: str) -> Revision:
    try:
        return parse_revision(token)
    except StoreError as error:
        raise HttpError(f"{where}: {one_line(str(error))}") from None


def from_body(value: Any) -> Consistency:
    """The body's ``consistency``: ``"any"``, ``"full"``, or ``{"at_least": TOKEN}``; else a 400."""
    if value in ("any", "full"):
        return Consistency(value)
    if isinstance(value, dict) and list(value) == ["at_least"]:
        return Consistency("at_least", _revision(value["at_least"], "body.consistency.at_least"))
    raise HttpError(f'body.consistency is "any", "full" or {{"at_least": "<revision token>"}}, not {shown(value)}')


def from_header(value: str) -> Consistency:
    """The header ``Privilog-Consistency``: ``any``, ``full`` or ``at-least TOKEN``; else a 400."""
    words = value.split()
    if len(words) == 1 and words[0].lower() in ("any", "full"):
        return Consistency(words[0].lower())
    if len(words) == 2 and words[0].lower() in ("at-least", "at_least"):
        return Consistency("at_least", _revision(words[1], "the Privilog-Consistency header"))
    raise HttpError(f"the Privilog-Consistency header is `any`, `full` or `at-least TOKEN`, not {shown(value)}")


@dataclass(frozen=True)
class Asked:
    """A read's freshness resolved before deciding: the revision the answer must cover (None: any), or
    the past to answer from (``as_of``)."""

    wanted: Revision | None = None
    past: Past | None = None

    def revision_now(self, deployment: Deployment) -> Revision:
        """The revision the deployment decides at now; call it holding ``deployment.lock``, deciding in the
        same hold. A 503 if it does not cover what was asked (a reload to another policy meanwhile)."""
        revision = deployment.revision
        if self.wanted is not None and not revision.covers(self.wanted):
            raise HttpError(
                f"this server's engine moved off revision {self.wanted.token} while answering (a policy reload); "
                "ask again",
                503,
                {"Retry-After": "1"},
            )
        return revision

    def as_of_json(self) -> dict[str, Any]:
        """What ``as_of`` answered at: the log entry, its time, the policy then in force."""
        assert self.past is not None
        past = self.past
        return {
            "seq": past.seq,
            "at": past.history.at,
            "policy": past.policy.name,
            "version": past.revision.policy_version,
            "recorded": past.recorded,
        }


def requested(call: Call, body: dict[str, Any] | None = None) -> tuple[Consistency, str | None]:
    """The consistency a request asked (body field or header, not both) and its ``as_of`` (not with a
    consistency); a 400 for anything malformed."""
    header = call.request.headers.get(HEADER)
    in_body = body is not None and "consistency" in body
    if header is not None and in_body:
        raise HttpError("consistency is asked twice: give the body's `consistency` or the Privilog-Consistency "
                        "header, not both")
    consistency = from_body(body["consistency"]) if in_body and body is not None else (
        from_header(header) if header is not None else ANY
    )
    moment = body.get("as_of") if body is not None else None
    if moment is not None and (in_body or header is not None):
        raise HttpError("as_of answers about the past; consistency asks how fresh the present is: give one of them")
    return consistency, moment


async def settle(call: Call, body: dict[str, Any] | None = None) -> Asked:
    """Resolve a read's ``consistency`` or ``as_of`` before its decision: for ``at_least`` a revision the
    engine covers already, nothing but a comparison on the event loop; for anything that needs the
    store, a thread, bounded by ``--consistency-timeout`` (``as_of``: by ``--request-timeout``)."""
    consistency, moment = requested(call, body)
    service = call.service
    deployment = service.deployment
    if moment is not None:
        try:
            parse_as_of(moment) if moment.strip().lower() != "now" else None
        except StoreError as error:
            raise HttpError(f"body.as_of: {one_line(str(error))}") from None
        past: Past = await service.work(lambda deadline: _past(deployment, moment))
        return Asked(past=past)
    if consistency.mode == "any":
        return Asked()
    wanted = consistency.wanted
    if wanted is not None:
        with deployment.lock:
            if deployment.revision.covers(wanted):
                return Asked(wanted)
    job = (lambda: deployment.at_least(wanted)) if wanted is not None else deployment.fully
    timeout = service.limits.consistency_timeout
    try:
        reached = await asyncio.wait_for(run_in_threadpool(job), timeout)
    except TimeoutError:
        raise HttpError(
            f"this server did not reach the revision asked within {timeout:g} s (--consistency-timeout); "
            "ask again, or ask another server",
            503,
            {"Retry-After": "1"},
        ) from None
    except Stale as error:
        raise HttpError(one_line(str(error)), 409) from None
    return Asked(wanted if wanted is not None else reached)


def _past(deployment: Deployment, moment: str) -> Past:
    try:
        return as_of(deployment.store, moment, deployment.policy, deployment.backend)
    except StoreUnavailable:
        raise
    except StoreError as error:
        raise HttpError(f"body.as_of: {one_line(str(error))}") from None


__all__ = [
    "ANY",
    "HEADER",
    "READ_FIELDS",
    "READ_PROPERTIES",
    "REVISION_HEADER",
    "Asked",
    "Consistency",
    "from_body",
    "from_header",
    "requested",
    "settle",
]
