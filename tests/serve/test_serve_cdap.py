"""CDAP's authorization REST API, in CDAP's shapes, over real HTTP."""

from __future__ import annotations

BASE = "/v3/security/authorization"
DATASET = {"entity": "DATASET", "namespace": "ns1", "dataset": "ds"}
ALICE = {"name": "alice", "type": "USER"}


def test_grant_enforce_privileges_revoke(setup, server):
    root, bob = server.client(setup.root), server.client(setup.bob)
    body = {"entity": DATASET, "principal": ALICE, "actions": ["READ", "WRITE"]}
    assert root.post(f"{BASE}/privileges/grant", json=body).status_code == 200
    enforce = {"entity": DATASET, "principal": ALICE, "actions": ["READ", "WRITE"]}
    assert root.post(f"{BASE}/enforce", json=enforce).status_code == 200
    missing = root.post(f"{BASE}/enforce", json={**enforce, "actions": ["READ", "EXECUTE", "ADMIN"]})
    assert missing.status_code == 403
    assert missing.json() == {"error": "user:alice lacks EXECUTE, ADMIN on dataset:ns1.ds",
                              "missing": ["EXECUTE", "ADMIN"]}
    # a plain token may enforce (CDAP asks on behalf of its user), never grant
    assert bob.post(f"{BASE}/enforce", json=enforce).status_code == 200
    refused = bob.post(f"{BASE}/privileges/grant", json={**body, "principal": "user:bob"})
    assert refused.status_code == 403
    listed = root.get(f"{BASE}/user/alice/privileges").json()
    assert listed == [{"entity": DATASET, "action": "READ"}, {"entity": DATASET, "action": "WRITE"}]
    # through a group: enforce counts memberships
    root.post("/v1/changes", json={"kind": "member.add", "items": [["user:carol", "group:eng"]]})
    root.post(f"{BASE}/privileges/grant", json={"entity": "program:ns1.app.service.api",
                                                "principal": {"name": "eng", "type": "GROUP"}, "actions": ["EXECUTE"]})
    program = {"entity": "PROGRAM", "namespace": "ns1", "application": "app", "version": "-SNAPSHOT",
               "type": "Service", "program": "api"}
    assert root.post(f"{BASE}/enforce", json={"entity": program, "principal": "user:carol",
                                              "actions": ["EXECUTE"]}).status_code == 200
    assert root.get(f"{BASE}/group/eng/privileges").json() == [
        {"entity": {"namespace": "ns1", "application": "app", "type": "SERVICE", "program": "api",
                    "entity": "PROGRAM"}, "action": "EXECUTE"}]
    # revoke one action; a principal without actions loses all; an entity alone loses everything
    root.post(f"{BASE}/privileges/revoke", json={"entity": DATASET, "principal": ALICE, "actions": ["WRITE"]})
    assert root.get(f"{BASE}/user/alice/privileges").json() == [{"entity": DATASET, "action": "READ"}]
    root.post(f"{BASE}/privileges/grant", json={"entity": DATASET, "principal": "user:dave"})  # no actions: all
    assert len(root.get(f"{BASE}/user/dave/privileges").json()) == 4
    root.post(f"{BASE}/privileges/revoke", json={"entity": DATASET, "principal": "user:dave"})
    assert root.get(f"{BASE}/user/dave/privileges").json() == []
    root.post(f"{BASE}/privileges/grant", json={"entity": DATASET, "principal": "user:erin", "actions": ["ALL"]})
    everything = root.post(f"{BASE}/privileges/revoke", json={"entity": DATASET})
    assert everything.json()["revoked"] == 5  # alice's READ and erin's four
    assert root.get(f"{BASE}/user/alice/privileges").json() == []


def test_roles(setup, server):
    root, bob = server.client(setup.root), server.client(setup.bob)
    assert root.put(f"{BASE}/roles/ops").status_code == 200
    assert root.put(f"{BASE}/roles/ops").status_code == 409
    assert bob.put(f"{BASE}/roles/sneaky").status_code == 403
    assert root.get(f"{BASE}/roles").json() == [{"name": "ops", "type": "ROLE"}]
    assert root.put(f"{BASE}/user/alice/roles/ops").status_code == 200
    assert root.get(f"{BASE}/USER/alice/roles").json() == [{"name": "ops", "type": "ROLE"}]
    root.post(f"{BASE}/privileges/grant", json={"entity": "namespace:ns1", "principal": {"name": "ops", "type": "ROLE"},
                                                "actions": ["ADMIN"]})
    enforce = {"entity": {"entity": "NAMESPACE", "namespace": "ns1"}, "principal": ALICE, "actions": ["ADMIN"]}
    assert root.post(f"{BASE}/enforce", json=enforce).status_code == 200
    assert root.delete(f"{BASE}/user/alice/roles/ops").status_code == 200
    assert root.get(f"{BASE}/user/alice/roles").json() == []
    assert root.post(f"{BASE}/enforce", json=enforce).status_code == 403
    assert root.delete(f"{BASE}/roles/ops").status_code == 200
    assert root.delete(f"{BASE}/roles/ops").status_code == 404
    assert root.get(f"{BASE}/role/ops/privileges").json() == []
    assert root.put(f"{BASE}/roles/bad name").status_code == 400
    assert root.get(f"{BASE}/robot/x/roles").status_code == 400


def test_is_visible(setup, server):
    root = server.client(setup.root)
    root.post(f"{BASE}/privileges/grant", json={"entity": DATASET, "principal": ALICE, "actions": ["READ"]})
    # a namespace shows through what exists inside it
    root.post("/v1/changes", json={"kind": "entity.add", "items": ["dataset:ns1.ds"]})
    entities = [DATASET, "dataset:ns1.other", {"entity": "NAMESPACE", "namespace": "ns1"}, "namespace:ns2",
                "schedule:ns1.app.nightly"]
    shown = root.post(f"{BASE}/isVisible", json={"principal": ALICE, "entities": entities}).json()
    assert shown == {"visible": [DATASET, {"entity": "NAMESPACE", "namespace": "ns1"}]}


def test_bad_cdap_bodies(setup, server):
    root = server.client(setup.root)
    cases = [
        ({"entity": {"entity": "TABLE", "name": "x"}, "principal": ALICE}, "an entity type such as DATASET"),
        ({"entity": {**DATASET, "colour": "red"}, "principal": ALICE}, "no field `\"colour\"`"),
        ({"entity": {"entity": "DATASET", "namespace": "ns1"}, "principal": ALICE}, "body.entity.dataset is a string"),
        ({"entity": DATASET, "principal": {"name": "alice", "type": "ROBOT"}}, "USER, GROUP or ROLE"),
        ({"entity": DATASET, "principal": ALICE, "actions": ["FLY"]}, "unknown action `FLY`"),
        ({"entity": "dataset:ns1", "principal": ALICE}, "malformed dataset id"),
        ({"entity": DATASET, "actions": ["READ"]}, "needs body.principal"),
    ]
    for body, message in cases:
        response = root.post(f"{BASE}/privileges/revoke", json=body)
        assert response.status_code == 400 and message in response.json()["error"], (body, response.text)
    with setup.store() as store:
        assert not [c for c in store.changes_since(0) if c.kind == "revoke"]
