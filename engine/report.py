"""A principal's report, and an entity's: every grant that reaches, through which memberships, and
what it allows (``privilog report``).

:func:`principal_report` answers for a user, a group or a role: the groups and roles it is in (a
chain of memberships to each), for a group or role the principals in it (a chain from each), every
grant that reaches it (its own, and each of its groups' and roles', with the chain), every access it
holds (each operation of the policy, without arguments, on each entity that exists or is granted on)
with the grants that meet the access's requirements (the decision's witnesses) or the rules and
bypasses that let it through, what each grant allows, and what it sees (``Authorizer.visible``).
A group or role is asked as itself: what it holds, every member holds through it.

:func:`entity_report` answers for an entity: every principal of the world with any access to it,
each access with its grants and the chain of memberships to each grant's holder.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from privilog.engine.authorizer import Authorizer
from privilog.engine.decision import Decision
from privilog.engine.ids import EntityId, parse_principal
from privilog.engine.patterns import is_pattern, parse_pattern
from privilog.engine.world import Grant, World


def _chains(start: str, edges: Mapping[str, Iterable[str]]) -> dict[str, tuple[str, ...]]:
    """The shortest chain from ``start`` to each principal reachable along ``edges`` (breadth first,
    in sorted order, so that the chain is the same on every run), ``start`` first."""
    found: dict[str, tuple[str, ...]] = {start: (start,)}
    frontier = [start]
    while frontier:
        following = []
        for here in frontier:
            for there in sorted(edges.get(here, ())):
                if there not in found:
                    found[there] = (*found[here], there)
                    following.append(there)
        frontier = following
    return found


def _back(start: str, chains: Mapping[str, tuple[str, ...]], edges: Mapping[str, Iterable[str]]) -> tuple[str, ...]:
    """The shortest chain from ``start`` round a cycle back to itself, or () when it is in none."""
    closing = [chains[p] for p in chains if start in edges.get(p, ())]  # itself too: a group in itself
    return (*min(closing, key=lambda c: (len(c), c)), start) if closing else ()


def _groups(world: World) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for member, group in world.members:
        out.setdefault(member, set()).add(group)
    return out


def _members(world: World) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for member, group in world.members:
        out.setdefault(group, set()).add(member)
    return out


def memberships(world: World, principal: str) -> dict[str, tuple[str, ...]]:
    """Each group and role ``principal`` is in, directly or not, with the chain to it (the principal
    first, the group last): the groups are ``world.groups_of(principal)``."""
    edges = _groups(world)
    chains = _chains(principal, edges)
    del chains[principal]
    cycle = _back(principal, {principal: (principal,), **chains}, edges)
    return {**chains, principal: cycle} if cycle else chains


def members(world: World, group: str) -> dict[str, tuple[str, ...]]:
    """Each principal in ``group``, directly or through other groups, with its chain (the member first)."""
    edges = _members(world)
    chains = _chains(group, edges)
    del chains[group]
    cycle = _back(group, {group: (group,), **chains}, edges)
    if cycle:
        chains[group] = cycle
    return {m: tuple(reversed(c)) for m, c in chains.items()}


def universe(world: World) -> list[EntityId]:
    """The entities a report asks about: those that exist, and those granted on (not a wildcard)."""
    return sorted(world.existing() | {g.entity for g in world.grants if not is_pattern(g.entity)})


@dataclass(frozen=True)
class Reaching:
    """A grant that reaches a principal: ``via`` is the chain from the principal to the grant's holder
    (the principal alone for its own grant); ``allows`` what it meets a requirement of."""

    grant: Grant
    via: tuple[str, ...]
    allows: tuple[tuple[str, EntityId], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "principal": self.grant.principal,
            "action": self.grant.action,
            "entity": str(self.grant.entity),
            "via": list(self.via),
            "allows": [{"operation": op, "entity": str(e)} for op, e in self.allows],
        }


@dataclass(frozen=True)
class Held:
    """An access a principal holds: the grants that meet its requirements, and the policy's rules
    (``by NAME``) and bypasses that let it through without a grant."""

    principal: str
    operation: str
    entity: EntityId
    grants: tuple[Reaching, ...] = ()
    rules: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "principal": self.principal,
            "operation": self.operation,
            "entity": str(self.entity),
            "grants": [
                {"principal": r.grant.principal, "action": r.grant.action, "entity": str(r.grant.entity),
                 "via": list(r.via)}
                for r in self.grants
            ],
            "rules": list(self.rules),
        }


def _held(decision: Decision, chains: Mapping[str, tuple[str, ...]]) -> Held:
    """An allowed decision as an access: its witnesses' grants (each with the chain to its holder)."""
    request = decision.request
    grants: dict[Grant, Reaching] = {}
    rules: list[str] = []
    for outcome in decision.outcomes:
        for w in outcome.witnesses:
            grant = Grant(w.holder, w.action, parse_pattern(w.pattern) if w.pattern else w.entity)
            via = chains.get(w.holder, (request.principal, *w.groups) if w.groups else (request.principal,))
            grants.setdefault(grant, Reaching(grant, via))
        rules.extend(f"by {name}" for name in outcome.by)
    rules.extend(f"bypass: {reason}" for reason in decision.bypassed)
    return Held(
        request.principal,
        request.operation,
        request.entity,
        tuple(sorted(grants.values(), key=lambda r: (r.grant, r.via))),
        tuple(dict.fromkeys(rules)),
    )


def accesses(authorizer: Authorizer, principals: Sequence[str], entities: Sequence[EntityId]) -> list[Held]:
    """Every access of ``principals`` on ``entities``: each operation of the policy on each entity of its
    type, without arguments, decided; the allowed ones with why."""
    world = authorizer.world
    chains = {p: _chains(p, _groups(world)) for p in principals}
    out: list[Held] = []
    for op in authorizer.policy.operations:
        name = op.qualified
        requests = [authorizer.request(p, name, e) for p in principals for e in entities if e.type == op.entity_type]
        if not requests:
            continue
        for decision in authorizer.check_many(requests, explain_denials=False):
            if decision.allowed:
                out.append(_held(decision, chains[decision.request.principal]))
    out.sort(key=lambda h: (h.principal, h.entity, h.operation))
    return out


@dataclass(frozen=True)
class PrincipalReport:
    """What reaches a principal and what it may do (see the module's docstring)."""

    principal: str
    known: bool  # the world names it
    memberships: tuple[tuple[str, ...], ...]  # a chain to each group and role it is in
    members: tuple[tuple[str, ...], ...]  # for a group or role: a chain from each principal in it
    grants: tuple[Reaching, ...]  # every grant that reaches it, with what each allows
    accesses: tuple[Held, ...]  # every access it holds, with why
    visible: tuple[tuple[str, tuple[EntityId, ...]], ...]  # each listable type, the entities it sees

    @property
    def kind(self) -> str:
        return self.principal.partition(":")[0]

    def to_json(self) -> dict[str, Any]:
        return {
            "principal": self.principal,
            "kind": self.kind,
            "known": self.known,
            "memberships": [list(c) for c in self.memberships],
            "members": [list(c) for c in self.members],
            "grants": [g.to_json() for g in self.grants],
            "accesses": [
                {k: v for k, v in a.to_json().items() if k != "principal"} for a in self.accesses
            ],
            "visible": {t: [str(e) for e in es] for t, es in self.visible},
            "counts": {"grants": len(self.grants), "accesses": len(self.accesses),
                       "visible": sum(len(es) for _, es in self.visible)},
        }


def principal_report(authorizer: Authorizer, principal: str) -> PrincipalReport:
    """The report of a user, a group or a role (a well-formed principal id: see ``parse_principal``)."""
    world = authorizer.world
    principal = parse_principal(principal)
    chains = _chains(principal, _groups(world))
    held = accesses(authorizer, [principal], universe(world))
    allows: dict[Grant, list[tuple[str, EntityId]]] = {}
    for access in held:
        for reaching in access.grants:
            allows.setdefault(reaching.grant, []).append((access.operation, access.entity))
    grants = [
        Reaching(g, chains[g.principal], tuple(sorted(allows.get(g, ()))))
        for g in sorted(world.grants)
        if g.principal in chains
    ]
    grants.sort(key=lambda r: (len(r.via), r.grant))
    seen = []
    for entity_type in authorizer.listable_types():
        shown = authorizer.visible_entities(principal, entity_type)
        if shown:
            seen.append((entity_type, tuple(shown)))
    return PrincipalReport(
        principal,
        principal in world.principals(),
        tuple(c for _, c in sorted(memberships(world, principal).items())),
        tuple(sorted(members(world, principal).values())) if principal.partition(":")[0] != "user" else (),
        tuple(grants),
        tuple(held),
        tuple(seen),
    )


@dataclass(frozen=True)
class EntityReport:
    """Every principal of the world with any access to an entity, and why."""

    entity: EntityId
    exists: bool
    accesses: tuple[Held, ...]  # by principal, then operation

    def principals(self) -> list[str]:
        return sorted({a.principal for a in self.accesses})

    def to_json(self) -> dict[str, Any]:
        return {
            "entity": str(self.entity),
            "exists": self.exists,
            "accesses": [a.to_json() for a in self.accesses],
            "counts": {"principals": len(self.principals()), "accesses": len(self.accesses)},
        }


def entity_report(authorizer: Authorizer, entity: str | EntityId) -> EntityReport:
    """The report of an entity: every principal the world names (users first), each operation of the
    entity's type, decided; the allowed ones with their grants and memberships."""
    entity = authorizer.entity(entity)
    world = authorizer.world
    principals = sorted(world.principals(), key=lambda p: (p.partition(":")[0] != "user", p))
    held = accesses(authorizer, principals, [entity])
    order = {p: i for i, p in enumerate(principals)}
    held.sort(key=lambda h: (order[h.principal], h.operation))
    return EntityReport(entity, entity in world.existing(), tuple(held))
