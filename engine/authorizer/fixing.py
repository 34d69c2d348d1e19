"""A denial explained: the policy's own `denied` rules that hold, and the changes that would allow it.

A request denied for want of grants is fixed by the smallest sets of new grants (or
memberships of groups that hold them) that meet every unmet requirement. One that a rule
of the policy denies is fixed by taking a premise of that rule away (a membership removed,
a grant revoked) and meeting what that leaves unmet; each such fix is verified by deciding
the request again with the changes made in the backend for the moment.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager

from privilog.dsl.ir import Policy, Scope
from privilog.engine.authorizer.answers import Answers
from privilog.engine.authorizer.deciding import Deciding
from privilog.engine.authorizer.loaded import LoadedWorld
from privilog.engine.backends import Backend
from privilog.engine.decision import (
    Change,
    Decision,
    Denial,
    GrantChange,
    MembershipChange,
    Outcome,
    Request,
    RevokeChange,
)
from privilog.engine.denial import Changes, Rules, denials, deny_rules, premise_changes, taking_away
from privilog.engine.facts import within_rows
from privilog.engine.ids import EntityId
from privilog.engine.program import Program, Row

MAX_FIXES = 8


class Fixing:
    """What denies a request, and what would allow it."""

    def __init__(
        self,
        policy: Policy,
        program: Program,
        backend: Backend,
        loaded: LoadedWorld,
        deciding: Deciding,
        answers: Answers,
    ):
        self.policy = policy
        self.program = program
        self.backend = backend
        self.loaded = loaded
        self.deciding = deciding
        self.answers = answers
        self._denying = deny_rules(program)  # the policy's own `denied` rules (most policies: none)
        self._proof_rules: Rules | None = None  # what a proof of a denial reads, made when first needed

    def explained(self, decision: Decision) -> Decision:
        """A denial with the rules of the policy that deny it, the changes that would allow it,
        and what a partial delete would leave; an allow as it is."""
        if decision.allowed:
            return decision
        request = decision.request
        denied_by = self.denials(request)
        return Decision(
            request,
            False,
            decision.outcomes,
            self.policy.name,
            fixes=self._taking_away(request, denied_by) if denied_by else self._fixes(request, decision.unmet),
            remaining=self._remaining(request, decision.unmet),
            denied_by=denied_by,
        )

    # ---- the policy's own deny rules ----------------------------------------------------

    def denials(self, request: Request) -> tuple[Denial, ...]:
        """The policy's own `denied` rules that hold for a request, each with a proof (engine.denial)."""
        if not self._denying:
            return ()
        if self._proof_rules is None:
            self._proof_rules = Rules.of(self.program)
        with self.deciding.asserted([request]) as ids:
            (rid,) = ids
            return denials(self._proof_rules, self.backend, rid, self._denying)

    def _taking_away(self, request: Request, denied_by: tuple[Denial, ...]) -> tuple[tuple[Change, ...], ...]:
        """The smallest sets of world changes found that allow a request a rule of the policy denies:
        premises taken away (a membership removed, a grant revoked), and what that leaves unmet met.
        Each is verified: the request is decided again with it made."""
        found = taking_away(self._next_steps(request, denied_by, ()), lambda c: self._attempt(request, c))
        found.sort(key=lambda c: (sum(isinstance(x, MembershipChange) for x in c), sorted(map(str, c))))
        return tuple(tuple(sorted(c, key=str)) for c in found[:MAX_FIXES])

    def _next_steps(self, request: Request, denied_by: tuple[Denial, ...], unmet: tuple[Outcome, ...]) -> list[Changes]:
        """What may be changed next: a premise of a denial taken away (none when some denial rests on
        nothing the world can change), or a way to meet every unmet requirement."""
        taken = [premise_changes(d) for d in denied_by]
        if any(not changes for changes in taken):
            return []
        steps: list[Changes] = [frozenset({c}) for changes in taken for c in changes]
        if unmet:
            steps += [frozenset(fix) for fix in self._fixes(request, unmet)]
        return steps

    def _attempt(self, request: Request, changes: Changes) -> tuple[bool, list[Changes]]:
        """Decide a request with ``changes`` made in the backend for the moment: allowed, and what
        may be changed next."""
        with self._tentatively(changes):
            ids, answers = self.deciding.evaluate([request])
            (rid,) = ids
            decision = self.answers.decision(rid, request, answers)
            if decision.allowed:
                return True, []
            return False, self._next_steps(request, self.denials(request), decision.unmet)

    @contextmanager
    def _tentatively(self, changes: Changes) -> Iterator[None]:
        """The backend with ``changes`` made while the block runs, put back as it was after (the world,
        and the facts kept for refresh, are not touched)."""
        loaded = self.loaded
        added: dict[str, set[Row]] = {}
        removed: dict[str, set[Row]] = {}
        for change in changes:
            if isinstance(change, GrantChange | RevokeChange):
                target = added if isinstance(change, GrantChange) else removed
                target.setdefault("grant", set()).add((change.principal, change.action, str(change.entity)))
                if isinstance(change, GrantChange) and loaded.uses_within:
                    added.setdefault("within", set()).update(within_rows({change.entity}, loaded.world.instance))
            else:
                target = added if isinstance(change, MembershipChange) else removed
                target.setdefault("member_of", set()).add((change.principal, change.group))
        added = {r: rows - loaded.facts.get(r, set()) for r, rows in added.items()}
        removed = {r: rows & loaded.facts.get(r, set()) for r, rows in removed.items()}
        for relation, rows in removed.items():
            if rows:
                self.backend.remove(relation, rows)
        for relation, rows in added.items():
            if rows:
                self.backend.add(relation, rows)
        try:
            yield
        finally:
            for relation, rows in added.items():
                if rows:
                    self.backend.remove(relation, rows)
            for relation, rows in removed.items():
                if rows:
                    self.backend.add(relation, rows)

    # ---- what would allow it -------------------------------------------------------

    def _option_entities(self, request: Request, scope: Scope, param: str, exhaustive: bool) -> list[EntityId]:
        """The entities a grant would have to name to meet an option (for "self or descendant",
        the entity itself, or with ``exhaustive`` each existing descendant as well)."""
        entity = request.entity
        match scope:
            case Scope.SELF:
                return [entity]
            case Scope.SELF_OR_DESCENDANT | Scope.SELF_OR_WITHIN:  # (any id inside would do: these exist)
                if not exhaustive:
                    return [entity]
                return [entity, *sorted(self.loaded.inventory.within(entity))]
            case Scope.PARENT:
                parent = entity.parent(self.loaded.world.instance)
                return [parent] if parent else []
            case Scope.ANCESTOR:
                return [a for a in entity.ancestors(self.loaded.world.instance) if a.type == param]
            case Scope.ARGUMENT:
                value = request.arg(param)
                return [EntityId.parse(value)] if value else []
            case Scope.EVERY | Scope.EVERY_ARGUMENT | Scope.RULE:
                return []  # no grant names "every" entity at once, nor meets a rule
        raise AssertionError(scope)

    def _alternatives(self, request: Request, outcome: Outcome, exhaustive: bool = False) -> list[frozenset[Change]]:
        """Each way to meet one unmet requirement: a set of changes.

        With ``exhaustive``, every grant that would do (not only the smallest), and no memberships.
        """
        _, requirement = self.program.requirements[outcome.id]
        who = request.principal
        mine = self.loaded.memberships(who)  # the groups (and who itself), from the backend's member_of
        ways: list[frozenset[Change]] = []
        for option in requirement.options:
            for target in option.targets:
                if target.every:
                    for action in option.actions:
                        ways.append(frozenset(GrantChange(who, action, d) for d in outcome.lacking))
                    continue
                for entity in self._option_entities(request, target.scope, target.param, exhaustive):
                    for action in option.actions:
                        ways.append(frozenset({GrantChange(who, action, entity)}))
                        if exhaustive:
                            continue
                        for holder in sorted(self.loaded.holders.get((action, entity), ())):
                            if holder != who and holder not in mine and holder.split(":")[0] in ("group", "role"):
                                ways.append(frozenset({MembershipChange(who, holder)}))
        return ways

    def _fixes(self, request: Request, unmet: tuple[Outcome, ...]) -> tuple[tuple[Change, ...], ...]:
        if not unmet:
            return ()
        per_requirement = [self._alternatives(request, o) for o in unmet]
        if any(not ways for ways in per_requirement):
            return ()  # some requirement cannot be met by a change of grants (an argument is missing)
        candidates: set[frozenset[Change]] = set()
        for combination in itertools.islice(itertools.product(*per_requirement), 20000):
            candidates.add(frozenset().union(*combination))
        smallest = min(len(c) for c in candidates)
        best = [c for c in candidates if len(c) == smallest]
        best.sort(key=lambda c: (sum(isinstance(x, MembershipChange) for x in c), sorted(map(str, c))))
        return tuple(tuple(sorted(c, key=str)) for c in best[:MAX_FIXES])

    def minimal_grant_sets(self, decision: Decision, limit: int = 256) -> list[frozenset[GrantChange]]:
        """Every inclusion-minimal set of new grants that would meet all of a decision's unmet
        requirements (up to ``limit`` of them), for comparing policies exactly."""
        if decision.allowed:
            return [frozenset()]
        per_requirement = [self._alternatives(decision.request, o, exhaustive=True) for o in decision.unmet]
        if any(not ways for ways in per_requirement):
            return []
        candidates = {frozenset().union(*c) for c in itertools.islice(itertools.product(*per_requirement), 50000)}
        ordered = sorted(candidates, key=lambda c: (len(c), sorted(map(str, c))))
        minimal: list[frozenset[GrantChange]] = []
        for candidate in ordered:
            if not any(m <= candidate for m in minimal):
                minimal.append(frozenset(c for c in candidate if isinstance(c, GrantChange)))
            if len(minimal) >= limit:
                break
        return minimal

    def _remaining(self, request: Request, unmet: tuple[Outcome, ...]) -> tuple[EntityId, ...]:
        """What a partial delete would leave: each entity inside lacking ADMIN, and what encloses it
        (the entities of a list argument that are lacking are not inside: none is left)."""
        left: set[EntityId] = set()
        for outcome in unmet:
            _, requirement = self.program.requirements[outcome.id]
            if not any(t.scope is Scope.EVERY for o in requirement.options for t in o.targets):
                continue
            for entity in outcome.lacking:
                left.add(entity)
                for ancestor in entity.ancestors(self.loaded.world.instance):
                    left.add(ancestor)
                    if ancestor == request.entity:
                        break
        return tuple(sorted(left))
