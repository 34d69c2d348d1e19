"""The store's answers to the attacks of issue 33, the same on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from privilog.dsl.ir import Policy
from privilog.engine.world import NotAnAdmin

from privilog.store import StoreError
from privilog.store.deployment import Deployment
from privilog.store.sql import SqlStore

# ---- item 2: a dropped role leaves nothing under its name ----------------------------------------


def test_a_dropped_role_is_no_longer_an_admin(store: SqlStore, policy: Policy) -> None:
    deployment = Deployment(store, policy)
    store.change("user:root", "role.create", ["role:ops"])
    store.change("user:root", "admin.add", ["role:ops"])
    store.change("user:root", "member.add", [["role:ops", "group:all"]])
    deployment.catch_up()
    assert deployment.change("user:root", "role.drop", ["role:ops"]).items == ("role:ops",)
    world, _ = store.snapshot()
    assert world.admins == {"user:root"} and world.members == set()
    assert deployment.authorizer.world.admins == {"user:root"}  # the replay agrees
    assert deployment.authorizer.world.members == set()
    store.change("user:root", "role.create", ["role:ops"])
    store.change("user:root", "member.add", [["user:mallory", "role:ops"]])
    with pytest.raises(NotAnAdmin):
        store.change("user:mallory", "admin.add", ["user:mallory"])
    # an admin role never created (admin.add does not create it) is dropped all the same
    store.change("user:root", "admin.add", ["role:ghost"])
    assert store.change("user:root", "role.drop", ["role:ghost"]).items == ("role:ghost",)
    assert store.snapshot()[0].admins == {"user:root"}


def test_dropping_the_role_of_the_last_admin_is_refused(store: SqlStore, policy: Policy) -> None:
    store.change("user:root", "admin.add", ["role:solo"])
    store.change("user:root", "member.add", [["user:root", "role:solo"]])
    store.change("user:root", "admin.remove", ["user:root"])  # root is an admin through role:solo only
    with pytest.raises(StoreError, match="dropping role:solo would leave no authorization admin; add another admin"):
        store.change("user:root", "role.drop", ["role:solo"])
    world, _ = store.snapshot()
    assert world.admins == {"role:solo"} and ("user:root", "role:solo") in world.members
    assert store.changes_since(0)[-1].outcome.startswith("refused: dropping role:solo would leave no")


# ---- item 4: revoke.entity finds the grants on an entity in its own transaction ------------------


def test_revoke_entity_takes_every_grant_on_exactly_that_entity(store: SqlStore, policy: Policy) -> None:
    deployment = Deployment(store, policy)
    store.change("user:root", "grant", [["user:a", "READ", "dataset:ns1.ds"], ["group:g", "ADMIN", "dataset:ns1.ds"],
                                        ["user:a", "READ", "dataset:ns1.ds2"], ["user:b", "READ", "dataset:ns1.*"],
                                        ["user:c", "ADMIN", "namespace:ns1"]])
    deployment.catch_up()
    entry = deployment.change("user:root", "revoke.entity", ["dataset:ns1.ds", "dataset:ns1.none"])
    assert entry.applied and entry.asked == ("dataset:ns1.ds", "dataset:ns1.none")
    assert entry.items == (("group:g", "ADMIN", "dataset:ns1.ds"), ("user:a", "READ", "dataset:ns1.ds"))
    left = {(g.principal, g.action, str(g.entity)) for g in store.snapshot()[0].grants}
    assert left == {("user:a", "READ", "dataset:ns1.ds2"), ("user:b", "READ", "dataset:ns1.*"),
                    ("user:c", "ADMIN", "namespace:ns1")}
    assert {(g.principal, g.action, str(g.entity)) for g in deployment.authorizer.world.grants} == left
    assert not deployment.authorizer.allows("user:a", "dataset.read", "dataset:ns1.ds")
    # a pattern is revoked by its own text; the instance too
    store.change("user:root", "grant", [["user:i", "ADMIN", "instance:cdap"]])
    assert store.change("user:root", "revoke.entity", ["dataset:ns1.*", "instance:cdap"]).items == (
        ("user:b", "READ", "dataset:ns1.*"), ("user:i", "ADMIN", "instance:cdap"))
    assert store.audit(entity="dataset:ns1.ds")[-1].kind == "revoke.entity"
    with pytest.raises(NotAnAdmin):
        store.change("user:eve", "revoke.entity", ["namespace:ns1"])
    with pytest.raises(StoreError, match=r"an item of `revoke\.entity` is ENTITY"):
        store.change("user:root", "revoke.entity", [["namespace:ns1"]])


# ---- items 5 and 6: refusals logged, and bounded ---------------------------------------------------


def test_a_large_refused_change_is_logged_bounded(store: SqlStore) -> None:
    import hashlib
    import json

    asked = [[f"user:u{n}", "READ", f"dataset:ns1.d{n}"] for n in range(10_000)]
    with pytest.raises(NotAnAdmin):
        store.change("user:bob", "grant", asked)
    (entry,) = store.changes_since(1)
    assert entry.asked == tuple(tuple(a) for a in asked[:20]) and entry.items == ()
    digest = hashlib.sha256(json.dumps(asked).encode()).hexdigest()[:16]
    assert entry.outcome == (
        f"refused: user:bob is not an authorization admin (10000 items asked, the first 20 kept; sha256 {digest})"
    )
    # refused by the store's own rule, bounded alike; applied, kept whole
    many = [[f"user:u{n}", "role:r"] for n in range(30)]
    applied = store.change("user:root", "member.add", many)
    assert len(applied.asked) == len(applied.items) == 30
    store.change("user:root", "admin.add", ["role:r"])
    store.change("user:root", "admin.remove", ["user:root"])
    with pytest.raises(StoreError, match="no authorization admin"):
        store.change("user:u0", "admin.remove", ["role:r", *[f"user:x{n}" for n in range(25)]])
    last = store.changes_since(0)[-1]
    assert len(last.asked) == 20 and "(26 items asked, the first 20 kept; sha256 " in last.outcome


def test_a_malformed_change_is_logged_refused_bounded(store: SqlStore) -> None:
    good = [["user:a", "READ", "namespace:ns1"]] * 3
    huge = "user:" + "x" * 5000
    for actor in ("user:root", "user:bob"):  # a non-admin's too: the reason is the malformation
        with pytest.raises(Exception, match="unknown action `RAED`"):
            store.change(actor, "grant", [*good, ["user:a", "RAED", "namespace:ns1"], [huge, "READ", 7], {"a": [1] * 500}])
        entry = store.changes_since(0)[-1]
        assert entry.actor == actor and entry.kind == "grant" and entry.items == ()
        assert entry.outcome == "refused: unknown action `RAED`: did you mean `READ`?"
        assert entry.asked[:4] == (*map(tuple, good), ("user:a", "RAED", "namespace:ns1"))
        assert entry.asked[4] == (huge[:200] + "...", "READ", 7)  # a text cut to 200 characters
        assert entry.asked[5].startswith('{"a": [1, 1') and len(entry.asked[5]) == 203  # JSON text, cut
    assert store.snapshot()[0].grants == set()
    with pytest.raises(StoreError):
        store.change("user:root", "entity.add", [["nested", ["list"]], 3.5, None])
    assert store.changes_since(0)[-1].asked == ('["nested", ["list"]]', 3.5, None)


def test_a_large_malformed_change_keeps_its_first_items_and_a_digest_of_what_was_asked(store: SqlStore) -> None:
    import hashlib
    import json

    asked = [["user:a", "READ", f"dataset:ns1.d{n}"] for n in range(24)] + [["user:a", "READ", "x" * 1000]]
    with pytest.raises(Exception, match="malformed entity id"):
        store.change("user:root", "grant", asked)
    entry = store.changes_since(0)[-1]
    digest = hashlib.sha256(json.dumps(asked).encode()).hexdigest()[:16]
    assert entry.outcome.endswith(f" (25 items asked, the first 20 kept; sha256 {digest})")
    assert entry.asked == tuple(tuple(a) for a in asked[:20])
