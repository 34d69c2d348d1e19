"""Two policies compared: where their requirements differ, with a checked witness each.

Without a world, each operation is tried on a small world built for it (the
entity, what encloses it, one entity of each type inside it, and the entities
its arguments name), with every combination of its arguments given or not.
The witnesses come from the policies themselves: every inclusion-minimal set
of grants that allows the request under one policy is evaluated under the
other. Both policies are monotonic in grants (proofs/ checks it), so if every
minimal set of each is allowed by the other, they agree on that world: the
comparison is exact there, and each reported witness is a real evaluation of
both policies, not an inference from their text.

With a world, every (principal, operation, entity) decision in it is made
under both and the ones that change are reported.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from privilog.dsl.check import ancestor_types
from privilog.dsl.format import format_requirements
from privilog.dsl.ir import Operation, Param, Policy
from privilog.engine.authorizer import Authorizer
from privilog.engine.decision import Decision, GrantChange, Request
from privilog.engine.ids import EntityId, parent_type
from privilog.engine.patterns import is_pattern
from privilog.engine.world import Grant, World

PRINCIPAL = "user:u"
GROUP = "group:g"  # a group the principal is in, in the worlds that try grants through a group
OWN = "kerberosprincipal:u"  # the principal's own kerberos principal: the same name
_SAMPLE_NAMES = {
    "instance": "cdap",
    "namespace": "ns1",
    "artifact": "ns1.art",
    "application": "ns1.app",
    "program": "ns1.app.service.prog",
    "schedule": "ns1.app.sched",
    "dataset": "ns1.ds",
    "dataset_module": "ns1.mod",
    "dataset_type": "ns1.dstype",
    "stream": "ns1.events",
    "securekey": "ns1.key",
    "kerberosprincipal": "owner@EXAMPLE.COM",
}


def sample_entity(type_name: str, variant: str = "") -> EntityId:
    """A well-formed entity of a type (``variant`` makes a second one, for arguments)."""
    name = _SAMPLE_NAMES[type_name]
    if variant:
        name = name.replace("@", f"{variant}@") if "@" in name else f"{name}{variant}"
    return EntityId(type_name, name)


@dataclass(frozen=True)
class Witness:
    """A request in a world that one policy allows and the other denies."""

    world: World = field(compare=False)
    grants: tuple[Grant, ...]
    request: Request
    allowed_by: str
    denied_by: str
    denial: Decision = field(compare=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "request": self.request.to_json(),
            "entities": sorted(str(e) for e in self.world.entities),
            "grants": [[g.principal, g.action, str(g.entity)] for g in self.grants],
            "members": [list(m) for m in sorted(self.world.members)],
            "allowed_by": self.allowed_by,
            "denied_by": self.denied_by,
        }


@dataclass(frozen=True)
class OperationDiff:
    """One operation as the two policies see it."""

    operation: str
    left: tuple[str, ...] | None  # the requirements as written; None: no such operation
    right: tuple[str, ...] | None
    witnesses: tuple[Witness, ...] = ()

    @property
    def differs(self) -> bool:
        return self.left is None or self.right is None or bool(self.witnesses)

    def to_json(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "left": list(self.left) if self.left is not None else None,
            "right": list(self.right) if self.right is not None else None,
            "witnesses": [w.to_json() for w in self.witnesses],
        }


def _requirements(op: Operation | None) -> tuple[str, ...] | None:
    if op is None:
        return None
    return tuple(format_requirements(op.requirements)) or ("nothing",)


def _world_for(policies: tuple[Policy, ...], op: Operation, params: list[Param]) -> tuple[EntityId, set[EntityId]]:
    """The request's entity, and the entities of a world with it, one of each type inside it
    (in either policy), and the entities its arguments name."""
    target = sample_entity(op.entity_type)
    entities = {target}
    for policy in policies:
        for entity_type in policy.entity_types:
            inside = op.entity_type in ancestor_types(policy, entity_type.name)
            if inside and entity_type.name in _SAMPLE_NAMES and parent_type(entity_type.name) is not None:
                entities.add(sample_entity(entity_type.name))
    for param in params:
        if param.type in _SAMPLE_NAMES:
            entities.add(sample_entity(param.type, "arg"))
    return target, entities


def _arg_choices(params: list[Param]) -> Iterator[dict[str, str]]:
    """Every combination of arguments given or not (a bool given as true); and where a kerberos
    principal is given, once more as the requester's own (its name is the requester's)."""
    for mask in itertools.product((False, True), repeat=len(params)):
        args: dict[str, str] = {}
        for given, param in zip(mask, params, strict=True):
            if given:
                args[param.name] = "true" if param.type == "bool" else str(sample_entity(param.type, "arg"))
        yield args
        own = {
            k: OWN if dict((p.name, p.type) for p in params)[k] == "kerberosprincipal" else v for k, v in args.items()
        }
        if own != args:
            yield own


def _copy(world: World) -> World:
    return World(entities=set(world.entities), grants=set(world.grants), members=set(world.members))


def _absent_inside(target: EntityId) -> EntityId | None:
    """An entity just inside ``target`` that no sample world holds (None when nothing sits in it)."""
    inside = {"namespace": "dataset:ns1.absent", "application": "program:ns1.app.service.absent"}
    return EntityId.parse(inside[target.type]) if target.type in inside else None


class Comparison:
    """Two policies side by side; one authorizer each, reused across the worlds tried."""

    def __init__(self, left: Policy, right: Policy, left_name: str = "", right_name: str = ""):
        self.left, self.right = left, right
        self.left_name, self.right_name = left_name or left.name, right_name or right.name
        self._authorizers = {self.left_name: Authorizer(left), self.right_name: Authorizer(right)}

    def operations(self) -> list[str]:
        names = [op.qualified for op in self.left.operations]
        names += [op.qualified for op in self.right.operations if op.qualified not in names]
        return names

    def compare(self, max_witnesses: int = 1) -> list[OperationDiff]:
        """Every operation, with up to ``max_witnesses`` witnesses in each direction where they differ."""
        out = []
        for name in self.operations():
            a, b = self.left.operation(name), self.right.operation(name)
            witnesses: tuple[Witness, ...] = ()
            if a is not None and b is not None:
                witnesses = tuple(self._witnesses(a, b, max_witnesses))
            out.append(OperationDiff(name, _requirements(a), _requirements(b), witnesses))
        return out

    def _witnesses(self, a: Operation, b: Operation, limit: int) -> Iterator[Witness]:
        params = list({p.name: p for p in (*a.params, *b.params)}.values())
        target, entities = _world_for((self.left, self.right), a, params)
        found = dict.fromkeys(self._authorizers, 0)
        for args in _arg_choices(params):
            for first, second in ((self.left_name, self.right_name), (self.right_name, self.left_name)):
                if found[first] < limit:
                    witness = self._one_way(first, second, a.qualified, target, entities, args)
                    if witness is not None:
                        found[first] += 1
                        yield witness

    def _set_world(self, name: str, world: World) -> Authorizer:
        authorizer = self._authorizers[name]
        authorizer.world = world
        authorizer.refresh()
        return authorizer

    def _request(self, authorizer: Authorizer, operation: str, target: EntityId, args: dict[str, str]) -> Request:
        known = {p.name for p in authorizer.operation(operation).params}
        return authorizer.request(PRINCIPAL, operation, target, {k: v for k, v in args.items() if k in known})

    def _one_way(
        self, first: str, second: str, operation: str, target: EntityId, entities: set[EntityId], args: dict[str, str]
    ) -> Witness | None:
        """A minimal set of grants that ``first`` allows and ``second`` denies, if there is one."""
        authz_first = self._set_world(first, World(entities=set(entities)))
        request_first = self._request(authz_first, operation, target, args)
        candidates = authz_first.minimal_grant_sets(authz_first.check(request_first))
        for grants, members in self._probes(candidates, target):
            world = World(entities=set(entities), grants=grants, members=set(members))
            if not self._set_world(first, world).check(request_first).allowed:
                continue  # the search proposed too little: not a witness
            authz_second = self._set_world(second, _copy(world))
            request_second = self._request(authz_second, operation, target, args)
            denial = authz_second.check(request_second)
            if not denial.allowed:
                world = self._smallest_world(first, second, operation, target, args, world)
                denial = self._set_world(second, world).check(request_second)
                # shown with every argument either policy reads (one that takes no such argument ignores it)
                shown = request_second if len(request_second.args) > len(request_first.args) else request_first
                return Witness(world, tuple(sorted(grants)), shown, first, second, denial)
        return None

    @staticmethod
    def _probes(
        candidates: list[frozenset[GrantChange]], target: EntityId
    ) -> Iterator[tuple[set[Grant], set[tuple[str, str]]]]:
        """The worlds to try: each minimal set of grants; the same grants to a group the principal is in
        (a policy may count only the principal's own); and a privilege on an entity inside the target
        that does not exist (a policy may read grants by their ids)."""
        for changes in candidates:
            yield {Grant(c.principal, c.action, c.entity) for c in changes}, set()
        for changes in candidates:
            yield {Grant(GROUP, c.action, c.entity) for c in changes}, {(PRINCIPAL, GROUP)}
        inside = _absent_inside(target)
        if inside is not None:
            yield {Grant(PRINCIPAL, "READ", inside)}, set()

    def _differs(
        self, first: str, second: str, operation: str, target: EntityId, args: dict[str, str], world: World
    ) -> bool:
        a = self._set_world(first, _copy(world))
        if not a.check(self._request(a, operation, target, args)).allowed:
            return False
        b = self._set_world(second, _copy(world))
        return not b.check(self._request(b, operation, target, args)).allowed

    def _smallest_world(
        self, first: str, second: str, operation: str, target: EntityId, args: dict[str, str], world: World
    ) -> World:
        """Drop, one at a time, each entity the witness does not need (greedily), so a reader sees
        only what matters."""
        entities = set(world.entities)
        for entity in sorted(world.entities, reverse=True):
            if entity == target:
                continue
            trial = World(entities=entities - {entity}, grants=set(world.grants), members=set(world.members))
            if self._differs(first, second, operation, target, args, trial):
                entities.discard(entity)
        return World(entities=entities, grants=set(world.grants), members=set(world.members))

    def compare_world(
        self, world: World, right_world: World | None = None
    ) -> dict[str, list[tuple[Request, bool, bool]]]:
        """Every (principal, operation, entity) decision in ``world`` that changes, by operation.

        Each entry is (request, allowed by the left policy, allowed by the right). With
        ``right_world``, the right policy decides on it instead: the same deployment as that policy
        reads it (Ranger's policies as CDAP grants); the requests are those of both.
        """
        other = world if right_world is None else right_world
        principals = sorted(p for w in (world, other) for p in w.principals() if p.startswith("user:"))
        principals = sorted(set(principals))
        # a wildcard grant's pattern is no request's entity: the entities it matches are asked about
        existing = sorted(
            {e for w in (world, other) for e in w.existing() | {g.entity for g in w.grants if not is_pattern(g.entity)}}
        )
        changed: dict[str, list[tuple[Request, bool, bool]]] = {}
        left = self._set_world(self.left_name, world)
        right = self._set_world(self.right_name, other)
        for name in self.operations():
            a, b = self.left.operation(name), self.right.operation(name)
            if a is None or b is None:
                continue
            requests = [left.request(p, name, e) for p in principals for e in existing if e.type == a.entity_type]
            if not requests:
                continue
            for request, da, db in zip(requests, left.check_many(requests), right.check_many(requests), strict=True):
                if da.allowed != db.allowed:
                    changed.setdefault(name, []).append((request, da.allowed, db.allowed))
        return changed
