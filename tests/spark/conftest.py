"""What the Spark tests share: generated deployments (the ``spark`` fixture is in tests/conftest.py).

Deployments are drawn by Hypothesis (derandomized, so every run draws the same
ones). Each pipeline run costs tens of seconds however small its input, so the
examples are not decided one by one: :func:`draw_batch` collects a batch of
generated worlds, each with its own requests, and the tests decide a whole batch
in one run, over the deployment that holds every world of the batch. The names of
each world carry its number (``ns1w3``, ``user:u1w3``), so the worlds of a batch
share only ``instance:cdap`` (and ``user:nobody``, who holds nothing); the reference engine is asked about the same
combined deployment, so nothing relies on the worlds staying apart.

(A failing Hypothesis example imports libcst, which warns on import; under
``filterwarnings = ["error"]`` that would hide the failure, so it is imported here
once with the warning off, as tests/property/conftest.py does.)
"""

from __future__ import annotations

import contextlib
import itertools
import json
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from privilog.dsl.ir import Param, Policy
from privilog.engine.ids import EntityId
from privilog.engine.patterns import is_pattern, matches, parse_pattern

with warnings.catch_warnings(), contextlib.suppress(ImportError):
    warnings.simplefilter("ignore", DeprecationWarning)
    import libcst  # noqa: F401

# ---- generated deployments ------------------------------------------------------------

NOBODY = "user:nobody"  # in no grant and no group, in every world
CHAIN = 6  # the deepest chain of groups a world nests (issue 18: membership depth)
ABSENT = object()  # an argument the request leaves out


@dataclass(frozen=True)
class Names:
    """The names one world of a batch may use; ``tag`` keeps them apart from other worlds'."""

    tag: int

    @property
    def namespaces(self) -> tuple[str, ...]:
        return tuple(f"ns{i}w{self.tag}" for i in (1, 2, 3))

    @property
    def users(self) -> list[str]:
        return [f"user:u{i}w{self.tag}" for i in (1, 2, 3)]

    @property
    def groups(self) -> list[str]:
        return [f"group:g1w{self.tag}", f"group:g2w{self.tag}", f"role:r1w{self.tag}"]

    @property
    def chain(self) -> list[str]:
        """Groups a world may nest in one another, deeper than the three above ever are."""
        return [f"group:c{i}w{self.tag}" for i in range(1, CHAIN + 1)]

    @property
    def kerberos(self) -> list[str]:
        return [f"kerberosprincipal:k1w{self.tag}@EXAMPLE.COM", f"kerberosprincipal:svc{self.tag}/host@EXAMPLE.COM"]

    def inside(self, ns: str) -> list[str]:
        """Entities that may exist in a namespace (dotted dataset names included)."""
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

    def wildcards(self, ns: str) -> list[str]:
        """Wildcard grants' ids: in each type's parts, across a dataset name's dots, over created entities."""
        return [
            f"dataset:{ns}.d*",
            "dataset:*.new.*",
            f"program:{ns}.a1.*.*",
            f"program:{ns}.a?.spark.p3",
            f"application:{ns}.a?",
            f"artifact:{ns}.*",
            f"namespace:ns?w{self.tag}",
            f"stream:{ns}.*",
            "securekey:*.k1",
            f"dataset_type:{ns}.t*",
            f"schedule:{ns}.a*.s?",
        ]

    def fresh(self, ns: str) -> list[str]:
        """Entities no world holds: what creates name (some inside an application that does not exist)."""
        return [
            f"application:{ns}.a3",
            f"program:{ns}.a1.worker.new",
            f"program:{ns}.a3.service.p1",
            f"schedule:{ns}.a3.s1",
            f"dataset:{ns}.new.v1",
            f"dataset_module:{ns}.new",
            f"dataset_type:{ns}.new",
            f"stream:{ns}.new",
            f"artifact:{ns}.new",
            f"securekey:{ns}.new",
        ]

    @property
    def pool(self) -> list[str]:
        """Every entity a world may hold."""
        return [e for ns in self.namespaces for e in (f"namespace:{ns}", *self.inside(ns))]

    def of_type(self, type_name: str) -> list[str]:
        """Entities of a type a request may name: held by the world or not, fresh ones included."""
        everything = [
            *self.pool,
            *(e for ns in self.namespaces for e in self.fresh(ns)),
            *self.kerberos,
            f"namespace:nsneww{self.tag}",
            "instance:cdap",
        ]
        return [e for e in everything if e.startswith(type_name + ":")]


def ancestors(entity: str) -> list[str]:
    return [str(a) for a in EntityId.parse(entity).ancestors()]


@st.composite
def worlds(draw: st.DrawFn, names: Names, actions: Sequence[str]) -> dict[str, Any]:
    """A world in the world-file format: entities, grants (pre-grants and `ALL` included), memberships."""
    namespaces = draw(st.sampled_from([names.namespaces[:2], names.namespaces]))
    pool = [e for e in names.pool if e.split(":")[1].split(".")[0] in namespaces]
    entities = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=12, unique=True))
    existing = sorted({a for e in entities for a in [e, *ancestors(e)]})
    anywhere = [*names.pool, *names.kerberos, "instance:cdap"]
    on = st.one_of(st.sampled_from(existing), st.sampled_from(anywhere))
    principals = [*names.users, *names.groups]
    grant_actions = [*actions, "ALL"]
    grants = draw(st.lists(st.tuples(st.sampled_from(principals), st.sampled_from(grant_actions), on), max_size=16))
    # whole-namespace grants with holes: what multi-entity deletes and listings need
    for principal, action, ns, step, offset in draw(
        st.lists(
            st.tuples(
                st.sampled_from(principals),
                st.sampled_from(["ADMIN", "ALL", "READ"]),
                st.sampled_from(namespaces),
                st.integers(0, 6),
                st.integers(0, 5),
            ),
            max_size=2,
        )
    ):
        for i, e in enumerate([f"namespace:{ns}", *names.inside(ns)]):
            if step == 0 or (i + offset) % (step + 3):
                grants.append((principal, action, e))
    wild = [w for ns in namespaces for w in names.wildcards(ns)]
    wildcard = st.tuples(st.sampled_from(principals), st.sampled_from(grant_actions), st.sampled_from(wild))
    grants += draw(st.lists(wildcard, min_size=1, max_size=3))
    members = draw(
        st.lists(st.tuples(st.sampled_from(principals), st.sampled_from(names.groups)), max_size=5, unique=True)
    )
    for member, group in draw(chains(names)):
        if (member, group) not in members:
            members.append((member, group))
    # grants to the groups of a chain: the deepest, its middle, or anywhere along it
    depth = len({g for _, g in members if g in names.chain})
    if depth:
        holders = st.sampled_from(names.chain[:depth])
        grants += draw(st.lists(st.tuples(holders, st.sampled_from(grant_actions), on), max_size=3))
    return {"entities": entities, "grants": [list(g) for g in grants], "members": [list(m) for m in members]}


@st.composite
def chains(draw: st.DrawFn, names: Names) -> list[tuple[str, str]]:
    """Memberships nested deep: a user or group in c1, c1 in c2, ... (up to ``CHAIN`` deep), and
    sometimes a cycle, the last group back in an earlier one (or in the first member)."""
    depth = draw(st.integers(0, CHAIN))
    if not depth:
        return []
    first = draw(st.sampled_from([*names.users, *names.groups]))
    path = [first, *names.chain[:depth]]
    members = list(itertools.pairwise(path))
    earlier = [p for p in path[:-1] if not p.startswith("user:")]
    if earlier and draw(st.booleans()):
        members.append((path[-1], draw(st.sampled_from(earlier))))
    return members


BOOL_WORDS: list[object] = [
    ABSENT,
    "true",
    "false",
    "yes",
    "no",
    "1",
    "0",
    "on",
    "off",
    "TRUE",
    " Yes ",
    "",
    True,
    False,
]


def _argument(draw: st.DrawFn, names: Names, param: Param, entity: str) -> object:
    if param.type == "bool":
        return draw(st.sampled_from(BOOL_WORDS))
    candidates = names.of_type(param.type)
    if param.within == "application":  # mostly a program of the request's own application
        application = ".".join(entity.split(":")[1].split(".")[:2])
        mine = [c for c in candidates if c.split(":")[1].startswith(application + ".")]
        candidates = mine * 4 + candidates if mine else candidates
    if param.many:  # a list argument: a few entities, none, or one as plain text
        return draw(st.sampled_from([ABSENT, candidates[0]]) | st.lists(st.sampled_from(candidates), max_size=3))
    return draw(st.sampled_from([ABSENT, *candidates]))


DEFECTS = ["none"] * 10 + ["unknown argument", "bad argument", "wrong entity type", "principal without kind"]


def members_of(world: dict[str, Any], group: str) -> list[str]:
    """Every principal in ``group``, directly or through other groups (cycles included)."""
    inside: dict[str, list[str]] = {}
    for member, parent in world["members"]:
        inside.setdefault(parent, []).append(member)
    found = {group: None}
    frontier = [group]
    while frontier:
        for member in inside.get(frontier.pop(), ()):
            if member not in found:
                found[member] = None
                frontier.append(member)
    return list(found)[1:]


def _instances(names: Names, granted: str) -> list[str]:
    """The entity a grant names, or for a wildcard the entities a request may name that it matches."""
    if not is_pattern(granted):
        return [granted]
    pattern = parse_pattern(granted)
    return [e for e in names.of_type(pattern.type) if matches(pattern, EntityId.parse(e))]


@st.composite
def requests(draw: st.DrawFn, policy: Policy, world: dict[str, Any], names: Names) -> tuple[str, str, str, str]:
    """A request row (principal, operation, entity, args as JSON text), biased towards what the world grants.

    Mostly a holder of a grant (or a member of a group that holds it, however deeply nested)
    acting on the granted entity or on what encloses it; otherwise anyone on any entity of the
    operation's type, held by the world or not. Some are malformed (an unknown argument, a bad argument, an
    entity of the wrong type, a principal without its kind), so that what is rejected is
    compared as well as what is decided.
    """
    operations = [op for op in policy.operations for _ in range(4 if op.params else 1)]  # few take arguments
    types = {op.entity_type for op in policy.operations}
    grants = [g for g in world["grants"] if g[2].split(":")[0] in types and _instances(names, g[2])]
    wildcards = [g for g in grants if is_pattern(g[2])]
    how = draw(st.sampled_from(["granted", "granted", "wildcard", "anything"]))
    if how == "wildcard" and wildcards:
        grants = wildcards  # a third of the requests the world's grants lead to: through a wildcard
    if grants and how != "anything":
        holder, _, pattern = draw(st.sampled_from(grants))
        granted = draw(st.sampled_from(_instances(names, pattern)))  # a wildcard's: an entity it matches
        entity = draw(st.sampled_from([e for e in [granted, *ancestors(granted)] if e.split(":")[0] in types]))
        principal = draw(st.sampled_from([holder, *members_of(world, holder)]))
        op = draw(st.sampled_from([op for op in operations if op.entity_type == entity.split(":")[0]]))
    else:
        op = draw(st.sampled_from(operations))
        principal = draw(st.sampled_from([*names.users, *names.groups, NOBODY]))
        entity = draw(st.sampled_from(names.of_type(op.entity_type)))
    args: dict[str, object] = {}
    for param in op.params:
        value = _argument(draw, names, param, entity)
        if value is not ABSENT:
            args[draw(st.sampled_from([param.name, f"${param.name}"]))] = value
    defect = draw(st.sampled_from(DEFECTS))
    if defect == "unknown argument":
        args["colour"] = "blue"
    elif defect == "bad argument" and op.params:
        args[op.params[0].name] = "maybe" if op.params[0].type == "bool" else "dataset:nowhere.d1"
    elif defect == "wrong entity type":
        entity = draw(st.sampled_from([e for e in names.pool if not e.startswith(op.entity_type + ":")]))
    elif defect == "principal without kind":
        principal = principal.split(":")[1]
    return principal, op.qualified, entity, json.dumps(args) if args else ""


RequestRow = tuple[str, str, str, str]


@dataclass(frozen=True)
class Case:
    """One generated world and requests on it."""

    names: Names
    world: dict[str, Any]
    requests: list[RequestRow] = field(default_factory=list)


@dataclass(frozen=True)
class Batch:
    """Several cases, decided together over the deployment that holds all their worlds."""

    cases: list[Case]

    @property
    def world(self) -> dict[str, Any]:
        """Every case's world in one, in the world-file format."""
        return {
            "entities": sorted({e for c in self.cases for e in c.world["entities"]}),
            "grants": [g for c in self.cases for g in c.world["grants"]],
            "members": [m for c in self.cases for m in c.world["members"]],
        }

    @property
    def requests(self) -> list[RequestRow]:
        return [r for c in self.cases for r in c.requests]

    def case_of(self, index: int) -> Case:
        """The case the ``index``-th request of :attr:`requests` comes from."""
        for case in self.cases:
            if index < len(case.requests):
                return case
            index -= len(case.requests)
        raise IndexError(index)


def draw_batch(policy: Policy, worlds_count: int, max_requests: int, salt: int = 0) -> Batch:
    """``worlds_count`` generated worlds, each with up to ``max_requests`` requests (the same every run;
    another ``salt``, another batch: for a policy whose first batch lacks what a test needs)."""
    cases: list[Case] = []

    @settings(
        max_examples=worlds_count,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def collect(data: st.DataObject) -> None:
        names = Names(len(cases))
        world = data.draw(worlds(names, policy.actions), label="world")
        rows = data.draw(
            st.lists(requests(policy, world, names), min_size=min(4, max_requests), max_size=max_requests),
            label="requests",
        )
        cases.append(Case(names, world, rows))

    (seed(salt)(collect) if salt else collect)()
    return Batch(cases)


@pytest.fixture(scope="session")
def generated() -> Callable[[Policy, int, int], Batch]:
    """:func:`draw_batch`: ``generated(policy, worlds, max_requests_per_world)``."""
    return draw_batch
