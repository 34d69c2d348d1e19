"""Conformance of every policy in rules/ with its table, tests/conformance/POLICY.yaml.

Every row of every table (and every example argument set of it) becomes tests against the
public API:

* SUFFICE: granting exactly what the row requires (one way per conjunct; each way of each
  conjunct in turn) allows;
* NECESSARY: removing any one of those grants denies (unless the table itself, whose
  conjuncts may overlap, still allows: then the policy must too);
* UNREQUIRED DON'T HELP: granting everything else (every action on every entity the table
  names, the parent, ancestors and the instance included), while other principals and
  groups the principal is not in hold all the row could need, without what one conjunct
  needs denies;
* GROUPS: the same grants to a group (or a role through a group) the principal is in allow
  (where a row counts only the principal's own grants, `own: true`, they do not);
* a request whose arguments cannot meet a conjunct (a deploy without an artifact) is
  denied whatever is granted;
* DRIFT: the table and the policy name the same operations, verbs and arguments.

Listings (`shows` rows) are checked through ``Authorizer.visible``. The way a row's
`requires` is read is privilog/testing/table.py, the interpreter the property tests and
``privilog test --report`` use too. One authorizer per policy and backend serves every test:
its world is replaced and ``refresh()``ed for each question.

Every question is asked of both backends, and each answer held to the table: so check() on
the default backend gives the reference's answers. On the default backend, each answer is
also asked of ``decide`` and ``allows`` (the decision plans `privilog serve`, its batches and
CDAP's enforce answer with), and each listing of ``visible_entities``; the Bench raises when
they differ from check() (privilog.testing.conformance.Bench._agree).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
from privilog.dsl.ir import Param

import privilog
from privilog import EntityId, dsl
from privilog.testing.conformance import Bench
from privilog.testing.table import (
    Need,
    Row,
    Table,
    TableWorld,
    case_label,
    combinations,
    is_table,
    load_table,
    overlapping,
    to_principal,
    universe,
    vacuous,
    ways_of,
)

HERE = Path(__file__).resolve().parent
TABLES: dict[str, Table] = {t.policy: t for t in (load_table(p) for p in sorted(HERE.glob("*.yaml")) if is_table(p))}

ALICE = "user:alice"
# Principals that hold everything and must never lend it to alice: another user, a group
# alice is not in (bob is), a role nobody is in, and a group that is a *member of* alice
# (membership does not flow downwards).
OTHERS = ("user:bob", "group:eng", "role:ops", "group:boss")
OTHER_MEMBERS = (("user:bob", "group:eng"), ("group:boss", ALICE))

Case = tuple[str, Row, dict[str, str | list[str]]]


def _cases() -> tuple[list[Case], list[Case]]:
    satisfiable, unsatisfiable = [], []
    for policy, table in TABLES.items():
        for row in table.rows:
            for args in row.args:
                (satisfiable if all(ways_of(table, row, args)) else unsatisfiable).append((policy, row, args))
    return satisfiable, unsatisfiable


SATISFIABLE, UNSATISFIABLE = _cases()


def case_id(case: Case) -> str:
    policy, row, args = case
    return f"{policy}:{case_label(row, args)}"


_BENCHES: dict[tuple[str, str], Bench] = {}
BACKENDS = ("compiled", "pydatalog")  # the default engine, and the reference it is held to


def bench_for(policy: str, backend: str = "compiled") -> Bench:
    """The one authorizer of a policy on a backend, shared by every test of its table."""
    if (policy, backend) not in _BENCHES:
        _BENCHES[(policy, backend)] = Bench(TABLES[policy], backend=backend)
    return _BENCHES[(policy, backend)]


def others_hold(needs: set[Need]) -> set[tuple[str, str, str]]:
    return {(p, a, e) for p in OTHERS for a, e in needs}


def test_every_policy_has_a_table() -> None:
    shipped = sorted(p.stem for p in dsl.rules_dir().glob("*.policy"))
    assert sorted(TABLES) == shipped


# ---- SUFFICE -----------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", SATISFIABLE, ids=case_id)
def test_required_grants_suffice(case: Case, backend: str) -> None:
    policy, row, args = case
    bench = bench_for(policy, backend)
    for combo in combinations(bench.table, row, args):
        assert bench.allowed(row, args, to_principal(combo)), f"{case_id(case)} denied with {sorted(combo)}"


# ---- NECESSARY ---------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", SATISFIABLE, ids=case_id)
def test_each_required_grant_is_necessary(case: Case, backend: str) -> None:
    policy, row, args = case
    bench = bench_for(policy, backend)
    table = bench.table
    subject = table.subject(row)
    ways = ways_of(table, row, args)
    tried = 0
    combos = combinations(table, row, args)
    for i, combo in enumerate(combos):
        # every grant of the first combination; of the others, the ones they vary
        for need in combo if i == 0 else combo - combos[0]:
            tried += 1
            rest = to_principal(combo - {need})
            # A grant can be redundant only where the table's conjuncts overlap (ADMIN on every
            # application inside a namespace is also a privilege inside it): then the table
            # itself, read by the interpreter, says the rest still allows.
            table_says = TableWorld(table.entities, sorted(rest)).allowed(table, ALICE, row.operation, subject, args)
            assert bench.allowed(row, args, rest) == table_says, f"{case_id(case)}: without {need}"
            assert not table_says or overlapping(ways), f"{case_id(case)} allowed without {need}"
    assert tried or vacuous(ways)
    if not vacuous(ways):
        assert not bench.allowed(row, args, set()), f"{case_id(case)} allowed with no grants"


# ---- UNREQUIRED DON'T HELP ---------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", SATISFIABLE, ids=case_id)
def test_unrequired_grants_do_not_help(case: Case, backend: str) -> None:
    policy, row, args = case
    bench = bench_for(policy, backend)
    table = bench.table
    everything = universe(table)
    ways = ways_of(table, row, args)
    helpful = {need for alternatives in ways for way in alternatives for need in way}
    context = others_hold(helpful)  # the others hold all that alice lacks below

    # Everything that no conjunct asks for, for alice; everything at all for the others.
    if helpful:
        grants = to_principal(everything - helpful) | context
        assert not bench.allowed(row, args, grants, OTHER_MEMBERS), f"{case_id(case)}: unrequired grants helped"

    # Everything but what one conjunct needs: still denied. For an "every" alternative,
    # everything but the privilege on one of the entities it covers.
    world = TableWorld(table.entities, names=table.mentioned())
    for conjunct in world.applicable(row, args):
        for hole in world.breakers(conjunct, table.subject(row), args):
            grants = to_principal(everything - hole) | context
            assert not bench.allowed(row, args, grants, OTHER_MEMBERS), (
                f"{case_id(case)} allowed without any of {sorted(hole)}"
            )
    # ... and with everything, allowed (the context above was not itself the cause of denial).
    assert bench.allowed(row, args, to_principal(everything) | context, OTHER_MEMBERS)


# ---- through groups and roles ------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", SATISFIABLE, ids=case_id)
def test_grants_to_a_group_count(case: Case, backend: str) -> None:
    policy, row, args = case
    bench = bench_for(policy, backend)
    combo = combinations(bench.table, row, args)[0]
    if not combo:
        pytest.skip("nothing to grant: every conjunct is vacuously met")
    team = [(ALICE, "group:team")]
    if any(a.own for c in row.requires for a in c.alternatives):
        # only the principal's own grants count (cdap-5.1's visibility): a group's do not
        assert not bench.allowed(row, args, to_principal(combo, "group:team"), team)
        assert not bench.allowed(row, args, to_principal(combo, "role:ops"), [*team, ("group:team", "role:ops")])
        return
    assert bench.allowed(row, args, to_principal(combo, "group:team"), team)
    # a role reached through a group
    assert bench.allowed(row, args, to_principal(combo, "role:ops"), [*team, ("group:team", "role:ops")])
    # half through the group, half directly
    needs = sorted(combo)
    split = to_principal(needs[::2], "group:team") | to_principal(needs[1::2])
    assert bench.allowed(row, args, split, team)
    # the same grants to the group, but alice not in it: denied
    assert not bench.allowed(row, args, to_principal(combo, "group:team"), [("user:bob", "group:team")])


# ---- arguments that cannot be met ---------------------------------------------------------


@pytest.mark.parametrize("case", UNSATISFIABLE, ids=case_id)
def test_missing_argument_denies_whatever_is_granted(case: Case) -> None:
    policy, row, args = case
    bench = bench_for(policy)
    everything = universe(bench.table)
    assert not bench.allowed(row, args, to_principal(everything) | others_hold(everything), OTHER_MEMBERS)


@pytest.mark.parametrize("case", UNSATISFIABLE, ids=case_id)
def test_only_a_missing_argument_makes_a_row_unsatisfiable(case: Case) -> None:
    policy, row, args = case
    world = TableWorld(TABLES[policy].entities)
    hopeless = [c for c in world.applicable(row, args) if not world.ways(c, TABLES[policy].subject(row), args)]
    for conjunct in hopeless:
        if [a.without for a in conjunct.alternatives] == ["a delegate admin of a Ranger policy about it"]:
            continue  # ranger-cdap's grant: the table's world holds no Ranger policy (tests/ranger holds the rule)
        named = {a.on[1:] for a in conjunct.alternatives if a.on.startswith("$")}
        assert named and not named & set(args), (case_id(case), conjunct)


# ---- the table and the policy cannot drift -----------------------------------------------


@pytest.mark.parametrize("policy", sorted(TABLES))
def test_every_policy_operation_has_a_row(policy: str) -> None:
    in_policy = {op.qualified for op in privilog.load_policy(policy).operations}
    in_table = [row.operation for row in TABLES[policy].rows]
    assert len(in_table) == len(set(in_table)), "an operation has two rows"
    assert sorted(in_policy - set(in_table)) == [], "operations of the policy without a row"
    assert sorted(set(in_table) - in_policy) == [], "rows whose operation the policy lacks"


def _agrees(row: Row, params: Mapping[str, Param]) -> None:
    assert row.arg_names == set(params), row.operation
    for args in row.args:
        assert set(args) <= set(params), row.operation
        for name, value in args.items():
            param = params[name]
            assert isinstance(value, list) == param.many, (row.operation, name, "a list where the policy takes one")
            if param.type == "bool":
                assert value in ("true", "false"), (row.operation, name)
            else:
                for one in value if isinstance(value, list) else [value]:
                    assert EntityId.parse(one).type == param.type, (row.operation, name)


@pytest.mark.parametrize("policy", sorted(TABLES))
def test_rows_agree_with_the_policy_on_verbs_and_arguments(policy: str) -> None:
    loaded = privilog.load_policy(policy)
    for row in TABLES[policy].rows:
        op = loaded.operation(row.operation)
        assert op is not None, row.operation
        assert op.verb.value == row.verb, row.operation
        _agrees(row, {p.name: p for p in op.params})


@pytest.mark.parametrize("policy", sorted(TABLES))
def test_rows_are_documented(policy: str) -> None:
    table = TABLES[policy]
    assert table.seeds, "the table names its seed(s)"
    declared = {t.name for t in privilog.load_policy(policy).entity_types}
    for row in table.rows:
        assert set(row.seed.split(",")) <= set(table.seeds), row.operation
        assert row.source.strip(), row.operation
        subject = table.subject(row)
        assert EntityId.parse(subject).type == row.entity_type, row.operation
    # every entity the table names is of a type the policy knows
    assert {EntityId.parse(e).type for e in table.mentioned()} <= declared
    # a type has at most one listing
    listed = [row.entity_type for row in table.rows if row.verb == "shows"]
    assert len(listed) == len(set(listed))
