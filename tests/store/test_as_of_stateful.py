"""The past is answered as it was: every decision recorded at a revision is answered the same as of it.

A Hypothesis rule-based state machine over a real SQLite store and a :class:`Deployment` on it
(``user:root`` its admin) steps through generated changes: grants and revokes, ``revoke.entity``,
memberships added and removed (groups and a role), entities added and deleted (with what is inside),
role drops, admins added and removed; and now and then a policy served (the deployment reloaded with
another policy and :meth:`Deployment.record_policy`, or ``store.record_policy`` of the one it serves).
After each step the deployment is brought to the log's head and a sample of decisions (the compiled
engine, under the policy the deployment serves) is recorded with its revision. Each step, and at the
end, two things must hold:

* the reference: ``store.history(seq).world`` is the world a plain model (sets of rows, changed by
  this file's own reading of each change) holds at that entry, for every entry recorded;
* the proof: every decision recorded is answered the same by ``as_of(store, revision)`` (under the
  policy the store says was in force then), and, for a few, by ``privilog check --as-of`` (a real
  subprocess).

Derandomized (same examples each run). The PostgreSQL store is held to the same history by one
example (``test_postgres_history_is_the_same``), as ``tests/pg.py``'s server allows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from privilog.dsl.errors import PrivilogError
from privilog.dsl.format import format_policy
from privilog.engine.ids import EntityId

from privilog import dsl
from privilog.store import open_store
from privilog.store.deployment import Deployment
from privilog.store.history import as_of
from privilog.store.revision import parse_revision, policy_version
from tests.tiers import examples

USERS = ["user:ann", "user:bob", "user:cy"]
GROUPS = ["group:eng", "group:all", "role:ops"]
PRINCIPALS = USERS + GROUPS
ENTITIES = [
    "namespace:ns1",
    "dataset:ns1.orders",
    "application:ns1.etl",
    "program:ns1.etl.service.api",
    "namespace:ns2",
    "dataset:ns2.clicks",
]
ACTIONS = ["READ", "WRITE", "EXECUTE", "ADMIN"]
SAMPLE = [  # (principal, operation, entity): a few of each kind of entity, users and a group
    (p, op, e)
    for p in ["user:ann", "user:bob", "user:cy", "group:eng"]
    for e, ops in [
        ("namespace:ns1", ["namespace.get", "namespace.update"]),
        ("dataset:ns1.orders", ["dataset.read", "dataset.write"]),
        ("application:ns1.etl", ["application.get"]),
        ("program:ns1.etl.service.api", ["program.start"]),
        ("dataset:ns2.clicks", ["dataset.read"]),
    ]
    for op in ops
]
POLICIES = {name: dsl.load_policy(name) for name in ("cdap", "cdap-4.2")}
CLI_CHECKS = [2]  # subprocess checks left for the whole run (each costs a second)


class Model:
    """The store's world as plain sets of rows, changed as this file reads each change (not the store's code)."""

    def __init__(self) -> None:
        self.entities: set[str] = set()
        self.grants: set[tuple[str, str, str]] = set()
        self.members: set[tuple[str, str]] = set()
        self.admins: set[str] = {"user:root"}

    def apply(self, kind: str, items: list[Any]) -> None:
        if kind == "grant":
            self.grants |= {tuple(i) for i in items}
        elif kind == "revoke":
            self.grants -= {tuple(i) for i in items}
        elif kind == "revoke.entity":
            self.grants = {g for g in self.grants if g[2] not in items}
        elif kind == "member.add":
            self.members |= {tuple(i) for i in items}
        elif kind == "member.remove":
            self.members -= {tuple(i) for i in items}
        elif kind == "entity.add":
            self.entities |= set(items)
        elif kind == "entity.delete":
            for text in items:
                gone = EntityId.parse(text)
                self.entities = {e for e in self.entities if e != text and gone not in EntityId.parse(e).ancestors()}
        elif kind == "admin.add":
            self.admins |= set(items)
        elif kind == "admin.remove":
            self.admins -= set(items)
        elif kind == "role.drop":
            for role in items:
                self.members = {m for m in self.members if role not in m}
                self.grants = {g for g in self.grants if g[0] != role}
                self.admins.discard(role)

    def rows(self) -> dict[str, list[Any]]:
        return {
            "entities": sorted(self.entities),
            "grants": sorted(self.grants),
            "members": sorted(self.members),
            "admins": sorted(self.admins),
        }


def rows_of(world: Any) -> dict[str, list[Any]]:
    return {
        "entities": sorted(str(e) for e in world.entities),
        "grants": sorted((g.principal, g.action, str(g.entity)) for g in world.grants),
        "members": sorted(tuple(m) for m in world.members),
        "admins": sorted(world.admins),
    }


grants = st.lists(st.tuples(st.sampled_from(PRINCIPALS), st.sampled_from(ACTIONS), st.sampled_from(ENTITIES)),
                  min_size=1, max_size=3)
memberships = st.tuples(st.sampled_from([*USERS, "group:eng"]), st.sampled_from(GROUPS)).filter(lambda m: m[0] != m[1])


class AsOfMachine(RuleBasedStateMachine):
    """A store, a deployment on it, and the model beside them; decisions recorded at each revision."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(TMP) / f"run{id(self)}"
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.url = str(self.tmp / "authz.db")
        self.store = open_store(self.url, POLICIES["cdap"].actions)
        self.model = Model()
        self.worlds: dict[int, dict[str, list[Any]]] = {}  # log entry -> the model's rows then
        self.recorded: list[tuple[str, str, dict[tuple[str, str, str], bool]]] = []  # (token, policy, decisions)
        self.deployment: Deployment | None = None

    @initialize(record=st.booleans())
    def start(self, record: bool) -> None:
        self.store.change("local:ops", "admin.add", ["user:root"], trusted=True)
        self.deployment = Deployment(self.store, POLICIES["cdap"])
        if record:
            self.deployment.record_policy("local:test")
        self._record()

    # ---- changes ----------------------------------------------------------------------------

    def _change(self, kind: str, items: list[Any]) -> None:
        assert self.deployment is not None
        try:
            self.deployment.change("user:root", kind, items)
        except PrivilogError:  # refused by the store (logged, nothing changed): the model does not change
            pass
        else:
            self.model.apply(kind, items)
        self._record()

    @rule(rows=grants)
    def grant(self, rows: list[tuple[str, str, str]]) -> None:
        self._change("grant", [list(r) for r in rows])

    @rule(rows=grants)
    def revoke(self, rows: list[tuple[str, str, str]]) -> None:
        held = sorted(self.model.grants)
        self._change("revoke", [list(r) for r in (held[:1] + rows if held else rows)])

    @rule(entity=st.sampled_from(ENTITIES))
    def revoke_entity(self, entity: str) -> None:
        self._change("revoke.entity", [entity])

    @rule(pair=memberships, add=st.booleans())
    def member(self, pair: tuple[str, str], add: bool) -> None:
        self._change("member.add" if add else "member.remove", [list(pair)])

    @rule(entity=st.sampled_from(ENTITIES), add=st.booleans())
    def entity(self, entity: str, add: bool) -> None:
        self._change("entity.add" if add else "entity.delete", [entity])

    @rule()
    def drop_role(self) -> None:
        self._change("role.drop", ["role:ops"])

    @rule(who=st.sampled_from(["user:ann", "role:ops"]), add=st.booleans())
    def admin(self, who: str, add: bool) -> None:
        self._change("admin.add" if add else "admin.remove", [who])

    @rule(name=st.sampled_from(sorted(POLICIES)), through_store=st.booleans())
    def serve_policy(self, name: str, through_store: bool) -> None:
        """A server starts or reloads with a policy (the deployment's), or another one records its own."""
        assert self.deployment is not None
        policy = POLICIES[name]
        if through_store:  # another server: the store records its policy; this deployment serves on
            self.store.record_policy(policy.name, policy_version(policy), format_policy(policy), "local:other")
            self.deployment.catch_up()
            if policy_version(policy) != self.deployment.policy_version:
                self.deployment.reload(policy)  # and this one follows it, so its answers are under it
        else:
            self.deployment.reload(policy)
            self.deployment.record_policy("local:test")
        self._record()

    # ---- what is recorded and checked -------------------------------------------------------

    def _record(self) -> None:
        assert self.deployment is not None
        self.deployment.fully()
        with self.deployment.lock:
            revision = self.deployment.revision
            authorizer = self.deployment.authorizer
            decided = {s: authorizer.allows(*s) for s in SAMPLE}
        self.worlds[revision.seq] = self.model.rows()
        self.recorded.append((revision.token, self.deployment.policy.name, decided))

    @invariant()
    def history_is_the_model(self) -> None:
        """The store's history at the newest entry recorded, and at one older, is the model's world then."""
        if not self.worlds:
            return
        seqs = sorted(self.worlds)
        for seq in {seqs[-1], seqs[len(seqs) // 2]}:
            assert rows_of(self.store.history(seq).world) == self.worlds[seq], f"log entry {seq}"

    def teardown(self) -> None:
        try:
            for token, name, decided in self.recorded:  # every revision recorded, answered as of it
                past = as_of(self.store, token, POLICIES["cdap"])
                assert policy_version(past.policy) == policy_version(POLICIES[name]), token
                assert {s: past.authorizer.allows(*s) for s in SAMPLE} == decided, token
            for seq, rows in self.worlds.items():
                assert rows_of(self.store.history(seq).world) == rows, f"log entry {seq}"
            if CLI_CHECKS[0] and len(self.recorded) > 3:
                CLI_CHECKS[0] -= 1
                token, _name, decided = self.recorded[len(self.recorded) // 2]
                for sample in [s for s in SAMPLE if decided[s]][:1] + [s for s in SAMPLE if not decided[s]][:1]:
                    self._cli_agrees(token, sample, decided[sample])
        finally:
            if self.deployment is not None:
                self.deployment.store.close()

    def _cli_agrees(self, token: str, sample: tuple[str, str, str], allowed: bool) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "privilog", "check", *sample, "--store", self.url, "--as-of", token, "--json"],
            capture_output=True,
            text=True,
            env={**os.environ, "PRIVILOG_STORE": ""},
            timeout=120,
        )
        answer = json.loads(done.stdout)
        assert (done.returncode, answer["decision"]) == ((0, "allow") if allowed else (1, "deny")), done.stderr
        assert answer["as_of"]["seq"] == parse_revision(token).seq


TMP = ""


@pytest.fixture
def machine_tmp(tmp_path: Path) -> Path:
    global TMP
    TMP = str(tmp_path)
    return tmp_path


def test_the_past_is_answered_as_it_was(machine_tmp: Path) -> None:
    from hypothesis.stateful import run_state_machine_as_test

    run_state_machine_as_test(
        AsOfMachine,
        settings=settings(
            max_examples=examples(10),  # one under PRIVILOG_HYPOTHESIS=quick (tests/tiers.py)
            stateful_step_count=12,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        ),
    )


def test_postgres_history_is_the_same(fresh_postgres_url: str, tmp_path: Path) -> None:
    """One sequence of every kind of change, on PostgreSQL and SQLite: the model's world at every log entry,
    and the same decisions as of each on both."""
    policy = POLICIES["cdap"]
    changes: list[tuple[str, list[Any]]] = [
        ("entity.add", ["namespace:ns1"]),
        ("entity.add", ["application:ns1.etl"]),
        ("grant", [["user:ann", "ADMIN", "namespace:ns1"], ["group:eng", "READ", "dataset:ns1.orders"]]),
        ("member.add", [["user:bob", "group:eng"]]),
        ("member.add", [["user:cy", "role:ops"]]),
        ("grant", [["role:ops", "EXECUTE", "program:ns1.etl.service.api"]]),
        ("admin.add", ["role:ops"]),
        ("entity.delete", ["namespace:ns1"]),
        ("revoke.entity", ["namespace:ns1"]),
        ("role.drop", ["role:ops"]),
        ("revoke", [["group:eng", "READ", "dataset:ns1.orders"]]),
        ("member.remove", [["user:bob", "group:eng"]]),
    ]
    heads = []
    for url in (fresh_postgres_url, str(tmp_path / "authz.db")):
        with open_store(url, policy.actions) as store:
            store.change("local:ops", "admin.add", ["user:root"], trusted=True)
            store.record_policy(policy.name, policy_version(policy), format_policy(policy), "local:test")
            model, expected = Model(), {}
            for kind, items in changes:
                expected[store.change("user:root", kind, items).seq] = (model.apply(kind, items), model.rows())[1]
            head = store.last_seq()
            assert all(rows_of(store.history(seq).world) == rows for seq, rows in expected.items())
            heads.append(
                [
                    (rows_of(store.history(seq).world), {s: as_of(store, str(seq), policy).authorizer.allows(*s)
                                                         for s in SAMPLE[::3]})
                    for seq in range(1, head + 1)
                ]
            )
    assert heads[0] == heads[1]
    assert heads[0][4][1] != heads[0][-1][1]  # the decisions did change along the way
