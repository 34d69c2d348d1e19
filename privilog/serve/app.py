"""The Starlette application: every route behind one wrapper that authenticates, reads the body,
maps errors to statuses and counts.

Every answer is JSON (``/metrics`` is Prometheus text). An error is
``{"error": "one line"}`` with a 4xx status: 400 malformed, 401 no or an unknown
token, 403 not allowed (a non-admin's change, an enforce that fails), 404, 405,
408 a body too slow, 409, 413 too large, 422 a policy that does not load, 429
too many refused changes, 431 headers too large; 503 (with ``Retry-After``) a
store that is away or a request over its time, 507 a store whose disk is full.
A bug is a 500 naming the request id, logged with its traceback; never an allow.

>>> import tempfile, pathlib, dsl
>>> from privilog.store import open_store
>>> from privilog.store.deployment import Deployment
>>> store = open_store(str(pathlib.Path(tempfile.mkdtemp()) / "authz.db"))
>>> app = make_app(Service(Deployment(store, dsl.load_policy("cdap"))))
>>> sorted(r.path for r in app.routes)[:3]
['/health', '/metrics', '/openapi.json']
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import signal
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route as StarletteRoute

from privilog.dsl.errors import PrivilogError
from privilog.engine.world import NotAnAdmin
from privilog.store.base import StoreFull, StoreUnavailable

from . import cdap, routes
from .bodies import HttpError, one_line, parse_json, read_body
from .openapi import document
from .service import Call, Route, Service

log = logging.getLogger("privilog.serve")

_REQUEST_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}\Z")
VERSION = "1"


def json_response(status: int, payload: Any, headers: dict[str, str] | None = None) -> Response:
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    return Response(body, status, headers, media_type="application/json")


def request_id(given: str | None) -> str:
    """The caller's ``X-Request-Id`` when it is a sane one, else a new one."""
    return given if given is not None and _REQUEST_ID.match(given) else uuid.uuid4().hex


def endpoint(service: Service, route: Route) -> Any:
    """The Starlette endpoint of a route: authenticate, read the body, run, answer, count."""

    async def answer(request: Request) -> Response:
        started = time.perf_counter()
        rid = request_id(request.headers.get("x-request-id"))
        read = False  # whether the body was read to its end: if not, the connection ends with the answer
        call: Call | None = None
        try:
            principal = ""
            if route.auth != "none":
                principal = await service.principal(request.headers.get("authorization"))
                if route.auth == "admin" and not service.is_admin(principal):
                    log.warning(
                        "privilog serve: %s (not an authorization admin) refused %s %s, request %s",
                        principal,
                        route.method,
                        route.path,
                        rid,
                    )
                    raise HttpError(f"{principal} is not an authorization admin", 403)
            body = None
            if route.body is not None or request.method in ("POST", "PUT"):
                raw = await read_body(request, service.limits.max_body, service.limits.client_timeout)
                read = True
                if route.body is None and raw.strip():
                    raise HttpError(f"{route.method} {route.path} takes no body")
                if route.body is not None:
                    body = {} if not raw and route.body_optional else parse_json(raw)
            call = Call(service, request, principal, rid, body, request.path_params)
            result = await route.handler(call)
            response = result if isinstance(result, Response) else json_response(200, result)
        except HttpError as error:
            response = json_response(error.status, error.payload(), error.headers)
        except NotAnAdmin as error:
            response = json_response(403, {"error": one_line(str(error))})
        except StoreFull as error:
            log.error("privilog serve: %s %s, request %s: %s", route.method, route.path, rid, one_line(str(error)))
            response = json_response(507, {"error": one_line(str(error))})
        except StoreUnavailable as error:
            log.error("privilog serve: %s %s, request %s: %s", route.method, route.path, rid, one_line(str(error)))
            retry = {"Retry-After": str(error.retry_after)}
            response = json_response(503, {"error": one_line(str(error))}, retry)
        except PrivilogError as error:
            response = json_response(400, {"error": one_line(str(error))})
        except Exception:
            log.exception("privilog serve: internal error in %s %s, request %s", route.method, route.path, rid)
            response = json_response(500, {"error": f"internal error (request id {rid}); see the server's log"})
        response.headers["x-request-id"] = rid
        if call is not None and call.headers:  # the revision an answer was decided at (or a change made)
            response.headers.update(call.headers)
        if not read and _has_body(request):
            response.headers["connection"] = "close"
        service.metrics.requested(route.name, response.status_code, time.perf_counter() - started)
        return response

    answer.__name__ = route.name
    return answer


def _has_body(request: Request) -> bool:
    """Whether a request declares a body (a length above 0, or chunks)."""
    length = request.headers.get("content-length")
    return (length is not None and length != "0") or "transfer-encoding" in request.headers


def make_app(service: Service, follow_interval: float = 0.25, signals: bool = False) -> Starlette:
    """The application over ``service``. ``follow_interval``: how often to replay what others wrote to the
    store, when the deployment does not follow it by itself; ``signals``: reload the policy on SIGHUP."""
    table = [*routes.ROUTES, *cdap.ROUTES]
    openapi = document(table, VERSION)

    async def openapi_json(request: Request) -> Response:
        return json_response(200, openapi)

    async def http_error(request: Request, error: Exception) -> Response:
        status = error.status_code if isinstance(error, HTTPException) else 500
        text = {
            404: f"no route {request.method} {request.url.path}"[:200],
            405: f"{request.method} is not a method of {request.url.path}"[:200],
        }.get(status, "error")
        service.metrics.requested("unmatched", status, 0.0)
        return json_response(status, {"error": text}, dict(getattr(error, "headers", None) or {}))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        deployment = service.deployment
        service.warm()
        following = getattr(deployment, "start_following", None)
        task = None
        if following is not None:
            following(max(0.5, follow_interval))  # a wait for the store's next change, at most this long
        else:
            task = asyncio.create_task(service.follow(follow_interval))
        loop = asyncio.get_running_loop()
        if signals:
            loop.add_signal_handler(signal.SIGHUP, lambda: asyncio.ensure_future(_reload_quietly(service)))
        try:
            yield
        finally:
            if signals:
                loop.remove_signal_handler(signal.SIGHUP)
            if task is not None:
                task.cancel()
                with suppress(asyncio.CancelledError):
                    await task
            stop = getattr(deployment, "stop_following", None)
            if following is not None and stop is not None:
                stop()
            if service.decision_log is not None:
                service.decision_log.close()

    return Starlette(
        routes=[StarletteRoute(r.path, endpoint(service, r), methods=[r.method], name=r.name) for r in table]
        + [StarletteRoute("/openapi.json", openapi_json, methods=["GET"], name="openapi")],
        exception_handlers={HTTPException: http_error},
        lifespan=lifespan,
    )


async def _reload_quietly(service: Service) -> None:
    with suppress(HttpError):  # a broken policy is logged, and the old one serves
        await service.reload("SIGHUP")
