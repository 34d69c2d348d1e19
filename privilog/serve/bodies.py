"""Request bodies read strictly: bounded in size and time, JSON, known fields of the right types.

Every refusal is an :class:`HttpError`: a status and one line saying what is
wrong, which the application sends as ``{"error": "..."}``.

>>> fields({"principal": "user:alice", "entity": "namespace:ns1"}, "body",
...        required={"principal": str}, optional={"entity": str, "args": dict})
{'principal': 'user:alice', 'entity': 'namespace:ns1'}
>>> fields({"principal": 3}, "body", required={"principal": str})
Traceback (most recent call last):
...
privilog.serve.bodies.HttpError: body.principal is a string, not 3
>>> fields({"principal": "user:a", "colour": "red"}, "body", required={"principal": str})
Traceback (most recent call last):
...
privilog.serve.bodies.HttpError: body has no field `colour` (fields: principal)
>>> parse_json(b'{"principal": "user:nobody", "principal": "user:alice"}')
Traceback (most recent call last):
...
privilog.serve.bodies.HttpError: malformed JSON: the key "principal" appears twice in one object
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from starlette.requests import ClientDisconnect, Request

from privilog.dsl.errors import OneLineError

MAX_SHOWN = 60  # characters of a bad value shown in a message


class ServeError(OneLineError):
    """A server that cannot start as asked (a port in use, a log that cannot be written)."""


class HttpError(Exception):
    """A request refused: ``status`` and one line; ``extra`` fields join ``error`` in the body."""

    def __init__(self, message: str, status: int = 400, headers: Mapping[str, str] | None = None, **extra: Any):
        super().__init__(one_line(message))
        self.status = status
        self.headers = dict(headers or {})
        self.extra = extra

    def payload(self) -> dict[str, Any]:
        return {"error": str(self), **self.extra}


def one_line(text: str) -> str:
    """The first line of a message (an error rendered with its source has more)."""
    return str(text).strip().splitlines()[0] if str(text).strip() else "error"


def shown(value: Any) -> str:
    """A value as a message shows it: JSON, cut short."""
    try:
        text = json.dumps(value, ensure_ascii=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."


async def read_body(request: Request, limit: int, timeout: float) -> bytes:
    """The body, at most ``limit`` bytes, within ``timeout`` seconds (a slow sender gets 408)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise HttpError("Content-Length is not a number")
        if int(declared) > limit:
            raise HttpError(f"the body is {declared} bytes; the limit is {limit}", 413)

    async def collect() -> bytes:
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise HttpError(f"the body is over the limit of {limit} bytes", 413)
            chunks.append(chunk)
        return b"".join(chunks)

    try:
        return await asyncio.wait_for(collect(), timeout)
    except TimeoutError:
        raise HttpError(f"the body did not arrive within {timeout:g} s", 408) from None
    except ClientDisconnect:
        raise HttpError("the client went away before sending the whole body", 400) from None


def parse_json(raw: bytes) -> Any:
    """The body as JSON; malformed text is a 400 saying where."""
    if not raw:
        raise HttpError("the body is empty; send a JSON object")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise HttpError(f"the body is not UTF-8 (byte {error.start})") from None
    try:
        return json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as error:
        raise HttpError(f"malformed JSON: {error.msg} at line {error.lineno} column {error.colno}") from None
    except ValueError:  # Python reads at most 4300 digits of a whole number
        raise HttpError("malformed JSON: a number with more digits than privilog reads") from None
    except RecursionError:
        raise HttpError("malformed JSON: nested too deeply") from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are each written once: a key written twice is refused, not read last-wins
    (a proxy or a log reading the first would see another request than the one decided)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise HttpError(f"malformed JSON: the key {shown(key)} appears twice in one object")
            seen.add(key)
    return out


def _no_constant(name: str) -> Any:
    raise HttpError(f"malformed JSON: {name} is not a JSON number")


_TYPE_NAMES = {str: "a string", bool: "true or false", int: "an integer", dict: "an object", list: "an array"}


def check_type(value: Any, kind: type | tuple[type, ...], where: str) -> Any:
    """``value`` if it is of ``kind`` (a bool is not an integer here), else a 400 naming ``where``."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
    if not ok:
        names = " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)
        raise HttpError(f"{where} is {names}, not {shown(value)}")
    return value


def fields(
    body: Any,
    where: str,
    required: Mapping[str, Any],
    optional: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The fields of a JSON object: each required one present, none unknown, each of its type."""
    optional = optional or {}
    check_type(body, dict, where)
    for name in body:
        if name not in required and name not in optional:
            known = ", ".join([*required, *optional])
            raise HttpError(f"{where} has no field `{_name(name)}` (fields: {known})")
    out = {}
    for name, kind in required.items():
        if name not in body:
            raise HttpError(f"{where} needs the field `{name}`")
        out[name] = check_type(body[name], kind, f"{where}.{name}")
    for name, kind in optional.items():
        if name in body and body[name] is not None:
            out[name] = check_type(body[name], kind, f"{where}.{name}")
    return out


def _name(name: str) -> str:
    return name if name.isprintable() and len(name) <= MAX_SHOWN else shown(name)
