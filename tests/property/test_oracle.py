"""The engine against an independent oracle (oracle.py, read from tests/conformance/cdap.yaml).

Hypothesis generates small worlds — up to three namespaces with applications, programs,
schedules, datasets (some with dotted names), modules, types, streams, artifacts and keys;
users, groups and roles with memberships (cycles included); single grants and whole-
namespace grants with holes, some on entities that do not exist (pre-grants), `ALL`
included — and compares, for random requests, the authorizer's decision with the oracle's,
and ``visible`` with the oracle's listing; every decision is also asked of ``decide`` and
``allows``, which `privilog serve` answers with, and must be check()'s. Then invariants: more grants never deny what was
allowed; a principal with nothing is allowed nothing (but see the vacuous delete-alls);
every suggested fix, applied, allows; deciding in a batch equals deciding one by one.

One authorizer serves every example: its world is replaced and ``refresh()``ed.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from oracle import ACTIONS, OracleWorld, ancestors, entity_type, load_table
from privilog.engine.decision import GrantChange
from privilog.engine.patterns import is_pattern

import privilog
from privilog.api import load_world_for

TABLE = load_table()
ROWS = TABLE.rows

NAMESPACES = ("ns1", "ns2", "ns3")


def _inside(ns: str) -> list[str]:
    return [
        f"application:{ns}.a1",
        f"application:{ns}.a2",
        f"program:{ns}.a1.service.p1",
        f"program:{ns}.a1.mapreduce.p2",
        f"program:{ns}.a2.spark.p3",
        f"schedule:{ns}.a1.s1",
        f"schedule:{ns}.a2.s2",
        f"dataset:{ns}.d1",
        f"dataset:{ns}.d.x",
        f"dataset_module:{ns}.m1",
        f"dataset_type:{ns}.t1",
        f"dataset_type:{ns}.t.custom",
        f"stream:{ns}.st1",
        f"artifact:{ns}.art1",
        f"artifact:{ns}.art2",
        f"securekey:{ns}.k1",
    ]


POOL = [e for ns in NAMESPACES for e in (f"namespace:{ns}", *_inside(ns))]
KERBEROS = ["kerberosprincipal:k1@EXAMPLE.COM", "kerberosprincipal:svc/host@EXAMPLE.COM"]
GRANTABLE = [*POOL, *KERBEROS, "instance:cdap"]
BY_TYPE: dict[str, list[str]] = {}
for _e in GRANTABLE:
    BY_TYPE.setdefault(entity_type(_e), []).append(_e)

# Wildcard grants: every type's, a `*` in the namespace, one that crosses a dataset name's dots,
# one in a program's kind, one that matches nothing.
WILDCARDS = [
    "dataset:ns1.d*",
    "dataset:*.d.*",
    "dataset:ns?.*",
    "program:ns1.a1.*.*",
    "program:*.a?.spark.p3",
    "application:ns2.a?",
    "schedule:ns1.*.s1",
    "artifact:ns1.*",
    "namespace:ns*",
    "stream:*.st?",
    "securekey:ns3.*",
    "dataset_type:ns1.t.*",
    "dataset_module:*.m*",
    "kerberosprincipal:k?@EXAMPLE.COM",
    "application:ns9.*",
]
USERS = ["user:u1", "user:u2", "user:u3"]
GROUPS = ["group:g1", "group:g2", "role:r1"]
PRINCIPALS = [*USERS, *GROUPS]
NOBODY = "user:nobody"  # never in a grant or a membership
GRANT_ACTIONS = [*ACTIONS, "ALL"]

# The type of each request argument (bool or an entity type), as CDAP's documents describe them.
ARG_TYPES = {
    "artifact": "artifact",
    "new_artifact": "bool",
    "owner": "kerberosprincipal",
    "dataset_type": "dataset_type",
    "program": "program",
}
LISTINGS = [(row.entity_type, row.operation) for row in ROWS if row.verb == "shows"]

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# ---- strategies --------------------------------------------------------------------------


@st.composite
def worlds(draw: st.DrawFn) -> dict[str, Any]:
    namespaces = draw(st.sampled_from([NAMESPACES[:2], NAMESPACES]))
    pool = [e for e in POOL if e.split(":")[1].split(".")[0] in namespaces]
    entities = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=14, unique=True))
    existing = sorted({a for e in entities for a in [e, *ancestors(e)]})
    # half on entities that exist, half anywhere (pre-grants included)
    on = st.one_of(st.sampled_from(existing), st.sampled_from([*pool, *KERBEROS, "instance:cdap"]))
    grants = draw(
        st.lists(
            st.tuples(st.sampled_from(PRINCIPALS), st.sampled_from(GRANT_ACTIONS), on),
            max_size=20,
        )
    )
    # whole-namespace grants, with holes: what makes multi-entity deletes interesting
    for principal, action, ns, step, offset in draw(
        st.lists(
            st.tuples(
                st.sampled_from(PRINCIPALS),
                st.sampled_from(["ADMIN", "ALL", "READ"]),
                st.sampled_from(namespaces),
                st.integers(0, 6),
                st.integers(0, 5),
            ),
            max_size=3,
        )
    ):
        for i, e in enumerate([f"namespace:{ns}", *_inside(ns)]):
            if step == 0 or (i + offset) % (step + 3):
                grants.append((principal, action, e))
    # wildcard grants (`*`, `?` in any part), matched part by part as Sentry matches them
    grants += draw(
        st.lists(
            st.tuples(st.sampled_from(PRINCIPALS), st.sampled_from(GRANT_ACTIONS), st.sampled_from(WILDCARDS)),
            max_size=3,
        )
    )
    members = draw(
        st.lists(
            st.tuples(st.sampled_from([*USERS, *GROUPS]), st.sampled_from(GROUPS)),
            max_size=5,
            unique=True,
        )
    )
    return {
        "entities": entities,
        "grants": [list(g) for g in grants],
        "members": [list(m) for m in members],
    }


@st.composite
def requests(draw: st.DrawFn, world: Mapping[str, Any] | None = None) -> tuple[str, str, str, dict[str, str]]:
    """A request; with a world, biased towards its principals and the entities it grants on."""
    granted = sorted({g[2] for g in world["grants"] if not is_pattern(g[2])}) if world else []
    holders = sorted({g[0] for g in world["grants"]} | {m[0] for m in world["members"]}) if world else []

    def some(type_name: str) -> st.SearchStrategy[str]:
        mine = [e for e in granted if entity_type(e) == type_name]
        anywhere = st.sampled_from(BY_TYPE[type_name])
        return st.one_of(st.sampled_from(mine), anywhere) if mine else anywhere

    row = draw(st.sampled_from(ROWS))
    everyone = st.sampled_from([*PRINCIPALS, NOBODY])
    principal = draw(st.one_of(st.sampled_from(holders), everyone) if holders else everyone)
    entity = draw(some(row.entity_type))
    args: dict[str, str] = {}
    for name in sorted(row.arg_names):
        kind = ARG_TYPES[name]
        if kind == "bool":
            value = draw(st.sampled_from([None, "true", "false"]))
        elif name == "program":  # a schedule's program is one of its own application's
            app = ".".join(entity.split(":")[1].split(".")[:2])
            same = [p for p in BY_TYPE["program"] if p.split(":")[1].startswith(app + ".")]
            value = draw(st.one_of(st.none(), st.sampled_from(same or [f"program:{app}.service.px"])))
        else:
            value = draw(st.one_of(st.none(), some(kind)))
        if value is not None:
            args[name] = value
    return principal, row.operation, entity, args


# ---- helpers -----------------------------------------------------------------------------

_AUTHZ: list[privilog.Authorizer] = []


def authorizer(world: Mapping[str, Any]) -> privilog.Authorizer:
    """The shared authorizer, its world replaced by ``world`` (parsed as a world file is)."""
    if not _AUTHZ:
        _AUTHZ.append(privilog.load("cdap"))
    authz = _AUTHZ[0]
    authz.world = load_world_for(authz.policy, dict(world))
    authz.refresh()
    return authz


def oracle_of(world: Mapping[str, Any]) -> OracleWorld:
    return OracleWorld(
        entities=world.get("entities", []),
        grants=[tuple(g) for g in world.get("grants", [])],
        members=[tuple(m) for m in world.get("members", [])],
    )


def decide(authz: privilog.Authorizer, request: tuple[str, str, str, dict[str, str]]) -> privilog.Decision:
    """check()'s decision, held to what `privilog serve`, its batches and CDAP's enforce answer
    with: ``decide`` and ``allows`` (the decision plans), the same allow or deny."""
    principal, operation, entity, args = request
    built = authz.request(principal, operation, entity, args)
    decision = authz.check(built)
    fast = {"decide": authz.decide(built), "allows": authz.allows(principal, operation, entity, args)}
    assert fast == dict.fromkeys(fast, decision.allowed), (request, "check() allowed:", decision.allowed, fast)
    return decision


def with_grant(world: Mapping[str, Any], grant: tuple[str, str, str]) -> dict[str, Any]:
    return {**world, "grants": [*world["grants"], list(grant)]}


def vacuous(oracle: OracleWorld, operation: str, entity: str, args: Mapping[str, str]) -> bool:
    """Whether every applicable conjunct is met with no grant at all (an "every" over nothing)."""
    row = TABLE.row(operation)
    assert row is not None
    return all(any(not way for way in oracle.ways(c, entity, args)) for c in oracle.applicable(row, args))


# ---- decisions ---------------------------------------------------------------------------


@SETTINGS
@given(world=worlds(), data=st.data())
def test_decisions_agree_with_the_oracle(world: dict[str, Any], data: st.DataObject) -> None:
    batch = data.draw(st.lists(requests(world), min_size=1, max_size=10))
    authz = authorizer(world)
    oracle = oracle_of(world)
    for request in batch:
        expected = oracle.allowed(TABLE, *request)
        decision = decide(authz, request)
        event("allow" if expected else "deny")
        assert decision.allowed == expected, (request, decision.to_json())
        # A decision explains itself: an allow has no unmet requirement, a deny has one.
        assert bool(decision.unmet) != decision.allowed, decision.to_json()


@SETTINGS
@given(world=worlds(), data=st.data())
def test_visible_agrees_with_the_oracle(world: dict[str, Any], data: st.DataObject) -> None:
    authz = authorizer(world)
    oracle = oracle_of(world)
    # mostly someone who holds something, so that listings are not all empty
    holders = sorted({g[0] for g in world["grants"]} | {m[0] for m in world["members"]})
    principal = data.draw(st.sampled_from([*holders, NOBODY] if holders else [NOBODY, *USERS]))
    for type_name, _ in LISTINGS:
        if type_name == "namespace":
            places: list[str | None] = [None]
        else:
            places = [None, *(f"namespace:{ns}" for ns in NAMESPACES)]
            if type_name == "program":
                places += ["application:ns1.a1", "application:ns2.a2"]
        within = data.draw(st.sampled_from(places))
        shown = {str(v.entity) for v in authz.visible(principal, type_name, within)}
        # what `privilog serve` lists: the decision plans alone, without the proofs
        assert {str(e) for e in authz.visible_entities(principal, type_name, within)} == shown
        expected = oracle.visible(TABLE, principal, type_name, within)
        event("some visible" if expected else "none visible")
        assert shown == expected, (principal, type_name, within)


# ---- invariants --------------------------------------------------------------------------


@SETTINGS
@given(
    world=worlds(),
    data=st.data(),
    extra=st.tuples(st.sampled_from(PRINCIPALS), st.sampled_from(GRANT_ACTIONS), st.sampled_from(GRANTABLE)),
    listing=st.sampled_from(LISTINGS),
)
def test_a_grant_never_turns_allow_into_deny(
    world: dict[str, Any], data: st.DataObject, extra: tuple[str, str, str], listing: tuple[str, str]
) -> None:
    batch = data.draw(st.lists(requests(world), min_size=1, max_size=6))
    authz = authorizer(world)
    before = [decide(authz, r).allowed for r in batch]
    seen_before = {(p, v.entity) for p in PRINCIPALS for v in authz.visible(p, listing[0])}
    authz = authorizer(with_grant(world, extra))
    after = [decide(authz, r).allowed for r in batch]
    seen_after = {(p, v.entity) for p in PRINCIPALS for v in authz.visible(p, listing[0])}
    for request, was, now in zip(batch, before, after, strict=True):
        event("allowed before" if was else "denied before")
        assert now or not was, (request, extra)
    assert seen_before <= seen_after


@SETTINGS
@given(world=worlds(), data=st.data())
def test_a_principal_with_nothing_is_allowed_only_vacuous_deletes(world: dict[str, Any], data: st.DataObject) -> None:
    batch = data.draw(st.lists(requests(world), min_size=1, max_size=10))
    authz = authorizer(world)
    oracle = oracle_of(world)
    for _, operation, entity, args in batch:
        allowed = decide(authz, (NOBODY, operation, entity, args)).allowed
        if allowed:
            # the only exception: a namespace-wide delete over nothing of its kind
            assert operation.startswith(("namespace.delete_all_", "namespace.drop_all_")), operation
            assert vacuous(oracle, operation, entity, args)


@SETTINGS
@given(world=worlds(), data=st.data())
def test_every_suggested_fix_allows(world: dict[str, Any], data: st.DataObject) -> None:
    batch = data.draw(st.lists(requests(world), min_size=1, max_size=8))
    authz = authorizer(world)
    denied = [(r, d) for r in batch if not (d := decide(authz, r)).allowed and d.fixes]
    for request, decision in denied[:3]:
        for fix in decision.fixes[:3]:
            event("fix applied" + (" (with a membership)" if not all(isinstance(c, GrantChange) for c in fix) else ""))
            fixed = {**world, "grants": list(world["grants"]), "members": list(world["members"])}
            for change in fix:
                if isinstance(change, GrantChange):
                    fixed["grants"].append([change.principal, change.action, str(change.entity)])
                else:
                    fixed["members"].append([change.principal, change.group])
            assert oracle_of(fixed).allowed(TABLE, *request), (request, [str(c) for c in fix])
            assert decide(authorizer(fixed), request).allowed, (request, [str(c) for c in fix])


@SETTINGS
@given(world=worlds(), data=st.data())
def test_a_batch_of_requests_on_existing_entities_is_decided_as_one_by_one(
    world: dict[str, Any], data: st.DataObject
) -> None:
    batch = data.draw(st.lists(requests(world), min_size=2, max_size=10))
    authz = authorizer(world)
    existing = oracle_of(world).existing
    batch = [r for r in batch if r[2] in existing]
    reqs = [authz.request(*r) for r in batch]
    together = [d.allowed for d in authz.check_many(reqs)]
    alone = [authz.check(r).allowed for r in reqs]
    assert together == alone
    # a batch as `privilog serve` answers one (/v1/check/batch): allows, request after request
    assert [authz.allows(*r) for r in batch] == alone


# ---- deterministic checks of what the properties rely on ---------------------------------

RICH = {
    "entities": [*POOL[: 1 + len(_inside("ns1"))], "namespace:ns3", "application:ns2.a1"],
    # everything, to a user and to a group (NOBODY is in no group)
    "grants": [[p, "ALL", e] for p in ("user:u1", "group:g1") for e in GRANTABLE],
    "members": [["user:u1", "group:g1"], ["group:g1", "role:r1"]],
}


def test_a_principal_with_nothing_is_allowed_nothing() -> None:
    """Every operation on every entity of the pool, by a principal with no grant and no group."""
    authz = authorizer(RICH)
    oracle = oracle_of(RICH)
    allowed = []
    for row in ROWS:
        if row.entity_type == "namespace":
            entities = [*BY_TYPE["namespace"], "namespace:nope"]
        else:  # one that exists (in ns1) and one that does not (in ns3)
            entities = [e for e in BY_TYPE[row.entity_type] if e.split(":")[1].startswith(("ns1.", "ns3."))][::2]
        for entity in entities:
            for example in row.args:
                args = dict(example)
                if "program" in args:  # a program of the schedule's own application
                    app = ".".join(entity.split(":")[1].split(".")[:2])
                    args["program"] = f"program:{app}.service.px"
                decision = decide(authz, (NOBODY, row.operation, entity, args))
                assert decision.allowed == oracle.allowed(TABLE, NOBODY, row.operation, entity, args)
                if decision.allowed:
                    allowed.append((row.operation, entity))
    # Not even the namespace-wide deletes over namespaces with nothing of the kind
    # (ns2 holds an application only, ns3 is empty): they also need what get needs.
    assert allowed == []


def test_nothing_is_allowed_without_any_grant() -> None:
    authz = authorizer({"entities": ["namespace:ns3"]})
    for row in ROWS:
        for entity in ["namespace:ns3", "namespace:nope"] if row.entity_type == "namespace" else []:
            assert not decide(authz, (NOBODY, row.operation, entity, {})).allowed, (row.operation, entity)


def test_a_batch_is_decided_as_one_by_one_with_entities_that_do_not_exist() -> None:
    authz = authorizer({"entities": ["namespace:ns1"], "grants": [["user:u1", "ADMIN", "namespace:ns1"]]})
    reqs = [
        authz.request("user:u1", "dataset.create", "dataset:ns1.new"),
        authz.request("user:u1", "namespace.delete", "namespace:ns1"),
    ]
    alone = [authz.check(r).allowed for r in reqs]
    # the create places dataset:ns1.new for its own evaluation only: the delete has nothing inside
    assert alone == [False, True]
    assert [d.allowed for d in authz.check_many(reqs)] == alone


def test_the_oracle_and_the_engine_share_no_hierarchy_code() -> None:
    """The oracle derives parents itself; spot-check it against the id scheme's examples."""
    assert ancestors("program:ns1.app.service.api") == ["application:ns1.app", "namespace:ns1", "instance:cdap"]
    assert ancestors("dataset:ns1.sales.2024") == ["namespace:ns1", "instance:cdap"]
    assert ancestors("schedule:ns1.app.nightly") == ["application:ns1.app", "namespace:ns1", "instance:cdap"]
    assert ancestors("kerberosprincipal:svc/host@EXAMPLE.COM") == []
    for entity in GRANTABLE:
        assert [str(a) for a in privilog.EntityId.parse(entity).ancestors()] == ancestors(entity)


def test_multi_entity_deletes_allow_and_deny_through_groups() -> None:
    """ADMIN on everything through a group allows multi-entity deletes; one hole denies."""
    seen: set[tuple[str, bool]] = set()
    for ns, holes in itertools.product(["ns1"], [False, True]):
        world = {
            "entities": _inside(ns),
            "grants": [["group:g1", "ADMIN", e] for e in [f"namespace:{ns}", *_inside(ns)]],
            "members": [["user:u1", "group:g1"]],
        }
        if holes:
            world["grants"] = world["grants"][:-1]
        authz = authorizer(world)
        oracle = oracle_of(world)
        for op in ("namespace.delete", "namespace.delete_all_applications", "application.delete"):
            entity = f"namespace:{ns}" if op.startswith("namespace") else f"application:{ns}.a1"
            allowed = decide(authz, ("user:u1", op, entity, {})).allowed
            assert allowed == oracle.allowed(TABLE, "user:u1", op, entity)
            seen.add((op, allowed))
    assert ("namespace.delete", True) in seen and ("namespace.delete", False) in seen
