"""The generated phase: larger worlds than the bound allows, drawn by hypothesis.

Each example is a world of two namespaces with up to three entities of each type
(applications with programs and schedules), three users, a group and a role with
memberships between them (cycles included), grants to any of them on any entity,
existing or not, and authorization admins; and a requester asking for every
operation on one entity, with arguments drawn for each. The same checkers run over
it as over the bounded worlds. A counterexample is shrunk by hypothesis to a small
one before it is reported. The search is derandomized: a run is repeatable.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from privilog.dsl.ir import Policy
from privilog.engine.authorizer import RequestError
from privilog.engine.decision import Request
from privilog.engine.ids import EntityId
from privilog.engine.world import Grant
from privilog.proofs.checkers import CHECKERS, Context, Trial, relations
from privilog.proofs.evaluate import Outcome
from privilog.proofs.findings import Counterexample, Verdict
from privilog.proofs.worlds import Point, child_entity

NAMESPACES = ("ns1", "ns2")
USERS = ("user:u1", "user:u2", "user:u3")
GROUPS = ("group:g1", "role:r1")
PRINCIPALS = (*USERS, *GROUPS)
KERBEROS = (EntityId("kerberosprincipal", "alice@EXAMPLE.COM"), EntityId("kerberosprincipal", "svc@EXAMPLE.COM"))
PER_TYPE = 3  # entities of each type under each parent the generator may place


def entity_pool(policy: Policy) -> list[EntityId]:
    """Every entity a generated world may hold or grant on."""
    known = {t.name: t for t in policy.entity_types}
    pool: list[EntityId] = []

    def under(parent: EntityId, depth: int) -> None:
        for entity_type in policy.entity_types:
            if entity_type.parent == parent.type:
                for index in range(1, (2 if depth > 1 else PER_TYPE) + 1):
                    child = child_entity(parent, entity_type.name, index)
                    pool.append(child)
                    under(child, depth + 1)

    if "namespace" in known:
        for index in range(1, len(NAMESPACES) + 1):
            namespace = child_entity(EntityId("instance", "cdap"), "namespace", index)
            pool.append(namespace)
            under(namespace, 1)
    if "instance" in known:
        pool.append(EntityId("instance", "cdap"))
    if "kerberosprincipal" in known:
        pool.extend(KERBEROS)
    return pool


@dataclass(frozen=True)
class Example:
    """A generated world, the requests made in it, a grant to try adding, an entity to recreate."""

    entities: frozenset[EntityId]
    grants: frozenset[Grant]
    members: frozenset[tuple[str, str]]
    admins: frozenset[str]
    requests: tuple[Request, ...]
    extra: Grant
    recreate: EntityId


def examples(context: Context) -> st.SearchStrategy[Example]:
    """Generated worlds, each with a requester asking for every operation on one entity."""
    authorizer = context.evaluator.authorizer
    policy = authorizer.policy
    pool = entity_pool(policy)
    targets: dict[str, list[EntityId]] = {}
    for entity in pool:
        if any(op.entity_type == entity.type for op in policy.operations):
            targets.setdefault(entity.type, []).append(entity)

    def fits(operation: str, target: EntityId, name: str, value: EntityId) -> bool:
        """Whether the policy takes ``value`` as the argument (it may have to sit beside the target)."""
        try:
            authorizer.request(USERS[0], operation, target, {name: str(value)})
        except RequestError:
            return False
        return True

    @st.composite
    def draw(data: st.DrawFn) -> Example:
        target = data(st.sampled_from(targets[data(st.sampled_from(sorted(targets)))]))
        inside = [e for e in pool if target in e.ancestors()]
        around = st.sampled_from(inside) | st.sampled_from(pool) if inside else st.sampled_from(pool)
        entities = data(st.frozensets(around, max_size=12))
        if data(st.integers(0, 3)):  # the request's entity exists three times in four
            entities |= {target}
        # grants mostly on what exists around the request, some on anything (pre-grants)
        somewhere = st.sampled_from(sorted({*entities, target, *target.ancestors()})) | st.sampled_from(pool)
        principal = data(st.sampled_from(USERS))
        requests = []
        for op in policy.operations:
            if op.entity_type != target.type:
                continue
            args: dict[str, str | list[str]] = {}
            for param in op.params:
                if not data(st.booleans()):
                    continue
                if param.type == "bool":
                    args[param.name] = "true"
                    continue
                fitting = [e for e in pool if e.type == param.type and fits(op.qualified, target, param.name, e)]
                if fitting and param.many:  # a list argument: a few entities, or none
                    args[param.name] = [str(e) for e in data(st.lists(st.sampled_from(fitting), max_size=3))]
                elif fitting:
                    args[param.name] = str(data(st.sampled_from(fitting)))
            requests.append(authorizer.request(principal, op.qualified, target, args))
        holders = st.sampled_from((principal, *GROUPS)) | st.sampled_from(PRINCIPALS)
        grants = st.builds(Grant, holders, st.sampled_from(policy.actions), somewhere)
        members = st.tuples(st.sampled_from((principal, *PRINCIPALS)), st.sampled_from(GROUPS))
        return Example(
            entities=entities,
            grants=data(st.frozensets(grants, min_size=1, max_size=12)),
            members=data(st.frozensets(members, max_size=4)),
            admins=data(st.frozensets(st.sampled_from(PRINCIPALS), max_size=2)),
            requests=tuple(requests),
            extra=data(st.builds(Grant, holders, st.sampled_from(policy.actions), somewhere)),
            recreate=data(st.sampled_from(sorted(entities | {target}))),
        )

    return draw()


class GeneratedTrial(Trial):
    """One generated world."""

    phase = "generated"

    def __init__(self, context: Context, example: Example):
        super().__init__(context, example.requests)
        self.example = example
        context.evaluator.forget()
        self.point = Point(example.entities, example.grants, example.members, example.admins)
        self._outcome = self.outcome(self.point)

    def worlds(self) -> Iterable[tuple[Point, Outcome]]:
        return [(self.point, self._outcome)]

    def outcome(self, point: Point) -> Outcome:
        return self.context.evaluator.cached(point, lambda: self.world(point), self.requests)

    def additions(self, point: Point) -> Sequence[Grant]:
        return [self.example.extra] if self.example.extra not in point.grants else []

    def fullest(self) -> Iterable[tuple[Point, Outcome]]:
        return self.worlds()

    def recreatable(self, point: Point) -> list[EntityId]:
        return [self.example.recreate]


class _Found(Exception):
    """A generated world broke a promise (raised so that hypothesis shrinks it)."""

    def __init__(self, counterexample: Counterexample):
        super().__init__(counterexample.summary)
        self.counterexample = counterexample


class Prover(Protocol):
    """What the generated phase reads of :class:`proofs.prover.Prover`, which calls it: named here, so that
    this module does not import the prover back. (The search below keeps its source as it was: hypothesis
    seeds a derandomized search from it.)"""

    context: Context
    verdicts: dict[str, Verdict]
    examples: int


def generated(prover: Prover) -> None:
    """Check the promises not yet broken on ``prover.examples`` generated worlds; shrink what breaks one."""
    strategy = examples(prover.context)
    while any(v.held for v in prover.verdicts.values()):
        found = _search(prover, strategy, [v for v in prover.verdicts.values() if v.held])
        if found is None:
            return
        prover.verdicts[found.promise].found(found)


def _search(prover: Prover, strategy: st.SearchStrategy[Example], watched: list[Verdict]) -> Counterexample | None:
    """One hypothesis run over the promises in ``watched``; the (shrunk) counterexample it found, if any."""
    focus: list[str] = []  # once one breaks, shrinking looks at that promise alone

    @settings(
        max_examples=prover.examples,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        phases=(Phase.generate, Phase.shrink),
        report_multiple_bugs=False,
    )
    @given(strategy)
    def search(example: Example) -> None:
        scratch = {v.promise.name: Verdict(v.promise) for v in watched if not focus or v.promise.name in focus}
        _check(GeneratedTrial(prover.context, example), scratch)
        for verdict in scratch.values():
            prover.verdicts[verdict.promise.name].generated += verdict.generated
            if verdict.counterexample is not None:
                focus[:] = [verdict.promise.name]
                raise _Found(verdict.counterexample)

    try:
        search()
    except _Found as found:
        return found.counterexample
    return None


def _check(trial: Trial, verdicts: dict[str, Verdict]) -> None:
    """The promises in ``verdicts`` over one generated world."""
    relations(trial, verdicts)
    for verdict in verdicts.values():
        if verdict.promise.checker:
            CHECKERS[verdict.promise.checker](trial, verdict)
