"""Decisions rendered as trees a person can read.

The decision is data (engine.decision); this module only renders it. The same
trees back ``privilog why`` and ``who``, the REPL's ``why``, ``whynot`` and ``who``, and the golden
files in tests/golden.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from privilog.engine.decision import (
    ABSENT,
    COMPARED,
    DERIVED,
    REQUEST,
    TABLE,
    UNTRACED,
    WORLD,
    WRITTEN,
    Change,
    Decision,
    Denial,
    GrantChange,
    MembershipChange,
    Outcome,
    Premise,
    Visible,
    Witness,
)
from privilog.engine.who import Who

MAX_LISTED = 12
# Why a premise of a denial holds, by where it comes from (engine.decision.Premise.source).
_HOLDS = {
    WORLD: "in the world",
    REQUEST: "the request",
    TABLE: "the policy's operation tables",
    ABSENT: "holds: no such fact",
    COMPARED: "holds",
    UNTRACED: "derived (not traced further: the search stopped at its bound)",
}


def _join(words: Sequence[str]) -> str:
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " or " + words[-1]


def _entities(entities: Sequence[object]) -> str:
    shown = [str(e) for e in entities[:MAX_LISTED]]
    more = len(entities) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def witness_sentence(principal: str, witness: Witness) -> str:
    """``user:bob is in group:eng, which holds READ on dataset:ns1.ds, which is in namespace:ns1``."""
    if witness.holder == principal:
        text = f"{principal} holds {witness.action} on {witness.entity}"
    elif ":" not in witness.holder:  # not a principal: what the policy's own rules name (Ranger's "policy 12")
        text = f"{principal} holds {witness.action} on {witness.entity} by {witness.holder}"
    else:
        chain = list(witness.groups) or [principal, witness.holder]
        text = (
            f"{chain[0]} is in "
            + ", which is in ".join(chain[1:])
            + f", which holds {witness.action} on {witness.entity}"
        )
    if witness.pattern:
        text += f" by the wildcard grant on {witness.pattern}"
    if len(witness.inside) > 1:
        text += ", which is in " + ", which is in ".join(str(e) for e in witness.inside[1:])
    return text


def _outcome_lines(decision: Decision, outcome: Outcome) -> tuple[str, list[str]]:
    request = decision.request
    label = outcome.text
    if outcome.condition:
        label += f" (if {outcome.condition})"
    if not outcome.applies:
        return f"{label}: does not apply", []
    if outcome.met:
        details = [f"the policy's rule `{name}` holds for this request" for name in outcome.by]
        details += [witness_sentence(request.principal, w) for w in outcome.witnesses[:3]]
        if len(outcome.witnesses) > 3:
            details.append(f"and {len(outcome.witnesses) - 3} more grants")
        if outcome.covered and not outcome.witnesses:
            count = len(outcome.covered)
            details.append(f"{request.principal} holds it on all {count} entities: {_entities(outcome.covered)}")
        elif not outcome.witnesses and not outcome.by:
            listed = "every $" in outcome.text  # a list argument's: it named none
            none = "the request names none to hold it on" if listed else "there is nothing inside to hold it on"
            details.append(none)
        return f"{label}: met", details
    details = []
    for argument in outcome.missing_arguments:
        details.append(f"the request gives no ${argument}; pass it with --arg {argument}=ENTITY")
    if outcome.lacking:
        details.append(
            f"{request.principal} lacks it on {len(outcome.lacking)} of {len(outcome.covered)} entities: "
            + _entities(outcome.lacking)
        )
    elif not outcome.missing_arguments:
        options = outcome.text.split(" or ")
        rules = [f"`{t[3:]}`" for t in options if t.startswith("by ")]
        unheld = (
            f"the policy's rule {rules[0]} does not hold"
            if len(rules) == 1
            else f"neither of the policy's rules {' nor '.join(rules)} holds"
        )
        if rules and len(rules) == len(options):
            details.append(f"{unheld} for this request")
        else:
            also = f", and {unheld}" if rules else ""
            details.append(f"no grant to {request.principal} or its groups meets it{also}")
    return f"{label}: UNMET", details


@dataclass(frozen=True)
class Branch:
    """A line of a tree and the lines under it."""

    text: str
    children: tuple[Branch, ...] = ()


def _tree(branches: Sequence[Branch], indent: str = "") -> list[str]:
    """Branches drawn with box-drawing lines, each child under its parent."""
    out = []
    for index, branch in enumerate(branches):
        last = index == len(branches) - 1
        out.append(indent + ("└─ " if last else "├─ ") + branch.text)
        out += _tree(branch.children, indent + ("   " if last else "│  "))
    return out


def _outcome_branch(decision: Decision, outcome: Outcome) -> Branch:
    head, details = _outcome_lines(decision, outcome)
    return Branch(head, tuple(Branch(d) for d in details))


def denial_sentence(denial: Denial) -> str:
    """``denied by the policy's rule denied(R) :- request(R, P, _, _), blocked(P) (deny.policy:5)``."""
    return f"denied by the policy's rule {denial.rule} ({denial.at})"


def premise_sentence(premise: Premise) -> str:
    """A premise of a denial and why it holds: ``member_of(user:eve, group:bad): in the world``."""
    if premise.source == DERIVED:
        why = f"by the rule {premise.rule} ({premise.at})"
    elif premise.source == WRITTEN:
        why = f"the policy's fact ({premise.at})" if premise.at else "written in the policy"
    else:
        why = _HOLDS.get(premise.source, premise.source)
    return f"{premise.fact}: {why}"


def _premise_branch(premise: Premise) -> Branch:
    return Branch(premise_sentence(premise), tuple(_premise_branch(p) for p in premise.premises))


def denial_branch(denial: Denial) -> Branch:
    """A denying rule and, under it, the facts that make it hold, each derived one with its own."""
    return Branch(denial_sentence(denial), tuple(_premise_branch(p) for p in denial.premises))


def fix_sentence(fix: Sequence[Change]) -> str:
    """One way to allow a request: what is taken away first, then grants to one principal of one
    action grouped together, then groups to join."""
    grouped: dict[tuple[str, str], list[str]] = {}
    taken: list[str] = []
    joined: list[str] = []
    for change in fix:
        if isinstance(change, MembershipChange):
            joined.append(f"{change}, which already holds what is needed")
        elif isinstance(change, GrantChange):
            grouped.setdefault((change.principal, change.action), []).append(str(change.entity))
        else:
            taken.append(str(change))
    granted = [f"grant {action} on {_entities(es)} to {principal}" for (principal, action), es in grouped.items()]
    return "; ".join([*taken, *reversed(granted), *joined])  # the grants last grouped first, as always


def render_decision(decision: Decision) -> str:
    """The decision as a tree: the request, each requirement, and what met it or what is missing."""
    verdict = "ALLOW" if decision.allowed else "DENY"
    lines = [f"{verdict} {decision.request}  (policy {decision.policy})"]
    if decision.bypassed:
        lines.append(f"   let through by a bypass ({', '.join(decision.bypassed)}), whatever it lacks:")
    branches = [_outcome_branch(decision, o) for o in decision.outcomes]
    if not decision.outcomes and not decision.denied_by:
        branches.append(Branch("the operation requires nothing"))
    branches += [denial_branch(d) for d in decision.denied_by]
    lines += _tree(branches)
    if not decision.allowed:
        lines += render_fixes(decision)
        if decision.remaining:
            lines.append(
                f"A partial delete would leave {len(decision.remaining)} entities: {_entities(decision.remaining)}"
            )
    return "\n".join(lines)


def render_fixes(decision: Decision) -> list[str]:
    """What would allow a denied request, each way verified; for a denial by the policy's own rule,
    the changes that take its premises away (and the policy's facts it rests on)."""
    if decision.allowed:
        return []
    if not decision.fixes:
        if decision.denied_by:
            return _policy_changes(decision, found=False)
        if any(o.missing_arguments for o in decision.unmet):
            return ["No change of grants allows it: the request is missing an argument it needs."]
        rules = [
            f"`{option[3:]}`" for o in decision.unmet for option in o.text.split(" or ") if option.startswith("by ")
        ]
        if rules:  # a rule of the policy's own may hold after a change the search does not try
            return [
                "No change of grants or memberships found allows it: the search does not try what would make "
                f"the policy's {'rule' if len(rules) == 1 else 'rules'} {_join(list(dict.fromkeys(rules)))} hold."
            ]
        return ["No change of grants or memberships allows it."]
    if len(decision.fixes) == 1:
        head = "Would allow it:"
    else:
        head = f"Would allow it (any one of these {len(decision.fixes)}):"
    lines = [head]
    for index, fix in enumerate(decision.fixes, start=1):
        lines.append(f"  {index}. {fix_sentence(fix)}")
    return lines + _policy_changes(decision, found=True)


def _policy_changes(decision: Decision, found: bool) -> list[str]:
    """The facts of the policy the denials rest on, to retract; or, with none and no change of the
    world found, that nothing found takes the denying rules' premises away."""
    written = list(dict.fromkeys(p for d in decision.denied_by for p in d.written()))
    if written:
        facts = _join([f"{p.fact} ({p.at})" if p.at else p.fact for p in written])
        what = f"its fact {facts}" if len(written) == 1 else f"one of its facts {facts}"
        lead = (
            "A change of the policy takes a premise away too"
            if found
            else "Taking a premise away needs a change of the policy"
        )
        return [f"{lead}: retract {what}."]
    if found:
        return []
    rules = "rule" if len(decision.denied_by) == 1 else "rules"
    return [f"No change of grants or memberships found takes away a premise of the denying {rules}."]


def render_short(decision: Decision) -> str:
    """One line: ``ALLOW user:alice namespace.delete namespace:ns1``, and for a deny, what is unmet."""
    if decision.allowed:
        bypass = f" (bypass: {', '.join(decision.bypassed)})" if decision.bypassed else ""
        return f"ALLOW {decision.request}{bypass}"
    reasons = [f"unmet: {'; '.join(o.text for o in decision.unmet)}"] if decision.unmet else []
    reasons += [denial_sentence(d) for d in decision.denied_by]
    return f"DENY {decision.request}: {'; '.join(reasons) or 'unmet: the operation does not apply to this entity'}"


def render_visible(principal: str, shown: Sequence[Visible]) -> str:
    """What a principal sees, each with the grant that makes it visible."""
    if not shown:
        return f"{principal} sees nothing here"
    lines = []
    for item in shown:
        if item.witness is None:
            lines.append(f"{item.entity}  (shown to everyone the policy lets list)")
        elif item.witness.entity == item.entity and item.witness.holder == principal:
            lines.append(f"{item.entity}  ({item.witness.action} on it)")
        else:
            lines.append(f"{item.entity}  (because {witness_sentence(principal, item.witness)})")
    return "\n".join(lines)


def render_who(who: Who) -> str:
    """The principals allowed, each with the grants that allow it, or that nobody is."""
    if not who.checked:
        return "the world names no principals"
    request = who.request
    what = f"{request.operation} {request.entity}{''.join(f' {k}={v}' for k, v in request.args)}"
    if not who.allowed:
        return f"nobody in the world may {what} ({who.checked} principals checked)"
    lines = [f"{len(who.allowed)} of {who.checked} principals in the world may {what}:"]
    for decision in who.allowed:
        principal = decision.request.principal
        because = [witness_sentence(principal, o.witnesses[0]) for o in decision.outcomes if o.witnesses]
        lines.append(f"  {principal}  (" + ("; ".join(because) or "the operation requires nothing of it") + ")")
    return "\n".join(lines)
