"""What every endpoint shares: the deployment, who a token stands for, metrics, the decision log.

Threads. A check takes microseconds: it runs on the event loop's thread,
inline, holding ``deployment.lock`` so that it never sees a change half
replayed. Bigger work (a batch past :data:`INLINE` checks, anything explained,
listings) runs in the thread pool through :meth:`Service.work`: at most
:data:`HEAVY` such requests at once, each taking the lock for a few
milliseconds at a time, within ``--request-timeout``; so the loop, and
``/health`` with it, keeps answering while one runs. Store writes wait for a
disk (fsync, milliseconds): they run in the thread pool, where
``deployment.change`` makes the change durable and replays the log into the
authorizer under the same lock. Token lookups that miss the cache also go to
the pool.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from privilog import dsl
from privilog.dsl.errors import PrivilogError
from privilog.dsl.ir import Policy
from privilog.engine.authorizer import Authorizer
from privilog.engine.authorizer.tabling import Tabled
from privilog.engine.world import NotAnAdmin
from privilog.store.base import Change, StoreFull, StoreUnavailable, split_token
from privilog.store.deployment import Deployment
from privilog.store.revision import Revision, policy_version

from .bodies import HttpError, one_line
from .decisionlog import Decided, DecisionLog, ReasonText, Why
from .limits import Limits
from .metrics import Metrics

log = logging.getLogger("privilog.serve")

TOKEN_CACHE = 10_000  # live tokens remembered at most (only tokens the store knows are remembered)
MAX_AUTHORIZATION = 512  # characters of an Authorization header looked at; a token is about 70
INLINE = 256  # checks (or entities) of one request decided inline on the event loop; more go to a thread
HEAVY = 2  # requests doing bigger work at once, per worker (the others wait their turn)
SLICE = 0.005  # seconds a big request holds the deployment's lock at a time
REMEMBERED = 1 << 16  # decisions (and their reasons) remembered per revision, with a decision log


class Deadline:
    """The time one request may still take (``--request-timeout``); :meth:`check` raises 503 past it."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def check(self) -> None:
        if time.monotonic() > self.end:
            raise HttpError(
                f"the request took longer than {self.seconds:g} s (--request-timeout); split it into smaller ones",
                503,
            )


class RefusalBudget:
    """Refused changes per principal: ``per_minute`` a minute, as a token bucket (a burst of as many).

    A principal past its budget is answered 429 without the store being asked, so a
    token holder cannot fill the audit log's disk with refusals.
    """

    def __init__(self, per_minute: int):
        self.per_minute = per_minute
        self._buckets: dict[str, tuple[float, float]] = {}  # principal -> (tokens, when)

    def _level(self, principal: str, now: float) -> float:
        tokens, when = self._buckets.get(principal, (float(self.per_minute), now))
        return min(float(self.per_minute), tokens + (now - when) * self.per_minute / 60.0)

    def allowed(self, principal: str) -> float:
        """0 if ``principal`` may try a change now, else the seconds until it may."""
        level = self._level(principal, time.monotonic())
        return 0.0 if level >= 1.0 else (1.0 - level) * 60.0 / self.per_minute

    def refused(self, principal: str) -> None:
        now = time.monotonic()
        self._buckets[principal] = (self._level(principal, now) - 1.0, now)
        if len(self._buckets) > TOKEN_CACHE:  # only principals with a live token get here: keep the emptiest
            full = [p for p in self._buckets if self._level(p, now) >= self.per_minute - 1]
            for name in full[: TOKEN_CACHE // 2]:
                del self._buckets[name]


@dataclass(frozen=True)
class Call:
    """One request as a handler sees it: who asks (the token's principal), its id, its body."""

    service: Service
    request: Request
    principal: str
    request_id: str
    body: Any
    params: Mapping[str, str]
    headers: dict[str, str] = field(default_factory=dict)  # joined to the answer's (Privilog-Revision)


Handler = Callable[[Call], Awaitable[Any]]


@dataclass(frozen=True)
class Route:
    """An endpoint: how it is reached, who may call it, what its body is (a JSON schema), its handler.

    ``auth``: ``none`` (anyone), ``token`` (any valid token), ``admin`` (an authorization
    admin's token; changes are instead checked by the store, in their own transaction).
    ``body``: the schema of the JSON body, or None for none. ``revision``: ``read`` for a read that takes the
    ``Privilog-Consistency`` header and answers ``Privilog-Revision``, ``change`` for a change that answers it.
    """

    method: str
    path: str
    name: str
    summary: str
    handler: Handler
    auth: str = "token"
    body: Mapping[str, Any] | None = None
    body_optional: bool = False
    responses: Mapping[int, str] = field(default_factory=dict)
    revision: str = ""  # "read": takes Privilog-Consistency, answers Privilog-Revision; "change": answers it


class Service:
    """The server's state, shared by its endpoints."""

    def __init__(
        self,
        deployment: Deployment,
        policy_source: str | None = None,
        limits: Limits | None = None,
        decision_log: DecisionLog | None = None,
    ):
        self.deployment = deployment
        self.store = deployment.store
        self.policy_source = policy_source  # what a reload reads again: a name in rules/ or a path
        self.limits = limits or Limits()
        self.decision_log = decision_log
        self.metrics = Metrics()
        self.version = policy_version(deployment.policy)
        self.last_reload_error: str | None = None
        self._tokens: dict[str, tuple[str, float]] = {}
        self._reloading: asyncio.Lock | None = None
        self._heavy: asyncio.Semaphore | None = None
        self.past_lock = threading.Lock()  # held while an authorizer of the past (as_of, shared, cached) decides
        self.refusals = RefusalBudget(self.limits.max_refusals_per_minute)
        self._revision_key: tuple[int, int, str] | None = None
        self._revision_token = ""
        self._reason_text: ReasonText | None = None
        self._remembered: dict[tuple[Any, ...] | None, tuple[bool, Why | None]] = {}
        self._remembered_at: tuple[int, int, str] | None = None
        self._remembered_of: Authorizer | None = None
        self._texts_of: Policy | None = None

    # ---- who asks ---------------------------------------------------------------------------

    async def principal(self, header: str | None) -> str:
        """The principal a request's bearer token stands for; 401 for none, a malformed or unknown one.

        Only tokens the store knows are remembered (for ``token_ttl`` seconds), and a header
        longer than any token is refused before anything is looked up. While the store is
        away, a token it knew goes on standing for its principal (checks are answered from
        the engine in memory); one never seen is a 503.
        """
        challenge = {"WWW-Authenticate": 'Bearer realm="privilog"'}
        if not header:
            raise HttpError(
                "no bearer token: send `Authorization: Bearer plg_...` (make one with `privilog token create`)",
                401,
                challenge,
            )
        invalid = {"WWW-Authenticate": 'Bearer realm="privilog", error="invalid_token"'}
        if len(header) > MAX_AUTHORIZATION:
            raise HttpError(
                f"the Authorization header is over {MAX_AUTHORIZATION} characters: not a token", 401, invalid
            )
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise HttpError("the Authorization header is `Bearer TOKEN`", 401, challenge)
        now = time.monotonic()
        cached = self._tokens.get(token)
        if cached is not None and cached[1] > now:
            return cached[0]
        if split_token(token) is None:
            raise HttpError("unknown or revoked token", 401, invalid)
        try:
            found = await run_in_threadpool(self.store.token_principal, token)
        except StoreUnavailable as error:
            if cached is None:
                raise
            log.warning("privilog serve: the store is away (%s); a token seen before stands", one_line(str(error)))
            return cached[0]
        if found is None:
            self._tokens.pop(token, None)
            raise HttpError("unknown or revoked token", 401, invalid)
        if len(self._tokens) >= TOKEN_CACHE and token not in self._tokens:
            self._tokens.clear()
        self._tokens[token] = (found, now + self.limits.token_ttl)
        return found

    def is_admin(self, principal: str) -> bool:
        with self.deployment.lock:
            return self.deployment.authorizer.world.is_admin(principal)

    # ---- changes ------------------------------------------------------------------------------

    async def change(self, call: Call, kind: str, items: list[Any]) -> Change:
        """Make a change as the caller (refused unless an admin: 403, logged by the store); durable when
        this returns, and already in the authorizer. A principal whose changes were refused more than
        ``--max-refusals-per-minute`` times in the last minute is answered 429 and the store is not asked."""
        wait = self.refusals.allowed(call.principal)
        if wait:
            self.metrics.changes[(kind, "throttled")] += 1
            raise HttpError(
                f"{call.principal} has had {self.limits.max_refusals_per_minute} changes refused in a minute "
                f"(--max-refusals-per-minute); try again in {wait:.0f} s",
                429,
                {"Retry-After": str(max(1, round(wait)))},
            )
        try:
            entry: Change = await run_in_threadpool(
                self.deployment.change, call.principal, kind, items, call.request_id
            )
        except Exception as error:
            if not isinstance(error, StoreUnavailable | StoreFull):  # the store's fault, not the caller's
                self.refusals.refused(call.principal)
            outcome = "refused" if isinstance(error, NotAnAdmin) else "invalid"
            self.metrics.changes[(kind, outcome)] += 1
            raise
        self.metrics.changes[(kind, "applied")] += 1
        if entry.revision:
            call.headers["Privilog-Revision"] = entry.revision
        return entry

    # ---- bigger work ----------------------------------------------------------------------------

    async def work(self, job: Callable[[Deadline], Any]) -> Any:
        """Run ``job`` (a request's bigger work) in the thread pool, at most :data:`HEAVY` at once, within
        ``--request-timeout`` (its wait for a turn included); ``job`` takes the deployment's lock in
        slices (:meth:`slices`) and calls ``deadline.check()`` between them."""
        if self._heavy is None:
            self._heavy = asyncio.Semaphore(HEAVY)
        deadline = Deadline(self.limits.request_timeout)
        try:
            await asyncio.wait_for(self._heavy.acquire(), self.limits.request_timeout)
        except TimeoutError:
            deadline.check()
            raise
        try:
            return await run_in_threadpool(job, deadline)
        finally:
            self._heavy.release()

    def in_slices(
        self, items: Iterable[Any], decide: Callable[[Authorizer, Any], Any], deadline: Deadline
    ) -> list[Any]:
        """``decide(authorizer, item)`` for each item, in order, holding the deployment's lock for about
        :data:`SLICE` seconds at a time (:meth:`in_slices_at`)."""
        return self.in_slices_at(items, decide, deadline, None)[0]

    def in_slices_at(
        self,
        items: Iterable[Any],
        decide: Callable[[Authorizer, Any], Any],
        deadline: Deadline,
        covering: Callable[[Deployment], Revision] | None,
    ) -> tuple[list[Any], Revision]:
        """``decide(authorizer, item)`` for each item, in order, holding the deployment's lock for about
        :data:`SLICE` seconds at a time: between slices the event loop's checks and the store's replay
        take their turn, and the deadline is looked at. Each answer is of the state at its slice, which
        holds every change acknowledged before the request began. The revision is the first slice's
        (``covering(deployment)``, which may refuse it, when given): later slices are at it or newer."""
        out: list[Any] = []
        pending = iter(items)
        lock = self.deployment.lock
        first: Revision | None = None
        while True:
            deadline.check()
            with lock:
                if first is None:
                    first = covering(self.deployment) if covering is not None else self.deployment.revision
                authorizer = self.deployment.authorizer
                end = time.perf_counter() + SLICE
                for item in pending:
                    out.append(decide(authorizer, item))
                    if time.perf_counter() > end:
                        break
                else:
                    return out, first

    # ---- decisions ----------------------------------------------------------------------------

    def decide(
        self, authorizer: Authorizer, p: str, op: str, e: str, args: Mapping[str, object] | None = None
    ) -> tuple[bool, Why | None]:
        """Whether ``p`` may do ``op`` on ``e``, and what the decision log says of it (None without a log):
        the revision decided at and, with reasons on, why (the request's row of the decisions table: one
        evaluation gives the decision and its reason). Call it holding the deployment's lock, with the
        deployment's authorizer, so that the revision and the grants' log entries are those decided at.

        With a log, each answer is remembered for as long as the revision does not change (a request
        asked again at the same revision has the same decision and the same reason), at most
        :data:`REMEMBERED` of them: measured, a row of the decisions table costs a few times a bare
        decision for a principal holding many grants (every grant that meets is looked at, to name one),
        and a log's requests repeat between changes."""
        log = self.decision_log
        if log is None or authorizer is not self.deployment.authorizer:  # (an answer about the past: not logged)
            return authorizer.allows(p, op, e, args), None
        deployment = self.deployment
        revision = (deployment.seq, deployment.policy_seq, deployment.policy_version)
        if revision != self._remembered_at or authorizer is not self._remembered_of:
            self._remembered.clear()
            self._remembered_at, self._remembered_of = revision, authorizer
        key: tuple[Any, ...] | None = (p, op, e, tuple(sorted(args.items())) if args else ())
        try:
            found = self._remembered.get(key)
        except TypeError:  # an argument's value is a list: not remembered
            found, key = None, None
        if found is not None:
            return found
        if log.reasons:
            row = authorizer.tabled(p, op, e, args)
            answer: tuple[bool, Why | None] = (row.allowed, self.why(row))
        else:
            answer = (authorizer.allows(p, op, e, args), self.why())
        if key is not None:
            if len(self._remembered) >= REMEMBERED:
                self._remembered.clear()
            self._remembered[key] = answer
        return answer

    def why(self, row: Tabled | None = None, reason: Any = None) -> Why:
        """The deployment's revision (its token and log entry) and the reason of ``row`` (or ``reason``, a
        value; neither: none), as a decision log's line says them; read under the deployment's lock."""
        deployment = self.deployment
        key = (deployment.seq, deployment.policy_seq, deployment.policy_version)
        if key != self._revision_key:
            self._revision_key, self._revision_token = key, deployment.revision.token
        if row is not None:
            policy = deployment.policy
            texts = self._reason_text
            if texts is None or policy is not self._texts_of:
                texts = self._reason_text = ReasonText(policy)
                self._texts_of = policy
            return self._revision_token, key[0], texts(row, deployment.granted)
        return self._revision_token, key[0], None if reason is None else json.dumps(reason, separators=(",", ":"))

    def log_decisions(self, call: Call, endpoint: str, decisions: list[Decided]) -> None:
        """Write ``decisions`` to the decision log, if one is kept. Answers about the past (``as_of``) are not
        decisions anything enforces: they carry no reason (:meth:`decide`) and are not written."""
        decisions = [d for d in decisions if d[3] is not None]
        if self.decision_log is not None and decisions:
            self.decision_log.record(
                call.request_id, call.principal, endpoint, decisions, (self.deployment.policy.name, self.version)
            )

    # ---- reload -------------------------------------------------------------------------------

    async def reload(self, why: str) -> dict[str, Any]:
        """Read the policy again and serve it; one that does not parse or check leaves the old one serving
        (HttpError 422 with the error's first line)."""
        if self._reloading is None:
            self._reloading = asyncio.Lock()
        async with self._reloading:
            source = self.policy_source or self.deployment.policy.name
            try:
                policy = await run_in_threadpool(dsl.load_policy, source)
                await run_in_threadpool(self.deployment.reload, policy)
                await run_in_threadpool(self.deployment.record_policy, "local:serve")
            except PrivilogError as error:
                self.metrics.reloads["failed"] += 1
                self.last_reload_error = str(error)
                log.error(
                    "privilog serve: reload (%s) of %s failed; the old policy serves: %s",
                    why,
                    source,
                    one_line(str(error)),
                )
                raise HttpError(
                    f"the policy was not reloaded: {one_line(str(error))}",
                    422,
                    detail=str(error),
                    policy=self.deployment.policy.name,
                    version=self.version,
                ) from None
            await run_in_threadpool(self.warm)
            self.version = policy_version(policy)
            self.last_reload_error = None
            self.metrics.reloads["ok"] += 1
            log.warning("privilog serve: reloaded %s (%s): version %s", source, why, self.version)
            return {"policy": policy.name, "version": self.version}

    def warm(self) -> None:
        """Compile every operation's decision plan now rather than in a request's time, then move what
        loading made out of the collector's sight (measured here: a full collection over the loaded engine
        takes a tenth of a second at 100k grants; after this, collections see only what requests make)."""
        with self.deployment.lock:
            self.deployment.authorizer.prepare()
        gc.collect()
        gc.freeze()

    # ---- following the store ----------------------------------------------------------------

    async def follow(self, interval: float) -> None:
        """Replay what others write to the store (the CLI, another worker, a replica), every ``interval``
        seconds: for a deployment that does not follow the store by itself."""
        while True:
            await asyncio.sleep(interval)
            try:
                if await run_in_threadpool(self.store.last_seq) > self.deployment.seq:
                    await run_in_threadpool(self.deployment.catch_up)
            except Exception:  # a store briefly away: the next round tries again
                log.exception("privilog serve: following the store failed")

    async def lag(self) -> int:
        """How many log entries the store has that this deployment has not replayed."""
        return max(0, int(await run_in_threadpool(self.store.last_seq)) - self.deployment.seq)
