"""Consistency over real HTTP: a read asking `at_least` a revision never sees what came before it.

Real servers on 127.0.0.1: two workers over one SQLite file, and two replicas (`privilog serve`
processes) on the tests' PostgreSQL. A grant, then its revoke through one; at once, thousands of
racing checks at the other(s): carrying the revoke's revision, not one is allowed; without it, the
stale allows are counted and printed (a figure, not asserted: benchmarks/consistency.py measures it).
Then the refusals (a malformed token 400, one beyond the log 409, one made under another policy 409),
`full` seeing another process's change at once with following slowed, a revision on every answer,
and `as_of` answering what was answered at that revision.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from privilog.store import open_store
from privilog.store.revision import Revision, parse_revision
from tests.serve.conftest import ROOT, Server, Setup

ACTIONS = ("READ", "WRITE", "EXECUTE", "ADMIN")
CHECK = {"principal": "user:alice", "operation": "dataset.read", "entity": "dataset:ns1.sales"}
GRANT = [["user:alice", "READ", "dataset:ns1.sales"]]
RACE = 10_000  # checks fired carrying the revoke's revision
UNTOKENED = 3_000  # checks fired without it
CONNECTIONS = 24
BOUND = 20.0  # liveness of a wait, not a timing


async def _fire(url: str, token: str, requests: list[tuple[bytes, dict[str, str]]]) -> list[tuple[float, int, Any]]:
    """Send each (body, headers) as a POST /v1/check over CONNECTIONS kept-alive connections at once; each
    answer with the time it arrived (time.monotonic), its status and its JSON body."""
    address = httpx.URL(url)
    host, port = address.host, address.port
    numbers = itertools.count()
    out: list[tuple[float, int, Any]] = []

    async def connection() -> None:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            while (i := next(numbers)) < len(requests):
                body, headers = requests[i]
                extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                writer.write(
                    (
                        f"POST /v1/check HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
                        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
                    ).encode()
                    + body
                )
                status = int((await reader.readline()).split()[1])
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    name, _, value = line.decode().partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                out.append((time.monotonic(), status, json.loads(await reader.readexactly(length))))
        finally:
            writer.close()

    await asyncio.gather(*(connection() for _ in range(CONNECTIONS)))
    return out


def _race(url: str, token: str, revision: str | None, count: int) -> list[tuple[float, int, Any]]:
    """``count`` racing checks of CHECK; with ``revision``, half ask it in the body, half in the header."""
    requests = []
    for i in range(count):
        if revision is None:
            requests.append((json.dumps(CHECK).encode(), {}))
        elif i % 2:
            requests.append((json.dumps(CHECK).encode(), {"Privilog-Consistency": f"at-least {revision}"}))
        else:
            requests.append((json.dumps({**CHECK, "consistency": {"at_least": revision}}).encode(), {}))
    return asyncio.run(_fire(url, token, requests))


def _decision(client: httpx.Client, **extra: Any) -> str:
    answer = client.post("/v1/check", json={**CHECK, **extra})
    assert answer.status_code == 200, answer.text
    parse_revision(answer.json()["revision"])
    return str(answer.json()["decision"])


def _all_allow(client: httpx.Client) -> None:
    """Wait (bounded) until 50 checks in a row allow: every worker took the grant in."""
    started, row = time.monotonic(), 0
    while row < 50:
        row = row + 1 if _decision(client) == "allow" else 0
        assert time.monotonic() - started < BOUND, "the grant did not reach every worker"


def _change(client: httpx.Client, kind: str) -> Revision:
    answer = client.post("/v1/changes", json={"kind": kind, "items": GRANT})
    assert answer.status_code == 200, answer.text
    token = answer.json()["change"]["revision"]
    assert answer.headers["privilog-revision"] == token
    return parse_revision(token)


def _races(change_at: httpx.Client, check_at: list[Server], token: str, where: str) -> None:
    """Grant, revoke through ``change_at``, race checks at ``check_at`` with the revoke's revision: no allow;
    then again without it: the allows counted and printed."""
    _change(change_at, "grant")
    for server in check_at:
        _all_allow(server.client(token))
    revoked = _change(change_at, "revoke")
    answers: list[tuple[float, int, Any]] = []
    started = time.monotonic()
    for server in check_at:
        answers += _race(server.url, token, revoked.token, RACE // len(check_at))
    seconds = time.monotonic() - started
    assert len(answers) == RACE // len(check_at) * len(check_at)
    assert [status for _, status, _ in answers if status != 200] == []
    allows = [body for _, _, body in answers if body["decision"] == "allow"]
    assert allows == []  # not one stale answer
    assert all(parse_revision(body["revision"]).covers(revoked) for _, _, body in answers)
    print(f"{where}: {len(answers)} checks at least the revoke's revision in {seconds:.1f} s: 0 allowed")

    _change(change_at, "grant")
    for server in check_at:
        _all_allow(server.client(token))
    _change(change_at, "revoke")
    acknowledged = time.monotonic()
    stale: list[float] = []
    for server in check_at:
        for arrived, status, body in _race(server.url, token, None, UNTOKENED // len(check_at)):
            assert status == 200
            if body["decision"] == "allow":
                stale.append(arrived - acknowledged)
    window = f"over {max(stale) * 1000:.0f} ms after the revoke was acknowledged" if stale else ""
    print(f"{where}: without the revision, {len(stale)} of {UNTOKENED} checks allowed {window}")


def test_workers_over_one_sqlite_file_never_answer_before_the_revision(setup: Setup) -> None:
    server = setup.serve("--workers", "2")
    _races(server.client(setup.root), [server], setup.root, "2 workers, SQLite")


def test_replicas_on_postgresql_never_answer_before_the_revision(
    fresh_postgres_url: str, start_replica: Callable[[str], Server]
) -> None:
    with open_store(fresh_postgres_url, ACTIONS) as store:
        store.change("local:test", "admin.add", ["user:root"], trusted=True)
        _, token = store.create_token("user:root", "local:test")
    first, second = start_replica(fresh_postgres_url), start_replica(fresh_postgres_url)
    _races(first.client(token), [second], token, "2 replicas, PostgreSQL")


def test_a_bad_revision_is_refused_with_one_line(setup: Setup, tmp_path: Path) -> None:
    server = setup.serve()
    client = server.client(setup.root)
    head = _change(client, "grant")
    for body, headers in [
        ({**CHECK, "consistency": {"at_least": "plr1_bm9wZQ"}}, {}),
        ({**CHECK, "consistency": {"at_least": 42}}, {}),
        ({**CHECK, "consistency": "strong"}, {}),
        (CHECK, {"Privilog-Consistency": "at-least nonsense"}),
        (CHECK, {"Privilog-Consistency": "eventually"}),
        ({**CHECK, "consistency": "full"}, {"Privilog-Consistency": "full"}),  # both: which one?
        ({**CHECK, "consistency": "full", "as_of": "1"}, {}),  # the past, and fresh?
        ({**CHECK, "as_of": "1"}, {"Privilog-Consistency": "full"}),
        ({**CHECK, "as_of": "last tuesday"}, {}),
        ({**CHECK, "as_of": "999999"}, {}),  # beyond the log
        ({**CHECK, "as_of": "9999-12-31T23:59:59-23:59"}, {}),  # past the year 9999 in UTC
    ]:
        answer = client.post("/v1/check", json=body, headers=headers)
        assert answer.status_code == 400, (body, headers, answer.text)
        assert "\n" not in answer.json()["error"], answer.text
    beyond = Revision(head.seq + 1000, head.policy_seq, head.policy_version).token
    for path, body in [("/v1/check", CHECK), ("/v1/why", CHECK), ("/v1/list", {"principal": "user:alice"})]:
        answer = client.post(path, json={**body, "consistency": {"at_least": beyond}})
        assert answer.status_code == 409, answer.text
        assert "log ends at" in answer.json()["error"]
    enforce = client.post(
        "/v3/security/authorization/enforce",
        json={"entity": "dataset:ns1.sales", "principal": "user:alice", "actions": ["READ"]},
        headers={"Privilog-Consistency": f"at-least {beyond}"},
    )
    assert enforce.status_code == 409, enforce.text


def test_a_revision_made_under_another_policy_is_a_conflict(setup: Setup, tmp_path: Path) -> None:
    other = tmp_path / "cdap-other.policy"
    text = (ROOT / "rules" / "cdap.policy").read_text().split("\n", 1)[1]
    other.write_text('policy cdap "CDAP authorization, another version"\n' + text)
    first = setup.serve()  # records cdap; then the second records its own version
    second = setup.serve("--policy", str(other))
    made = _change(second.client(setup.root), "grant")
    assert made.policy_version != parse_revision(_ready_revision(first, setup.root)).policy_version
    answer = first.client(setup.root).post("/v1/check", json={**CHECK, "consistency": {"at_least": made.token}})
    assert answer.status_code == 409, answer.text
    assert "policy version" in answer.json()["error"] and "\n" not in answer.json()["error"]
    assert _decision(second.client(setup.root), consistency={"at_least": made.token}) == "allow"


def _ready_revision(server: Server, token: str) -> str:
    answer = server.client(token).post("/v1/check", json=CHECK)
    return str(answer.json()["revision"])


def _on_the_command_line(setup: Setup, kind: str = "grant") -> Revision:
    """A change made by another process (`privilog grant|revoke --store`); the store's revision after it."""
    made = subprocess.run(
        [sys.executable, "-m", "privilog", kind, "user:alice", "READ", "dataset:ns1.sales", "--as", "user:root",
         "--store", str(setup.path)],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )
    assert made.returncode == 0, made.stderr
    with open_store(str(setup.path), ACTIONS, create=False) as store:
        return store.revision()


def test_full_and_at_least_see_another_process_change_at_once_with_following_slowed(setup: Setup) -> None:
    server = setup.serve("--follow-interval", "600")
    client = server.client(setup.root)
    assert _decision(client) == "deny"
    granted = _on_the_command_line(setup, "grant")
    assert _decision(client) == "deny"  # following looks again in ten minutes
    assert _decision(client, consistency={"at_least": granted.token}) == "allow"  # caught up to the token
    assert _decision(client) == "allow"  # and the engine keeps what it caught up with
    _on_the_command_line(setup, "revoke")
    assert _decision(client) == "allow"  # stale, for ten minutes
    assert _decision(client, consistency="full") == "deny"
    assert _decision(client) == "deny"
    server.kill()  # its follower sleeps for ten minutes: no need to wait for it


def test_a_catch_up_past_the_consistency_timeout_is_503(setup: Setup) -> None:
    server = setup.serve("--follow-interval", "600", "--consistency-timeout", "0.000001")
    client = server.client(setup.root)
    assert _decision(client) == "deny"
    _on_the_command_line(setup)  # the server must read the store to answer `full`: more than a microsecond
    answer = client.post("/v1/check", json={**CHECK, "consistency": "full"})
    assert answer.status_code == 503 and answer.headers["retry-after"] == "1", answer.text
    assert "--consistency-timeout" in answer.json()["error"]
    server.kill()


def test_every_answer_carries_its_revision(setup: Setup) -> None:
    server = setup.serve()
    client = server.client(setup.root)
    made = _change(client, "grant")
    many = [CHECK] * 300  # past INLINE: decided in a thread, in slices
    reads = [
        ("/v1/check", CHECK),
        ("/v1/check", {**CHECK, "explain": True}),
        ("/v1/check/batch", {"checks": [CHECK]}),
        ("/v1/check/batch", {"checks": many}),
        ("/v1/why", CHECK),
        ("/v1/list", {"principal": "user:alice"}),
        ("/v1/list", {"principal": "user:alice", "type": "dataset", "consistency": "full"}),
    ]
    for path, body in reads:
        answer = client.post(path, json={**body, "consistency": {"at_least": made.token}})
        assert answer.status_code == 200, answer.text
        revision = parse_revision(answer.json()["revision"])
        assert revision.covers(made) and answer.headers["privilog-revision"] == revision.token
    document = client.get("/openapi.json").json()["paths"]["/v1/check"]["post"]
    assert {"consistency", "as_of"} <= set(document["requestBody"]["content"]["application/json"]["schema"]["properties"])
    assert [p["name"] for p in document["parameters"]] == ["Privilog-Consistency"]
    assert "Privilog-Revision" in document["responses"]["200"]["headers"] and "409" in document["responses"]
    base = "/v3/security/authorization"
    cdap: list[tuple[str, str, Any]] = [
        ("POST", f"{base}/enforce", {"entity": "dataset:ns1.sales", "principal": "user:alice", "actions": ["READ"]}),
        ("POST", f"{base}/isVisible", {"principal": "user:alice", "entities": ["dataset:ns1.sales"]}),
        ("POST", f"{base}/privileges/grant", {"entity": "dataset:ns1.x", "principal": "user:bob", "actions": ["READ"]}),
        ("PUT", f"{base}/roles/ops", None),
        ("GET", f"{base}/user/alice/privileges", None),
    ]
    for method, path, body in cdap:
        answer = client.request(method, path, json=body, headers={"Privilog-Consistency": f"at-least {made.token}"})
        assert answer.status_code == 200, (path, answer.text)
        assert parse_revision(answer.headers["privilog-revision"]).covers(made), path


def test_as_of_answers_what_was_answered_at_that_revision(setup: Setup) -> None:
    server = setup.serve()
    client = server.client(setup.root)
    granted = _change(client, "grant")
    entity = client.post("/v1/changes", json={"kind": "entity.add", "items": ["dataset:ns1.sales"]})
    assert entity.status_code == 200, entity.text
    then = client.post("/v1/check", json=CHECK).json()
    assert then["decision"] == "allow"
    listing = {"principal": "user:alice", "type": "dataset"}
    listed_then = client.post("/v1/list", json=listing).json()
    assert listed_then["revision"] == then["revision"]
    assert [v["entity"] for v in listed_then["visible"]] == ["dataset:ns1.sales"]
    revoked = _change(client, "revoke")
    assert _decision(client) == "deny"
    for moment in (then["revision"], str(granted.seq + 1)):
        past = client.post("/v1/check", json={**CHECK, "as_of": moment})
        assert past.status_code == 200, past.text
        answer = past.json()
        assert answer["decision"] == then["decision"]
        assert answer["revision"] == then["revision"] and past.headers["privilog-revision"] == then["revision"]
        assert answer["as_of"]["seq"] == granted.seq + 1 and answer["as_of"]["recorded"] is True
        assert answer["as_of"]["policy"] == "cdap" and answer["as_of"]["version"] == granted.policy_version
    now = client.post("/v1/check", json={**CHECK, "as_of": revoked.token}).json()
    assert now["decision"] == "deny" and parse_revision(now["revision"]).seq == revoked.seq
    batch = client.post("/v1/check/batch", json={"checks": [CHECK, CHECK], "as_of": then["revision"]}).json()
    assert batch["decisions"] == ["allow", "allow"] and batch["revision"] == then["revision"]
    why = client.post("/v1/why", json={**CHECK, "as_of": then["revision"]}).json()
    assert why["decision"] == "allow" and why["as_of"]["seq"] == granted.seq + 1
    listed = client.post("/v1/list", json={**listing, "as_of": then["revision"]}).json()
    assert listed["visible"] == listed_then["visible"] and listed["revision"] == then["revision"]
    gone = client.post("/v1/list", json={**listing, "as_of": revoked.token}).json()
    assert gone["visible"] == [] and client.post("/v1/list", json=listing).json()["visible"] == []
    before = client.post("/v1/check", json={**CHECK, "as_of": str(granted.seq - 1)}).json()
    assert before["decision"] == "deny" and before["as_of"]["seq"] == granted.seq - 1
