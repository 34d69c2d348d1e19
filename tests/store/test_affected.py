"""The scope of a change (privilog/store/affected.py) is sound: every decision a change alters is covered.

Over generated worlds and random changes, on a real SQLite store and a Deployment with the compiled
engine (the server's own): a sample of requests (every principal, operation and entity of a small
vocabulary, with arguments for the operations that take them) decided before and after each change;
each request whose answer changed is covered by the scope the deployment recorded for that change.
Under both shipped policies that reach furthest across the hierarchy and through arguments (cdap,
cdap-5.1). The precision (requests dropped against requests changed) is measured by
``test_precision`` and printed (``-s``).
"""

from __future__ import annotations

import contextlib
import os
import random
import tempfile
from itertools import product
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from privilog.dsl.errors import PrivilogError
from privilog.dsl.ir import Policy
from privilog.engine.ids import EntityId
from privilog.engine.world import Grant, World

from privilog import dsl
from privilog.store import open_store
from privilog.store.affected import EVERYTHING, Affected, Feed, Scoped, literal_ancestor, related
from privilog.store.deployment import Deployment

ROOT = Path(__file__).resolve().parents[2]
PRINCIPALS = ["user:ann", "user:bob", "group:eng", "group:all", "role:ops"]
ENTITIES = [
    "instance:cdap",
    "namespace:ns1",
    "namespace:ns2",
    "dataset:ns1.orders",
    "dataset:ns1.sales_x",
    "dataset:ns2.clicks",
    "application:ns1.etl",
    "program:ns1.etl.service.api",
    "program:ns1.etl.workflow.wf",
    "schedule:ns1.etl.nightly",
    "artifact:ns1.lib",
    "dataset_type:ns1.tbl",
    "dataset_module:ns1.mod",
    "stream:ns1.events",
    "kerberosprincipal:alice@EX.COM",
]
PATTERNS = ["dataset:ns1.sales_*", "program:ns1.etl.*.*", "namespace:*", "dataset:*.orders", "kerberosprincipal:*"]
ACTIONS = ["READ", "WRITE", "EXECUTE", "ADMIN"]
GROUPS = ["group:eng", "group:all", "role:ops"]
POLICIES = ["cdap", "cdap-5.1"]
STEPS = int(os.environ.get("PRIVILOG_AFFECTED_STEPS", "50"))  # of test_precision (the report: 1000)


def _policy(name: str, cache: dict[str, Policy] = {}) -> Policy:  # noqa: B006 - loaded once per process
    if name not in cache:
        cache[name] = dsl.load_policy(name)
    return cache[name]


def requests(policy: Policy) -> list[tuple[str, str, str, dict[str, Any] | None]]:
    """Every principal, operation and entity of the vocabulary; an operation with parameters once with
    none and once with each filled by the vocabulary (the first entity of the type, or the last)."""
    out: list[tuple[str, str, str, dict[str, Any] | None]] = []
    for operation in policy.operations:
        for entity in (e for e in ENTITIES if e.split(":")[0] == operation.entity_type):
            variants: list[dict[str, Any] | None] = [None]
            for pick in (0, -1):
                args: dict[str, Any] = {}
                for param in operation.params:
                    if param.type == "bool":
                        args[param.name] = pick == 0
                        continue
                    fits = [e for e in ENTITIES if e.split(":")[0] == param.type]
                    if param.within:
                        fits = [e for e in fits if e.split(":")[1].split(".")[:2] == entity.split(":")[1].split(".")[:2]]
                    if fits:
                        args[param.name] = [fits[pick]] if param.many else fits[pick]
                if args:
                    variants.append(args)
            for principal, args_ in product(PRINCIPALS, variants):
                out.append((principal, operation.qualified, entity, args_))
    return out


def decide(deployment: Deployment, asked: list[tuple[str, str, str, dict[str, Any] | None]]) -> list[bool]:
    with deployment.lock:
        authorizer = deployment.authorizer
        return [authorizer.allows(p, op, e, args) for p, op, e, args in asked]


# ---- changes ---------------------------------------------------------------------------------

grant_items = st.lists(
    st.tuples(st.sampled_from(PRINCIPALS), st.sampled_from(ACTIONS), st.sampled_from(ENTITIES + PATTERNS)).map(list),
    min_size=1,
    max_size=3,
)
member_items = st.lists(
    st.tuples(st.sampled_from(["user:ann", "user:bob", "group:eng", "group:all"]), st.sampled_from(GROUPS))
    .filter(lambda pair: pair[0] != pair[1])
    .map(list),
    min_size=1,
    max_size=2,
)
changes = st.one_of(
    st.tuples(st.sampled_from(["grant", "grant", "revoke"]), grant_items),
    st.tuples(st.sampled_from(["member.add", "member.add", "member.remove"]), member_items),
    st.tuples(st.sampled_from(["entity.add", "entity.add", "entity.delete"]), st.sampled_from(ENTITIES).map(lambda e: [e])),
    st.tuples(st.just("revoke.entity"), st.sampled_from(ENTITIES + PATTERNS).map(lambda e: [e])),
    st.tuples(st.sampled_from(["admin.add", "admin.remove"]), st.sampled_from(PRINCIPALS).map(lambda p: [p])),
    st.tuples(st.just("role.drop"), st.just(["role:ops"])),
)


def _drawn(rng: random.Random) -> tuple[str, list[Any]]:
    kind = rng.choice(["grant", "grant", "grant", "revoke", "revoke", "revoke.entity", "member.add", "member.add",
                       "member.remove", "entity.add", "entity.add", "entity.delete", "admin.add", "role.drop"])
    if kind in ("grant", "revoke"):
        return kind, [[rng.choice(PRINCIPALS), rng.choice(ACTIONS), rng.choice(ENTITIES + PATTERNS)]
                      for _ in range(rng.randint(1, 3))]
    if kind.startswith("member."):
        member = rng.choice(["user:ann", "user:bob", "group:eng", "group:all"])
        return kind, [[member, rng.choice([g for g in GROUPS if g != member])]]
    if kind == "revoke.entity":
        return kind, [rng.choice(ENTITIES + PATTERNS)]
    if kind == "admin.add":
        return kind, [rng.choice(PRINCIPALS)]
    if kind == "role.drop":
        return kind, ["role:ops"]
    return kind, [rng.choice(ENTITIES)]


class Run:
    """A deployment over a new SQLite store, changed and decided step by step."""

    def __init__(self, folder: str, policy: Policy):
        self.store = open_store(str(Path(folder) / "authz.db"), policy.actions)
        self.store.change("local:ops", "admin.add", ["user:root"], trusted=True)
        # the vocabulary's entities exist to begin with (a change may delete them), and its principals are
        # known (requests about them take the compiled plans' fast path, as a server's mostly do)
        self.store.change("user:root", "entity.add", [e for e in ENTITIES if not e.startswith("instance:")])
        self.store.change("user:root", "member.add", [[p, "group:all"] for p in PRINCIPALS if p != "group:all"])
        self.deployment = Deployment(self.store, policy)
        self.asked = requests(policy)
        self.dropped = self.changed = self.decided = 0

    def step(self, kind: str, items: list[Any]) -> None:
        """Make a change; check that the scope recorded for it covers every decision it changed."""
        before = decide(self.deployment, self.asked)
        try:
            entry = self.deployment.change("user:root", kind, items)
        except PrivilogError:  # refused (the last admin, the instance deleted): nothing changed
            assert decide(self.deployment, self.asked) == before
            return
        after = decide(self.deployment, self.asked)
        scoped = self.deployment.feed.after(entry.seq - 1)
        assert scoped is not None
        affected = scoped[0].affected if scoped and scoped[0].seq == entry.seq else Affected(frozenset(), frozenset())
        for request, was, now in zip(self.asked, before, after, strict=True):
            covered = affected.covers(*request)
            self.dropped += covered
            self.decided += 1
            if was != now:
                self.changed += 1
                assert covered, f"{kind} {items} changed {request} ({was} -> {now}) outside {affected.to_json()}"

    def close(self) -> None:
        self.store.close()


@pytest.mark.parametrize("policy_name", POLICIES)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setup=st.lists(changes, max_size=8), steps=st.lists(changes, min_size=1, max_size=3))
def test_every_changed_decision_is_covered(policy_name: str, setup: list[Any], steps: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        run = Run(folder, _policy(policy_name))
        try:
            for kind, items in setup:
                with contextlib.suppress(PrivilogError):  # refused: the setup goes on without it
                    run.store.change("user:root", kind, items)
            run.deployment.catch_up()
            for kind, items in steps:
                run.step(kind, items)
        finally:
            run.close()


@pytest.mark.parametrize("policy_name", POLICIES)
def test_precision(policy_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A seeded run of STEPS changes: sound at every step; the share of requests dropped, printed."""
    rng = random.Random(36)
    run = Run(str(tmp_path), _policy(policy_name))
    try:
        for _ in range(STEPS):
            run.step(*_drawn(rng))
    finally:
        run.close()
    assert run.changed > 0  # the run changed decisions at all
    with capsys.disabled():
        print(
            f"\n{policy_name}: {run.decided} requests decided after a change, {run.changed} changed, "
            f"{run.dropped} dropped by the scope ({run.dropped / max(run.changed, 1):.1f} per changed; "
            f"{run.dropped / run.decided:.1%} of the requests)"
        )


# ---- the pieces ---------------------------------------------------------------------------------


def test_related_is_the_same_or_enclosing_either_way() -> None:
    assert related("namespace:ns1", "dataset:ns1.orders")
    assert related("dataset:ns1.orders", "namespace:ns1")
    assert related("instance:cdap", "program:ns1.etl.service.api")
    assert not related("schedule:ns1.etl.nightly", "program:ns1.etl.service.api")  # siblings
    assert not related("namespace:ns1", "namespace:ns10")
    assert not related("kerberosprincipal:a@X", "instance:cdap")
    assert related("not an id", "namespace:ns1")  # text that is no id: dropped rather than kept


def test_a_pattern_affects_what_encloses_every_entity_it_matches() -> None:
    assert literal_ancestor("program:ns1.etl.*.*") == "application:ns1.etl"
    assert literal_ancestor("dataset:*.orders") == "instance:cdap"
    assert literal_ancestor("namespace:ns?") == "instance:cdap"
    assert literal_ancestor("kerberosprincipal:*") is None
    assert literal_ancestor("dataset:ns1.orders") == "dataset:ns1.orders"


def test_an_argument_naming_an_affected_entity_is_covered() -> None:
    scope = Affected(frozenset({"user:ann"}), frozenset({"program:ns1.etl.service.api"}))
    assert scope.covers("user:ann", "schedule.resume", "schedule:ns1.etl.nightly", {"program": "program:ns1.etl.service.api"})
    assert not scope.covers("user:ann", "schedule.resume", "schedule:ns1.etl.nightly", {"program": "program:ns1.etl.workflow.wf"})
    assert not scope.covers("user:ann", "schedule.resume", "schedule:ns1.etl.nightly")


def test_the_feed_forgets_its_oldest_and_says_so() -> None:
    feed = Feed(start=5, size=3)
    for seq in range(6, 11):
        feed.record(Scoped(seq, f"r{seq}", "", "grant", EVERYTHING))
    assert feed.after(4) is None and feed.after(6) is None  # 6 and 7 were forgotten: reset
    assert [s.seq for s in feed.after(7) or []] == [8, 9, 10]
    assert [s.seq for s in feed.after(8) or []] == [9, 10]
    assert feed.after(10) == []
    assert [s.seq for s in feed.after(8, limit=1) or []] == [9]


def test_an_import_and_a_new_policy_reset(tmp_path: Path) -> None:
    policy = _policy("cdap")
    store = open_store(str(tmp_path / "authz.db"), policy.actions)
    store.change("local:ops", "admin.add", ["user:root"], trusted=True)
    deployment = Deployment(store, policy)
    start = deployment.seq
    entry = deployment.change("user:root", "grant", [["user:ann", "READ", "dataset:ns1.orders"]])
    scoped = deployment.feed.after(start) or []
    assert [(s.seq, s.kind) for s in scoped] == [(entry.seq, "grant")]
    assert scoped[0].affected == Affected(frozenset({"user:ann"}), frozenset({"dataset:ns1.orders"}))
    other = Deployment(store, policy)
    other.change("user:root", "role.create", ["role:x"])  # nothing a decision reads
    deployment.catch_up()
    assert [s.seq for s in deployment.feed.after(start) or []] == [entry.seq]
    # another server records another policy: decisions here do not change, but a cache shared with it resets
    Deployment(store, _policy("cdap-5.1")).record_policy()
    deployment.catch_up()
    assert [(s.kind, s.affected) for s in deployment.feed.after(entry.seq) or []] == [("policy.use", EVERYTHING)]
    # an import: the world read anew, everything
    mark = deployment.seq
    store.import_world(World(grants={Grant("user:bob", "READ", EntityId.parse("dataset:ns1.clicks"))}), "user:root")
    deployment.catch_up()
    assert [(s.kind, s.affected) for s in deployment.feed.after(mark) or []] == [("import", EVERYTHING)]
    assert deployment.authorizer.allows("user:bob", "dataset.read", "dataset:ns1.clicks")
    deployment.reload(_policy("cdap-5.1"))  # another policy: every answer may differ
    assert deployment.feed.after(start) is None
    assert deployment.feed.after(deployment.seq) == []
    store.close()


def test_who_is_an_admin_matters_only_to_a_policy_whose_rules_read_it(tmp_path: Path) -> None:
    text = (ROOT / "rules" / "cdap.policy").read_text(encoding="utf-8")
    admins_pass = dsl.parse_policy(text + '\nbypass(R, "an admin") :- request(R, P, _, _), admin(P).\n')
    for policy, scoped in ((_policy("cdap"), False), (admins_pass, True)):
        store = open_store(str(tmp_path / f"{scoped}.db"), policy.actions)
        store.change("local:ops", "admin.add", ["user:root"], trusted=True)
        deployment = Deployment(store, policy)
        before = deployment.authorizer.allows("user:ann", "dataset.read", "dataset:ns1.orders")
        entry = deployment.change("user:root", "admin.add", ["user:ann"])
        after = deployment.authorizer.allows("user:ann", "dataset.read", "dataset:ns1.orders")
        assert (before, after) == (False, scoped)
        scopes = deployment.feed.after(entry.seq - 1)
        assert [s.affected for s in scopes or []] == ([Affected(frozenset({"user:ann"}), None)] if scoped else [])
        store.close()


def test_a_policy_whose_rules_read_grants_anywhere_scopes_every_entity(tmp_path: Path) -> None:
    """A rule of the policy's own that reads a principal's grant on an entity unrelated to the request's
    (an auditor who holds READ on namespace:audit may read any dataset): a grant there changes decisions
    everywhere, so its scope is every entity (of that principal); a rule the analysis cannot place at all
    makes every scope everything. Fail closed: a cache drops more, never less."""
    text = (ROOT / "rules" / "cdap.policy").read_text(encoding="utf-8")
    auditors = dsl.parse_policy(
        text + '\nbypass(R, "an auditor") :- request(R, P, _, _), grant(P, "READ", "namespace:audit").\n'
    )
    anyone = dsl.parse_policy(
        text + '\nbypass(R, "a busy namespace") :- request(R, _, _, _), grant(_, "ADMIN", "namespace:busy").\n'
    )
    grant = ["user:ann", "READ", "namespace:audit"]
    cases = ((_policy("cdap"), False, frozenset({"namespace:audit"})), (auditors, True, None), (anyone, True, None))
    for number, (policy, widened, entities) in enumerate(cases):
        store = open_store(str(tmp_path / f"{number}.db"), policy.actions)
        store.change("local:ops", "admin.add", ["user:root"], trusted=True)
        deployment = Deployment(store, policy)
        before = deployment.authorizer.allows("user:ann", "dataset.read", "dataset:ns1.orders")
        entry = deployment.change("user:root", "grant", [grant] if number < 2 else [["user:bob", "ADMIN", "namespace:busy"]])
        after = deployment.authorizer.allows("user:ann", "dataset.read", "dataset:ns1.orders")
        assert (before, after) == (False, widened)
        (scoped,) = deployment.feed.after(entry.seq - 1) or []
        assert scoped.affected.covers("user:ann", "dataset.read", "dataset:ns1.orders") == widened
        if number < 2:
            assert scoped.affected == Affected(frozenset({"user:ann"}), entities)
        else:
            assert scoped.affected.everything
        store.close()
