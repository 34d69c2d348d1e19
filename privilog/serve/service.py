"""What every endpoint shares: the deployment, who a token stands for, metrics, the decision log.

Threads. Decisions take microseconds: they run on the event loop's thread,
inline, holding ``deployment.lock`` so that they never see a change half
replayed. Store writes wait for a disk (fsync, milliseconds): they run in the
thread pool, where ``deployment.change`` makes the change durable and replays
the log into the authorizer under the same lock. Token lookups that miss the
cache also go to the pool.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from privilog import dsl
from privilog.dsl.errors import PrivilogError
from privilog.dsl.format import format_policy
from privilog.dsl.ir import Policy
from privilog.engine.world import NotAnAdmin
from privilog.store.base import Change, split_token
from privilog.store.deployment import Deployment

from .bodies import HttpError, one_line
from .decisionlog import DecisionLog
from .metrics import Metrics

log = logging.getLogger("privilog.serve")

TOKEN_CACHE = 10_000  # tokens remembered at most (a flood of made-up tokens cannot grow it)


@dataclass(frozen=True)
class Limits:
    """What one request may ask: body size, checks in a batch, seconds to send the body."""

    max_body: int = 1 << 20
    max_batch: int = 10_000
    body_timeout: float = 10.0
    token_ttl: float = 1.0  # a revoked token stops working within this many seconds


@dataclass(frozen=True)
class Call:
    """One request as a handler sees it: who asks (the token's principal), its id, its body."""

    service: Service
    request: Request
    principal: str
    request_id: str
    body: Any
    params: Mapping[str, str]


Handler = Callable[[Call], Awaitable[Any]]


@dataclass(frozen=True)
class Route:
    """An endpoint: how it is reached, who may call it, what its body is (a JSON schema), its handler.

    ``auth``: ``none`` (anyone), ``token`` (any valid token), ``admin`` (an authorization
    admin's token; changes are instead checked by the store, in their own transaction).
    ``body``: the schema of the JSON body, or None for none.
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


def policy_version(policy: Policy) -> str:
    """A policy's version: the first 16 hex digits of a SHA-256 of its canonical text."""
    return hashlib.sha256(format_policy(policy).encode()).hexdigest()[:16]


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
        self._tokens: dict[str, tuple[str | None, float]] = {}
        self._reloading: asyncio.Lock | None = None

    # ---- who asks ---------------------------------------------------------------------------

    async def principal(self, header: str | None) -> str:
        """The principal a request's bearer token stands for; 401 for none, a malformed or unknown one."""
        challenge = {"WWW-Authenticate": 'Bearer realm="privilog"'}
        if not header:
            raise HttpError(
                "no bearer token: send `Authorization: Bearer plg_...` (make one with `privilog token create`)",
                401,
                challenge,
            )
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise HttpError("the Authorization header is `Bearer TOKEN`", 401, challenge)
        now = time.monotonic()
        cached = self._tokens.get(token)
        if cached is None or cached[1] <= now:
            found = await run_in_threadpool(self.store.token_principal, token) if split_token(token) else None
            if len(self._tokens) >= TOKEN_CACHE:
                self._tokens.clear()
            cached = self._tokens[token] = (found, now + self.limits.token_ttl)
        if cached[0] is None:
            raise HttpError(
                "unknown or revoked token", 401, {"WWW-Authenticate": 'Bearer realm="privilog", error="invalid_token"'}
            )
        return cached[0]

    def is_admin(self, principal: str) -> bool:
        with self.deployment.lock:
            return self.deployment.authorizer.world.is_admin(principal)

    # ---- changes ------------------------------------------------------------------------------

    async def change(self, call: Call, kind: str, items: list[Any]) -> Change:
        """Make a change as the caller (refused unless an admin: 403, logged by the store); durable when
        this returns, and already in the authorizer."""
        try:
            entry: Change = await run_in_threadpool(
                self.deployment.change, call.principal, kind, items, call.request_id
            )
        except Exception as error:
            outcome = "refused" if isinstance(error, NotAnAdmin) else "invalid"
            self.metrics.changes[(kind, outcome)] += 1
            raise
        self.metrics.changes[(kind, "applied")] += 1
        return entry

    # ---- decisions ----------------------------------------------------------------------------

    def log_decisions(self, call: Call, endpoint: str, decisions: list[tuple[dict[str, Any], bool, float]]) -> None:
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
        loading made out of the collector's sight (ENGINES.md: a full collection over the loaded engine
        takes a tenth of a second at 100k grants; after this, collections see only what requests make)."""
        with self.deployment.lock:
            authorizer = self.deployment.authorizer
            compile_plan = getattr(authorizer.backend, "decider", None)
            if compile_plan is not None:
                for op in authorizer.policy.operations:
                    compile_plan(op.qualified)
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
