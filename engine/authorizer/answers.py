"""A request's answers, the rows the backend derived for it, read into a :class:`Decision`.

Each requirement of the operation becomes an :class:`Outcome`: whether it applies and is
met, the grants that meet it (each a :class:`Witness`: who holds it, through which groups,
on what), what an "every" option covers and lacks, and the arguments it needed and missed.
"""

from __future__ import annotations

from collections.abc import Mapping

from privilog.dsl.format import format_alternatives
from privilog.dsl.ir import Policy, Requirement, Scope
from privilog.engine.authorizer.loaded import LoadedWorld
from privilog.engine.authorizer.requests import Requests
from privilog.engine.decision import Decision, Outcome, Request, Witness
from privilog.engine.ids import EntityId
from privilog.engine.program import Row


class Answers:
    """Decisions read from the rows the backend derived, with their witnesses."""

    def __init__(self, policy: Policy, requests: Requests, loaded: LoadedWorld):
        self.policy = policy
        self.requests = requests
        self.loaded = loaded

    def decision(self, rid: str, request: Request, answers: Mapping[str, set[Row]]) -> Decision:
        """The decision of the request asserted as ``rid``: allow or deny, and each requirement's
        outcome (a denial is not explained here: no fixes, no denials of the policy's own rules)."""
        op = self.requests.operation(request.operation)
        allowed = any(r[0] == rid for r in answers.get("allowed", ()))
        applies = {r[1] for r in answers.get("applies", ()) if r[0] == rid}
        outcomes = []
        for number, requirement in enumerate(op.requirements, start=1):
            iid = f"{op.qualified}#{number}"
            outcomes.append(self._outcome(rid, iid, request, requirement, iid in applies, answers))
        bypassed = tuple(sorted({r[1] for r in answers.get("bypass", ()) if r[0] == rid})) if allowed else ()
        return Decision(request, allowed, tuple(outcomes), self.policy.name, bypassed=bypassed)

    def _outcome(
        self,
        rid: str,
        iid: str,
        request: Request,
        requirement: Requirement,
        applies: bool,
        answers: Mapping[str, set[Row]],
    ) -> Outcome:
        witnesses = sorted(
            self._witness(request, action, EntityId.parse(entity), via)
            for (r, i, action, entity, via) in answers.get("met", ())
            if r == rid and i == iid
        )
        covered = sorted(EntityId.parse(r[2]) for r in answers.get("covered", ()) if r[0] == rid and r[1] == iid)
        lacking = sorted(EntityId.parse(r[2]) for r in answers.get("lacking", ()) if r[0] == rid and r[1] == iid)
        has_every = any(t.every for o in requirement.options for t in o.targets)
        by = tuple(
            t.param
            for o in requirement.options
            for t in o.targets
            if t.scope is Scope.RULE and any(r[0] == rid for r in answers.get(t.param, ()))
        )
        met = bool(witnesses) or (has_every and not lacking) or bool(by)
        missing = tuple(
            t.param
            for o in requirement.options
            for t in o.targets
            if t.scope is Scope.ARGUMENT and request.arg(t.param) is None
        )
        return Outcome(
            id=iid,
            text=format_alternatives(requirement.options),
            applies=applies,
            met=met,
            witnesses=tuple(witnesses),
            covered=tuple(covered),
            lacking=tuple(lacking),
            missing_arguments=tuple(dict.fromkeys(missing)),
            condition=str(requirement.condition) if requirement.condition else "",
            by=by,
        )

    def _witness(self, request: Request, action: str, entity: EntityId, holder: str) -> Witness:
        groups: tuple[str, ...] = ()
        if holder != request.principal:
            groups = self.loaded.membership_chain(request.principal, holder)
        inside: tuple[EntityId, ...] = ()
        ancestors = entity.ancestors(self.loaded.world.instance)
        if request.entity in ancestors:
            inside = tuple([entity, *ancestors[: ancestors.index(request.entity) + 1]])
        granted = self.loaded.granted_as(holder, action, entity)
        pattern = str(granted[0]) if granted and granted[0] != entity else ""
        return Witness(action, entity, holder, groups, inside, pattern)
