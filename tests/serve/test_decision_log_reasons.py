"""A decision log's lines carry their revision and their reason, chained by HMAC: a real server over a SQLite
store, decisions made while grants and memberships change through the API, each line read back and held
against the store's own audit log."""

from __future__ import annotations

import json
import re

import pytest

from privilog.serve.decisionlog import KEY_NAME, mac_of, split_mac
from privilog.store import open_store

READ = {"principal": "user:alice", "operation": "dataset.read", "entity": "dataset:ns1.ds"}
WRITE = {**READ, "operation": "dataset.write"}
CDAP = "/v3/security/authorization"


def change(client, kind, *items):
    response = client.post("/v1/changes", json={"kind": kind, "items": [list(i) for i in items]})
    assert response.status_code == 200, response.text
    return response.json()["change"]


def lines(path):
    return [json.loads(text) for text in path.read_text().splitlines()]


def test_each_line_names_its_revision_and_the_grant_log_entry_behind_an_allow(setup, tmp_path):
    log = tmp_path / "decisions.log"
    server = setup.serve("--decision-log", str(log))
    root = server.client(setup.root)
    assert root.post("/v1/check", json=READ).json()["decision"] == "deny"
    direct = change(root, "grant", ("user:alice", "READ", "dataset:ns1.ds"))
    assert root.post("/v1/check", json=READ).json()["decision"] == "allow"
    group = change(root, "grant", ("group:eng", "WRITE", "dataset:ns1.ds"))
    member = change(root, "member.add", ("user:alice", "group:eng"))
    batch = root.post("/v1/check/batch", json={"checks": [READ, WRITE, {**READ, "principal": "user:bob"}]})
    assert batch.json()["decisions"] == ["allow", "allow", "deny"]
    revoked = change(root, "revoke", ("user:alice", "READ", "dataset:ns1.ds"))
    assert root.post("/v1/check", json={**READ, "explain": True}).json()["decision"] == "deny"
    # a question about the past is answered, and not logged: nothing enforces it, its revision is not the server's
    past = root.post("/v1/check", json={**READ, "as_of": direct["revision"]}).json()
    assert (past["decision"], past["revision"]) == ("allow", direct["revision"])
    enforce = {"entity": {"entity": "DATASET", "namespace": "ns1", "dataset": "ds"},
               "principal": {"name": "alice", "type": "USER"}, "actions": ["WRITE", "ADMIN"]}
    assert root.post(f"{CDAP}/enforce", json=enforce).status_code == 403
    setup.servers[0].stop()

    got = lines(log)
    assert [(g["endpoint"], g["result"]) for g in got] == [
        ("check", "deny"), ("check", "allow"),
        ("check/batch", "allow"), ("check/batch", "allow"), ("check/batch", "deny"),
        ("check", "deny"), ("enforce", "deny"),
    ]
    # the revision each was decided at: the log entry of the last change acknowledged before it
    assert [g["seq"] for g in got] == [direct["seq"] - 1, direct["seq"], *[member["seq"]] * 3, *[revoked["seq"]] * 2]
    assert got[1]["revision"] == direct["revision"] and got[-1]["revision"] == revoked["revision"]
    # an allow names the grant that met each requirement by the log entry that made it, as the store's audit says
    with setup.store() as store:
        made = {tuple(item): entry.seq for entry in store.audit() if entry.kind == "grant" for item in entry.items}
        key = store.secret(KEY_NAME).encode()
    assert made[("user:alice", "READ", "dataset:ns1.ds")] == direct["seq"]
    assert got[1]["reason"] == {
        "allowed_by": [{"requirement": "dataset.read#1", "text": "READ",
                        "grant": ["user:alice", "READ", "dataset:ns1.ds"], "entry": direct["seq"]}],
        "bypass": [],
    }
    through_group = got[3]["reason"]["allowed_by"][0]
    assert through_group["grant"] == ["group:eng", "WRITE", "dataset:ns1.ds"]
    assert through_group["entry"] == made[("group:eng", "WRITE", "dataset:ns1.ds")] == group["seq"]
    # a deny names what is unmet; enforce names the actions missing
    assert got[0]["reason"] == {"unmet": [{"requirement": "dataset.read#1", "text": "READ", "lacking": []}],
                                "denied_by": []}
    assert got[5]["reason"]["unmet"][0]["requirement"] == "dataset.read#1"
    assert got[6]["reason"] == {"missing": ["ADMIN"]}
    # the chain: one stream, n consecutive, each mac over the line and the one before, by the store's key
    assert {g["stream"] for g in got} == {got[0]["stream"]} and [g["n"] for g in got] == list(range(1, 8))
    previous = ""
    for text in log.read_text().splitlines():
        body, mac = split_mac(text)
        assert mac == json.loads(text)["mac"] == mac_of(key, previous, body)
        assert json.loads(body) == {k: v for k, v in json.loads(text).items() if k != "mac"}
        previous = mac


def test_reasons_off_keeps_the_revision_and_the_chain(setup, tmp_path):
    log = tmp_path / "decisions.log"
    server = setup.serve("--decision-log", str(log), "--decision-log-reasons", "off")
    root = server.client(setup.root)
    granted = change(root, "grant", ("user:alice", "READ", "dataset:ns1.ds"))
    assert root.post("/v1/check", json=READ).json()["decision"] == "allow"
    setup.servers[0].stop()
    (line,) = lines(log)
    assert "reason" not in line
    assert (line["seq"], line["revision"], line["n"]) == (granted["seq"], granted["revision"], 1)
    assert list(line)[-1] == "mac"
    assert len(line["mac"]) == 64


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_the_key_is_the_stores_made_once_and_kept(kind, tmp_path, request):
    url = str(tmp_path / "authz.db") if kind == "sqlite" else request.getfixturevalue("fresh_postgres_url")
    with open_store(url, ("READ",)) as store:
        key = store.secret(KEY_NAME)
        assert re.fullmatch(r"[0-9a-f]{64}", key)
        assert store.secret(KEY_NAME) == key and store.secret("another") != key
    with open_store(url, ("READ",), create=False) as again:  # another process, later: the same key
        assert again.secret(KEY_NAME) == key
