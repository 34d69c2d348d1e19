"""HTTP bodies and headers against a real ``privilog serve`` on 127.0.0.1, started once per campaign
(:func:`start_server`) with the sample world imported into its store.

Bodies: each endpoint's valid body with values broken (other types, look-alikes,
fragments, unknown or missing fields), or any bytes. Questions go with the admin's
token; changes with a non-admin's (``user:bob``), a broken token or none, and must
never succeed. Headers: a whole request written on a socket with its head mutated.

The oracle: never a 5xx, never a dropped connection or no answer, a 4xx carries one
line in ``error``, the server answers ``/health`` after a raw request, and a question
whose request cannot be allowed (:func:`tests.fuzz.requests.allowable`) is not.
"""

from __future__ import annotations

import json
import random
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

from tests.fuzz.harness import Case, Verdict, answered, failure, refused
from tests.fuzz.mutate import FRAGMENTS, decode, encode, mutate_bytes, mutate_text
from tests.fuzz.worlds import mutate_data

BASE = "/v3/security/authorization"
DATASET = {"entity": "DATASET", "namespace": "sales", "dataset": "orders"}
CHECK = {"principal": "user:bob", "operation": "dataset.read", "entity": "dataset:sales.orders"}
QUESTIONS = {
    ("POST", "/v1/check"): {**CHECK, "args": {}, "explain": False},
    ("POST", "/v1/check/batch"): {"checks": [CHECK, {**CHECK, "principal": "user:dave"}], "explain": False},
    ("POST", "/v1/why"): CHECK,
    ("POST", "/v1/list"): {"principal": "user:dave", "type": "dataset", "in": "namespace:marketing"},
    ("POST", f"{BASE}/enforce"): {"entity": DATASET, "principal": "user:bob", "actions": ["READ"]},
    ("POST", f"{BASE}/isVisible"): {"principal": "user:bob", "entities": [DATASET, "namespace:sales"]},
}
CHANGES = {
    ("POST", "/v1/changes"): {"kind": "grant", "items": [["user:eve", "ADMIN", "namespace:sales"]]},
    ("POST", f"{BASE}/privileges/grant"): {
        "entity": DATASET,
        "principal": {"name": "eve", "type": "USER"},
        "actions": ["ADMIN"],
    },
    ("POST", f"{BASE}/privileges/revoke"): {"entity": DATASET, "principal": "user:bob", "actions": ["READ"]},
    ("POST", "/v1/admin/reload"): {},
}
GETS = ["/health", "/metrics", "/v1/audit?limit=5", f"{BASE}/user/bob/privileges", f"{BASE}/roles", "/openapi.json"]
CHANGERS = ["bob", "none", "garbage"]


def generate(rng: random.Random, count: int) -> Iterator[Case]:
    for _ in range(count):
        how = rng.randrange(10)
        if how < 4:
            (method, path), body = rng.choice(sorted(QUESTIONS.items()))
            yield {
                "method": method,
                "path": path,
                "token": "root",
                "body": mutate_data(rng, body, root=True),
                "question": body,
            }
        elif how < 6:
            (method, path), body = rng.choice(sorted(CHANGES.items()))
            broken = body if rng.random() < 0.3 else mutate_data(rng, body, root=True)
            yield {"method": method, "path": path, "token": rng.choice(CHANGERS), "body": broken, "change": True}
        elif how < 7:
            (method, path), body = rng.choice(sorted({**QUESTIONS, **CHANGES}.items()))
            text = json.dumps(body)
            if rng.random() < 0.2:  # a number longer than Python reads (4300 digits), or a deep nesting
                value = rng.choice(["9" * rng.randint(4000, 9000), "[" * 5000, "-0." + "1" * 5000, "1e99999"])
                raw = text.replace('"user:bob"', value, 1).replace("{}", value, 1).encode()
            elif rng.random() < 0.8:
                raw = mutate_bytes(rng, text.encode())
            else:
                raw = rng.randbytes(rng.randint(0, 64))
            yield {
                "method": method,
                "path": path,
                "token": "bob" if (method, path) in CHANGES else "root",
                "bytes": encode(raw),
                "change": (method, path) in CHANGES,
            }
        elif how < 8:
            path = mutate_text(rng, rng.choice(GETS), 1) if rng.random() < 0.7 else rng.choice(GETS)
            yield {
                "method": rng.choice(["GET", "GET", "DELETE", "PUT", "OPTIONS", "HEAD"]),
                "path": path,
                "token": rng.choice(["root", "bob", "none", "garbage"]),
            }
        else:
            yield {"raw": encode(_raw_request(rng))}


def _raw_request(rng: random.Random) -> bytes:
    """A whole request (its head ends in a blank line; Content-Length never promises more than is sent)."""
    body = json.dumps(CHECK).encode()
    lines = [
        "POST /v1/check HTTP/1.1",
        "Host: 127.0.0.1",
        "Authorization: Bearer @root",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        "Connection: close",
    ]
    head = "\r\n".join(lines)
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(head) + 1)
        extra = rng.choice(
            [
                *FRAGMENTS,
                "\r\n",
                "\r\nX-A: " + "a" * rng.randint(1, 70000),
                "\r\nContent-Length: 1",
                "\r\nTransfer-Encoding: chunked",
                "\r\nHost: b",
                "\x00",
                "\r\n\r\n",
                " HTTP/1.0",
                "\r\nAuthorization: Bearer plg_x_y",
                "\r\nExpect: 100-continue",
            ]
        )
        head = head[:at] + extra + head[at + rng.randint(0, 8) :]
    if "\r\n\r\n" in head:
        head = head.split("\r\n\r\n", 1)[0]
    data = head.encode("utf-8", "surrogatepass") + b"\r\n\r\n" + body
    return mutate_bytes(rng, data, 1) if rng.random() < 0.2 and b"Content-Length" not in data else data


def run(case: Case, context: Any) -> Verdict:
    if not context.server:
        return Verdict("skipped", "no server (PRIVILOG_FUZZ_SERVER unset)")
    if "raw" in case:
        return _run_raw(decode(case["raw"]), context)
    import httpx

    headers = {"Content-Type": "application/json"}
    token = context.tokens.get(case["token"], "plg_garbage_x" if case["token"] == "garbage" else None)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    content = decode(case["bytes"]) if "bytes" in case else None
    if content is None and "body" in case:
        content = json.dumps(case["body"]).encode()
    try:
        response = httpx.request(
            case["method"],
            context.server + "/" + quote(case["path"].removeprefix("/"), safe="/?=&%:"),
            content=content,
            headers=headers,
            timeout=15,
        )
    except httpx.HTTPError as error:
        return failure(f"no answer ({type(error).__name__}: {error}) to {case['method']} {case['path']}")
    status = response.status_code
    if status >= 500:
        return failure(f"{status} for {case['method']} {case['path']}: {response.text[:500]}")
    if case.get("change") and status < 400:  # a change is never sent with the admin's token
        return failure(f"a change by {case['token']} was accepted ({status}): {case.get('body')!r}")
    if status >= 400:
        return _refusal(response)
    if "question" in case:
        return _question(case, response.json(), context)
    return answered(str(status))


def _refusal(response: Any) -> Verdict:
    if response.request.method == "HEAD":
        return refused(str(response.status_code))
    try:
        error = response.json()["error"]
    except (ValueError, KeyError, TypeError):
        return failure(f"a {response.status_code} without a JSON error: {response.text[:300]!r}")
    if not isinstance(error, str) or not error or "\n" in error:
        return failure(f"a {response.status_code} whose error is not one line: {error!r}")
    return refused(f"{response.status_code} {error}")


def _question(case: Case, answer: Any, context: Any) -> Verdict:
    """A question answered 2xx: an allow only where the request could be allowed."""
    from tests.fuzz.requests import allowable

    body = case["body"]
    if case["path"] == "/v1/check" and isinstance(answer, dict) and answer.get("decision") == "allow":
        fields = [body.get(k) for k in ("principal", "operation", "entity")] + [body.get("args")]
        if not allowable(context.policy, context.authorizer.world, *fields):
            return failure(f"allowed a request that must be refused or denied: {body!r}")
    if case["path"] == "/v1/check/batch" and isinstance(answer, dict):
        for asked, given in zip(body.get("checks", []), answer.get("results", []), strict=False):
            if isinstance(given, dict) and given.get("decision") == "allow" and isinstance(asked, dict):
                fields = [asked.get(k) for k in ("principal", "operation", "entity")] + [asked.get("args")]
                if not allowable(context.policy, context.authorizer.world, *fields):
                    return failure(f"allowed a request that must be refused or denied: {asked!r}")
    return answered("2xx")


def _run_raw(data: bytes, context: Any) -> Verdict:
    address = urlparse(context.server)
    data = data.replace(b"@root", context.tokens["root"].encode())
    received = b""
    with socket.create_connection((address.hostname, address.port), timeout=15) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            while True:
                more = sock.recv(65536)
                if not more:
                    break
                received += more
        except TimeoutError:
            if not received:
                return failure(f"no answer within 15 s to {data[:300]!r}")
        except ConnectionResetError:
            pass
    import httpx

    if httpx.get(context.server + "/health", timeout=15).status_code != 200:
        return failure(f"the server stopped answering after {data[:300]!r}")
    if not received:
        return refused("closed without an answer (the request was not HTTP)")
    status_line = received.split(b"\r\n", 1)[0]
    parts = status_line.split()
    if len(parts) < 2 or not parts[1].isdigit():
        return failure(f"not an HTTP answer: {received[:200]!r}")
    if int(parts[1]) >= 500:
        return failure(f"{status_line!r} for {data[:300]!r}")
    return refused(status_line.decode()) if int(parts[1]) >= 400 else answered(status_line.decode())


@contextmanager
def running_server(folder: Path) -> Iterator[dict[str, str]]:
    """``privilog serve`` on a store holding the sample world, admin user:root; the worker's environment."""
    from privilog import dsl
    from privilog.api import load_world_for
    from privilog.store import open_store
    from tests.serve.conftest import Server

    policy = dsl.load_policy("cdap")
    path = folder / "fuzz.db"
    world = load_world_for(policy, Path(__file__).resolve().parents[2] / "privilog" / "samples" / "world.yaml")
    with open_store(str(path), policy.actions) as store:
        store.import_world(world, "local:fuzz")
        _, root = store.create_token("user:root", "local:fuzz")
        _, bob = store.create_token("user:bob", "local:fuzz")
    server = Server(path, "--client-timeout", "2").start()
    try:
        yield {"PRIVILOG_FUZZ_SERVER": server.url, "PRIVILOG_FUZZ_TOKENS": json.dumps({"root": root, "bob": bob})}
    finally:
        server.stop()
