"""``prove``: every promise of a policy, over every world up to a bound, then on generated worlds.

The bounded phase walks the cases of the policy (proofs.worlds): for each, it
decides the case's requests in every canonical world, reads the property relations
there, and runs the checkers over those worlds (a world a checker derives, such as
one with a grant more, is looked up by its canonical form, so it is decided once).
The generated phase (proofs.generated) then tries larger worlds with hypothesis.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from privilog.dsl.errors import PolicyError
from privilog.engine.ids import EntityId
from privilog.engine.world import Grant, World
from privilog.proofs.bounds import DEFAULT_EXAMPLES, DEFAULT_MAX_ENTITIES
from privilog.proofs.checkers import CHECKERS, Context, Trial, relations
from privilog.proofs.evaluate import Evaluator, Outcome
from privilog.proofs.findings import Report, Verdict
from privilog.proofs.load import ProvedPolicy
from privilog.proofs.worlds import BoundTooLarge, Case, Point, Space, build_cases, space_for

WORLD_LIMIT = 200_000  # worlds enumerated for one case before the bound is declared too large
SPLIT_AT = 10_000  # a case of at least this many worlds is shared among the jobs (``prove --jobs``)

Progress = Callable[[str], None]


class BoundedTrial(Trial):
    """The canonical worlds of one case."""

    phase = "bounded"

    def __init__(self, context: Context, space: Space, points: Sequence[Point], largest: int | None = None):
        super().__init__(context, space.case.requests)
        self.space = space
        evaluator = context.evaluator
        evaluator.forget()
        self._decided = [(p, self.outcome(p)) for p in points]
        # the most entities of the case's fullest worlds (given when these points are a slice of the case's)
        self._largest = largest if largest is not None else max((len(p.entities) for p, _ in self.fullest()), default=0)

    def worlds(self) -> Iterable[tuple[Point, Outcome]]:
        return self._decided

    def outcome(self, point: Point) -> Outcome:
        return self.context.evaluator.cached(self.space.key(point), lambda: self.world(point), self.requests)

    def additions(self, point: Point) -> Sequence[Grant]:
        return self.space.additions(point)

    def fullest(self) -> Iterable[tuple[Point, Outcome]]:
        """Each arrangement of entities once, with every grant of the pool it admits."""
        return [(p, o) for p, o in self._decided if not self.space.additions(p) and not p.admins]

    def recreatable(self, point: Point) -> list[EntityId]:
        """Each request's entity; and in the largest world, every entity listed as well."""
        requested = {r.entity for r in self.requests}
        if len(point.entities) < self._largest:
            return sorted(requested)
        return sorted(point.entities | requested)


@dataclass
class Prover:
    """Checks one policy's promises."""

    proved: ProvedPolicy
    max_entities: int = DEFAULT_MAX_ENTITIES
    examples: int = DEFAULT_EXAMPLES
    world_type: type[World] = World
    progress: Progress | None = None
    reduce: bool = True  # symmetry reduction (off only to test it against the full search)
    jobs: int = 1  # processes a large case's worlds are shared among (the policy is read again in each)

    def __post_init__(self) -> None:
        policy = self.proved.policy
        for prop in policy.properties:
            if prop.checker and prop.checker not in CHECKERS:
                raise PolicyError(
                    f"property `{prop.name}` names an unknown checker `{prop.checker}`",
                    prop.span,
                    f"checkers are {', '.join(CHECKERS)}",
                )
        self.verdicts = {p.name: Verdict(p) for p in policy.properties}
        self.notes: list[str] = []
        self.evaluator = Evaluator.for_policy(policy, [p.name for p in policy.properties if not p.checker])
        acts_on: dict[str, set[str]] = {}
        for operation, type_name in self.proved.facts("acts_on"):
            acts_on.setdefault(operation, set()).add(type_name)
        self.context = Context(
            evaluator=self.evaluator,
            world_type=self.world_type,
            acts_on=acts_on,
            changes_grants={row[0] for row in self.proved.facts("changes_grants")},
        )

    def _say(self, text: str) -> None:
        if self.progress is not None:
            self.progress(text)

    def check(self, trial: Trial) -> None:
        """Every promise, over the worlds of one trial."""
        relations(trial, self.verdicts)
        for verdict in self.verdicts.values():
            if verdict.promise.checker:
                CHECKERS[verdict.promise.checker](trial, verdict)

    def bounded(self) -> None:
        """Every world up to the bound, case by case."""
        cases = build_cases(self.proved.policy, self.evaluator.authorizer)
        for number, case in enumerate(cases, start=1):
            space, points = self._space(case)
            self._say(
                f"[{number}/{len(cases)}] {case.label}: {len(points)} worlds ({space.enumerated} before symmetry)"
            )
            if self.jobs > 1 and len(points) >= SPLIT_AT:
                self._shared(number - 1, space, points)
            else:
                self.check(BoundedTrial(self.context, space, points))

    def _shared(self, index: int, space: Space, points: Sequence[Point]) -> None:
        """Check one large case's worlds in :attr:`jobs` processes, a contiguous slice each, and merge their
        verdicts in the slices' order: the same counts, the same first smallest counterexample and the same
        operations, in the same order, as one process checking them all (no checker compares two worlds of
        the case but through the largest one's size, which each slice is given)."""
        from concurrent.futures import ProcessPoolExecutor

        largest = max((len(p.entities) for p in points if not space.additions(p) and not p.admins), default=0)
        size = -(-len(points) // self.jobs)
        bounds = [(start, min(start + size, len(points))) for start in range(0, len(points), size)]
        args = (self.proved.name, self.proved.proof, self.max_entities, self.world_type, self.reduce, index, largest)
        with ProcessPoolExecutor(max_workers=len(bounds)) as pool:
            found = list(pool.map(_check_slice, *zip(*[(*args, a, b) for a, b in bounds], strict=True)))
        for verdicts in found:
            for part in verdicts:
                whole = self.verdicts[part.promise.name]
                whole.bounded += part.bounded
                whole.operations += [op for op in part.operations if op not in whole.operations]
                ce = part.counterexample
                if ce is not None and (whole.counterexample is None or ce.size < whole.counterexample.size):
                    whole.counterexample = ce

    def _space(self, case: Case) -> tuple[Space, list[Point]]:
        """The case's worlds up to the bound; where they are too many, up to the largest bound that fits."""
        for bound in range(self.max_entities, 0, -1):
            space = space_for(self.proved, case, bound, self.context.changes_grants, self.reduce)
            try:
                points = space.representatives(WORLD_LIMIT)
            except BoundTooLarge:
                continue
            if bound < self.max_entities:
                self.notes.append(
                    f"{case.label}: checked up to {bound} of each kind; "
                    f"{bound + 1} makes more than {WORLD_LIMIT} worlds"
                )
            return space, points
        # Even one of each kind is too many (a policy whose own rules may read any grant tells no
        # two apart): the case is left to the generated phase, and the report says so.
        self.notes.append(
            f"{case.label}: not searched exhaustively: one entity of each kind makes more than "
            f"{WORLD_LIMIT} worlds (its rules read grants anywhere); the generated worlds check it"
        )
        return space_for(self.proved, case, 1, self.context.changes_grants, self.reduce), []

    def explain(self) -> None:
        """Decide each counterexample's requests again, in full, for a reader."""
        for verdict in self.verdicts.values():
            found = verdict.counterexample
            if found is None:
                continue
            scenes = tuple(
                replace(s, decision=self.evaluator.decision(s.world, s.request)) if s.request else s
                for s in found.scenes
            )
            verdict.counterexample = replace(found, scenes=scenes)

    def prove(self) -> Report:
        started = time.perf_counter()
        self.bounded()
        if self.examples:
            from privilog.proofs.generated import generated

            self._say(f"then {self.examples} larger worlds generated by hypothesis")

            generated(self)
        self.explain()
        return Report(
            self.proved.name,
            self.max_entities,
            self.examples,
            list(self.verdicts.values()),
            time.perf_counter() - started,
            self.notes,
        )


def _check_slice(
    name: str,
    proof: Path,
    max_entities: int,
    world_type: type[World],
    reduce: bool,
    index: int,
    largest: int,
    start: int,
    stop: int,
) -> list[Verdict]:
    """In a process of its own: the policy read again, case ``index``'s worlds made again (the same, in the
    same order), the slice ``start:stop`` of them checked; the verdicts of that slice alone."""
    from privilog.proofs.load import load_proved

    prover = Prover(load_proved(name, proof), max_entities, 0, world_type, reduce=reduce)
    case = build_cases(prover.proved.policy, prover.evaluator.authorizer)[index]
    space, points = prover._space(case)
    prover.check(BoundedTrial(prover.context, space, points[start:stop], largest))
    return list(prover.verdicts.values())


def prove(
    proved: ProvedPolicy,
    max_entities: int = DEFAULT_MAX_ENTITIES,
    examples: int = DEFAULT_EXAMPLES,
    world_type: type[World] = World,
    progress: Progress | None = None,
    jobs: int = 1,
) -> Report:
    """Check every promise of ``proved``: exhaustively over every world with up to ``max_entities``
    entities of each kind under each entity, then on ``examples`` worlds generated by hypothesis.
    ``jobs``: a case of many worlds is shared among that many processes (the same report)."""
    return Prover(proved, max_entities, examples, world_type, progress, jobs=jobs).prove()
