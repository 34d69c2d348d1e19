"""A change the store made, whose log could not be read back at once (the store went away between the commit
and the replay): applied from the store's answer when nothing else came between, else a 503 that says the
change was made, never "nothing was changed"; either way the next catch-up brings the engine to it."""

from __future__ import annotations

import pytest

from privilog import dsl
from privilog.store import open_store
from privilog.store.base import StoreUnavailable
from privilog.store.deployment import Deployment


def _away_once(store, monkeypatch):
    """The store's log unreadable for the next read only (the fault, injected where it happens)."""
    real = store.changes_since

    def once(seq, limit=10_000):
        monkeypatch.setattr(store, "changes_since", real)
        raise StoreUnavailable(f"{store.url}: database is locked")

    monkeypatch.setattr(store, "changes_since", once)


def test_a_change_whose_log_cannot_be_read_is_applied_from_the_answer(tmp_path, monkeypatch):
    store = open_store(str(tmp_path / "authz.db"), ("READ", "WRITE", "EXECUTE", "ADMIN"))
    store.change("local:test", "admin.add", ["user:root"], trusted=True)
    deployment = Deployment(store, dsl.load_policy("cdap"))
    deployment.change("user:root", "grant", [["user:alice", "READ", "dataset:ns1.ds"]])
    _away_once(store, monkeypatch)
    entry = deployment.change("user:root", "revoke", [["user:alice", "READ", "dataset:ns1.ds"]])
    assert deployment.seq == entry.seq
    assert not deployment.authorizer.allows("user:alice", "dataset.read", "dataset:ns1.ds")  # the revoke holds


def test_a_change_behind_anothers_says_it_was_made_and_is_applied_later(tmp_path, monkeypatch):
    path = str(tmp_path / "authz.db")
    store = open_store(path, ("READ", "WRITE", "EXECUTE", "ADMIN"))
    store.change("local:test", "admin.add", ["user:root"], trusted=True)
    deployment = Deployment(store, dsl.load_policy("cdap"))
    with open_store(path, ("READ", "WRITE", "EXECUTE", "ADMIN"), create=False) as other:  # another process's
        other.change("user:root", "grant", [["user:bob", "READ", "dataset:ns1.ds"]])
    _away_once(store, monkeypatch)
    with pytest.raises(StoreUnavailable, match=r"the change was made \(log entry 3\) but this server could not"):
        deployment.change("user:root", "grant", [["user:alice", "READ", "dataset:ns1.ds"]])
    assert not deployment.authorizer.allows("user:alice", "dataset.read", "dataset:ns1.ds")  # not yet shown
    deployment.catch_up()
    assert deployment.authorizer.allows("user:alice", "dataset.read", "dataset:ns1.ds")
    assert deployment.authorizer.allows("user:bob", "dataset.read", "dataset:ns1.ds")


def test_a_new_sqlite_store_is_its_owners_only(tmp_path):
    open_store(str(tmp_path / "authz.db"), ("READ",)).close()
    assert (tmp_path / "authz.db").stat().st_mode & 0o777 == 0o600
