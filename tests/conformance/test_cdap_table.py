"""Conformance of rules/cdap.policy with its table, tests/conformance/cdap.yaml.

Every row (and every example argument set of it) becomes tests against the public API:

* SUFFICE: granting exactly what the row requires (one way per conjunct; each way of each
  conjunct in turn) allows;
* NECESSARY: removing any one of those grants denies;
* UNREQUIRED DON'T HELP: granting everything else (every action on every other entity,
  the parent and ancestors, the instance; everything to other principals and to groups
  the principal is not in) without what one conjunct needs denies;
* GROUPS: the same grants to a group (or a role through a group) the principal is in allow;
* a request whose arguments cannot meet a conjunct (a deploy without an artifact) is
  denied whatever is granted.

Listings (`shows` rows) are checked through ``Authorizer.visible``. The way a row's
`requires` is read is tests/property/oracle.py, the same interpretation the property
tests compare the engine with.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

import privilog
from dsl.ir import Policy
from privilog import EntityId, Grant, World

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "property"))
from oracle import ACTIONS, Need, OracleWorld, Row, ancestors, load_table, parent

TABLE = load_table()
ROWS = TABLE.rows
BASE_ENTITIES: list[str] = TABLE.world["entities"]

ALICE = "user:alice"
# Principals that hold everything and must never lend it to alice: another user, a group
# alice is not in (bob is), a role nobody is in, and a group that is a *member of* alice
# (membership does not flow downwards).
OTHERS = ("user:bob", "group:eng", "role:ops", "group:boss")
OTHER_MEMBERS = (("user:bob", "group:eng"), ("group:boss", ALICE))
# Entities outside the hierarchy of every subject, granted in the "unrequired" tests.
EXTRA_ENTITIES = (
    "instance:cdap",
    "namespace:ns9",
    "kerberosprincipal:alice@EXAMPLE.COM",
    "kerberosprincipal:nsowner@EXAMPLE.COM",
    "kerberosprincipal:etl@EXAMPLE.COM",
    "kerberosprincipal:ingest@EXAMPLE.COM",
    "kerberosprincipal:svc/host@EXAMPLE.COM",
    "artifact:ns1.fresh",
    "dataset_type:ns1.custom.kv",
    "application:ns1.newapp",
    "dataset:ns1.new.ds",
)


def _cases() -> tuple[list[tuple[Row, dict[str, str]]], list[tuple[Row, dict[str, str]]]]:
    satisfiable, unsatisfiable = [], []
    world = OracleWorld(BASE_ENTITIES)
    for row in ROWS:
        for args in row.args:
            ways = [world.ways(c, TABLE.subject(row), args) for c in world.applicable(row, args)]
            (satisfiable if all(ways) else unsatisfiable).append((row, args))
    return satisfiable, unsatisfiable


SATISFIABLE, UNSATISFIABLE = _cases()


def case_id(case: tuple[Row, Mapping[str, str]]) -> str:
    row, args = case
    text = ",".join(f"{k}={v.split(':')[-1]}" for k, v in sorted(args.items()))
    return f"{row.operation}[{text}]" if text else row.operation


# ---- the bench: one authorizer, its world swapped per question ---------------------------


class Bench:
    def __init__(self) -> None:
        self.authz = privilog.load("cdap", {"entities": BASE_ENTITIES})
        self.base = {EntityId.parse(e) for e in BASE_ENTITIES}

    def _world(self, grants: Iterable[tuple[str, str, str]], members: Iterable[tuple[str, str]]) -> None:
        self.authz.world = World(
            entities=set(self.base),
            grants={Grant(p, a, EntityId.parse(e)) for p, a, e in grants},
            members=set(members),
        )
        self.authz.refresh()

    def allowed(
        self,
        row: Row,
        args: Mapping[str, str],
        grants: Iterable[tuple[str, str, str]],
        members: Iterable[tuple[str, str]] = (),
        principal: str = ALICE,
    ) -> bool:
        """Whether ``principal`` may do the row's operation on its subject in this world."""
        self._world(grants, members)
        entity = TABLE.subject(row)
        if row.verb == "shows":
            seen = self._visible(principal, row.entity_type, parent(entity))
            everywhere = self._visible(principal, row.entity_type, None)
            assert (entity in seen) == (entity in everywhere), "a listing must not depend on where it is asked"
            return entity in seen
        request = self.authz.request(principal, row.operation, entity, dict(args))
        return self.authz.check(request).allowed

    def _visible(self, principal: str, type_name: str, within: str | None) -> set[str]:
        if within is not None and within.startswith("instance:"):
            within = None
        return {str(v.entity) for v in self.authz.visible(principal, type_name, within)}


@pytest.fixture(scope="module")
def bench() -> Bench:
    return Bench()


def to_alice(needs: Iterable[Need], who: str = ALICE) -> set[tuple[str, str, str]]:
    return {(who, action, entity) for action, entity in needs}


def ways_of(row: Row, args: Mapping[str, str]) -> list[list[frozenset[Need]]]:
    """For each applicable conjunct, each set of grants that meets it (from the table)."""
    world = OracleWorld(BASE_ENTITIES)
    return [world.ways(c, TABLE.subject(row), args) for c in world.applicable(row, args)]


def _thin(row: Row, ways: list[frozenset[Need]]) -> list[frozenset[Need]]:
    """Every action on the subject and on named entities, but one action per descendant
    (rotating through the actions), to keep "self or descendant" rows affordable."""
    subject = TABLE.subject(row)
    kept: list[frozenset[Need]] = []
    seen: dict[str, int] = {}
    for way in ways:
        if not way:
            kept.append(way)
            continue
        (action, entity), *more = sorted(way)
        if more or entity == subject or subject not in ancestors(entity):
            kept.append(way)
            continue
        k = seen.setdefault(entity, len(seen))
        options = sorted(a for w in ways if len(w) == 1 for a, e in w if e == entity)
        if action == options[k % len(options)]:
            kept.append(way)
    return kept


def combinations(row: Row, args: Mapping[str, str]) -> list[frozenset[Need]]:
    """One way per conjunct: the first way of each, then each other way of each conjunct in turn."""
    ways = [_thin(row, w) for w in ways_of(row, args)]
    default = [w[0] for w in ways]
    combos = [frozenset().union(*default)]
    for i, alternatives in enumerate(ways):
        for way in alternatives[1:]:
            chosen = list(default)
            chosen[i] = way
            combos.append(frozenset().union(*chosen))
    return list(dict.fromkeys(combos))


def universe(row: Row, args: Mapping[str, str]) -> set[Need]:
    """Every action on every entity the tests know of, the subject and the arguments included."""
    entities = {*BASE_ENTITIES, *EXTRA_ENTITIES, TABLE.subject(row)}
    entities |= {v for v in args.values() if ":" in v}
    for e in list(entities):
        entities.update(ancestors(e))
    return {(a, e) for a in ACTIONS for e in entities}


def others_hold(needs: set[Need]) -> set[tuple[str, str, str]]:
    return {(p, a, e) for p in OTHERS for a, e in needs}


# ---- SUFFICE -----------------------------------------------------------------------------


@pytest.mark.parametrize("case", SATISFIABLE, ids=case_id)
def test_required_grants_suffice(bench: Bench, case: tuple[Row, dict[str, str]]) -> None:
    row, args = case
    for combo in combinations(row, args):
        assert bench.allowed(row, args, to_alice(combo)), f"{case_id(case)} denied with {sorted(combo)}"


# ---- NECESSARY ---------------------------------------------------------------------------

# Rows whose conjuncts overlap in a full namespace; their "self or descendant" conjunct is
# proved necessary on an empty namespace by test_namespace_wide_deletes_need_a_privilege_in_it.
OVERLAPPING = {
    "namespace.delete_all_applications",
    "namespace.drop_all_datasets",
    "namespace.delete_all_dataset_modules",
    "namespace.drop_all_streams",
}


@pytest.mark.parametrize("operation", sorted(OVERLAPPING))
def test_namespace_wide_deletes_need_a_privilege_in_it(operation: str) -> None:
    authz = privilog.load("cdap", {"entities": ["namespace:empty"]})
    request = authz.request(ALICE, operation, "namespace:empty")
    assert not authz.check(request).allowed  # nothing to delete, and no privilege: denied
    authz.world.grants = {Grant(ALICE, "READ", EntityId.parse("namespace:empty"))}
    authz.refresh()
    assert authz.check(request).allowed


@pytest.mark.parametrize("case", SATISFIABLE, ids=case_id)
def test_each_required_grant_is_necessary(bench: Bench, case: tuple[Row, dict[str, str]]) -> None:
    row, args = case
    tried = 0
    subject = TABLE.subject(row)
    for combo in combinations(row, args):
        for need in combo:
            tried += 1
            rest = to_alice(combo - {need})
            # A grant can be redundant only where the table's conjuncts overlap (ADMIN on every
            # application inside a namespace is also a privilege inside it): then the table
            # itself, read by the oracle, says the rest still allows.
            table_says = OracleWorld(BASE_ENTITIES, sorted(rest)).allowed(TABLE, ALICE, row.operation, subject, args)
            assert bench.allowed(row, args, rest) == table_says, f"{case_id(case)}: without {need}"
            redundant_ok = row.operation in OVERLAPPING and need[1] == subject
            assert not table_says or redundant_ok, f"{case_id(case)} allowed without {need}"
    nothing_needed = all(any(not way for way in ways) for ways in ways_of(row, args))
    assert tried or nothing_needed
    if not nothing_needed:
        assert not bench.allowed(row, args, set()), f"{case_id(case)} allowed with no grants"


# ---- UNREQUIRED DON'T HELP ---------------------------------------------------------------


@pytest.mark.parametrize("case", SATISFIABLE, ids=case_id)
def test_unrequired_grants_do_not_help(bench: Bench, case: tuple[Row, dict[str, str]]) -> None:
    row, args = case
    everything = universe(row, args)
    context = others_hold(everything)
    ways = ways_of(row, args)
    helpful = {need for alternatives in ways for way in alternatives for need in way}

    # Everything that no conjunct asks for, for alice; everything at all for the others.
    if helpful:
        grants = to_alice(everything - helpful) | context
        assert not bench.allowed(row, args, grants, OTHER_MEMBERS), f"{case_id(case)}: unrequired grants helped"

    # Everything but what one conjunct needs: still denied. For an "every" conjunct,
    # everything but the privilege on one of the entities it covers.
    world = OracleWorld(BASE_ENTITIES)
    conjuncts = world.applicable(row, args)
    for conjunct, alternatives in zip(conjuncts, ways, strict=True):
        if conjunct.is_every:
            covered = {e for way in alternatives for _, e in way}
            holes = [
                {(a, e) for a, e2 in everything if e2 == e and a in conjunct.alternatives[0].actions}
                for e in sorted(covered)
            ]
        else:
            holes = [{need for way in alternatives for need in way}]
        for hole in holes:
            grants = to_alice(everything - hole) | context
            assert not bench.allowed(row, args, grants, OTHER_MEMBERS), (
                f"{case_id(case)} allowed without any of {sorted(hole)}"
            )
    # ... and with everything, allowed (the context above was not itself the cause of denial).
    assert bench.allowed(row, args, to_alice(everything) | context, OTHER_MEMBERS)


# ---- through groups and roles ------------------------------------------------------------


@pytest.mark.parametrize("case", SATISFIABLE, ids=case_id)
def test_grants_to_a_group_count(bench: Bench, case: tuple[Row, dict[str, str]]) -> None:
    row, args = case
    combo = combinations(row, args)[0]
    if not combo:
        pytest.skip("nothing to grant: every conjunct is vacuously met")
    team = [(ALICE, "group:team")]
    assert bench.allowed(row, args, to_alice(combo, "group:team"), team)
    # a role reached through a group
    assert bench.allowed(row, args, to_alice(combo, "role:ops"), [*team, ("group:team", "role:ops")])
    # half through the group, half directly
    needs = sorted(combo)
    split = to_alice(needs[::2], "group:team") | to_alice(needs[1::2])
    assert bench.allowed(row, args, split, team)
    # the same grants to the group, but alice not in it: denied
    assert not bench.allowed(row, args, to_alice(combo, "group:team"), [("user:bob", "group:team")])


# ---- arguments that cannot be met ---------------------------------------------------------


@pytest.mark.parametrize("case", UNSATISFIABLE, ids=case_id)
def test_missing_argument_denies_whatever_is_granted(bench: Bench, case: tuple[Row, dict[str, str]]) -> None:
    row, args = case
    everything = universe(row, args)
    assert not bench.allowed(row, args, to_alice(everything) | others_hold(everything), OTHER_MEMBERS)


def test_unsatisfiable_cases_are_exactly_the_missing_arguments() -> None:
    assert {case_id(c) for c in UNSATISFIABLE} == {
        "application.deploy",
        "schedule.resume",
        "schedule.suspend",
    }


# ---- the table and the policy cannot drift -----------------------------------------------


@pytest.fixture(scope="module")
def policy() -> Policy:
    return privilog.load_policy("cdap")


def test_every_policy_operation_has_a_row(policy: Policy) -> None:
    in_policy = {op.qualified for op in policy.operations}
    in_table = [row.operation for row in ROWS]
    assert len(in_table) == len(set(in_table)), "an operation has two rows"
    assert sorted(in_policy - set(in_table)) == [], "operations of the policy without a row"
    assert sorted(set(in_table) - in_policy) == [], "rows whose operation the policy lacks"


def test_rows_agree_with_the_policy_on_verbs_and_arguments(policy: Policy) -> None:
    for row in ROWS:
        op = policy.operation(row.operation)
        assert op is not None, row.operation
        assert op.verb.value == row.verb, row.operation
        params = {p.name: p.type for p in op.params}
        assert row.arg_names == set(params), row.operation
        for args in row.args:
            assert set(args) <= set(params), row.operation
            for name, value in args.items():
                expected = params[name]
                if expected == "bool":
                    assert value in ("true", "false"), (row.operation, name)
                else:
                    assert EntityId.parse(value).type == expected, (row.operation, name)


def test_rows_are_documented() -> None:
    assert len(ROWS) >= 60
    for row in ROWS:
        assert row.seed in ("003", "004", "003,004"), row.operation
        assert row.source.strip(), row.operation
        assert row.verb in ("requires", "shows"), row.operation
        assert row.requires, row.operation
        subject = TABLE.subject(row)
        assert EntityId.parse(subject).type == row.entity_type, row.operation
    # every type with a documented listing has exactly one
    listed = [row.entity_type for row in ROWS if row.verb == "shows"]
    assert len(listed) == len(set(listed))
    assert set(listed) == {
        "namespace",
        "artifact",
        "application",
        "program",
        "dataset",
        "dataset_module",
        "dataset_type",
        "stream",
        "securekey",
    }


def test_seed_rows_are_covered() -> None:
    """The rows of seeds 003 and 004 that are easy to miss."""
    by_op = {row.operation: row for row in ROWS}
    for op in ("namespace.create", "application.deploy", "dataset.create", "stream.create"):
        assert "owner" in by_op[op].arg_names, f"{op}: the Kerberos principal row"
        assert any("owner" in a for a in by_op[op].args), op
    for op in (
        "namespace.delete_all_dataset_modules",
        "namespace.drop_all_streams",
        "namespace.delete_all_applications",
        "namespace.drop_all_datasets",
    ):
        assert by_op[op].requires[0].is_every, op
    assert {r.operation for r in ROWS if r.seed == "004"} >= {
        "stream.create",
        "stream.read",
        "stream.write",
        "stream.get",
        "stream.update",
        "stream.truncate",
        "stream.drop",
        "stream.list",
        "namespace.drop_all_streams",
    }


# ---- spot checks of the world format the table relies on ----------------------------------


def test_all_means_the_four_actions() -> None:
    authz = privilog.load(
        "cdap",
        {
            "entities": ["program:ns1.app.service.api"],
            "grants": [[ALICE, "ALL", "program:ns1.app.service.api"]],
        },
    )
    for op in ("program.start", "program.set_instances", "program.get_runtime_args", "program.get_status"):
        assert authz.check(authz.request(ALICE, op, "program:ns1.app.service.api")).allowed, op
    assert not authz.check(authz.request(ALICE, "application.delete", "application:ns1.app")).allowed


@pytest.mark.parametrize("operation", ["schedule.resume", "schedule.suspend"])
def test_a_schedule_cannot_be_driven_through_an_unrelated_program(operation: str) -> None:
    authz = privilog.load(
        "cdap",
        {
            "entities": [*BASE_ENTITIES, "program:ns2.mine.service.x"],
            "grants": [["user:eve", "EXECUTE", "program:ns2.mine.service.x"]],
        },
    )
    own = authz.request("user:eve", operation, "schedule:ns2.mine.s", {"program": "program:ns2.mine.service.x"})
    assert authz.check(own).allowed  # her own application's schedule: yes
    # a schedule of ns1.app, which she cannot touch, named with her own program: a bad request
    with pytest.raises(privilog.RequestError, match=r"must be a program in application:ns1\.app"):
        authz.request("user:eve", operation, "schedule:ns1.app.nightly", {"program": "program:ns2.mine.service.x"})
