"""What one caller can make another caller see through what the server keeps between requests (issue 33,
"every cache the server keeps"): the entity a create's decision assumes for its own time, the token cache,
the decision plans. Callers run at once against a real server; the one who watches must never see a change.
"""

from __future__ import annotations

import threading

import httpx

DELETE = {"principal": "user:ops", "operation": "namespace.delete", "entity": "namespace:ns1"}


def _world(server, setup) -> None:
    root = server.client(setup.root)
    for kind, items in [
        ("entity.add", ["namespace:ns1", "dataset:ns1.a"]),
        ("grant", [["user:ops", "ADMIN", "namespace:ns1"], ["user:ops", "ADMIN", "dataset:ns1.a"]]),
    ]:
        assert root.post("/v1/changes", json={"kind": kind, "items": items}).status_code == 200


def test_a_create_assumes_its_entity_for_its_own_decision_only(server, setup):
    """bob asks, as fast as he can, about creating datasets and deploying applications in ns1 (each decision
    assumes the new entity exists), in big batches decided in slices, in small ones, one by one, and in
    batches that end in a malformed check; ops's `namespace.delete` (ADMIN on every descendant) is watched
    meanwhile. A new entity leaking out of one decision would be a descendant ops has no ADMIN on: a deny."""
    _world(server, setup)
    creates = [{"principal": "user:bob", "operation": "dataset.create", "entity": f"dataset:ns1.new{i}"}
               for i in range(600)]
    deploys = [{"principal": "user:bob", "operation": "application.deploy", "entity": f"application:ns1.app{i}",
                "args": {"artifact": f"artifact:ns1.x{i}", "new_artifact": True}} for i in range(300)]
    broken = [*creates[:100], {"principal": "user:bob", "operation": "dataset.create", "entity": "dataset:ns1.z",
                               "args": {"no_such_argument": "x"}}]
    stop = threading.Event()
    seen: list[str] = []
    errors: list[str] = []

    def attack(n: int) -> None:
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {setup.bob}"}, timeout=60) as c:
            while not stop.is_set():
                for body in ({"checks": creates + deploys}, {"checks": creates[:50]}, {"checks": broken},
                             {"checks": deploys, "explain": True}):
                    answer = c.post("/v1/check/batch", json=body)
                    if answer.status_code != (400 if body["checks"] is broken else 200):
                        errors.append(answer.text)
                answer = c.post("/v1/check", json=creates[n])
                if answer.status_code != 200:
                    errors.append(answer.text)

    threads = [threading.Thread(target=attack, args=(n,), daemon=True) for n in range(2)]
    for thread in threads:
        thread.start()
    try:
        watch = server.client(setup.root)
        for _ in range(150):
            seen.append(watch.post("/v1/check", json=DELETE).json()["decision"])
            seen.extend(watch.post("/v1/check/batch", json={"checks": [DELETE] * 3}).json()["decisions"])
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=120)
    assert not errors, errors[:3]
    assert set(seen) == {"allow"}, f"{seen.count('deny')} of {len(seen)} watched decisions were denies"
    listed = watch.post("/v1/list", json={"principal": "user:ops", "type": "dataset"}).json()["visible"]
    assert listed == [{"entity": "dataset:ns1.a"}]


def test_one_callers_tokens_do_not_unseat_anothers(server, setup):
    """A caller cycling through thousands of made-up tokens (well formed, so each goes to the store) never
    makes another caller's valid token fail, nor stand for anyone else."""
    _world(server, setup)
    stop = threading.Event()
    wrong: list[int] = []

    def flood() -> None:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            n = 0
            while not stop.is_set():
                n += 1
                token = f"plg_{n:016x}_{'s' * 43}"
                status = c.post("/v1/check", json=DELETE, headers={"Authorization": f"Bearer {token}"}).status_code
                if status != 401:
                    wrong.append(status)

    thread = threading.Thread(target=flood, daemon=True)
    thread.start()
    try:
        bob = server.client(setup.bob)
        answers = [bob.post("/v1/changes", json={"kind": "grant", "items": [["user:bob", "READ", "dataset:ns1.a"]]})
                   for _ in range(5)]
        checks = [bob.post("/v1/check", json=DELETE).status_code for _ in range(300)]
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not wrong
    assert set(checks) == {200}
    assert all(a.status_code == 403 and "user:bob is not an authorization admin" in a.json()["error"]
               for a in answers)  # bob's token stands for bob, whatever else is cached
