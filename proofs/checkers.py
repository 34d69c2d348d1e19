"""The checkers named by ``property NAME "..." by CHECKER``: promises about two worlds.

A relation can say what is wrong inside one world; these promises compare the
decisions of two: a world and the same world with one more grant (``monotonic``),
without the grants on what encloses the request's entity (``no_hierarchy``), after an
entity was deleted and created again (``survives_recreate``). ``list_get_agree``
compares two requests in one world, and ``admins_only`` asks the world itself who
may change grants.

Each checker reads a :class:`Trial`: some worlds with their outcomes, and a way to
decide any other world. The bounded search and the generated one provide their own.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from privilog.engine.decision import Request
from privilog.engine.ids import EntityId
from privilog.engine.world import Grant, NotAnAdmin, World
from privilog.proofs.evaluate import Evaluator, Outcome
from privilog.proofs.findings import Counterexample, Scene, Verdict
from privilog.proofs.worlds import BYSTANDER, GROUP, REQUESTER, Point

T = TypeVar("T")


@dataclass
class Context:
    """What every trial of one policy shares."""

    evaluator: Evaluator
    world_type: type[World]
    acts_on: dict[str, set[str]]  # operation -> enclosing types whose grants are its own
    changes_grants: set[str]  # operation names (after the dot) that change grants


class Trial(ABC):
    """Some worlds with their outcomes, the requests made in each, and a way to decide others."""

    phase = "bounded"

    def __init__(self, context: Context, requests: Sequence[Request]):
        self.context = context
        self.requests = tuple(requests)

    @abstractmethod
    def worlds(self) -> Iterable[tuple[Point, Outcome]]:
        """The worlds of the trial, with what was decided in each."""
        raise NotImplementedError

    @abstractmethod
    def outcome(self, point: Point) -> Outcome:
        """Decide the trial's requests in another world."""
        raise NotImplementedError

    @abstractmethod
    def additions(self, point: Point) -> Sequence[Grant]:
        """Grants to try adding to a world."""
        raise NotImplementedError

    @abstractmethod
    def fullest(self) -> Iterable[tuple[Point, Outcome]]:
        """The worlds worth the cost of a delete and recreate."""
        raise NotImplementedError

    @abstractmethod
    def recreatable(self, point: Point) -> list[EntityId]:
        """The entities to delete and create again in one of the fullest worlds."""
        raise NotImplementedError

    def world(self, point: Point) -> World:
        """The world to evaluate for ``point`` (of the world type the proof runs with)."""
        return point.world(self.context.world_type)

    def count(self, verdict: Verdict, worlds: int = 1) -> None:
        """Note that a promise was checked in ``worlds`` more worlds."""
        if self.phase == "bounded":
            verdict.bounded += worlds
        else:
            verdict.generated += worlds


def _plain(point: Point) -> World:
    """A world to show (and evaluate again) in a counterexample."""
    return point.world()


Check = Callable[[Trial, Verdict], None]


# ---- property relations ----------------------------------------------------------------


def relations(trial: Trial, verdicts: dict[str, Verdict]) -> None:
    """Every row of a property relation is a counterexample (for the promises in ``verdicts``)."""
    names = [name for name in trial.context.evaluator.relations if name in verdicts]
    for point, outcome in trial.worlds():
        for name in names:
            trial.count(verdicts[name])
        for violation in outcome.violations:
            if violation.promise not in verdicts:
                continue
            request = trial.requests[violation.request] if violation.request is not None else None
            columns = ["the request" if request is not None else violation.row[0], *violation.row[1:]]
            allowed = request is not None and violation.request in outcome.allowed
            row = f"{violation.promise}({', '.join(columns)})"
            verdicts[violation.promise].found(
                Counterexample(
                    violation.promise,
                    request.operation if request else "",
                    f"{request} is {'allowed' if allowed else 'denied'}, and {row}" if request else row,
                    (Scene("allowed in this world" if allowed else "in this world", _plain(point), request),),
                )
            )


# ---- the checkers ----------------------------------------------------------------------


def monotonic(trial: Trial, verdict: Verdict) -> None:
    """Adding a grant never turns an allow into a deny."""
    for point, outcome in trial.worlds():
        trial.count(verdict)
        for grant in trial.additions(point):
            bigger = point.with_grants(point.grants | {grant})
            for index in sorted(outcome.allowed - trial.outcome(bigger).allowed):
                request = trial.requests[index]
                verdict.found(
                    Counterexample(
                        verdict.promise.name,
                        request.operation,
                        f"granting {grant.action} on {grant.entity} to {grant.principal} denies what was allowed",
                        (
                            Scene("allowed in this world", _plain(point), request),
                            Scene(f"denied once {grant} is granted", _plain(bigger), request),
                        ),
                    )
                )


def no_hierarchy(trial: Trial, verdict: Verdict) -> None:
    """Without the grants on what encloses the request's entity, what was allowed stays allowed."""
    acts_on = trial.context.acts_on
    for point, outcome in trial.worlds():
        trial.count(verdict)
        for index in sorted(outcome.allowed):
            request = trial.requests[index]
            own = acts_on.get(request.operation, set())
            enclosing = {a for a in request.entity.ancestors() if a.type not in own}
            stripped = frozenset(g for g in point.grants if g.entity not in enclosing)
            if stripped == point.grants or index in trial.outcome(point.with_grants(stripped)).allowed:
                continue
            dropped = sorted({str(g.entity) for g in point.grants - stripped})
            verdict.found(
                Counterexample(
                    verdict.promise.name,
                    request.operation,
                    f"{request.principal} may {request.operation} {request.entity} only through its grants on "
                    f"{', '.join(dropped)}, which enclose it",
                    (
                        Scene("allowed in this world", _plain(point), request),
                        Scene(
                            f"denied without the grants on {', '.join(dropped)}",
                            _plain(point.with_grants(stripped)),
                            request,
                        ),
                    ),
                )
            )


def list_get_agree(trial: Trial, verdict: Verdict) -> None:
    """For an entity that exists, a listing shows it exactly when get allows it."""
    pairs = _list_get_pairs(trial)
    if not pairs:
        return
    for point, outcome in trial.worlds():
        existing = trial.world(point).existing()
        checked = False
        for listing, getting in pairs:
            if trial.requests[listing].entity not in existing:
                continue
            checked = True
            if (listing in outcome.allowed) == (getting in outcome.allowed):
                continue
            shown, got = trial.requests[listing], trial.requests[getting]
            verb = "shows" if listing in outcome.allowed else "does not show"
            allows = "allows" if getting in outcome.allowed else "denies"
            verdict.found(
                Counterexample(
                    verdict.promise.name,
                    got.operation,
                    f"{shown.operation} {verb} {shown.entity} to {shown.principal}, but {got.operation} {allows} it",
                    (
                        Scene(f"{shown.operation} in this world", _plain(point), shown),
                        Scene(f"{got.operation} in the same world", _plain(point), got),
                    ),
                )
            )
        if checked:
            trial.count(verdict)


def _list_get_pairs(trial: Trial) -> list[tuple[int, int]]:
    policy = trial.context.evaluator.authorizer.policy
    listings = {op.qualified for op in policy.operations if op.verb.value == "shows"}
    gets = {op.qualified: op.entity_type for op in policy.operations if op.name == "get"}
    pairs = []
    for i, shown in enumerate(trial.requests):
        if shown.operation not in listings:
            continue
        for j, got in enumerate(trial.requests):
            if gets.get(got.operation) == shown.operation.split(".")[0] and (got.principal, got.entity, got.args) == (
                shown.principal,
                shown.entity,
                shown.args,
            ):
                pairs.append((i, j))
    return pairs


def survives_recreate(trial: Trial, verdict: Verdict) -> None:
    """Deleting an entity keeps every grant, and creating it again brings back every decision."""
    evaluator = trial.context.evaluator
    for point, outcome in trial.fullest():
        for entity in trial.recreatable(point):
            trial.count(verdict)
            world = trial.world(point)
            if entity in world.existing():
                removed = _as_admin(world, lambda actor: world.delete_entity(actor, entity))  # noqa: B023
                between = Point.of(world)
                evaluator.load(world)  # the engine sees the deletion before the recreation
                for again in sorted(removed & point.entities):
                    _as_admin(world, lambda actor: world.add_entity(actor, again))  # noqa: B023
                story = f"deleting {entity} and creating it again"
            else:
                _as_admin(world, lambda actor: world.add_entity(actor, entity))  # noqa: B023
                between = Point.of(world)
                evaluator.load(world)
                _as_admin(world, lambda actor: world.delete_entity(actor, entity))  # noqa: B023
                story = f"creating {entity} and deleting it again"
            after = evaluator.outcome(world, trial.requests)
            lost_grants = point.grants - world.grants
            changed = sorted(outcome.allowed ^ after.allowed)
            if not lost_grants and not changed:
                continue
            index = changed[0] if changed else None
            request = trial.requests[index] if index is not None else None
            if lost_grants:
                what = f"lost the grants {'; '.join(map(str, sorted(lost_grants)))}"
            else:
                assert request is not None and index is not None
                what = f"turned {'an allow into a deny' if index in outcome.allowed else 'a deny into an allow'}"
            verdict.found(
                Counterexample(
                    verdict.promise.name,
                    request.operation if request else "",
                    f"{story} {what}",
                    (
                        Scene("before", _plain(point), request),
                        Scene("in between", between.world(), request),
                        Scene("after", Point.of(world).world(), request),
                    ),
                )
            )


# Who deletes and creates entities for survives_recreate: an admin only for that change, so
# the world the policy sees (its `admin` facts) is the trial's own.
PROVER = "user:privilog-prove"


def _as_admin(world: World, change: Callable[[str], T]) -> T:
    """Make a change of entities as an authorization admin who is one only for that change."""
    had = PROVER in world.admins
    world.admins.add(PROVER)
    try:
        return change(PROVER)
    finally:
        if not had:
            world.admins.discard(PROVER)


def admins_only(trial: Trial, verdict: Verdict) -> None:
    """Only an authorization admin (itself or through a group) changes grants, through the world or the policy."""
    changes = trial.context.changes_grants
    for point, outcome in trial.worlds():
        trial.count(verdict)
        world = trial.world(point)
        for index in sorted(outcome.allowed):
            request = trial.requests[index]
            if request.operation.split(".", 1)[1] in changes and not world.is_admin(request.principal):
                verdict.found(
                    Counterexample(
                        verdict.promise.name,
                        request.operation,
                        f"{request.principal} is not an authorization admin, yet may {request.operation}",
                        (Scene("allowed in this world", _plain(point), request),),
                    )
                )
    for point, _ in trial.fullest():
        for configured in _admin_configs(point):
            trial.count(verdict)
            for found in _world_changes(trial, configured):
                verdict.found(found)


def _admin_configs(point: Point) -> Iterator[Point]:
    """The world with nobody an admin, the requester an admin, and the requester's group an admin."""
    yield Point(point.entities, point.grants, point.members, frozenset())
    yield Point(point.entities, point.grants, point.members, frozenset({REQUESTER}))
    yield Point(point.entities, point.grants, point.members | {(REQUESTER, GROUP)}, frozenset({GROUP}))


def _world_changes(trial: Trial, point: Point) -> Iterator[Counterexample]:
    target = next(iter(sorted(r.entity for r in trial.requests)), EntityId("namespace", "ns1"))
    action = trial.context.evaluator.authorizer.policy.actions[0]
    change = Grant(BYSTANDER, action, target)
    for actor in (REQUESTER, BYSTANDER):
        for verb in ("grant", "revoke"):
            world = trial.world(point)
            if verb == "revoke":
                world.grants.add(change)
            before = Point.of(world)
            try:
                getattr(world, verb)(actor, [change])
                done = True
            except NotAnAdmin:
                done = False
            may = world.is_admin(actor)
            if done == may and (done or world.grants == before.grants):
                continue
            yield Counterexample(
                "admins_only",
                "",
                f"{actor} {'is' if may else 'is not'} an authorization admin, "
                f"and {'did' if done else 'could not'} {verb} {change}",
                (Scene(f"{actor} tries to {verb} {change}", before.world()),),
            )


CHECKERS: dict[str, Check] = {
    "monotonic": monotonic,
    "no_hierarchy": no_hierarchy,
    "list_get_agree": list_get_agree,
    "survives_recreate": survives_recreate,
    "admins_only": admins_only,
}
