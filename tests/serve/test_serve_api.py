"""privilog serve over real HTTP on 127.0.0.1: privilog's questions, changes, tokens, reload, metrics,
decision logs and the OpenAPI document."""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

from privilog import dsl
from privilog.serve import cdap, routes

READ = {"principal": "user:alice", "operation": "dataset.read", "entity": "dataset:ns1.ds"}


def grant(client, *grants, status=200):
    response = client.post("/v1/changes", json={"kind": "grant", "items": [list(g) for g in grants]})
    assert response.status_code == status, response.text
    return response.json()


def test_check_why_and_batch(setup, server):
    root = server.client(setup.root)
    assert root.post("/v1/check", json=READ).json()["decision"] == "deny"
    grant(root, ("user:alice", "READ", "dataset:ns1.ds"))
    answer = root.post("/v1/check", json=READ).json()
    assert answer.pop("revision").startswith("plr1_")  # the revision it was decided at: docs/consistency.md
    assert answer == {"decision": "allow", "request": {**READ, "args": {}}, "policy": "cdap"}
    # explained: the proof of an allow; the unmet requirement and the fix of a deny
    proof = root.post("/v1/check", json={**READ, "explain": True}).json()
    assert proof["requirements"][0]["witnesses"][0]["holder"] == "user:alice"
    denied = root.post("/v1/why", json={**READ, "operation": "dataset.write"}).json()
    assert denied["decision"] == "deny"
    assert denied["fixes"] == [[{"grant": {"principal": "user:alice", "action": "WRITE", "entity": "dataset:ns1.ds"}}]]
    assert denied["explanation"].startswith("DENY user:alice dataset.write dataset:ns1.ds")
    # arguments: a deploy with its artifact
    deploy = {"principal": "user:alice", "operation": "application.deploy", "entity": "application:ns1.app",
              "args": {"artifact": "artifact:ns1.etl"}}
    assert root.post("/v1/check", json=deploy).json()["decision"] == "deny"
    batch = root.post("/v1/check/batch", json={"checks": [READ, {**READ, "principal": "user:bob"}, deploy]})
    assert batch.json()["decisions"] == ["allow", "deny", "deny"]
    whole = root.post("/v1/check/batch", json={"checks": [READ], "explain": True}).json()
    assert whole["decisions"][0]["decision"] == "allow"
    # a plain user's token may ask too (about anyone)
    assert server.client(setup.bob).post("/v1/check", json=READ).json()["decision"] == "allow"


def test_bad_checks_are_400_with_one_line_and_never_allow(setup, server):
    root = server.client(setup.root)
    grant(root, ("user:alice", "READ", "dataset:ns1.ds"))
    cases = [
        ({**READ, "operation": "dataset.zap"}, "unknown operation `dataset.zap`"),
        ({**READ, "entity": "dataset:"}, "malformed dataset id"),
        ({**READ, "principal": "alice"}, "malformed principal"),
        ({**READ, "colour": "red"}, "body has no field `colour`"),
        ({**READ, "entity": 3}, "body.entity is a string, not 3"),
        ({"principal": "user:alice"}, "body needs the field `operation`"),
        ({**READ, "args": {"artifact": "artifact:ns1.a"}}, "`dataset.read` takes no arguments"),
        ([READ], "body is an object"),
    ]
    for body, message in cases:
        response = root.post("/v1/check", json=body)
        assert response.status_code == 400, (body, response.text)
        assert message in response.json()["error"], (body, response.text)
        assert "\n" not in response.json()["error"]
    bad = root.post("/v1/check/batch", json={"checks": [READ, {**READ, "operation": "dataset.zap"}]})
    assert bad.status_code == 400 and bad.json()["error"].startswith("body.checks[1]: unknown operation")
    too_many = root.post("/v1/check/batch", json={"checks": [READ] * 10_001})
    assert too_many.status_code == 413 and "the limit is 10000" in too_many.json()["error"]
    for raw, message in [(b"{", "malformed JSON"), (b"", "the body is empty"), (b"\xff\xfe", "not UTF-8"),
                         (b"[" * 100_000, "malformed JSON"), (b'{"principal": NaN}', "NaN is not a JSON number")]:
        response = root.post("/v1/check", content=raw)
        assert response.status_code == 400 and message in response.json()["error"], (raw[:10], response.text)
    huge = root.post("/v1/check", content=b" " * (2 << 20))
    assert huge.status_code == 413


def test_list(setup, server):
    root = server.client(setup.root)
    root.post("/v1/changes", json={"kind": "entity.add", "items": ["dataset:ns1.ds", "dataset:ns1.other"]})
    grant(root, ("user:alice", "READ", "dataset:ns1.ds"))
    shown = root.post("/v1/list", json={"principal": "user:alice", "type": "dataset", "in": "namespace:ns1"}).json()
    assert shown.pop("revision").startswith("plr1_")
    assert shown == {"principal": "user:alice", "in": "namespace:ns1", "visible": [{"entity": "dataset:ns1.ds"}]}
    every = root.post("/v1/list", json={"principal": "user:alice", "because": True}).json()["visible"]
    assert {v["entity"] for v in every} == {"namespace:ns1", "dataset:ns1.ds"}
    assert all(v["because"]["action"] == "READ" for v in every)
    bad = root.post("/v1/list", json={"principal": "user:alice", "type": "table"})
    assert bad.status_code == 400 and "unknown entity type `table`" in bad.json()["error"]


def test_tokens_401_403_and_audit(setup, server):
    anonymous, bob, root = server.client(), server.client(setup.bob), server.client(setup.root)
    response = anonymous.post("/v1/check", json=READ)
    assert response.status_code == 401 and response.headers["www-authenticate"].startswith("Bearer")
    for token in ("nonsense", "plg_0123456789abcdef_forged", setup.root + "x"):
        response = server.client(token).post("/v1/check", json=READ)
        assert response.status_code == 401 and "invalid_token" in response.headers["www-authenticate"]
    assert server.client().post("/v1/check", json=READ, headers={"Authorization": "Basic abc"}).status_code == 401
    # a non-admin's change: 403, refused in the store and audited with the request id
    response = bob.post("/v1/changes", json={"kind": "grant", "items": [["user:bob", "ADMIN", "namespace:ns1"]]},
                        headers={"X-Request-Id": "bob-tries-1"})
    assert response.status_code == 403 and "not an authorization admin" in response.json()["error"]
    assert response.headers["x-request-id"] == "bob-tries-1"
    assert bob.get("/v1/audit").status_code == 403
    assert bob.post("/v1/admin/reload").status_code == 403
    entries = root.get("/v1/audit", params={"principal": "user:bob"}).json()["changes"]
    refused = [e for e in entries if e["request_id"] == "bob-tries-1"]
    assert refused and refused[0]["outcome"].startswith("refused: user:bob is not an authorization admin")
    assert refused[0]["actor"] == "user:bob" and refused[0]["asked"] == [["user:bob", "ADMIN", "namespace:ns1"]]
    # an admin's change: audited with who, when, what and the request id
    grant(root, ("user:bob", "READ", "dataset:ns1.ds"))
    last = root.get("/v1/audit", params={"limit": "1"}).json()["changes"][-1]
    assert last["actor"] == "user:root" and last["kind"] == "grant" and last["at"] and last["request_id"]
    assert root.post("/v1/changes", json={"kind": "token.revoke", "items": ["abcdefgh"]}).status_code == 400
    # a revoked token stops working within about a second
    with setup.store() as store:
        (bob_token,) = [t.token_id for t in store.tokens() if t.principal == "user:bob"]
        store.revoke_token(bob_token, "local:test")
    deadline = time.monotonic() + 10
    while bob.post("/v1/check", json=READ).status_code != 401:
        assert time.monotonic() < deadline, "a revoked token kept working"
        time.sleep(0.05)


def test_request_ids_health_ready_and_errors(setup, server):
    root = server.client(setup.root)
    response = root.post("/v1/check", json=READ, headers={"X-Request-Id": "abc-123"})
    assert response.headers["x-request-id"] == "abc-123"
    made = root.post("/v1/check", json=READ, headers={"X-Request-Id": b"no spaces allowed" + b"\xe9"})
    assert re.fullmatch(r"[0-9a-f]{32}", made.headers["x-request-id"])
    assert server.client().get("/health").json() == {"status": "ok"}
    assert server.client().get("/ready").json()["status"] == "ready"
    assert root.get("/nowhere").status_code == 404 and root.get("/nowhere").json()["error"]
    assert root.delete("/v1/check").status_code == 405


def test_metrics_are_prometheus_text(setup, server):
    root = server.client(setup.root)
    grant(root, ("user:alice", "READ", "dataset:ns1.ds"))
    root.post("/v1/check", json=READ)
    root.post("/v1/check", json={**READ, "principal": "user:bob"})
    assert server.client().get("/metrics").status_code == 401
    text = root.get("/metrics").text
    sample = re.compile(r'[a-z_]+(\{([a-z_]+="[^"]*",?)*\})? [-+0-9.eE]+|[-+]?inf|nan')
    for line in text.splitlines():
        assert line.startswith("# HELP ") or line.startswith("# TYPE ") or sample.fullmatch(line), line
    assert 'privilog_decisions_total{operation="dataset.read",result="allow"} 1' in text
    assert 'privilog_decisions_total{operation="dataset.read",result="deny"} 1' in text
    assert 'privilog_http_request_seconds_bucket{route="check",le="+Inf"} 2' in text
    assert "privilog_store_lag_entries 0.0" in text
    assert 'privilog_changes_total{kind="grant",outcome="applied"} 1' in text


def test_openapi_lists_every_route(setup, server):
    document = server.client().get("/openapi.json").json()
    assert document["openapi"].startswith("3.")
    listed = {(method.upper(), path) for path, item in document["paths"].items() for method in item}
    assert listed == {(r.method, r.path) for r in [*routes.ROUTES, *cdap.ROUTES]}
    assert len(listed) == 22  # GET /v1/watch among them


def test_reload_good_and_broken_policy(setup, tmp_path: Path):
    policy = tmp_path / "mine.policy"
    text = (Path(dsl.rules_dir()) / "cdap.policy").read_text()
    policy.write_text(text)
    server = setup.serve("--policy", str(policy))
    root = server.client(setup.root)
    grant(root, ("user:alice", "WRITE", "dataset:ns1.ds"))
    assert root.post("/v1/check", json=READ).json()["decision"] == "deny"
    version = server.client().get("/ready").json()["version"]
    policy.write_text(text.replace("  read requires READ\n  write", "  read requires WRITE\n  write", 1))
    reloaded = root.post("/v1/admin/reload")
    assert reloaded.status_code == 200 and reloaded.json()["version"] != version
    assert root.post("/v1/check", json=READ).json()["decision"] == "allow"
    # a policy that does not parse: 422, one line, and the old policy serves on
    policy.write_text(text.replace("  read requires READ", "  read requires READ on on", 1))
    broken = root.post("/v1/admin/reload")
    assert broken.status_code == 422 and "not reloaded" in broken.json()["error"]
    assert "\n" not in broken.json()["error"] and broken.json()["detail"]
    assert root.post("/v1/check", json=READ).json()["decision"] == "allow"
    assert "privilog_policy_reload_failing 1.0" in root.get("/metrics").text
    # a policy that parses but does not check (an undeclared action)
    policy.write_text(text.replace("  read requires READ", "  read requires READS", 1))
    assert root.post("/v1/admin/reload").status_code == 422
    # SIGHUP: a broken policy is logged and the old one serves; a good one is taken
    server.signal(signal.SIGHUP)
    _wait(lambda: any("reload (SIGHUP)" in line and "failed" in line for line in server.log))
    assert root.post("/v1/check", json=READ).json()["decision"] == "allow"
    policy.write_text(text)
    server.signal(signal.SIGHUP)
    _wait(lambda: server.client().get("/ready").json()["version"] == version)
    assert root.post("/v1/check", json=READ).json()["decision"] == "deny"


def _wait(condition, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_decision_log(setup, tmp_path: Path):
    path = tmp_path / "decisions.jsonl"
    server = setup.serve("--decision-log", str(path))
    root = server.client(setup.root)
    grant(root, ("user:alice", "READ", "dataset:ns1.ds"))
    root.post("/v1/check", json=READ, headers={"X-Request-Id": "one"})
    root.post("/v1/check/batch", json={"checks": [READ, {**READ, "principal": "user:bob"}]},
              headers={"X-Request-Id": "two"})
    root.post("/v3/security/authorization/enforce",
              json={"principal": "user:alice", "entity": "dataset:ns1.ds", "actions": ["READ"]})
    root.post("/v1/check", json={**READ, "operation": "dataset.zap"})  # malformed: no decision, no line
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(line["request_id"], line["result"]) for line in lines[:3]] == [("one", "allow"), ("two", "allow"),
                                                                            ("two", "deny")]
    first = lines[0]
    assert first["request"] == {**READ, "args": {}} and first["caller"] == "user:root"
    assert first["policy"] == "cdap" and len(first["policy_version"]) == 16 and first["latency_us"] >= 0
    assert lines[3]["endpoint"] == "enforce" and len(lines) == 4


def test_decision_log_sample(setup, tmp_path: Path):
    path = tmp_path / "sampled.jsonl"
    server = setup.serve("--decision-log", str(path), "--decision-log-sample", "0.1")
    root = server.client(setup.root)
    root.post("/v1/check/batch", json={"checks": [READ] * 2000})
    logged = len(path.read_text().splitlines()) if path.exists() else 0
    assert 50 < logged < 400  # 200 expected; far outside this is a broken sampler
