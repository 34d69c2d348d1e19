"""Decisions are data: the request, allow or deny, and why.

An allowed decision carries, for each requirement, the grant that met it (and
the membership and descendant path through which it counts). A denied one
carries every unmet requirement, the policy's own `denied` rules that hold for
it (each with the facts that make it hold, as a tree: :class:`Denial`), and the
smallest sets of changes (grants, joining a group that already holds what is
needed, or taking away a membership or a grant a denying rule rests on) that
would allow it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from privilog.engine.ids import EntityId


@dataclass(frozen=True)
class Request:
    """May ``principal`` do ``operation`` on ``entity`` (with these arguments)?"""

    principal: str
    operation: str
    entity: EntityId
    args: tuple[tuple[str, str], ...] = ()
    lists: frozenset[str] = field(default=frozenset(), compare=False)  # the list arguments, shown as lists

    def arg(self, name: str) -> str | None:
        return dict(self.args).get(name)

    def values(self, name: str) -> list[str]:
        """Every value of an argument: a list argument (`$datasets: [dataset]`) has a pair a value."""
        return [v for k, v in self.args if k == name]

    def arguments(self) -> dict[str, str | list[str]]:
        """The arguments as a mapping: a list argument's values in a list."""
        found = gathered(self.args)
        return {k: [v] if k in self.lists and isinstance(v, str) else v for k, v in found.items()}

    def to_json(self) -> dict[str, Any]:
        return {
            "principal": self.principal,
            "operation": self.operation,
            "entity": str(self.entity),
            "args": self.arguments(),
        }

    def __str__(self) -> str:
        args = "".join(f" {k}={v}" for k, v in self.args)
        return f"{self.principal} {self.operation} {self.entity}{args}"


def gathered(pairs: Iterable[tuple[str, str]]) -> dict[str, str | list[str]]:
    """``NAME=VALUE`` pairs as request arguments: a name given again makes a list, the values of
    a list argument (``datasets=dataset:ns1.a datasets=dataset:ns1.b``).

    >>> gathered([("artifact", "artifact:ns1.a"), ("datasets", "dataset:ns1.x"), ("datasets", "dataset:ns1.y")])
    {'artifact': 'artifact:ns1.a', 'datasets': ['dataset:ns1.x', 'dataset:ns1.y']}
    """
    out: dict[str, str | list[str]] = {}
    for name, value in pairs:
        before = out.get(name)
        out[name] = value if before is None else [*before, value] if isinstance(before, list) else [before, value]
    return out


@dataclass(frozen=True, order=True)
class Witness:
    """A grant that meets a requirement.

    ``holder`` holds ``action`` on ``entity``; when the holder is a group or
    role, ``groups`` is the membership chain from the requester to it. For
    "self or descendant", ``inside`` is the chain of entities from the granted
    one up to the requested one. When the grant names a wildcard that matches
    ``entity`` (engine.patterns), ``pattern`` is the id the grant names.
    """

    action: str
    entity: EntityId
    holder: str
    groups: tuple[str, ...] = ()
    inside: tuple[EntityId, ...] = ()
    pattern: str = ""

    def to_json(self) -> dict[str, Any]:
        out = {
            "action": self.action,
            "entity": str(self.entity),
            "holder": self.holder,
            "groups": list(self.groups),
            "inside": [str(e) for e in self.inside],
        }
        if self.pattern:
            out["pattern"] = self.pattern
        return out


@dataclass(frozen=True, order=True)
class GrantChange:
    """Granting ``action`` on ``entity`` to ``principal``."""

    principal: str
    action: str
    entity: EntityId

    def __str__(self) -> str:
        return f"grant {self.action} on {self.entity} to {self.principal}"

    def to_json(self) -> dict[str, Any]:
        return {"grant": {"principal": self.principal, "action": self.action, "entity": str(self.entity)}}


@dataclass(frozen=True, order=True)
class MembershipChange:
    """Adding ``principal`` to ``group``, which already holds what is needed."""

    principal: str
    group: str

    def __str__(self) -> str:
        return f"add {self.principal} to {self.group}"

    def to_json(self) -> dict[str, Any]:
        return {"member": {"principal": self.principal, "group": self.group}}


@dataclass(frozen=True, order=True)
class RevokeChange:
    """Revoking ``action`` on ``entity`` from ``principal``: a grant a denying rule rests on."""

    principal: str
    action: str
    entity: EntityId

    def __str__(self) -> str:
        return f"revoke {self.action} on {self.entity} from {self.principal}"

    def to_json(self) -> dict[str, Any]:
        return {"revoke": {"principal": self.principal, "action": self.action, "entity": str(self.entity)}}


@dataclass(frozen=True, order=True)
class RemoveMemberChange:
    """Taking ``principal`` out of ``group``: a membership a denying rule rests on."""

    principal: str
    group: str

    def __str__(self) -> str:
        return f"remove {self.principal} from {self.group}"

    def to_json(self) -> dict[str, Any]:
        return {"remove_member": {"principal": self.principal, "group": self.group}}


Change = GrantChange | MembershipChange | RevokeChange | RemoveMemberChange


# Where a premise of a denial comes from (Premise.source).
WORLD = "world"  # a fact of the world: a grant, a membership, the hierarchy, a setting
REQUEST = "request"  # a fact of the request under decision (`request`, `request_arg`)
WRITTEN = "policy"  # a fact the policy writes, at its place
TABLE = "table"  # a fact of the policy's operation tables (`operation`, `requires`, `guard`)
DERIVED = "rule"  # derived by a rule of the policy (or the prelude), from its own premises
ABSENT = "absent"  # a negated literal: no row holds
COMPARED = "comparison"  # a comparison that holds
UNTRACED = "untraced"  # derived, but the search stopped at its bound before tracing it

# The request's own id (``r17``), as a premise shows it: a request has no other name in the rules.
REQUEST_ID_SHOWN = "R"


@dataclass(frozen=True)
class Premise:
    """A literal of a rule's body, grounded, and why it holds.

    ``fact`` is the grounded literal as the policy would write it (``blocked(user:eve)``,
    ``not trusted(user:eve)``, ``user:eve != user:root``); ``values`` are its columns (the
    request's id shown as ``R``). A fact derived by a rule (``source`` ``rule``) names the
    rule, its place (``at``, FILE:LINE) and the premises that make its body hold; a fact the
    policy writes names its place.
    """

    fact: str
    source: str
    relation: str = ""
    values: tuple[str, ...] = ()
    rule: str = ""
    at: str = ""
    premises: tuple[Premise, ...] = ()

    def walk(self) -> tuple[Premise, ...]:
        """This premise and every premise under it, depth first."""
        return (self, *(p for premise in self.premises for p in premise.walk()))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fact": self.fact, "source": self.source}
        if self.relation:
            out["relation"] = self.relation
            out["values"] = list(self.values)
        if self.rule:
            out["rule"] = self.rule
        if self.at:
            out["at"] = self.at
        if self.premises:
            out["premises"] = [p.to_json() for p in self.premises]
        return out


@dataclass(frozen=True)
class Denial:
    """A `denied` rule of the policy that holds for the request: the rule as the policy writes it,
    its place (FILE:LINE), and the grounded premises of its body (a proof, each derived premise
    down to facts of the world, the request and the policy)."""

    rule: str
    at: str
    premises: tuple[Premise, ...] = ()

    def walk(self) -> tuple[Premise, ...]:
        """Every premise of the proof, depth first."""
        return tuple(p for premise in self.premises for p in premise.walk())

    def written(self) -> tuple[Premise, ...]:
        """The facts the policy writes that the proof rests on (retracting one takes a premise away)."""
        return tuple(dict.fromkeys(p for p in self.walk() if p.source == WRITTEN))

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "at": self.at, "premises": [p.to_json() for p in self.premises]}


@dataclass(frozen=True)
class Outcome:
    """What became of one requirement of the operation."""

    id: str
    text: str  # the requirement as the policy writes it
    applies: bool  # False when its condition (`if $arg`) excludes it
    met: bool
    witnesses: tuple[Witness, ...] = ()
    covered: tuple[EntityId, ...] = ()  # "every": the entities it covers
    lacking: tuple[EntityId, ...] = ()  # "every": those not held
    missing_arguments: tuple[str, ...] = ()  # arguments it names that the request did not give
    condition: str = ""
    by: tuple[str, ...] = ()  # the policy's rules (`by NAME`) that hold for the request and meet it

    def to_json(self) -> dict[str, Any]:
        return ({"by": list(self.by)} if self.by else {}) | {
            "id": self.id,
            "requirement": self.text,
            "applies": self.applies,
            "condition": self.condition,
            "met": self.met,
            "witnesses": [w.to_json() for w in self.witnesses],
            "covered": [str(e) for e in self.covered],
            "lacking": [str(e) for e in self.lacking],
            "missing_arguments": list(self.missing_arguments),
        }


@dataclass(frozen=True)
class Decision:
    """Allow or deny, with the proof, or the unmet requirements, the denying rules and the fixes."""

    request: Request
    allowed: bool
    outcomes: tuple[Outcome, ...]
    policy: str
    fixes: tuple[tuple[Change, ...], ...] = ()
    remaining: tuple[EntityId, ...] = field(default=())  # a partial delete leaves these
    # why a bypass let the request through whatever it lacks (the prelude's `bypass` reasons)
    bypassed: tuple[str, ...] = ()
    # the policy's own `denied` rules that hold for the request, each with its proof
    denied_by: tuple[Denial, ...] = ()

    @property
    def unmet(self) -> tuple[Outcome, ...]:
        return tuple(o for o in self.outcomes if o.applies and not o.met)

    def to_json(self) -> dict[str, Any]:
        return (
            {
                "request": self.request.to_json(),
                "decision": "allow" if self.allowed else "deny",
                "policy": self.policy,
                "requirements": [o.to_json() for o in self.outcomes],
                "fixes": [[c.to_json() for c in fix] for fix in self.fixes],
                "remaining": [str(e) for e in self.remaining],
            }
            | ({"bypass": list(self.bypassed)} if self.bypassed else {})
            | ({"denied_by": [d.to_json() for d in self.denied_by]} if self.denied_by else {})
        )


@dataclass(frozen=True)
class Visible:
    """An entity a principal may see, and a grant that makes it visible."""

    entity: EntityId
    witness: Witness | None  # None when the policy shows it without any grant

    def to_json(self) -> dict[str, Any]:
        return {"entity": str(self.entity), "because": self.witness.to_json() if self.witness else None}
