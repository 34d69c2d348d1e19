"""What a proof run finds: for each promise, held over so many worlds, or a counterexample.

Findings are data. A counterexample is a short story of one to three scenes, each a
world and a request in it; the command line renders each scene's decision with its
explanation (privilog.render.explain), so a reader sees why the promise breaks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from privilog.dsl.ir import Property
from privilog.engine.decision import Decision, Request
from privilog.engine.world import World


def world_size(world: World) -> int:
    """How much a reader has to take in: entities, grants, memberships and admins."""
    return len(world.entities) + len(world.grants) + len(world.members) + len(world.admins)


def world_json(world: World) -> dict[str, Any]:
    """A world in the file format (``privilog check --world`` reads it back)."""
    data = world.to_data()
    data.pop("instance", None)
    return {key: value for key, value in data.items() if value}


@dataclass(frozen=True)
class Scene:
    """One world and one request in it, with a caption saying what the scene shows."""

    caption: str
    world: World = field(compare=False)
    request: Request | None = None  # None: the scene is about the world alone
    decision: Decision | None = field(default=None, compare=False)  # the request decided, with why

    def to_json(self) -> dict[str, Any]:
        return {
            "caption": self.caption,
            "world": world_json(self.world),
            "request": self.request.to_json() if self.request else None,
            "decision": self.decision.to_json() if self.decision else None,
        }


@dataclass(frozen=True)
class Counterexample:
    """A world (or two) and a request that break a promise.

    ``summary`` says in one sentence what happened; ``scenes`` are the worlds to look
    at, in order (the world the promise breaks in first).
    """

    promise: str
    operation: str
    summary: str
    scenes: tuple[Scene, ...]

    @property
    def size(self) -> tuple[int, int]:
        """Smaller counterexamples are easier to read: first by world, then by the later scenes."""
        first = world_size(self.scenes[0].world)
        return first, sum(world_size(s.world) for s in self.scenes)

    def to_json(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "summary": self.summary,
            "scenes": [s.to_json() for s in self.scenes],
        }


@dataclass
class Verdict:
    """One promise of a policy: how many worlds were checked, and what broke it."""

    promise: Property
    bounded: int = 0  # worlds checked exhaustively, up to the bound
    generated: int = 0  # worlds checked by hypothesis
    counterexample: Counterexample | None = None
    operations: list[str] = field(default_factory=list)  # every operation a counterexample was found for

    @property
    def held(self) -> bool:
        return self.counterexample is None

    @property
    def worlds(self) -> int:
        return self.bounded + self.generated

    def found(self, counterexample: Counterexample) -> None:
        """Keep the smallest counterexample, and note the operation it is about (if any)."""
        if counterexample.operation and counterexample.operation not in self.operations:
            self.operations.append(counterexample.operation)
        if self.counterexample is None or counterexample.size < self.counterexample.size:
            self.counterexample = counterexample

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.promise.name,
            "sentence": self.promise.sentence,
            "checker": self.promise.checker or None,
            "held": self.held,
            "worlds": {"bounded": self.bounded, "generated": self.generated},
            "operations": list(self.operations),
            "counterexample": self.counterexample.to_json() if self.counterexample else None,
        }


@dataclass
class Report:
    """Every promise of one policy, checked up to a bound and then on generated worlds."""

    policy: str
    max_entities: int
    examples: int
    verdicts: list[Verdict]
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)  # cases checked to a smaller bound, and why

    @property
    def held(self) -> bool:
        return all(v.held for v in self.verdicts)

    def verdict(self, name: str) -> Verdict:
        for verdict in self.verdicts:
            if verdict.promise.name == name:
                return verdict
        raise KeyError(name)

    def to_json(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "max_entities": self.max_entities,
            "examples": self.examples,
            "held": self.held,
            "seconds": round(self.seconds, 1),
            "notes": list(self.notes),
            "properties": [v.to_json() for v in self.verdicts],
        }
