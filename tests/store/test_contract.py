"""The store's contract, the same for SQLite and PostgreSQL: changes, admins, the audit log, tokens, bulk."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest
from privilog.engine.ids import EntityId
from privilog.engine.world import Grant, NotAnAdmin, World

from privilog.store import StoreError, open_store
from privilog.store.sql import SqlStore


def grants(store: SqlStore) -> list[tuple[str, str, str]]:
    world, _ = store.snapshot()
    return sorted((g.principal, g.action, str(g.entity)) for g in world.grants)


def test_a_grant_is_applied_logged_and_in_the_snapshot(store: SqlStore) -> None:
    entry = store.change("user:root", "grant", [["user:alice", "READ", "dataset:ns1.orders"]], "req-1")
    assert entry.applied and entry.seq == 2 and entry.request_id == "req-1"
    assert entry.items == (("user:alice", "READ", "dataset:ns1.orders"),)
    again = store.change("user:root", "grant", [["user:alice", "READ", "dataset:ns1.orders"]])
    assert again.applied and again.items == () and again.asked == entry.asked  # nothing new
    assert grants(store) == [("user:alice", "READ", "dataset:ns1.orders")]
    assert store.last_seq() == 3
    assert [c.seq for c in store.changes_since(1)] == [2, 3]


def test_a_change_by_a_non_admin_is_refused_logged_and_changes_nothing(store: SqlStore) -> None:
    with pytest.raises(NotAnAdmin, match=r"user:eve is not an authorization admin.*admins: user:root"):
        store.change("user:eve", "grant", [["user:eve", "ADMIN", "namespace:ns1"]])
    assert grants(store) == []
    (entry,) = store.audit(principal="user:eve")
    assert entry.outcome == "refused: user:eve is not an authorization admin"
    assert entry.items == () and entry.asked == (("user:eve", "ADMIN", "namespace:ns1"),)


def test_an_admin_through_a_group_and_a_role(store: SqlStore) -> None:
    store.change("user:root", "admin.add", ["group:admins"])
    store.change("user:root", "member.add", [["group:oncall", "role:sre"], ["role:sre", "group:admins"]])
    with pytest.raises(NotAnAdmin):
        store.change("user:bob", "grant", [["user:bob", "READ", "namespace:ns1"]])
    store.change("user:root", "member.add", [["user:bob", "group:oncall"]])
    assert store.change("user:bob", "grant", [["user:bob", "READ", "namespace:ns1"]]).applied
    store.change("user:root", "role.drop", ["role:sre"])  # bob's way in was through the role
    with pytest.raises(NotAnAdmin):
        store.change("user:bob", "revoke", [["user:bob", "READ", "namespace:ns1"]])
    assert grants(store) == [("user:bob", "READ", "namespace:ns1")]


def test_the_last_admin_cannot_be_removed_and_the_refusal_is_logged(store: SqlStore) -> None:
    with pytest.raises(StoreError, match="no authorization admin"):
        store.change("user:root", "admin.remove", ["user:root"])
    assert store.snapshot()[0].admins == {"user:root"}
    last = store.changes_since(0)[-1]
    assert last.kind == "admin.remove" and last.outcome.startswith("refused: that would leave no authorization admin")
    store.change("user:root", "admin.add", ["user:ann"])
    assert store.change("user:root", "admin.remove", ["user:root"]).items == ("user:root",)
    with pytest.raises(NotAnAdmin):  # root is no longer one
        store.change("user:root", "admin.add", ["user:root"])


def test_revoke_member_remove_role_drop_and_entity_delete(store: SqlStore) -> None:
    store.change("user:root", "entity.add", ["namespace:ns1", "application:ns1.a", "program:ns1.a.service.s", "namespace:ns2"])
    store.change("user:root", "grant", [["role:r", "READ", "application:ns1.a"], ["user:u", "WRITE", "namespace:ns2"]])
    store.change("user:root", "member.add", [["user:u", "role:r"], ["user:v", "group:g"]])
    assert store.roles() == ["role:r"]
    assert store.change("user:root", "member.remove", [["user:v", "group:g"], ["user:x", "group:g"]]).items == (
        ("user:v", "group:g"),
    )
    assert store.change("user:root", "revoke", [["user:u", "WRITE", "namespace:ns2"]]).applied
    assert store.change("user:root", "role.drop", ["role:r", "role:none"]).items == ("role:r",)
    world, _ = store.snapshot()
    assert world.grants == set() and world.members == set() and store.roles() == []
    deleted = store.change("user:root", "entity.delete", ["application:ns1.a", "dataset:ns9.z"])
    assert deleted.items == ("application:ns1.a",)
    world, _ = store.snapshot()
    assert sorted(map(str, world.entities)) == ["namespace:ns1", "namespace:ns2"]  # the child went too


def test_a_malformed_change_is_refused_before_the_store(store: SqlStore) -> None:
    with pytest.raises(StoreError, match="unknown change `grnat`"):
        store.change("user:root", "grnat", [])
    assert store.last_seq() == 1  # no change of the log's kinds: not logged
    with pytest.raises(Exception, match="unknown action `RAED`"):
        store.change("user:root", "grant", [["user:a", "RAED", "namespace:ns1"]])
    (refused,) = store.changes_since(1)  # logged as refused, nothing changed (issue 33, item 6)
    assert refused.outcome.startswith("refused: unknown action `RAED`") and refused.items == ()
    assert store.snapshot()[0].grants == set()


def test_audit_filters(store: SqlStore) -> None:
    store.change("user:root", "grant", [["user:alice", "READ", "dataset:ns1.orders"]])
    first = store.changes_since(0)[-1].at
    store.change("user:root", "admin.add", ["user:alice"])
    store.change("user:alice", "grant", [["user:bob", "WRITE", "dataset:ns1.orders"]])
    store.change("user:alice", "grant", [["user:bob", "READ", "namespace:ns2"]])
    with pytest.raises(NotAnAdmin):
        store.change("user:carol", "entity.add", ["namespace:ns3"])
    assert [c.seq for c in store.audit(principal="user:alice")] == [2, 3, 4, 5]
    assert [c.seq for c in store.audit(principal="user:bob")] == [4, 5]
    assert [c.seq for c in store.audit(entity="dataset:ns1.orders")] == [2, 4]
    assert [c.seq for c in store.audit(entity="namespace:ns3")] == [6]
    assert [c.seq for c in store.audit(since=first)] == [2, 3, 4, 5, 6]
    assert [c.seq for c in store.audit(principal="user:alice", since=first, limit=2)] == [4, 5]
    assert [c.seq for c in store.audit(principal="user:root")] == [1, 2, 3]


def test_tokens(store: SqlStore) -> None:
    token_id, token = store.create_token("user:svc", "local:ops")
    assert store.token_principal(token) == "user:svc"
    assert store.token_principal(token[:-1] + ("x" if token[-1] != "x" else "y")) is None
    assert store.token_principal("not a token") is None
    (listed,) = store.tokens()
    assert listed.token_id == token_id and listed.principal == "user:svc" and listed.revoked is None
    assert store.revoke_token(token_id, "local:ops") is True
    assert store.revoke_token(token_id, "local:ops") is False
    assert store.token_principal(token) is None and store.tokens()[0].revoked is not None
    assert [c.kind for c in store.changes_since(1)] == ["token.create", "token.revoke", "token.revoke"]
    secret = token.split("_", 2)[2]  # the whole secret: token_urlsafe may itself hold `_`
    assert secret not in str([c.to_json() for c in store.changes_since(0)])  # never the secret


def small_world() -> World:
    e = EntityId.parse
    return World(
        entities={e("namespace:ns1"), e("dataset:ns1.orders"), e("application:ns1.etl")},
        grants={Grant("user:a", "READ", e("dataset:ns1.orders")), Grant("role:r", "ADMIN", e("namespace:ns1")),
                Grant("user:b", "WRITE", e("dataset:ns9.later"))},
        members={("user:a", "group:g"), ("group:g", "role:r")},
        admins={"user:root", "user:ops"},
    )


def test_import_counts_idempotence_and_snapshot_round_trip(store: SqlStore) -> None:
    world = small_world()
    counts = store.import_world(world, "local:ops")
    assert counts == {"entities": 3, "grants": 3, "members": 2, "admins": 1, "roles": 1}
    assert store.import_world(world, "local:ops") == dict.fromkeys(counts, 0)
    back, seq = store.snapshot()
    assert seq == store.last_seq() == 3
    assert (back.entities, back.grants, back.members, back.admins) == (
        world.entities, world.grants, world.members, world.admins
    )
    assert store.roles() == ["role:r"]
    assert store.changes_since(1)[0].kind == "import" and store.changes_since(1)[0].asked == (counts,)


def test_import_of_another_instance_is_refused_once_the_store_has_content(store: SqlStore) -> None:
    world = small_world()
    world.instance = "other"
    store.change("user:root", "entity.add", ["namespace:ns1"])
    with pytest.raises(StoreError, match="instance `other`"):
        store.import_world(world, "local:ops")


def raw_connection(url: str):  # type: ignore[no-untyped-def]
    if url.startswith("postgresql://"):
        return psycopg.connect(url, autocommit=True)
    return sqlite3.connect(url, isolation_level=None)


@pytest.mark.parametrize("statement", ["UPDATE changes SET actor = 'user:nobody'", "DELETE FROM changes"])
def test_the_log_is_append_only(store: SqlStore, store_url: str, statement: str) -> None:
    store.change("user:root", "grant", [["user:a", "READ", "namespace:ns1"]])
    conn = raw_connection(store_url)
    try:
        with pytest.raises((sqlite3.DatabaseError, psycopg.Error), match="append-only"):
            conn.execute(statement)
    finally:
        conn.close()
    assert [c.actor for c in store.changes_since(0)] == ["local:ops", "user:root"]


def test_a_newer_schema_is_refused(store_url: str) -> None:
    open_store(store_url).close()
    conn = raw_connection(store_url)
    try:
        conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    finally:
        conn.close()
    with pytest.raises(StoreError, match="schema is version 3, newer than this privilog's"):
        open_store(store_url)


def test_reopening_keeps_everything(store: SqlStore, store_url: str) -> None:
    store.change("user:root", "grant", [["user:a", "READ", "namespace:ns1"]])
    with open_store(store_url) as again:
        assert grants(again) == [("user:a", "READ", "namespace:ns1")] and again.last_seq() == 2


def test_wait_for_change(store: SqlStore, store_url: str) -> None:
    seq = store.last_seq()
    assert store.wait_for_change(seq - 1, timeout=0) is True
    assert store.wait_for_change(seq, timeout=0.2) is False
    with open_store(store_url) as other:
        other.change("user:root", "entity.add", ["namespace:ns1"])
    assert store.wait_for_change(seq, timeout=10) is True
