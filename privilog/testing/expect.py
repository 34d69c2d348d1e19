"""What a scenario case expects, and whether the policy gives it.

A case's ``expect:`` is one of

* ``allow`` or ``deny`` (or ``{allow: true}``, ``{allow: false}``): the decision;
* ``{allow: true, because: [grant PRINCIPAL ACTION ENTITY, ...]}``: allowed, and each
  grant listed is one the allow's proof uses (see :func:`proof_grants`);
* ``{visible: [ENTITY, ...]}``: exactly the entities the principal sees;
* ``{who: [PRINCIPAL, ...]}``: exactly the principals of the world who may do the
  operation on the entity (the request names no principal).

A case's answer is check()'s (with its proof), and the answer `privilog serve` and CDAP's
enforce would give must be the same: every decision is asked of ``allows`` and ``decide``
too (the backend's decision plans), every listing of ``visible_entities``. A case where
they differ fails, whatever it expects: the engine disagrees with itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from privilog.dsl.errors import PrivilogError, did_you_mean
from privilog.engine.authorizer import Authorizer
from privilog.engine.decision import Decision, Request, Witness
from privilog.engine.ids import EntityId, IdError, parse_principal
from privilog.engine.patterns import is_pattern, matches
from privilog.engine.who import who
from privilog.engine.world import Located
from privilog.render.explain import render_short

EXPECT_KEYS = ("allow", "because", "visible", "who")
UsedGrant = tuple[str, str, EntityId]  # holder, action, entity


class ExpectationError(PrivilogError):
    """An expectation or request in a scenario that cannot be judged."""

    located = True


def fail(item: Located, message: str) -> ExpectationError:
    return ExpectationError(f"{item.where}: {message}")


def plain(item: Located) -> object:
    """Strip positions from a located value."""
    if isinstance(item.value, dict):
        return {k: plain(v) for k, v in item.value.items()}
    if isinstance(item.value, list):
        return [plain(v) for v in item.value]
    return item.value


def mapping(item: Located, what: str, keys: tuple[str, ...]) -> dict[str, Located]:
    if not isinstance(item.value, dict):
        raise fail(item, f"{what} must be a mapping")
    for key, value in item.value.items():
        if key not in keys:
            raise fail(value, f"unknown key `{key}` in {what}; the keys are {', '.join(keys)}")
    return item.value


@dataclass(frozen=True)
class Verdict:
    """Whether a case passed, why not, and the requests it decided (for coverage)."""

    passed: bool
    message: str = ""
    requests: tuple[Request, ...] = ()


def _differs(what: str, expected: set[str], got: set[str]) -> str:
    parts = []
    if expected - got:
        parts.append(f"missing {sorted(expected - got)}")
    if got - expected:
        parts.append(f"unexpected {sorted(got - expected)}")
    return f"{what} differs: " + "; ".join(parts)


EXAMPLES = {
    "who": "a list of principals, such as [user:alice, group:eng]",
    "visible": "a list of entity ids, such as [dataset:ns1.ds]",
    "because": "a list of grants, such as [grant user:alice ADMIN namespace:ns1]",
}


def _texts(item: Located, what: str) -> list[Located]:
    if not isinstance(item.value, list) or not all(isinstance(v.value, str) for v in item.value):
        raise fail(item, f"`{what}` is {EXAMPLES[what]}")
    return list(item.value)


class Judge:
    """Judges the cases of one scenario file against one authorizer, in the case's world."""

    def __init__(self, authorizer: Authorizer):
        self.authorizer = authorizer

    def judge(self, request: Located, expect: Located) -> Verdict:
        fields = mapping(request, "a request", ("principal", "operation", "entity", "in", "args"))
        wanted = self._expectation(expect)
        if "operation" not in fields:
            raise fail(request, "a request needs `operation`")
        if "who" in wanted:
            if "principal" in fields:
                raise fail(fields["principal"], "a `who` case names no principal: it asks which principals may")
        elif "principal" not in fields:
            raise fail(request, "a request needs `principal`")
        args = plain(fields["args"]) if "args" in fields else {}
        if not isinstance(args, dict):
            raise fail(fields["args"], "`args` is a mapping of argument names to values")
        try:
            if "visible" in wanted:
                return self._visible(fields, wanted["visible"])
            if "entity" not in fields:
                raise fail(
                    request, f"a request that expects {'who' if 'who' in wanted else 'allow or deny'} needs `entity`"
                )
            if "who" in wanted:
                return self._who(fields, args, wanted["who"])
            req = self.authorizer.request(
                str(fields["principal"].value), str(fields["operation"].value), str(fields["entity"].value), args
            )
            because = [self._grant(g) for g in _texts(wanted["because"], "because")] if "because" in wanted else []
        except ExpectationError:
            raise
        except PrivilogError as error:
            raise fail(request, str(error)) from None
        return self._decision(req, bool(wanted["allow"].value), because)

    def _expectation(self, expect: Located) -> dict[str, Located]:
        if isinstance(expect.value, str):
            if expect.value not in ("allow", "deny"):
                raise fail(
                    expect,
                    f"expect is `allow`, `deny`, `{{allow: true, because: [...]}}`, `{{visible: [...]}}` "
                    f"or `{{who: [...]}}`, not `{expect.value}`",
                )
            return {"allow": Located(expect.value == "allow", expect.where)}
        wanted = mapping(expect, "an expectation", EXPECT_KEYS)
        kinds = [k for k in ("allow", "visible", "who") if k in wanted]
        if len(kinds) != 1:
            raise fail(
                expect,
                "an expectation has one of `allow`, `visible` or `who`"
                + (f", not {' and '.join(kinds)}" if kinds else ""),
            )
        if "allow" in wanted and not isinstance(wanted["allow"].value, bool):
            raise fail(wanted["allow"], f"`allow` is true or false, not `{wanted['allow'].value}`")
        if "because" in wanted and wanted.get("allow", Located(False, "")).value is not True:
            raise fail(wanted["because"], "`because` goes with `allow: true`: it names grants the allow's proof uses")
        return wanted

    def _grant(self, item: Located) -> UsedGrant:
        words = str(item.value).split()
        if len(words) != 4 or words[0] != "grant":
            raise fail(
                item,
                f"a grant in `because` is `grant PRINCIPAL ACTION ENTITY`, such as "
                f"`grant user:alice ADMIN namespace:ns1`; not `{item.value}`",
            )
        _, principal, action, entity = words
        try:
            holder = parse_principal(principal)
        except IdError as error:
            raise fail(item, str(error)) from None
        actions = self.authorizer.policy.actions
        if action not in actions:
            hint = did_you_mean(action, list(actions)) or f"the actions are {', '.join(actions)}"
            raise fail(item, f"unknown action `{action}`: {hint}")
        try:
            return holder, action, self.authorizer.entity(entity)
        except PrivilogError as error:
            raise fail(item, str(error)) from None

    def _decision(self, request: Request, allow: bool, because: list[UsedGrant]) -> Verdict:
        decision = self.authorizer.check(request)
        differs = self._fast_paths(request, decision.allowed)
        if differs:
            return Verdict(False, differs, (request,))
        if decision.allowed != allow:
            expected = "allow" if allow else "deny"
            return Verdict(False, f"expected {expected}, got {render_short(decision)}", (request,))
        used = proof_grants(self.authorizer, decision)
        unused = [g for g in because if g not in used]
        if unused:
            instead = "; ".join(_grant_text(g) for g in sorted(used, key=_grant_text)) or "no grant"
            return Verdict(
                False,
                f"allowed, but the proof does not use {'; '.join(_grant_text(g) for g in unused)}; it used: {instead}",
                (request,),
            )
        return Verdict(True, requests=(request,))

    def _fast_paths(self, request: Request, allowed: bool) -> str:
        """What differs when the paths `privilog serve`, its batches and CDAP's enforce answer with
        (``allows``, ``decide``: the backend's decision plans) do not give check()'s answer: an
        engine bug, which a case expecting check()'s answer would not show."""
        authz = self.authorizer
        answers = {
            "decide()": authz.decide(request),
            "allows()": authz.allows(request.principal, request.operation, str(request.entity), request.arguments()),
        }
        wrong = [f"{k} {'allows' if v else 'denies'}" for k, v in answers.items() if v != allowed]
        if not wrong:
            return ""
        return (
            f"check() {'allows' if allowed else 'denies'}, but {', '.join(wrong)} (what privilog serve answers "
            f"with): the engine disagrees with itself; please report it"
        )

    def _who(self, fields: dict[str, Located], args: dict[str, object], wanted: Located) -> Verdict:
        listed = _texts(wanted, "who")
        expected = set()
        for item in listed:
            try:
                expected.add(parse_principal(str(item.value)))
            except IdError as error:
                raise fail(item, str(error)) from None
        operation, entity = str(fields["operation"].value), str(fields["entity"].value)
        # who() hands the arguments to Authorizer.request, which checks values of any type
        found = who(self.authorizer, operation, entity, cast(Mapping[str, object], args))
        principals = sorted(self.authorizer.world.principals())
        requests = tuple(self.authorizer.request(p, operation, entity, args) for p in principals)
        got = {d.request.principal for d in found.allowed}
        for request in requests:
            differs = self._fast_paths(request, request.principal in got)
            if differs:
                return Verdict(False, f"{request.principal}: {differs}", requests)
        if got == expected:
            return Verdict(True, requests=requests)
        return Verdict(False, _differs("who may", expected, got), requests)

    def _visible(self, fields: dict[str, Located], wanted: Located) -> Verdict:
        authorizer = self.authorizer
        op = authorizer.operation(str(fields["operation"].value))
        principal = str(fields["principal"].value)
        within = str(fields["in"].value) if "in" in fields else None
        expected = {str(authorizer.entity(str(v.value))) for v in _texts(wanted, "visible")}
        shown = {str(v.entity) for v in authorizer.visible(principal, op.entity_type, within)}
        parent = authorizer.entity(within) if within is not None else None
        candidates = authorizer.inventory.inside(op.entity_type, parent)
        listing = authorizer.list_operation(op.entity_type).qualified
        requests = tuple(authorizer.request(principal, listing, e) for e in candidates)
        # what privilog serve lists: the decision plans alone, without the proofs
        listed = {str(e) for e in authorizer.visible_entities(principal, op.entity_type, within)}
        if listed != shown:
            return Verdict(
                False,
                _differs("the visible set privilog serve lists (visible_entities())", shown, listed)
                + ": the engine disagrees with itself; please report it",
                requests,
            )
        if shown == expected:
            return Verdict(True, requests=requests)
        return Verdict(False, _differs("visible set", expected, shown), requests)


def _grant_text(grant: UsedGrant) -> str:
    holder, action, entity = grant
    return f"grant {holder} {action} {entity}"


def _named(authorizer: Authorizer, witness: Witness) -> list[EntityId]:
    """What the grants behind a witness name: its entity, or the wildcards that match it."""
    return authorizer.granted_as(witness.holder, witness.action, witness.entity) or [witness.entity]


def proof_grants(authorizer: Authorizer, decision: Decision) -> set[UsedGrant]:
    """The grants an allow's proof uses: (holder, action, entity) of every grant that meets a
    requirement that applies. A grant reached through a group or role is the group's grant. A
    requirement on every entity of a kind (``ADMIN on every descendant``) uses the grants that
    hold it on each entity it covers.
    """
    used: set[UsedGrant] = set()
    op = authorizer.operation(decision.request.operation)
    holders = {decision.request.principal, *authorizer.world.groups_of(decision.request.principal)}
    for outcome, requirement in zip(decision.outcomes, op.requirements, strict=True):
        if not (outcome.applies and outcome.met):
            continue
        used.update((w.holder, w.action, named) for w in outcome.witnesses for named in _named(authorizer, w))
        every = {a for o in requirement.options if any(t.every for t in o.targets) for a in o.actions}
        covered = set(outcome.covered)
        used.update(
            (g.principal, g.action, g.entity)
            for g in authorizer.world.grants
            if g.action in every
            and g.principal in holders
            and (g.entity in covered or (is_pattern(g.entity) and any(matches(g.entity, c) for c in covered)))
        )
    return used
