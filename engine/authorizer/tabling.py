"""Requests decided as rows of the pipeline's decisions table: allow or deny, what is unmet, why.

A :class:`Tabled` is what ``privilog pipeline decide`` writes for a request beside the
request itself (``engine.spark.decisions``): the decision, each unmet requirement (its id,
its text as the policy writes it, and the entities an "every" requirement lacks), the
bypasses that let it through, the places of the policy's own `denied` rules that deny it,
and for an allowed request one grant meeting each requirement that applies and a grant meets
(the least by Spark's codes of holder, action and entity, the one the pipeline names).

:func:`tabled` reads a row off a :class:`~engine.decision.Decision`: the reference, any
backend. :class:`Tabling` makes the same row without the Decision where the backend has
plans (:class:`~engine.backends.FastDecisions` and :class:`~engine.backends.FastRows`): the
decision plan, and per requirement the plans of its ``applies``, ``met`` and ``lacking``
rows (and of the policy's `by` rules), a few microseconds each; anything else (an
operation with no plans, a list argument) is evaluated and read off its Decision.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any, NamedTuple

from privilog.dsl.format import format_alternatives
from privilog.dsl.ir import Atom, Const, Policy, Requirement, Scope, Term, Var
from privilog.engine.authorizer.answers import Answers
from privilog.engine.authorizer.deciding import Deciding
from privilog.engine.authorizer.fixing import Fixing
from privilog.engine.authorizer.loaded import LoadedWorld
from privilog.engine.authorizer.requests import ID_CACHE, Requests
from privilog.engine.backends import Backend, Decider, FastDecisions, FastRows, RowsPlan
from privilog.engine.decision import Decision, Denial, Request
from privilog.engine.denial import deny_rules
from privilog.engine.program import Program
from privilog.engine.spark.encoding import xxhash64
from privilog.engine.unfold import REQUEST_ID

COSTLY = 50e-6  # seconds: a row that took longer to make is kept
KEPT = 1 << 16  # rows kept, at most

Unmet = tuple[str, str, tuple[str, ...]]  # requirement, its text, the entities it lacks (sorted)
AllowedBy = tuple[str, str, str, str]  # requirement, and the grant: principal (holder), action, entity


class Tabled(NamedTuple):
    """A request's row of the decisions table, less the request's own columns."""

    allowed: bool
    unmet: tuple[Unmet, ...]  # sorted
    bypass: tuple[str, ...]  # sorted; empty for a denial
    denied_by: tuple[str, ...]  # FILE:LINE, sorted; empty for an allow
    allowed_by: tuple[AllowedBy, ...]  # sorted; empty for a denial

    @property
    def decision(self) -> str:
        return "allow" if self.allowed else "deny"


def requirement_text(requirement: Requirement) -> str:
    """A requirement as the decisions table words it: its options, and its condition after `if`."""
    text = format_alternatives(requirement.options)
    if requirement.condition is not None:
        text += f" if {requirement.condition}"
    return text


class Codes(dict[str, int]):
    """Each value's Spark code (``engine.spark.encoding.xxhash64``), computed once; bounded."""

    def __missing__(self, value: str) -> int:
        if len(self) >= ID_CACHE:
            self.clear()
        code = self[value] = xxhash64(value)
        return code


def least_grant(grants: Sequence[tuple[str, str, str]], codes: Codes) -> tuple[str, str, str]:
    """Of grants as (holder, action, entity), the one the pipeline names: least by their codes."""
    if len(grants) == 1:
        return grants[0]
    return min(grants, key=lambda g: (codes[g[0]], codes[g[1]], codes[g[2]]))


def tabled(decision: Decision, policy: Policy, codes: Codes | None = None) -> Tabled:
    """The row of a decision (its ``denied_by`` as :meth:`Fixing.explained` gives it: an unexplained
    denial has none)."""
    codes = codes if codes is not None else Codes()
    outcomes = {o.id: o for o in decision.outcomes}
    op = next(o for o in policy.operations if o.qualified == decision.request.operation)
    texts = {f"{op.qualified}#{n}": requirement_text(r) for n, r in enumerate(op.requirements, start=1)}
    unmet = tuple(sorted((o.id, texts[o.id], tuple(sorted(str(e) for e in o.lacking))) for o in decision.unmet))
    allowed_by: list[AllowedBy] = []
    if decision.allowed:
        for o in outcomes.values():
            if o.applies and o.witnesses:
                grants = [(w.holder, w.action, str(w.entity)) for w in o.witnesses]
                allowed_by.append((o.id, *least_grant(grants, codes)))
    return Tabled(
        decision.allowed,
        unmet,
        tuple(sorted(decision.bypassed)) if decision.allowed else (),
        places(decision.denied_by) if not decision.allowed else (),
        tuple(sorted(allowed_by)),
    )


def places(denied_by: Sequence[Denial]) -> tuple[str, ...]:
    """The places (FILE:LINE) of the rules that deny, sorted, each once (as the pipeline's column)."""
    return tuple(sorted({d.at for d in denied_by}))


@dataclass(frozen=True)
class _Requirement:
    """One requirement's plans: whether it applies, the grants that meet it, what it lacks (an
    "every" requirement), and the policy's `by` rules that meet it."""

    id: str
    text: str
    applies: Decider
    met: RowsPlan  # (action, entity, holder) of each grant meeting it
    met_any: Decider  # whether a grant meets it
    lacking: RowsPlan | None
    by: tuple[Decider, ...]


@dataclass(frozen=True)
class _Plans:
    """An operation's plans: its decision, its requirements', and its bypasses'."""

    operation: str
    decide: Callable[[str, str, Mapping[str, str]], bool]
    requirements: tuple[_Requirement, ...]
    bypass: RowsPlan | None


class Tabling:
    """Rows of the decisions table, by plans where the backend has them (else read off a Decision)."""

    def __init__(
        self,
        policy: Policy,
        program: Program,
        backend: Backend,
        loaded: LoadedWorld,
        requests: Requests,
        deciding: Deciding,
        answers: Answers,
        fixing: Fixing,
    ):
        self.policy = policy
        self.program = program
        self.loaded = loaded
        self.requests = requests
        self.deciding = deciding
        self.answers = answers
        self.fixing = fixing
        fast = isinstance(backend, FastDecisions) and isinstance(backend, FastRows)
        self._backend: Any = backend if fast else None
        self._plans: dict[str, _Plans | None] = {}
        self._denying = bool(deny_rules(program))
        self.codes = Codes()
        # rows that took long to make (a busy principal's "any on the namespace or inside": every grant
        # it holds looked at, for the one to name), kept by request for as long as the world does not
        # change: logs ask them again. Which are kept depends on time; what each is, never.
        self._kept: dict[tuple[Any, ...], Tabled] = {}
        self._version = loaded.version

    # ---- a row ------------------------------------------------------------------------

    def row(self, request: Request) -> Tabled:
        """The row of a checked request."""
        plans = self.plans(request.operation)
        if plans is None:
            return self._evaluated(request)
        entity = str(request.entity)
        args = dict(request.args)
        loaded = self.loaded
        if loaded.inventory.exists(request.entity) and not loaded.patterns and not loaded.uses_names:
            return self._planned(plans, request.principal, entity, args, request)
        absent = self.deciding.absent(request)
        if not any(absent.values()):
            return self._planned(plans, request.principal, entity, args, request)
        changes = self._backend.assume(absent)  # a create: the entity's place, for this row only
        try:
            return self._planned(plans, request.principal, entity, args, request)
        finally:
            self._backend.retract(changes)

    def row_of(
        self, principal: str, operation: str, entity: str, args: Mapping[str, object] | None = None
    ) -> Tabled:
        """The row of a request given as strings (RequestError when it is not well formed): one seen
        in its parts before goes straight to the plans, without building a Request."""
        given = self.deciding.in_place(principal, operation, entity, args)
        if given is not None:
            plans = self.plans(operation)
            if plans is not None:
                if self._version != self.loaded.version:  # the world changed: what was kept is stale
                    self._kept.clear()
                    self._version = self.loaded.version
                key = (principal, operation, entity, tuple(given.items()) if given else ())
                kept = self._kept.get(key)
                if kept is not None:
                    return kept
                started = perf_counter()
                row = self._planned(plans, principal, entity, given, None)
                if perf_counter() - started > COSTLY:
                    if len(self._kept) >= KEPT:
                        self._kept.clear()
                    self._kept[key] = row
                return row
        return self.row(self.requests.request(principal, operation, entity, args))

    def _evaluated(self, request: Request) -> Tabled:
        ids, rows = self.deciding.evaluate([request])
        (rid,) = ids
        decision = self.answers.decision(rid, request, rows)
        if not decision.allowed and self._denying:
            decision = Decision(
                request, False, decision.outcomes, decision.policy, denied_by=self.fixing.denials(request)
            )
        return tabled(decision, self.policy, self.codes)

    def _planned(
        self, plans: _Plans, principal: str, entity: str, args: Mapping[str, str], request: Request | None
    ) -> Tabled:
        allowed = plans.decide(principal, entity, args)
        unmet: list[Unmet] = []
        allowed_by: list[AllowedBy] = []
        for requirement in plans.requirements:
            if not requirement.applies(principal, entity, args):
                continue
            if allowed:  # the grants that meet it, for the one to name
                met = requirement.met(principal, entity, args)
                if met:
                    grants = list({(v, a, e) for a, e, v in met})
                    allowed_by.append((requirement.id, *least_grant(grants, self.codes)))
                    continue
            elif requirement.met_any(principal, entity, args):
                continue
            if any(by(principal, entity, args) for by in requirement.by):
                continue
            if requirement.lacking is None:
                unmet.append((requirement.id, requirement.text, ()))
                continue
            lacking = requirement.lacking(principal, entity, args)
            if lacking:
                unmet.append((requirement.id, requirement.text, tuple(sorted({d for (d,) in lacking}))))
        bypass: tuple[str, ...] = ()
        if allowed and plans.bypass is not None:
            bypass = tuple(sorted({w for (w,) in plans.bypass(principal, entity, args)}))
        denied_by: tuple[str, ...] = ()
        if not allowed and self._denying:
            if request is None:
                request = self.requests.request(principal, plans.operation, entity, args)
            denied_by = places(self.fixing.denials(request))
        return Tabled(
            allowed,
            tuple(sorted(unmet)) if len(unmet) > 1 else tuple(unmet),
            bypass,
            denied_by,
            tuple(sorted(allowed_by)) if len(allowed_by) > 1 else tuple(allowed_by),
        )

    # ---- plans --------------------------------------------------------------------------

    def plans(self, operation: str) -> _Plans | None:
        """The plans of ``operation`` (made once), or None when the backend cannot make them all."""
        try:
            return self._plans[operation]
        except KeyError:
            found = self._plans[operation] = self._make(operation) if self._backend is not None else None
            return found

    def _make(self, operation: str) -> _Plans | None:
        backend = self._backend
        decide = self.deciding.plan(operation)
        op = self.requests.operations.get(operation)
        if decide is None or op is None:
            return None
        request: Term = Const(REQUEST_ID)

        def plan(predicate: str, *terms: Term) -> RowsPlan | None:
            rows: RowsPlan | None = backend.rows(operation, Atom(predicate, (request, *terms)))
            return rows

        def test(predicate: str, *terms: Term) -> Decider | None:
            holds: Decider | None = backend.test(operation, Atom(predicate, (request, *terms)))
            return holds

        requirements = []
        for number, requirement in enumerate(op.requirements, start=1):
            iid = f"{operation}#{number}"
            applies = test("applies", Const(iid))
            met = plan("met", Const(iid), Var("A"), Var("E"), Var("V"))
            met_any = test("met", Const(iid), Var("A"), Var("E"), Var("V"))
            every = any(t.every for o in requirement.options for t in o.targets)
            lacking = plan("lacking", Const(iid), Var("D")) if every else None
            by = []
            for option in requirement.options:
                for target in option.targets:
                    if target.scope is Scope.RULE:
                        arity = self.program.relations[target.param]
                        by.append(test(target.param, *(Var(f"X{i}") for i in range(1, arity))))
            if applies is None or met is None or met_any is None or (every and lacking is None) or None in by:
                return None
            rules = tuple(b for b in by if b is not None)
            requirements.append(_Requirement(iid, requirement_text(requirement), applies, met, met_any, lacking, rules))
        bypass = plan("bypass", Var("W")) if "bypass" in self.program.relations else None
        return _Plans(operation, decide, tuple(requirements), bypass)

