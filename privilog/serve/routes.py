"""privilog's own questions over HTTP (check, a batch of checks, why, list), changes, and operations.

Any valid token may ask about any principal (CDAP's enforcer asks on behalf of
the user it serves); only an authorization admin's token changes anything,
reads the audit log or reloads the policy.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from privilog.dsl.check import ancestor_types
from privilog.engine.authorizer import Authorizer, RequestError
from privilog.engine.ids import parse_principal
from privilog.render.explain import render_decision
from privilog.store.base import ENGINE_KINDS, KINDS, StoreError
from privilog.store.revision import Revision

from .bodies import HttpError, fields, one_line, shown
from .consistency import READ_FIELDS, READ_PROPERTIES, REVISION_HEADER, Asked, settle
from .service import INLINE, Call, Route
from .watch import watch

CHECK_FIELDS = {"principal": str, "operation": str, "entity": str}
CHECK_OPTIONAL = {"args": dict, "explain": bool, **READ_FIELDS}
_ITEM_KEYS = frozenset({"principal", "operation", "entity", "args"})


def _asked(p: str, op: str, e: str, args: dict[str, Any] | None) -> dict[str, Any]:
    return {"principal": p, "operation": op, "entity": e, "args": args or {}}


async def check(call: Call) -> dict[str, Any]:
    body = fields(call.body, "body", CHECK_FIELDS, CHECK_OPTIONAL)
    asked = await settle(call, body)
    if body.get("explain", False) or asked.past is not None:  # a proof, or the past: off the event loop
        explained: dict[str, Any] = await call.service.work(
            lambda deadline: _decide(call, body, asked, explain=body.get("explain", False), endpoint="check")
        )
        return explained
    return _decide(call, body, asked, explain=False, endpoint="check")


async def why(call: Call) -> dict[str, Any]:
    body = fields(call.body, "body", CHECK_FIELDS, {"args": dict, **READ_FIELDS})
    asked = await settle(call, body)
    explained: dict[str, Any] = await call.service.work(
        lambda deadline: _decide(call, body, asked, explain=True, endpoint="why", text=True)
    )
    return explained


@contextmanager
def _deciding(call: Call, asked: Asked) -> Iterator[tuple[Authorizer, Revision]]:
    """The authorizer to decide with and the revision it decides at, held for the decision: the
    deployment's under its lock (covering what was asked), or the past's (``as_of``)."""
    if asked.past is not None:
        with call.service.past_lock:
            yield asked.past.authorizer, asked.past.revision
        return
    deployment = call.service.deployment
    with deployment.lock:
        yield deployment.authorizer, asked.revision_now(deployment)


def _answered(call: Call, asked: Asked, revision: Revision, out: dict[str, Any]) -> dict[str, Any]:
    """An answer with the revision it was decided at (and, as of a moment, which), in its body and header."""
    out["revision"] = revision.token
    if asked.past is not None:
        out["as_of"] = asked.as_of_json()
    call.headers[REVISION_HEADER] = revision.token
    return out


def _decide(
    call: Call, body: dict[str, Any], asked: Asked, explain: bool, endpoint: str, text: bool = False
) -> dict[str, Any]:
    p, op, e, args = body["principal"], body["operation"], body["entity"], body.get("args")
    with _deciding(call, asked) as (authorizer, revision):
        started = time.perf_counter()
        if explain:
            decision = authorizer.check(authorizer.request(p, op, e, args))
            allowed = decision.allowed
            why = call.service.decide(authorizer, p, op, e, args)[1] if call.service.decision_log else None
        else:
            allowed, why = call.service.decide(authorizer, p, op, e, args)
        seconds = time.perf_counter() - started
        policy = authorizer.policy.name
    call.service.metrics.decided(op, allowed, seconds)
    call.service.log_decisions(call, endpoint, [(_asked(p, op, e, args), allowed, seconds * 1e6, why)])
    if not explain:
        out = {"decision": "allow" if allowed else "deny", "request": _asked(p, op, e, args), "policy": policy}
        return _answered(call, asked, revision, out)
    out = decision.to_json()
    if text:
        out["explanation"] = render_decision(decision)
    return _answered(call, asked, revision, out)


async def check_batch(call: Call) -> dict[str, Any]:
    """Many checks in one call: ``decisions`` is allow or deny for each, in order (with ``explain``,
    each decision whole). One malformed check refuses the whole batch, naming it. A batch of more than
    ``INLINE`` checks, or explained, is decided in a thread, in slices (:meth:`Service.in_slices_at`):
    its ``revision`` is the first slice's, which covers what was asked; later slices may be newer."""
    body = fields(call.body, "body", {"checks": list}, {"explain": bool, **READ_FIELDS})
    checks: list[Any] = body["checks"]
    limits = call.service.limits
    if len(checks) > limits.max_batch:
        raise HttpError(f"body.checks has {len(checks)} checks; the limit is {limits.max_batch} (--max-batch)", 413)
    explain = body.get("explain", False)
    if explain and len(checks) > limits.max_explained:
        raise HttpError(
            f"body.checks has {len(checks)} checks to explain; the limit is {limits.max_explained} "
            "(--max-explained): ask for the decisions alone, then explain those you need",
            413,
        )
    asked = [_item(item, index) for index, item in enumerate(checks)]
    freshness = await settle(call, body)

    def decide(authorizer: Authorizer, index_item: tuple[int, tuple[str, str, str, dict[str, Any] | None]]) -> Any:
        index, (p, op, e, args) = index_item
        try:
            if explain:
                decision = authorizer.check(authorizer.request(p, op, e, args))
                logged = call.service.decide(authorizer, p, op, e, args)[1] if call.service.decision_log else None
                return decision, logged
            return call.service.decide(authorizer, p, op, e, args)
        except RequestError as error:
            raise HttpError(f"body.checks[{index}]: {error}") from None

    def at_once(deadline: Any = None) -> tuple[list[Any], Revision]:
        with _deciding(call, freshness) as (authorizer, revision):
            return [decide(authorizer, pair) for pair in enumerate(asked)], revision

    started = time.perf_counter()
    if freshness.past is not None:
        answers, revision = await call.service.work(at_once)
    elif explain or len(asked) > INLINE:
        answers, revision = await call.service.work(
            lambda deadline: call.service.in_slices_at(enumerate(asked), decide, deadline, freshness.revision_now)
        )
    else:
        answers, revision = at_once()
    seconds = time.perf_counter() - started
    counts: Counter[tuple[str, bool]] = Counter()
    out: list[Any] = []
    for (_, op, _, _), (answer, _) in zip(asked, answers, strict=True):
        allowed = answer.allowed if explain else answer
        counts[(op, allowed)] += 1
        out.append(answer.to_json() if explain else ("allow" if allowed else "deny"))
    each = seconds / max(1, len(checks))
    for (op, allowed), n in counts.items():
        call.service.metrics.decided(op, allowed, each, n)
    if call.service.decision_log is not None:
        logged = [
            (_asked(p, op, e, args), answer.allowed if explain else answer, each * 1e6, why)
            for (p, op, e, args), (answer, why) in zip(asked, answers, strict=True)
        ]
        call.service.log_decisions(call, "check/batch", logged)
    policy = freshness.past.policy.name if freshness.past is not None else call.service.deployment.policy.name
    return _answered(call, freshness, revision, {"decisions": out, "policy": policy})


def _item(item: Any, index: int) -> tuple[str, str, str, dict[str, Any] | None]:
    """One check of a batch, its fields checked as :func:`fields` would, faster."""
    if type(item) is not dict or not item.keys() <= _ITEM_KEYS:
        fields(item, f"body.checks[{index}]", CHECK_FIELDS, {"args": dict})  # raises, naming what is wrong
    p, op, e, args = item.get("principal"), item.get("operation"), item.get("entity"), item.get("args")
    if type(p) is not str or type(op) is not str or type(e) is not str or (args is not None and type(args) is not dict):
        fields(item, f"body.checks[{index}]", CHECK_FIELDS, {"args": dict})
    return p, op, e, args


async def visible(call: Call) -> dict[str, Any]:
    """What a principal may see (``privilog list``): of one type or every listable one, inside ``in``;
    in a thread, one type at a time under the lock (the ``revision``: the first type's)."""
    body = fields(call.body, "body", {"principal": str}, {"type": str, "in": str, "because": bool, **READ_FIELDS})
    # checked here: with nothing of the type to show, the engine would not look at the principal
    principal, within = parse_principal(body["principal"]), body.get("in")
    asked = await settle(call, body)

    def one_type(authorizer: Authorizer, entity_type: str) -> list[dict[str, Any]]:
        if "type" not in body and not _fits(authorizer, entity_type, within):
            return []
        if body.get("because"):
            return [v.to_json() for v in authorizer.visible(principal, entity_type, within)]
        return [{"entity": str(e)} for e in authorizer.visible_entities(principal, entity_type, within)]

    def listed(deadline: Any) -> tuple[list[Any], Revision]:
        if asked.past is not None:
            with _deciding(call, asked) as (authorizer, revision):
                types = [body["type"]] if "type" in body else authorizer.listable_types()
                return [one_type(authorizer, t) for t in types], revision
        with call.service.deployment.lock:
            types = [body["type"]] if "type" in body else call.service.deployment.authorizer.listable_types()
        return call.service.in_slices_at(types, one_type, deadline, asked.revision_now)

    found, revision = await call.service.work(listed)
    out = {"principal": principal, "in": within, "visible": [v for shown_ in found for v in shown_]}
    return _answered(call, asked, revision, out)


def _fits(authorizer: Authorizer, entity_type: str, within: str | None) -> bool:
    return within is None or authorizer.entity(within).type in ancestor_types(authorizer.policy, entity_type)


async def change(call: Call) -> dict[str, Any]:
    """A change of the store (grants, memberships, roles, admins, entities), as the caller."""
    body = fields(call.body, "body", {"kind": str, "items": list})
    kind = body["kind"]
    if kind not in ENGINE_KINDS:
        known = ", ".join(k for k in KINDS if k in ENGINE_KINDS)
        hint = "; tokens are made and revoked with `privilog token`" if kind in KINDS else ""
        raise HttpError(f"body.kind is one of {known}, not {shown(kind)}{hint}")
    if len(body["items"]) > call.service.limits.max_batch:
        limit = call.service.limits.max_batch
        raise HttpError(f"body.items has {len(body['items'])} items; the limit is {limit} (--max-batch)", 413)
    entry = await call.service.change(call, kind, body["items"])
    return {"change": entry.to_json()}


async def audit(call: Call) -> dict[str, Any]:
    """The audit log (admins only): ``?principal=&entity=&since=&limit=``."""
    query = call.request.query_params
    for name in query:
        if name not in ("principal", "entity", "since", "limit"):
            raise HttpError(f"no query parameter `{shown(name)}` (parameters: principal, entity, since, limit)")
    limit_text = query.get("limit", "1000")
    if not limit_text.isdigit() or not 1 <= int(limit_text) <= 10_000:
        raise HttpError(f"limit is a number from 1 to 10000, not {shown(limit_text)}")
    entries = await run_in_threadpool(
        call.service.store.audit, query.get("principal"), query.get("entity"), query.get("since"), int(limit_text)
    )
    return {"changes": [e.to_json() for e in entries]}


async def reload(call: Call) -> dict[str, Any]:
    fields(call.body, "body", {})
    return await call.service.reload(f"asked by {call.principal}, request {call.request_id}")


async def health(call: Call) -> dict[str, Any]:
    return {"status": "ok"}


async def ready(call: Call) -> Any:
    service = call.service
    try:
        lag = await service.lag()
    except Exception as error:
        text = one_line(str(error)) if isinstance(error, StoreError) else type(error).__name__
        raise HttpError(f"the store is not reachable: {text}", 503, {"Retry-After": "1"}) from None
    return {
        "status": "ready",
        "policy": service.deployment.policy.name,
        "version": service.version,
        "seq": service.deployment.seq,
        "lag": lag,
        "pid": os.getpid(),
    }


async def metrics(call: Call) -> Response:
    service = call.service
    deployment = service.deployment
    try:
        lag = float(await service.lag())
    except Exception:
        lag = float("nan")
    with deployment.lock:
        world = deployment.authorizer.world
        grants, members = len(world.grants), len(world.members)
    gauges = {
        "privilog_store_lag_entries": ("Store log entries not yet replayed into this server's engine.", lag),
        "privilog_store_seq": ("The last store log entry this server has replayed.", float(deployment.seq)),
        "privilog_grants": ("Grants in this server's engine.", float(grants)),
        "privilog_memberships": ("Memberships of groups and roles in this server's engine.", float(members)),
        f'privilog_policy_info{{policy="{deployment.policy.name}",version="{service.version}"}}': (
            "The policy served, by name and version.",
            1.0,
        ),
        "privilog_policy_reload_failing": (
            "1 when the last reload failed (the old policy serves).",
            1.0 if service.last_reload_error else 0.0,
        ),
    }
    return Response(service.metrics.render(gauges), media_type="text/plain; version=0.0.4; charset=utf-8")


_REQUEST: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["principal", "operation", "entity"],
    "properties": {
        "principal": {"type": "string", "example": "user:alice"},
        "operation": {"type": "string", "example": "dataset.read"},
        "entity": {"type": "string", "example": "dataset:ns1.sales"},
        "args": {
            "type": "object",
            "additionalProperties": {
                "oneOf": [{"type": ["string", "boolean"]}, {"type": "array", "items": {"type": "string"}}]
            },
        },
    },
}

ROUTES = [
    Route(
        "POST",
        "/v1/check",
        "check",
        "Decide a request: allow or deny (with `explain`, the proof or what is unmet and the fixes)",
        check,
        body={**_REQUEST, "properties": {**_REQUEST["properties"], "explain": {"type": "boolean"}, **READ_PROPERTIES}},
        revision="read",
    ),
    Route(
        "POST",
        "/v1/check/batch",
        "check_batch",
        "Decide many requests in one call",
        check_batch,
        body={
            "type": "object",
            "additionalProperties": False,
            "required": ["checks"],
            "properties": {
                "checks": {"type": "array", "items": _REQUEST},
                "explain": {"type": "boolean"},
                **READ_PROPERTIES,
            },
        },
        revision="read",
    ),
    Route(
        "POST",
        "/v1/why",
        "why",
        "Explain a decision: the proof, or the unmet requirements and the fixes",
        why,
        body={**_REQUEST, "properties": {**_REQUEST["properties"], **READ_PROPERTIES}},
        revision="read",
    ),
    Route(
        "POST",
        "/v1/list",
        "list",
        "What a principal may see, of a type or every listable type",
        visible,
        body={
            "type": "object",
            "additionalProperties": False,
            "required": ["principal"],
            "properties": {
                "principal": {"type": "string"},
                "type": {"type": "string"},
                "in": {"type": "string"},
                "because": {"type": "boolean"},
                **READ_PROPERTIES,
            },
        },
        revision="read",
    ),
    Route(
        "POST",
        "/v1/changes",
        "changes",
        "Change grants, memberships, roles, admins or entities (authorization admins only; durable and audited)",
        change,
        body={
            "type": "object",
            "additionalProperties": False,
            "required": ["kind", "items"],
            "properties": {
                "kind": {"type": "string", "enum": [k for k in KINDS if k in ENGINE_KINDS]},
                "items": {"type": "array"},
            },
        },
        revision="change",
    ),
    Route("GET", "/v1/audit", "audit", "The audit log (authorization admins only)", audit, auth="admin"),
    Route(
        "POST",
        "/v1/admin/reload",
        "reload",
        "Read the policy again (authorization admins only); a broken one leaves the old one serving",
        reload,
        auth="admin",
        body={"type": "object", "additionalProperties": False},
        body_optional=True,
        responses={422: "the new policy does not parse or check; the old one serves"},
    ),
    Route("GET", "/health", "health", "Liveness", health, auth="none"),
    Route(
        "GET",
        "/ready",
        "ready",
        "Readiness: the policy is loaded and the store answers",
        ready,
        auth="none",
        responses={503: "the store does not answer"},
    ),
    Route("GET", "/metrics", "metrics", "Prometheus metrics", metrics),
    Route(
        "GET",
        "/v1/watch",
        "watch",
        "What changed since a revision (`?since=REVISION&timeout=SECONDS`, a long poll), and whose decisions it "
        "may affect: for caches of decisions (docs/caches.md)",
        watch,
        responses={409: "the revision is not of this store's log, or of a later policy than served"},
    ),
]
