"""GET /v1/watch over real HTTP on 127.0.0.1: a cache of decisions that follows the feed of changes.

A client caches decisions of /v1/check, long-polls /v1/watch from the revision it last saw, and drops
what each change's scope covers (docs/caches.md). A revoke made through the API, and one made by
`privilog revoke --store` in another process (which the server follows), each end a pending poll with
a scope covering the access revoked; after it has seen a change the cache never answers allow for
what was revoked.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx

from privilog.store.affected import Affected
from privilog.store.revision import Revision, parse_revision

ROOT = Path(__file__).resolve().parents[2]

POLL = 30  # seconds a test's long poll may wait: ended by a change long before


class Cache:
    """A client's cache of decisions, kept by the feed (the recipe of docs/caches.md)."""

    def __init__(self, client: httpx.Client, watcher: httpx.Client):
        self.client, self.watcher = client, watcher
        self.answers: dict[str, tuple[dict[str, Any], bool]] = {}
        start = watcher.get("/v1/watch").json()  # where to start: the revision now (and drop all)
        assert start["reset"] is True and start["changes"] == []
        self.revision = start["revision"]
        self.seen: list[dict[str, Any]] = []

    def allows(self, principal: str, operation: str, entity: str, args: dict[str, Any] | None = None) -> bool:
        request = {"principal": principal, "operation": operation, "entity": entity, "args": args or {}}
        key = json.dumps(request, sort_keys=True)
        if key not in self.answers:
            answer = self.client.post("/v1/check", json=request)
            assert answer.status_code == 200, answer.text
            self.answers[key] = (request, answer.json()["decision"] == "allow")
        return self.answers[key][1]

    def follow(self, timeout: float = POLL) -> list[dict[str, Any]]:
        """One long poll; what it answers applied to the cache."""
        answer = self.watcher.get("/v1/watch", params={"since": self.revision, "timeout": timeout},
                                  timeout=timeout + 30)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        if body["reset"]:
            self.answers.clear()
        for change in body["changes"]:
            scope = change["affected"]
            affected = Affected(
                None if scope["principals"] is None else frozenset(scope["principals"]),
                None if scope["entities"] is None else frozenset(scope["entities"]),
            )
            for key, (request, _) in list(self.answers.items()):
                if affected.covers(request["principal"], request["operation"], request["entity"], request["args"]):
                    del self.answers[key]
        self.revision = body["revision"]
        self.seen.extend(body["changes"])
        return list(body["changes"])


def _in_thread(job: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(job()), daemon=True)
    thread.start()
    return thread, out


def _change(client: httpx.Client, kind: str, *items: Any) -> dict[str, Any]:
    response = client.post("/v1/changes", json={"kind": kind, "items": [list(i) if isinstance(i, tuple) else i for i in items]})
    assert response.status_code == 200, response.text
    change: dict[str, Any] = response.json()["change"]
    return change


def test_a_cache_following_the_feed_drops_what_a_revoke_takes(setup: Any, server: Any) -> None:
    root = server.client(setup.root)
    _change(root, "grant", ("user:alice", "READ", "dataset:ns1.orders"), ("group:eng", "WRITE", "dataset:ns1.orders"),
            ("user:bob", "READ", "dataset:ns1.orders"), ("user:alice", "READ", "dataset:ns1.clicks"))
    _change(root, "member.add", ("user:alice", "group:eng"))
    cache = Cache(server.client(setup.bob), server.client(setup.bob, fresh=True))  # a plain user's token will do
    asked = [
        ("user:alice", "dataset.read", "dataset:ns1.orders"),
        ("user:alice", "dataset.write", "dataset:ns1.orders"),
        ("user:alice", "namespace.get", "namespace:ns1"),  # `any on self or within`: met by the grants inside
        ("user:alice", "dataset.read", "dataset:ns1.clicks"),
        ("user:bob", "dataset.read", "dataset:ns1.orders"),
    ]
    assert [cache.allows(*a) for a in asked] == [True, True, True, True, True]

    # a revoke through the API ends a pending long poll, with a scope covering the access revoked
    poll, polled = _in_thread(cache.follow)
    revoked = _change(root, "revoke", ("user:alice", "READ", "dataset:ns1.orders"))
    poll.join(POLL + 30)
    assert not poll.is_alive()
    changes = polled[0]
    assert [(c["seq"], c["kind"]) for c in changes] == [(revoked["seq"], "revoke")]
    assert changes[0]["revision"] == revoked["revision"]
    assert changes[0]["affected"] == {"principals": ["user:alice"], "entities": ["dataset:ns1.orders"]}
    assert cache.revision == revoked["revision"]
    # dropped: alice's answers about the dataset and what encloses it; kept: the rest
    assert [json.loads(k)["entity"] for k in cache.answers] == ["dataset:ns1.clicks", "dataset:ns1.orders"]
    assert cache.allows("user:alice", "dataset.read", "dataset:ns1.orders") is False
    assert cache.allows("user:alice", "namespace.get", "namespace:ns1") is True  # still, by the other grants

    # a revoke by the command line, in another process on the same store: the server follows it
    poll, polled = _in_thread(cache.follow)
    done = subprocess.run(
        [sys.executable, "-m", "privilog", "revoke", "group:eng", "WRITE", "dataset:ns1.orders",
         "--store", str(setup.path), "--as", "user:root"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    poll.join(POLL + 30)
    assert not poll.is_alive()
    changes = polled[0]
    assert [c["kind"] for c in changes] == ["revoke"]
    # a group's revoke reaches its members
    assert changes[0]["affected"] == {"principals": ["group:eng", "user:alice"], "entities": ["dataset:ns1.orders"]}
    assert cache.allows("user:alice", "dataset.write", "dataset:ns1.orders") is False

    # the cache agrees with the server on everything it holds: no revoked allow is served
    for a in asked:
        fresh = root.post("/v1/check", json=dict(zip(("principal", "operation", "entity"), a, strict=True)))
        assert cache.allows(*a) == (fresh.json()["decision"] == "allow"), a

    # nothing new: an empty answer after the timeout, from the same revision, and no reset
    quiet = cache.watcher.get("/v1/watch", params={"since": cache.revision, "timeout": 0}).json()
    assert quiet == {"revision": cache.revision, "changes": [], "reset": False}


def test_a_membership_an_entity_and_arguments(setup: Any, server: Any) -> None:
    root = server.client(setup.root)
    _change(root, "grant", ("group:all", "READ", "dataset:ns1.sales_*"))
    start = root.get("/v1/watch").json()["revision"]
    _change(root, "member.add", ("user:bob", "group:eng"))  # a group that holds nothing: no decision changes
    _change(root, "member.add", ("group:eng", "group:all"), ("user:ann", "group:eng"))
    _change(root, "entity.add", "dataset:ns1.orders")
    body = root.get("/v1/watch", params={"since": start, "timeout": 0}).json()
    member, entity = body["changes"]
    # the members of the member, and what the group (and the groups it is in) holds: a pattern's namespace
    assert member["affected"] == {"principals": ["group:eng", "user:ann", "user:bob"], "entities": ["namespace:ns1"]}
    assert entity["affected"] == {"principals": None, "entities": ["dataset:ns1.orders"]}
    # a deploy's artifact: a revoke on the artifact drops the cached deploy that names it
    scope = Affected(frozenset({"user:ann"}), frozenset({"artifact:ns1.etl"}))
    assert scope.covers("user:ann", "application.deploy", "application:ns1.app", {"artifact": "artifact:ns1.etl"})


def test_what_watch_refuses_and_when_it_resets(setup: Any, server: Any) -> None:
    bob = server.client(setup.bob)
    now = bob.get("/v1/watch").json()["revision"]
    revision = parse_revision(now)
    cases = [
        ({"since": "plr1_junk"}, 400, "since: `plr1_junk` is not a revision"),
        ({"since": now, "timeout": "61"}, 400, "timeout is a number of seconds from 0 to 60"),
        ({"since": now, "timeout": "soon"}, 400, "timeout is a number of seconds"),
        ({"since": now, "colour": "red"}, 400, "no query parameter"),
        ({"since": Revision(revision.seq + 100, revision.policy_seq, revision.policy_version).token}, 409,
         "the store's log ends at"),
    ]
    for params, status, text in cases:
        answer = bob.get("/v1/watch", params=params)
        assert answer.status_code == status, (params, answer.text)
        assert text in answer.json()["error"], answer.text
    assert server.client().get("/v1/watch").status_code == 401
    # from before this server started, or under another policy: it cannot say what changed, so: reset
    for since in (Revision(0, 0, revision.policy_version), Revision(revision.seq, revision.policy_seq, "0" * 16)):
        answer = bob.get("/v1/watch", params={"since": since.token, "timeout": 0}).json()
        assert answer == {"revision": now, "changes": [], "reset": True}
    paths = bob.get("/openapi.json").json()["paths"]
    assert "409" in paths["/v1/watch"]["get"]["responses"]


def test_a_new_policy_ends_a_pending_poll_with_a_reset(setup: Any, tmp_path: Path) -> None:
    policy = tmp_path / "mine.policy"
    text = (ROOT / "rules" / "cdap.policy").read_text(encoding="utf-8")
    policy.write_text(text, encoding="utf-8")
    server = setup.serve("--policy", str(policy))
    root = server.client(setup.root)
    since = root.get("/v1/watch").json()["revision"]
    poll, polled = _in_thread(
        lambda: server.client(setup.bob, fresh=True).get("/v1/watch", params={"since": since}, timeout=POLL + 30)
    )
    policy.write_text(text.replace("  read requires READ\n  write", "  read requires WRITE\n  write", 1), encoding="utf-8")
    assert root.post("/v1/admin/reload").status_code == 200
    poll.join(POLL + 30)
    assert not poll.is_alive()
    assert polled[0].status_code == 200, polled[0].text  # an error's body says which, if it ever is one
    answer = polled[0].json()
    assert answer["reset"] is True and answer["changes"] == []
    assert parse_revision(answer["revision"]).policy_version != parse_revision(since).policy_version
