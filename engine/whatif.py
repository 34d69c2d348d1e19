"""What a change to a world would do: the (principal, operation, entity) answers it changes.

:func:`impact` compares the decisions of one policy on a world before and after a change:
every access a user holds on one side and not the other, as lost and gained accesses. The
accesses asked about are those :meth:`engine.compare.Comparison.compare_world` asks about:
every user of either world, every operation of the policy (without arguments), on every
entity that exists or is granted on (by name, not by a wildcard), in either world.

:func:`redecide` re-decides logged requests on both worlds and keeps those decided
differently.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from privilog.dsl.ir import Policy
from privilog.engine.authorizer import Authorizer
from privilog.engine.decision import Request
from privilog.engine.ids import EntityId
from privilog.engine.patterns import is_pattern
from privilog.engine.world import World


@dataclass(frozen=True, order=True)
class Access:
    """A principal allowed an operation on an entity."""

    principal: str
    operation: str
    entity: EntityId

    def to_json(self) -> dict[str, str]:
        return {"principal": self.principal, "operation": self.operation, "entity": str(self.entity)}


@dataclass(frozen=True)
class Impact:
    """The accesses a change takes away (``lost``) and gives (``gained``), each sorted."""

    lost: tuple[Access, ...]
    gained: tuple[Access, ...]

    @property
    def changes(self) -> bool:
        return bool(self.lost or self.gained)

    def to_json(self) -> dict[str, Any]:
        return {
            "lost": [a.to_json() for a in self.lost],
            "gained": [a.to_json() for a in self.gained],
            "counts": {"lost": len(self.lost), "gained": len(self.gained)},
        }


def _accesses(authorizer: Authorizer, principals: Sequence[str], entities: Sequence[EntityId]) -> set[Access]:
    allowed: set[Access] = set()
    for op in authorizer.policy.operations:
        requests = [
            authorizer.request(p, op.qualified, e) for p in principals for e in entities if e.type == op.entity_type
        ]
        if not requests:
            continue
        for request, decision in zip(requests, authorizer.check_many(requests, explain_denials=False), strict=True):
            if decision.allowed:
                allowed.add(Access(request.principal, request.operation, request.entity))
    return allowed


def impact(policy: Policy, before: World, after: World, backend: str = "compiled") -> Impact:
    """The accesses that differ between ``before`` and ``after`` under ``policy``: each world decided whole."""
    principals = sorted(p for p in before.principals() | after.principals() if p.startswith("user:"))
    granted = {g.entity for g in before.grants | after.grants if not is_pattern(g.entity)}  # not a wildcard
    entities = sorted(before.existing() | after.existing() | granted)
    old = _accesses(Authorizer(policy, before, backend=backend), principals, entities)
    new = _accesses(Authorizer(policy, after, backend=backend), principals, entities)
    return Impact(tuple(sorted(old - new)), tuple(sorted(new - old)))


def redecide(
    policy: Policy, before: World, after: World, requests: Iterable[Request], backend: str = "compiled"
) -> list[tuple[Request, bool, bool]]:
    """Each of ``requests`` decided differently after the change: (request, allowed before, allowed after)."""
    old, new = Authorizer(policy, before, backend=backend), Authorizer(policy, after, backend=backend)
    changed = []
    for request in requests:
        a, b = old.decide(request), new.decide(request)
        if a != b:
            changed.append((request, a, b))
    return changed
