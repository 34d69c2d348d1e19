"""Attacks on the server's changes (issue 33), each against a real server over 127.0.0.1.

1. a kerberos principal with `*` taken as a literal by a plain-id path and as a wildcard by the engine;
2. a dropped role that kept its admin row, so whoever joins a role of that name later is an admin;
3. a user made a member of a user (an admin "through" root);
4. CDAP's revoke-everything-on-an-entity deciding what to revoke from a stale view;
5. a refused change logged whole (10,000 items each time);
6. a change refused for one malformed item missing from the audit log.
"""

from __future__ import annotations

BASE = "/v3/security/authorization"
WILD = "kerberosprincipal:svc*@EXAMPLE.COM"
SVCROOT = "kerberosprincipal:svcroot@EXAMPLE.COM"


def _audit(client, **params) -> list[dict]:
    answer = client.get("/v1/audit", params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()["changes"]


def _one_line_error(answer) -> str:
    error = answer.json()["error"]
    assert "\n" not in error and "Traceback" not in error
    return error


# ---- 1. a wildcard kerberos principal is a pattern, never a literal ------------------------------


def test_a_wildcard_kerberos_principal_is_refused_where_a_plain_id_is_asked(setup, server):
    root = server.client(setup.root)
    for entity in ({"entity": "KERBEROSPRINCIPAL", "principal": "svc*@EXAMPLE.COM"}, WILD,
                   "kerberosprincipal:svc?oot@EXAMPLE.COM"):
        answer = root.post(f"{BASE}/privileges/grant",
                           json={"entity": entity, "principal": "user:bob", "actions": ["ADMIN"]})
        assert answer.status_code == 400, answer.text
        assert "wildcard" in _one_line_error(answer)
        revoked = root.post(f"{BASE}/privileges/revoke", json={"entity": entity})
        assert revoked.status_code == 400, revoked.text
    enforce = {"entity": SVCROOT, "principal": "user:bob", "actions": ["ADMIN"]}
    assert root.post(f"{BASE}/enforce", json=enforce).status_code == 403
    assert root.get(f"{BASE}/user/bob/privileges").json() == []
    # every other path that names one entity refuses it too: check, enforce, isVisible, entity.add
    check = root.post("/v1/check", json={"principal": "user:bob", "operation": "kerberosprincipal.admin",
                                         "entity": WILD})
    assert check.status_code == 400, check.text
    owner = root.post("/v1/check", json={"principal": "user:bob", "operation": "namespace.create",
                                         "entity": "namespace:ns9", "args": {"owner": WILD}})
    assert owner.status_code == 400, owner.text
    assert root.post(f"{BASE}/enforce", json={**enforce, "entity": WILD}).status_code == 400
    assert root.post(f"{BASE}/isVisible", json={"principal": "user:bob", "entities": [WILD]}).status_code == 400
    added = root.post("/v1/changes", json={"kind": "entity.add", "items": [WILD]})
    assert added.status_code == 400 and "wildcard" in _one_line_error(added)
    # a grant of privilog's own API takes patterns: there it is a wildcard, and the engine agrees
    granted = root.post("/v1/changes", json={"kind": "grant", "items": [["user:alice", "ADMIN", WILD]]})
    assert granted.status_code == 200, granted.text
    # (enforce reads `holds`, whose pattern rows are for the entities the world lists)
    assert root.post("/v1/changes", json={"kind": "entity.add", "items": [SVCROOT]}).status_code == 200
    assert root.post(f"{BASE}/enforce", json={**enforce, "principal": "user:alice"}).status_code == 200
    assert root.post(f"{BASE}/enforce", json=enforce).status_code == 403


# ---- 2. a dropped role takes its admin row with it -----------------------------------------------


def test_a_role_dropped_and_created_again_makes_nobody_an_admin(setup, server):
    root, bob = server.client(setup.root), server.client(setup.bob)
    assert root.put(f"{BASE}/roles/ops").status_code == 200
    assert root.post("/v1/changes", json={"kind": "admin.add", "items": ["role:ops"]}).status_code == 200
    assert root.delete(f"{BASE}/roles/ops").status_code == 200
    assert root.put(f"{BASE}/roles/ops").status_code == 200
    assert root.put(f"{BASE}/user/bob/roles/ops").status_code == 200  # bob plays mallory
    refused = bob.post("/v1/changes", json={"kind": "admin.add", "items": ["user:bob"]})
    assert refused.status_code == 403, refused.text
    assert bob.get("/v1/audit").status_code == 403
    # the same through privilog's own API, and for an admin role that was never created
    assert root.post("/v1/changes", json={"kind": "admin.add", "items": ["role:ghost"]}).status_code == 200
    assert root.post("/v1/changes", json={"kind": "role.drop", "items": ["role:ghost"]}).status_code == 200
    assert root.put(f"{BASE}/user/bob/roles/ghost").status_code == 200
    assert bob.post(f"{BASE}/privileges/grant", json={"entity": "namespace:ns1", "principal": "user:bob"}
                    ).status_code == 403


def test_dropping_the_role_of_the_last_admin_is_refused(setup, server):
    root = server.client(setup.root)
    changes = [("admin.add", ["role:solo"]), ("member.add", [["user:root", "role:solo"]]),
               ("admin.remove", ["user:root"])]
    for kind, items in changes:
        assert root.post("/v1/changes", json={"kind": kind, "items": items}).status_code == 200
    refused = root.delete(f"{BASE}/roles/solo")
    assert refused.status_code == 400
    assert "would leave no authorization admin" in _one_line_error(refused)
    # root is still an admin, through the role
    assert root.post("/v1/changes", json={"kind": "admin.add", "items": ["user:root"]}).status_code == 200


# ---- 3. only groups and roles have members -------------------------------------------------------


def test_a_user_cannot_be_made_a_member_of_a_user(setup, server):
    root = server.client(setup.root)
    before = _audit(root)
    asked = [["user:ann", "group:eng"], ["user:eve", "user:root"]]
    refused = root.post("/v1/changes", json={"kind": "member.add", "items": asked})
    assert refused.status_code == 400, refused.text
    assert _one_line_error(refused) == (
        "`user:eve` cannot be a member of `user:root`: only a group or a role has members (group:NAME, role:NAME)"
    )
    for principal in ("user:eve", "user:ann"):  # nothing changed: not eve, not the good item before it
        assert root.get(f"{BASE}/user/{principal.partition(':')[2]}/roles").json() == []
    assert root.put(f"{BASE}/user/eve/roles/ops").status_code == 200  # a role is fine
    by_role = root.put(f"{BASE}/user/eve/roles/root")
    assert by_role.status_code == 200  # CDAP's path names a role: role:root, not user:root
    # eve holds nothing of root's, and is no admin
    check = root.post("/v1/check", json={"principal": "user:eve", "operation": "namespace.update",
                                         "entity": "namespace:ns1"})
    assert check.json()["decision"] == "deny"
    grant = root.post("/v1/changes", json={"kind": "grant", "items": [["user:root", "ADMIN", "namespace:ns1"]]})
    assert grant.status_code == 200
    assert root.post(f"{BASE}/enforce", json={"entity": "namespace:ns1", "principal": "user:eve",
                                              "actions": ["ADMIN"]}).status_code == 403
    applied = [c for c in _audit(root) if c not in before and c["outcome"] == "applied"]
    assert all(c["kind"] != "member.add" or all(i[1].startswith("role:") for i in c["items"]) for c in applied)


# ---- 4. revoke-everything decides what to revoke in the store's transaction ---------------------


def test_revoke_everything_takes_a_grant_another_process_made_just_before(setup, server):
    root = server.client(setup.root)
    dataset = {"entity": "DATASET", "namespace": "ns1", "dataset": "ds"}
    with setup.store() as store:  # another process on the same SQLite file: the server has not seen it yet
        for round_ in range(20):
            store.change("user:root", "grant", [[f"user:u{round_}", "READ", "dataset:ns1.ds"]])
            answer = root.post(f"{BASE}/privileges/revoke", json={"entity": dataset})
            assert answer.status_code == 200, answer.text
            assert answer.json()["revoked"] == 1, f"round {round_}: {answer.text}"
            world, _ = store.snapshot()
            assert world.grants == set(), f"round {round_}: {world.grants} survived"
    entry = _audit(root, entity="dataset:ns1.ds")[-1]
    assert entry["kind"] == "revoke.entity" and entry["asked"] == ["dataset:ns1.ds"]
    assert entry["items"] == [["user:u19", "READ", "dataset:ns1.ds"]] and entry["outcome"] == "applied"
    # the server's engine agrees with the store
    assert root.get(f"{BASE}/user/u19/privileges").json() == []
    enforce = {"entity": dataset, "principal": "user:u19", "actions": ["READ"]}
    assert root.post(f"{BASE}/enforce", json=enforce).status_code == 403
    # a plain token may not; nothing on the entity revokes nothing
    assert server.client(setup.bob).post(f"{BASE}/privileges/revoke", json={"entity": dataset}).status_code == 403
    assert root.post(f"{BASE}/privileges/revoke", json={"entity": dataset}).json()["revoked"] == 0


# ---- 5. a refused change is logged bounded ---------------------------------------------------------


def test_a_refused_change_of_ten_thousand_items_is_logged_bounded(setup, server):
    import hashlib
    import json

    root, bob = server.client(setup.root), server.client(setup.bob)
    asked = [[f"user:u{n}", "READ", f"dataset:ns1.d{n}"] for n in range(10_000)]
    for _ in range(3):
        assert bob.post("/v1/changes", json={"kind": "grant", "items": asked}).status_code == 403
    entries = [c for c in _audit(root, principal="user:bob") if c["actor"] == "user:bob"]
    assert len(entries) == 3
    digest = hashlib.sha256(json.dumps(asked).encode()).hexdigest()[:16]
    for entry in entries:
        assert entry["asked"] == asked[:20] and entry["items"] == []
        assert entry["outcome"] == (
            f"refused: user:bob is not an authorization admin (10000 items asked, the first 20 kept; sha256 {digest})"
        )
        assert len(json.dumps(entry)) < 3000
    # an applied change keeps everything
    applied = root.post("/v1/changes", json={"kind": "grant", "items": asked[:500]}).json()["change"]
    assert len(applied["asked"]) == len(applied["items"]) == 500


# ---- 6. a malformed change is in the audit log ----------------------------------------------------


def test_a_change_refused_for_one_malformed_item_is_audited(setup, server):
    root, bob = server.client(setup.root), server.client(setup.bob)
    good = [["user:alice", "READ", "dataset:ns1.ds"], ["user:carol", "WRITE", "dataset:ns1.ds"]]
    for client, actor in ((root, "user:root"), (bob, "user:bob")):  # a non-admin's too
        answer = client.post("/v1/changes", json={"kind": "grant", "items": [*good, ["user:alice", "READ", "dataset:"]]},
                             headers={"X-Request-Id": f"malformed-{actor}"})
        assert answer.status_code == 400, answer.text
        error = _one_line_error(answer)
        assert "malformed dataset id `dataset:`" in error
        (entry,) = [c for c in _audit(root) if c["request_id"] == f"malformed-{actor}"]
        assert entry["actor"] == actor and entry["kind"] == "grant" and entry["items"] == []
        assert entry["asked"] == [*good, ["user:alice", "READ", "dataset:"]]
        assert entry["outcome"] == f"refused: {error}"
    assert root.get(f"{BASE}/user/alice/privileges").json() == []  # nothing changed
    # a value of any shape is logged cut to size; the answer is the same 400 as before
    huge = {"principal": "user:" + "x" * 50_000}
    answer = root.post("/v1/changes", json={"kind": "member.add", "items": [["user:a", "group:g"], huge, "x" * 9000]},
                       headers={"X-Request-Id": "shapes"})
    assert answer.status_code == 400
    (entry,) = [c for c in _audit(root) if c["request_id"] == "shapes"]
    assert entry["asked"][0] == ["user:a", "group:g"]
    assert entry["asked"][1].startswith('{"principal": "user:xxx') and len(entry["asked"][1]) == 203
    assert entry["asked"][2] == "x" * 200 + "..."
    assert entry["outcome"].startswith("refused: an item of `member.add` is [PRINCIPAL, GROUP_OR_ROLE]")
    assert len(entry["outcome"]) < 600
    assert root.get(f"{BASE}/user/a/roles").json() == []
