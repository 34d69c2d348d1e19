"""The OpenAPI document of the server, written from its routes (so it lists every one).

>>> from privilog.serve.service import Route
>>> async def hello(call): ...
>>> doc = document([Route("GET", "/v1/hello/{name}", "hello", "Say hello", hello)], "0.1.0")
>>> doc["paths"]["/v1/hello/{name}"]["get"]["parameters"][0]["name"]
'name'
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from .service import Route

_PARAM = re.compile(r"{(\w+)}")
_ERROR = {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}}
_CONSISTENCY = {
    "name": "Privilog-Consistency",
    "in": "header",
    "required": False,
    "description": "how fresh the answer must be: `any` (default), `full` (the store's log head read first) or "
    "`at-least TOKEN` (a revision token a change or an answer carried); not with the body's `consistency` or "
    "`as_of` (docs/consistency.md)",
    "schema": {"type": "string", "example": "at-least plr1_NDI6NzowMWE5MGI3YmIwZDY4MGEz"},
}
_REVISION = {
    "description": "the revision the answer was decided at (a read), or the change made (a change): a token to hand "
    "back as `at_least`",
    "schema": {"type": "string"},
}


def document(routes: Iterable[Route], version: str) -> dict[str, Any]:
    """An OpenAPI 3.1 document: each route's method, path, parameters, body and responses."""
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        operation: dict[str, Any] = {"operationId": route.name, "summary": route.summary}
        params = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in _PARAM.findall(route.path)
        ]
        if route.revision == "read":
            params.append(_CONSISTENCY)
        if params:
            operation["parameters"] = params
        if route.body is not None:
            operation["requestBody"] = {
                "required": not route.body_optional,
                "content": {"application/json": {"schema": dict(route.body)}},
            }
        responses: dict[str, Any] = {"200": {"description": "OK"}}
        if route.revision:
            responses["200"]["headers"] = {"Privilog-Revision": _REVISION}
        if route.revision == "read":
            errors_read = {
                409: "the revision asked is beyond the store's log, or was made under a policy this server does not "
                "serve (one line saying which)",
                503: "the revision asked was not reached within --consistency-timeout (Retry-After), or the store "
                "is away",
            }
        else:
            errors_read = {}
        errors = {400: "malformed request: one line saying what is wrong"}
        if route.body is not None:
            errors |= {408: "the body came too slowly", 413: "the body or the batch is over the limit"}
        if route.auth != "none":
            errors |= {401: "no token, or an unknown or revoked one"}
        if route.auth == "admin" or (route.method != "GET" and route.name.startswith(("cdap_", "changes"))):
            errors |= {403: "not an authorization admin (the refusal of a change is audited)"}
        for status, text in {**errors, **errors_read, **route.responses}.items():
            responses[str(status)] = {"description": text, "content": {"application/json": {"schema": _ERROR}}}
        operation["responses"] = responses
        if route.auth != "none":
            operation["security"] = [{"bearer": []}]
        paths.setdefault(route.path, {})[route.method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "privilog serve",
            "version": version,
            "description": "CDAP authorization as Datalog: privilog's questions and CDAP's extension contract",
        },
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "paths": paths,
    }
