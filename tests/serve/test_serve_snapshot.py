"""`privilog serve --snapshot PATH`: a load started from the engine's state kept in a file answers as one rebuilt.

Real SQLite stores in tmp_path, real snapshot files, the server's own load (privilog/serve/server.py ``load``)
in process, and one real server over 127.0.0.1. A snapshot is written after a load; the store changes (grants,
revokes, wildcard grants, memberships, entities deleted); a load from the snapshot and a load from the store alone are compared
relation by relation and on every decision, denial, and listing of a vocabulary, then again after one more
change made through each. A snapshot missing, truncated, altered, of another store, of another policy or code,
or past the store's log is ignored with one line, and the load is the ordinary one.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import marshal
import random
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
from privilog.engine.compiled.relation import Relation

from privilog.serve import snapshot
from privilog.serve.bodies import ServeError
from privilog.serve.server import Loaded, ServeOptions, load
from privilog.store import StoreError, open_store
from tests.serve.conftest import Server

ACTIONS = ("READ", "WRITE", "EXECUTE", "ADMIN")
NAMESPACES = [f"namespace:ns{i}" for i in range(3)]
DATASETS = [f"dataset:ns{i}.d{j}" for i in range(3) for j in range(3)]
APPLICATIONS = [f"application:ns{i}.app{j}" for i in range(3) for j in range(2)]
PROGRAMS = [f"program:ns{i}.app{j}.service.p{k}" for i in range(3) for j in range(2) for k in range(2)]
ENTITIES = NAMESPACES + DATASETS + APPLICATIONS + PROGRAMS
USERS = [f"user:u{i}" for i in range(6)]
GROUPS = ["group:eng", "group:ops", "role:admins"]
PRINCIPALS = USERS + GROUPS
OPERATIONS = {
    "namespace": ["namespace.get", "namespace.update", "namespace.delete", "namespace.create"],
    "dataset": ["dataset.read", "dataset.write", "dataset.drop", "dataset.get"],
    "application": ["application.get", "application.delete", "application.deploy"],
    "program": ["program.start", "program.get", "program.stop"],
}
LISTED = ["namespace", "dataset", "application", "program"]


def random_change(rng: random.Random) -> tuple[str, list[Any]]:
    kind = rng.choice(["grant"] * 4 + ["revoke"] * 2 + ["member.add", "member.remove", "entity.add", "entity.delete"])
    if kind in ("grant", "revoke"):
        return kind, [[rng.choice(PRINCIPALS), rng.choice(ACTIONS), rng.choice(ENTITIES)] for _ in range(3)]
    if kind.startswith("member."):
        member = rng.choice([*USERS, "group:eng"])
        return kind, [[member, rng.choice([g for g in GROUPS if g != member])]]
    if kind == "entity.delete":
        return kind, [rng.choice(DATASETS + PROGRAMS)]  # a leaf: what a grant names of it goes with it
    return kind, [rng.choice(ENTITIES)]


def changes(url: str, seed: int, count: int) -> None:
    rng = random.Random(seed)
    with open_store(url, ACTIONS) as store:
        for _ in range(count):
            kind, items = random_change(rng)
            with contextlib.suppress(StoreError):  # (a member.add making a cycle, ...): refused, as an admin's
                store.change("user:root", kind, items)


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    url = str(tmp_path / "authz.db")
    with open_store(url, ACTIONS) as store:
        store.change("local:ops", "admin.add", ["user:root"], trusted=True)
        store.change("user:root", "entity.add", ENTITIES)
        store.change("user:root", "member.add", [["user:u0", "group:eng"], ["group:eng", "group:ops"]])
        store.change("user:root", "grant", [["user:u1", "READ", "dataset:ns1.*"], ["group:ops", "WRITE", "dataset:*.d1"]])
    changes(url, 1, 60)
    return url


def loaded(url: str, path: Path | None, capsys: pytest.CaptureFixture[str]) -> tuple[Loaded, str]:
    """A load of the store (from the snapshot at ``path``, if it may be used), and what it said on stderr."""
    capsys.readouterr()
    result = load(ServeOptions(store=url, snapshot=None if path is None else str(path)))
    return result, capsys.readouterr().err


def relations(result: Loaded) -> dict[str, Any]:
    """Every materialized relation of the engine but the plans' joins (named by compile order), by name, and
    the world's facts as the authorizer keeps them (what the next change is compared with)."""
    authorizer = result.deployment.authorizer
    store = authorizer.backend.store
    out: dict[str, Any] = {n: set(r.rows) for n, r in store.items() if type(r) is Relation and not n.startswith("_join")}
    out["facts"] = authorizer.loaded.facts
    return out


def answers(result: Loaded) -> dict[str, Any]:
    """Every decision of the vocabulary, each denial's unmet requirements, and every listing."""
    out: dict[str, Any] = {}
    authorizer = result.deployment.authorizer
    with result.deployment.lock:
        for principal, entity in itertools.product(PRINCIPALS, ENTITIES):
            for operation in OPERATIONS[entity.split(":")[0]]:
                out[f"{principal} {operation} {entity}"] = authorizer.allows(principal, operation, entity)
        for principal, entity in itertools.product(USERS[:3], DATASETS[:4] + PROGRAMS[:2]):
            operation = OPERATIONS[entity.split(":")[0]][0]
            decision = authorizer.check(authorizer.request(principal, operation, entity))
            out[f"check {principal} {operation} {entity}"] = (decision.allowed, sorted(map(str, decision.unmet)))
        for principal, kind in itertools.product(PRINCIPALS, LISTED):
            out[f"visible {principal} {kind}"] = [str(e) for e in authorizer.visible_entities(principal, kind)]
        # creates: an entity that does not exist yet, placed for the decision
        for principal in USERS:
            out[f"create {principal}"] = authorizer.allows(principal, "dataset.create", "dataset:ns1.new")
    return out


def test_a_load_from_a_snapshot_answers_as_one_rebuilt(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "authz.snapshot"
    first, said = loaded(store_url, path, capsys)
    assert "no snapshot at" in said and "snapshot written to" in said
    assert path.stat().st_mode & 0o777 == 0o600
    written_at = first.deployment.seq
    changes(store_url, 2, 40)  # after the snapshot: grants, revokes, memberships, entities added and deleted
    with open_store(store_url, ACTIONS) as store:  # wildcards: one taken away, one given
        store.change("user:root", "revoke", [["user:u1", "READ", "dataset:ns1.*"]])
        store.change("user:root", "grant", [["user:u2", "EXECUTE", "program:ns2.*.*.p*"]])

    started, said = loaded(store_url, path, capsys)
    assert "ignored" not in said and "no snapshot" not in said
    assert started.deployment.seq > written_at
    assert "snapshot written to" not in said  # 40 entries behind: caught up, not written again
    rebuilt, _ = loaded(store_url, None, capsys)
    assert started.deployment.seq == rebuilt.deployment.seq
    assert relations(started) == relations(rebuilt)
    expected = answers(rebuilt)
    assert sum(expected[k] is True for k in expected) > 20 and sum(expected[k] is False for k in expected) > 20
    assert answers(started) == expected

    # and kept in step alike from there: one more change through each (its joins maintained with the rest)
    for result in (started, rebuilt):
        result.deployment.change("user:root", "grant", [["user:u5", "READ", "namespace:ns2"]])
        result.deployment.change("user:root", "revoke", [["user:u5", "READ", "namespace:ns2"]])
        result.deployment.change("user:root", "grant", [["group:ops", "ADMIN", "application:ns1.app0"]])
        result.deployment.catch_up()
    assert relations(started) == relations(rebuilt)
    assert answers(started) == answers(rebuilt)


def test_a_snapshot_at_the_stores_head_is_used_and_not_written_again(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "authz.snapshot"
    loaded(store_url, path, capsys)
    before = path.read_bytes()
    again, said = loaded(store_url, path, capsys)
    assert said.strip() == ""  # read, nothing to say; the store has not moved: not written again
    assert path.read_bytes() == before
    assert "snapshot_read" in again.seconds
    rebuilt, _ = loaded(store_url, None, capsys)
    assert answers(again) == answers(rebuilt)


def ignored(store_url: str, path: Path, capsys: pytest.CaptureFixture[str], reason: str) -> None:
    """The snapshot at ``path`` is ignored for ``reason``, in one line; the load rebuilds and answers alike."""
    result, said = loaded(store_url, path, capsys)
    lines = [line for line in said.splitlines() if "ignored" in line]
    assert len(lines) == 1 and reason in lines[0], said
    assert f"snapshot {path} ignored: " in lines[0] and lines[0].endswith("(a new one is written after)")
    assert "snapshot written to" in said
    rebuilt, _ = loaded(store_url, None, capsys)
    assert relations(result) == relations(rebuilt)


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda data: data[: len(data) // 2], "its HMAC does not match"),  # truncated
        (lambda data: data[:-100] + bytes([data[-100] ^ 1]) + data[-99:], "its HMAC does not match"),  # a bit
        (lambda data: data.replace(b'"seq": ', b'"seq": 1', 1), "its HMAC does not match"),  # the header edited
        (lambda data: data[:40], "it is truncated"),
        (lambda data: data[:9], "it is not a privilog snapshot"),  # cut inside the magic line
        (lambda data: b"", "it is not a privilog snapshot"),
    ],
    ids=["truncated", "bit-flipped", "header-edited", "cut-in-the-header", "cut-in-the-magic", "empty"],
)
def test_a_damaged_snapshot_is_ignored(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: Any, reason: str
) -> None:
    path = tmp_path / "authz.snapshot"
    loaded(store_url, path, capsys)
    path.write_bytes(damage(path.read_bytes()))
    ignored(store_url, path, capsys, reason)


def test_a_snapshot_of_another_store_is_ignored(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = str(tmp_path / "other.db")
    with open_store(other, ACTIONS) as store:  # the same changes: only its secret differs
        store.change("local:ops", "admin.add", ["user:root"], trusted=True)
        store.change("user:root", "entity.add", ENTITIES)
    path = tmp_path / "other.snapshot"
    loaded(other, path, capsys)
    ignored(store_url, path, capsys, "its HMAC does not match")


def test_a_snapshot_past_the_stores_log_is_ignored(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "authz.snapshot"
    loaded(store_url, path, capsys)  # (the store's key made)
    backup = tmp_path / "backup.db"
    with sqlite3.connect(store_url) as source, sqlite3.connect(backup) as target:
        source.backup(target)  # the store as it was, restored later, say
    changes(store_url, 3, 10)
    path.unlink()
    loaded(store_url, path, capsys)  # written anew at the store's head, past the backup's
    ignored(str(backup), path, capsys, "past the store's last")


def forged(path: Path, key: bytes, meta: dict[str, Any], payload: bytes) -> None:
    """A snapshot file made with the store's own key (what only a reader of the store can make)."""
    head = json.dumps(meta).encode() + b"\n"
    path.write_bytes(snapshot.MAGIC + head + snapshot._mac(key, head, payload).encode() + b"\n" + payload)


def test_a_snapshot_of_another_policy_or_code_is_ignored(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "authz.snapshot"
    loaded(store_url, path, capsys)
    data = path.read_bytes()
    head_end = data.index(b"\n", len(snapshot.MAGIC))
    meta = json.loads(data[len(snapshot.MAGIC) : head_end])
    payload = data[data.index(b"\n", head_end + 1) + 1 :]
    with open_store(store_url, ACTIONS) as store:
        key = store.secret(snapshot.KEY_NAME).encode()
    for name in ("policy", "code", "privilog", "format"):
        forged(path, key, {**meta, name: "something else"}, payload)
        ignored(store_url, path, capsys, f"it was made for another {name}")
    forged(path, key, meta, b"\xff\x00 not marshal")  # keyed, yet not a state: still refused, no traceback
    ignored(store_url, path, capsys, "its state cannot be read")
    forged(path, key, meta, marshal.dumps({"format": 1, "relations": {"holds": (4, ["not", "a", "set"], {})}}))
    ignored(store_url, path, capsys, "its state cannot be read")


def test_the_server_writes_its_snapshot_and_starts_from_it(store_url: str, tmp_path: Path) -> None:
    path = tmp_path / "authz.snapshot"
    with open_store(store_url, ACTIONS) as store:
        token = store.create_token("user:root", "local:test")[1]
    check = {"principal": "user:u0", "operation": "dataset.read", "entity": "dataset:ns1.d1"}
    headers = {"Authorization": f"Bearer {token}"}
    decisions, logs = [], []
    for _ in range(2):
        server = Server(Path(store_url), "--snapshot", str(path)).start()
        try:
            answer = httpx.post(f"{server.url}/v1/check", json=check, headers=headers, timeout=30)
            assert answer.status_code == 200, answer.text
            decisions.append(answer.json()["decision"])
            logs.append("".join(server.log))  # (what the load says comes before the address: all of it here)
        finally:
            server.stop()
        assert path.exists()
    assert decisions[0] == decisions[1]
    assert "no snapshot at" in logs[0] and "snapshot written to" in logs[0]
    assert "ignored" not in logs[1] and "no snapshot" not in logs[1] and "written" not in logs[1]  # read, used


@pytest.mark.parametrize("foreign", ["a pickle", "the store"])
def test_a_file_that_is_not_a_snapshot_is_neither_read_nor_written_over(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], foreign: str
) -> None:
    """``--snapshot`` naming a file of something else (the store's own file, by a slip) stops the start in
    one line; the file is left as it was."""
    if foreign == "the store":
        path = Path(store_url.removeprefix("sqlite:"))
    else:
        path = tmp_path / "authz.snapshot"
        path.write_bytes(b"\x80\x04 not ours at all")
    before = path.read_bytes()
    with pytest.raises(ServeError, match="is not a privilog snapshot; refusing to read it or to write over it"):
        loaded(store_url, path, capsys)
    assert path.read_bytes() == before


def test_a_load_from_a_snapshot_evaluates_none_of_the_plans_joins(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a snapshot saves is the plans' joins: each plan takes its join from the file (kept current by the
    upkeep), none is evaluated again; a load without one evaluates them all."""
    from privilog.engine.compiled.evaluate import Evaluator

    evaluated: list[str] = []
    evaluate = Evaluator.evaluate

    def counting(self: Evaluator, component: Any, *args: Any, **kwargs: Any) -> Any:
        evaluated.extend(name for name in component.relations if name.startswith("_join"))
        return evaluate(self, component, *args, **kwargs)

    monkeypatch.setattr(Evaluator, "evaluate", counting)
    path = tmp_path / "authz.snapshot"
    loaded(store_url, path, capsys)
    assert evaluated, "a load without a snapshot evaluates the plans' joins"
    evaluated.clear()
    changes(store_url, 3, 10)
    started, said = loaded(store_url, path, capsys)
    assert "ignored" not in said
    assert evaluated == []
    assert started.deployment.authorizer.backend._decisions.aux_keys()  # the plans hold their joins
