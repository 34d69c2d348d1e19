"""Every world up to a bound, for each operation, with symmetry reduction.

The search is organised by **case**: the operations decided together on one
entity (a listing and a get of the same type are one case, so they can be
compared; every other operation is its own). A case's worlds hold:

* the request's entity (existing, unless the operation creates it), and what
  encloses it;
* up to ``max_entities`` entities of each *kind* under each entity inside it, of the
  types the case can reach: those its requirements name, those the proof's facts
  about it name (what a delete removes), and what is inside those;
* every subset of a small pool of grants to the requester ``user:u1``: one grant per
  *class* of actions on each entity the requirements can mention (the entity, the
  enclosing ones they name, the entities the request's arguments name, the ones
  inside it);
* for an operation that changes grants, no admin, the requester as an admin, or a
  group of the requester as one.

The reductions, and why they lose nothing. The prelude reads grants only through
requirements (``holds`` of an option's action on its target), so two actions are
one class on an entity when the same options accept either there, a grant no option
accepts changes no decision and is left out, and holding several classes decides as
holding the smallest set of them that meets the same options. Holding through a
group is holding (``holds`` flattens memberships), so one principal suffices. Types
that nothing names (no ``every TYPE``, no fact of the proof) and that have the same
shape inside are one kind, the first standing for all; entities of one kind under
one parent are interchangeable, so their states are enumerated as multisets, and
what remains is deduplicated by a canonical form. The promises of proofs/ only ask
for grants (``ADMIN on every entity removed``) or for their absence, so a grant left
out of the pool can only hide an allow, never a counterexample.

A policy that writes rules of its own may read grants any way it likes: for it the
classes are those of the case's requirements and the actions its rules name (the
others are one class, still granted), on every entity around the request, every
type is its own kind, and no symmetry is assumed; and each world of one grant is tried
again with that grant held by a group the requester is in (a rule may count only the
principal's own, as CDAP 5.1's visibility does). More grants through groups, and deeper
nesting, are left to the generated phase (proofs.generated).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field

from privilog.dsl.check import ancestor_types, descendant_types
from privilog.dsl.errors import PrivilogError
from privilog.dsl.ir import Atom, Const, Operation, Policy, Scope, Verb
from privilog.engine.authorizer import Authorizer
from privilog.engine.compare import sample_entity
from privilog.engine.decision import Request
from privilog.engine.ids import EntityId
from privilog.engine.world import Grant, World
from privilog.proofs.load import ProvedPolicy

REQUESTER = "user:u1"
GROUP = "group:g1"
BYSTANDER = "user:u2"
CREATES = ("create", "add", "deploy")  # operations that bring their entity into being

_SHORT = {
    "artifact": "art",
    "application": "app",
    "dataset": "ds",
    "dataset_module": "mod",
    "dataset_type": "dstype",
    "stream": "events",
    "securekey": "key",
}


@dataclass(frozen=True)
class Point:
    """One world, as frozen data."""

    entities: frozenset[EntityId]
    grants: frozenset[Grant]
    members: frozenset[tuple[str, str]] = frozenset()
    admins: frozenset[str] = frozenset()

    @property
    def size(self) -> int:
        """How much a reader has to take in: entities, grants, memberships and admins."""
        return len(self.entities) + len(self.grants) + len(self.members) + len(self.admins)

    def world(self, world_type: type[World] = World) -> World:
        """A world to evaluate (of ``world_type``, which a test may replace to break the world)."""
        return world_type(
            entities=set(self.entities),
            grants=set(self.grants),
            members=set(self.members),
            admins=set(self.admins),
        )

    def with_grants(self, grants: frozenset[Grant]) -> Point:
        """The same world with other grants."""
        return Point(self.entities, grants, self.members, self.admins)

    @classmethod
    def of(cls, world: World) -> Point:
        """A world as it is now, frozen."""
        return cls(
            frozenset(world.entities), frozenset(world.grants), frozenset(world.members), frozenset(world.admins)
        )

    def sort_key(self) -> tuple[int, list[str]]:
        """Smaller worlds first, then in a stable order."""
        words = [*map(str, self.entities), *map(str, self.grants), *map(str, self.members), *self.admins]
        return self.size, sorted(words)


def child_entity(parent: EntityId, type_name: str, index: int) -> EntityId:
    """The ``index``-th entity of a type inside ``parent``.

    >>> namespace = EntityId("namespace", "ns1")
    >>> str(child_entity(namespace, "dataset", 1)), str(child_entity(namespace, "dataset", 2))
    ('dataset:ns1.ds', 'dataset:ns1.ds2')
    >>> str(child_entity(EntityId("application", "ns1.app"), "program", 1))
    'program:ns1.app.service.prog'
    """
    suffix = "" if index == 1 else str(index)
    if type_name == "namespace":
        return EntityId("namespace", f"ns{index}")
    if type_name == "program":
        return EntityId("program", f"{parent.name}.service.prog{suffix}")
    if type_name == "schedule":
        return EntityId("schedule", f"{parent.name}.sched{suffix}")
    return EntityId(type_name, f"{parent.name}.{_SHORT.get(type_name, type_name)}{suffix}")


def creates(op: Operation) -> bool:
    """Whether the operation brings its entity into being (it does not exist before)."""
    return op.name in CREATES


# ---- cases ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """Operations decided together on one entity, and the requests the search makes."""

    entity: EntityId
    operations: tuple[Operation, ...]
    requests: tuple[Request, ...]
    arguments: dict[str, EntityId] = field(compare=False)  # the entity each argument names

    @property
    def creates(self) -> bool:
        """Whether the case's entity is one its operation creates."""
        return any(creates(op) for op in self.operations)

    @property
    def label(self) -> str:
        """The case's operations, for a reader."""
        return " and ".join(op.qualified for op in self.operations)


def _argument_entity(type_name: str, entity: EntityId) -> EntityId:
    chosen = sample_entity(type_name)
    return sample_entity(type_name, "2") if chosen == entity else chosen


def _argument_choices(op: Operation, arguments: dict[str, EntityId]) -> Iterator[dict[str, str]]:
    """Every combination of the operation's arguments given or not (a bool given as true)."""
    for mask in itertools.product((False, True), repeat=len(op.params)):
        chosen: dict[str, str] = {}
        for given, param in zip(mask, op.params, strict=True):
            if given:
                chosen[param.name] = "true" if param.type == "bool" else str(arguments[param.name])
        yield chosen


def build_cases(policy: Policy, authorizer: Authorizer) -> list[Case]:
    """One case per operation, but a type's listing and its get together, in the policy's order."""
    groups: list[list[Operation]] = []
    paired: dict[str, list[Operation]] = {}
    for op in policy.operations:
        pairs = op.verb is Verb.SHOWS or op.name == "get"
        if pairs and op.entity_type in paired:
            paired[op.entity_type].append(op)
            continue
        groups.append([op])
        if pairs:
            paired[op.entity_type] = groups[-1]
    cases = []
    for ops in groups:
        entity = sample_entity(ops[0].entity_type)
        arguments = {p.name: _argument_entity(p.type, entity) for op in ops for p in op.params if p.type != "bool"}
        requests = tuple(
            authorizer.request(REQUESTER, op.qualified, entity, args)
            for op in ops
            for args in _argument_choices(op, arguments)
        )
        cases.append(Case(entity, tuple(ops), requests, arguments))
    return cases


# ---- the pool of grants ----------------------------------------------------------------

Signature = frozenset[tuple[str, int, int]]  # (operation, requirement, option) that accept a grant


@dataclass(frozen=True)
class Role:
    """What an entity is to a case's request: the entity itself, enclosing, named, or inside."""

    kind: str  # "self", "ancestor", "argument", "descendant"
    type: str = ""
    argument: str = ""
    parent: bool = False


def _accepts(scope: Scope, param: str, role: Role) -> bool:
    match scope:
        case Scope.SELF:
            return role.kind == "self"
        case Scope.PARENT:
            return role.kind == "ancestor" and role.parent
        case Scope.ANCESTOR:
            return role.kind == "ancestor" and role.type == param
        case Scope.ARGUMENT | Scope.EVERY_ARGUMENT:  # a list argument's one entity, in these worlds
            return role.kind == "argument" and role.argument == param
        case Scope.SELF_OR_DESCENDANT | Scope.SELF_OR_WITHIN:  # these worlds' entities exist
            return role.kind in ("self", "descendant")
        case Scope.EVERY:
            return role.kind == "descendant" and param in ("*", role.type)
        case Scope.RULE:
            return True  # the policy's rule may read any grant: none is interchangeable with no grant
    raise AssertionError(scope)


def signature(operations: Sequence[Operation], action: str, roles: Sequence[Role]) -> Signature:
    """Which options of which requirements a grant of ``action`` on an entity with ``roles`` can meet."""
    found = set()
    for op in operations:
        for r, requirement in enumerate(op.requirements):
            for o, option in enumerate(requirement.options):
                if action in option.actions and any(
                    _accepts(t.scope, t.param, role) for t in option.targets for role in roles
                ):
                    found.add((op.qualified, r, o))
    return frozenset(found)


@dataclass(frozen=True)
class ActionClass:
    """Actions interchangeable on an entity; the search grants the first."""

    action: str
    signature: frozenset[Hashable]


def own_constants(proved: ProvedPolicy) -> set[str]:
    """The constants the policy's own rules mention."""
    found: set[str] = set()
    for rule in proved.own_rules:
        for literal in (rule.head, *rule.body):
            terms = literal.terms if isinstance(literal, Atom) else (literal.left, literal.right)
            found.update(t.value for t in terms if isinstance(t, Const))
    return found


# ---- the search space of a case --------------------------------------------------------


@dataclass(frozen=True)
class Slot:
    """A place for an entity inside the request's entity, and the places inside it."""

    entity: EntityId
    classes: tuple[ActionClass, ...]
    label: str  # its type, or "" when nothing tells its type apart
    groups: tuple[tuple[Slot, ...], ...]

    def shape(self) -> Hashable:
        """What a slot looks like to the policy: equal shapes are interchangeable."""
        return (
            self.label,
            tuple(c.signature for c in self.classes),
            tuple((len(g), g[0].shape()) for g in self.groups),
        )


# A slot's state: (0,) absent, or (1, indices of the classes held, the states of its groups).
State = tuple[object, ...]
ABSENT: State = (0,)
AdminConfig = tuple[frozenset[tuple[str, str]], frozenset[str]]  # memberships and admins


@dataclass
class Space:
    """Every world of one case up to the bound, as canonical representatives."""

    case: Case
    fixed: tuple[tuple[EntityId, tuple[ActionClass, ...]], ...]  # the entity, enclosing ones, argument entities
    groups: tuple[tuple[Slot, ...], ...]  # the places directly inside the request's entity
    symmetric: bool
    admin_configs: tuple[AdminConfig, ...]
    through_groups: bool = False  # each world of one grant again, that grant held by a group of the requester's
    enumerated: int = 0  # worlds enumerated before canonical deduplication
    _classes: dict[tuple[EntityId, str], ActionClass] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        def walk(groups: tuple[tuple[Slot, ...], ...]) -> Iterator[tuple[EntityId, tuple[ActionClass, ...]]]:
            for group in groups:
                for slot in group:
                    yield slot.entity, slot.classes
                    yield from walk(slot.groups)

        for entity, classes in [*self.fixed, *walk(self.groups)]:
            for c in classes:
                self._classes[(entity, c.action)] = c

    # -- enumeration ------------------------------------------------------------------

    def held_choices(self, classes: Sequence[ActionClass]) -> list[tuple[int, ...]]:
        """The sets of classes an entity may hold (indices into ``classes``).

        Under the prelude alone, holding several classes meets exactly the options that
        one of them meets: two sets that meet the same options decide alike, so only the
        smallest set of each is kept. With rules of its own, a policy may tell them apart.
        """
        subsets = sorted(
            (tuple(i for i, bit in enumerate(bits) if bit) for bits in itertools.product((0, 1), repeat=len(classes))),
            key=lambda held: (len(held), held),
        )
        if not self.symmetric:
            return subsets
        kept: dict[frozenset[Hashable], tuple[int, ...]] = {}
        for held in subsets:
            met = frozenset(x for i in held for x in classes[i].signature)
            kept.setdefault(met, held)
        return list(kept.values())

    def _states(self, slot: Slot) -> list[State]:
        out: list[State] = [ABSENT]
        inner = [self._group_states(g) for g in slot.groups]
        for held in self.held_choices(slot.classes):
            for children in itertools.product(*inner):
                out.append((1, held, tuple(children)))
        return out

    def _group_states(self, group: tuple[Slot, ...]) -> list[tuple[State, ...]]:
        if self.symmetric and all(s.shape() == group[0].shape() for s in group):
            # interchangeable slots: a multiset of states, present ones in the first slots
            return [
                tuple(sorted(combo, key=repr, reverse=True))
                for combo in itertools.combinations_with_replacement(self._states(group[0]), len(group))
            ]
        return [tuple(c) for c in itertools.product(*(self._states(s) for s in group))]

    def _place(
        self,
        groups: tuple[tuple[Slot, ...], ...],
        states: Sequence[tuple[State, ...]],
        out: tuple[set[EntityId], set[Grant]],
    ) -> None:
        for group, group_states in zip(groups, states, strict=True):
            for slot, state in zip(group, group_states, strict=True):
                if state == ABSENT:
                    continue
                _, held, inner = state
                out[0].add(slot.entity)
                for index in held:  # type: ignore[attr-defined]
                    out[1].add(Grant(REQUESTER, slot.classes[index].action, slot.entity))
                self._place(slot.groups, inner, out)  # type: ignore[arg-type]

    def points(self) -> Iterator[Point]:
        """Every world of the case, each arrangement of interchangeable slots once."""
        forests = list(itertools.product(*(self._group_states(g) for g in self.groups)))
        per_entity = [
            [[(entity, classes[i].action) for i in held] for held in self.held_choices(classes)]
            for entity, classes in self.fixed
        ]
        for choice in itertools.product(*per_entity):
            held = {Grant(REQUESTER, a, e) for chosen in choice for e, a in chosen}
            for forest in forests:
                out: tuple[set[EntityId], set[Grant]] = (
                    set() if self.case.creates else {self.case.entity},
                    set(held),
                )
                self._place(self.groups, forest, out)
                for members, admins in self.admin_configs:
                    yield Point(frozenset(out[0]), frozenset(out[1]), members, admins)
                    if self.through_groups and len(out[1]) == 1:  # rules of its own may tell a group's grant apart
                        through = frozenset(Grant(GROUP, g.action, g.entity) for g in out[1])
                        yield Point(frozenset(out[0]), through, members | {(REQUESTER, GROUP)}, admins)

    # -- canonical form ---------------------------------------------------------------

    def key(self, point: Point) -> Hashable:
        """Worlds that differ only by interchangeable entities (or actions) have one key."""
        if not self.symmetric:
            return point
        met: dict[EntityId, set[str]] = {}
        for grant in point.grants:
            found = self._classes.get((grant.entity, grant.action))
            met.setdefault(grant.entity, set()).update(map(repr, found.signature) if found else [grant.action])
        held = {entity: sorted(options) for entity, options in met.items()}
        fixed = tuple(tuple(held.get(entity, ())) for entity, _ in self.fixed)
        return fixed, self._forest(self.groups, point.entities, held), point.members, point.admins

    def _forest(
        self, groups: tuple[tuple[Slot, ...], ...], entities: frozenset[EntityId], held: dict[EntityId, list[str]]
    ) -> Hashable:
        forms = [
            ((slot.label, tuple(held.get(slot.entity, ()))), self._forest(slot.groups, entities, held))
            for group in groups
            for slot in group
            if slot.entity in entities
        ]
        return tuple(sorted(forms, key=repr))

    # -- what the checkers need -------------------------------------------------------

    def additions(self, point: Point) -> list[Grant]:
        """Each grant of the pool that ``point``'s entities admit and that it does not hold yet."""
        fixed = {entity for entity, _ in self.fixed}
        return [
            grant
            for (entity, action) in self._classes
            if entity in fixed or entity in point.entities
            if (grant := Grant(REQUESTER, action, entity)) not in point.grants
        ]

    def least_count(self) -> int:
        """How many worlds :meth:`points` yields at least (each choice of the fixed entities' grants, each
        forest, each admin configuration), counted without making them: a case whose count is past the
        limit is refused before anything is enumerated (the enumeration would be refused at the limit)."""

        def states(slot: Slot) -> int:
            return 1 + len(self.held_choices(slot.classes)) * math.prod(group_states(g) for g in slot.groups)

        def group_states(group: tuple[Slot, ...]) -> int:
            if self.symmetric and all(s.shape() == group[0].shape() for s in group):
                return math.comb(states(group[0]) + len(group) - 1, len(group))  # multisets of a slot's states
            return math.prod(states(s) for s in group)

        fixed = math.prod(len(self.held_choices(classes)) for _, classes in self.fixed)
        return fixed * math.prod(group_states(g) for g in self.groups) * len(self.admin_configs)

    def representatives(self, limit: int) -> list[Point]:
        """One world per canonical form, the smallest of each, smallest first."""
        best: dict[Hashable, Point] = {}
        self.enumerated = 0
        if self.least_count() > limit:
            raise BoundTooLarge(self.case.label, limit)
        for point in self.points():
            self.enumerated += 1
            if self.enumerated > limit:
                raise BoundTooLarge(self.case.label, limit)
            key = self.key(point)
            kept = best.get(key)
            if kept is None or point.sort_key() < kept.sort_key():
                best[key] = point
        return sorted(best.values(), key=Point.sort_key)


class BoundTooLarge(PrivilogError):
    """The bound makes too many worlds for a case to be searched."""

    def __init__(self, case: str, limit: int):
        super().__init__(f"{case}: more than {limit} worlds up to this bound; lower --max-entities")


def space_for(
    proved: ProvedPolicy, case: Case, max_entities: int, changes_grants: set[str], reduce: bool = True
) -> Space:
    """The bounded search space of one case; without ``reduce``, as for a policy with rules of its own."""
    policy = proved.policy
    open_rules = bool(proved.own_rules) or not reduce
    entity = case.entity
    ancestors = entity.ancestors()
    constants = own_constants(proved) if open_rules else set()

    # The types inside the entity the search places, and those told apart by name.
    inside = descendant_types(policy, entity.type)
    reached: set[str] = set(inside) if open_rules else set()
    named: set[str] = set()
    for op in case.operations:
        for requirement in op.requirements:
            for option in requirement.options:
                for target in option.targets:
                    if target.scope in (Scope.SELF_OR_DESCENDANT, Scope.SELF_OR_WITHIN) or (
                        target.scope is Scope.EVERY and target.param == "*"
                    ):
                        reached |= set(inside)
                    elif target.scope is Scope.EVERY:
                        reached.add(target.param)
                        named.add(target.param)
        for row in _facts_naming(proved, op.qualified):
            for value in row:
                if value == "*":
                    reached |= set(inside)
                elif value in inside:
                    reached |= {value, *descendant_types(policy, value)}
                    named.add(value)
    named |= {t for t in inside if t in constants}
    # a type is placed inside the types that enclose it
    reached |= {a for t in reached for a in ancestor_types(policy, t) if a in inside}

    def classes(roles: Sequence[Role]) -> tuple[ActionClass, ...]:
        if open_rules:
            return _open_classes(case.operations, policy.actions, constants)
        by_signature: dict[Signature, str] = {}
        for action in policy.actions:
            found = signature(case.operations, action, roles)
            if found and found not in by_signature:
                by_signature[found] = action
        return tuple(ActionClass(a, s) for s, a in by_signature.items())

    fixed_roles: dict[EntityId, list[Role]] = {entity: [Role("self", entity.type)]}
    for position, ancestor in enumerate(ancestors):
        fixed_roles.setdefault(ancestor, []).append(Role("ancestor", ancestor.type, parent=position == 0))
    for argument, named_entity in case.arguments.items():
        fixed_roles.setdefault(named_entity, []).append(Role("argument", named_entity.type, argument=argument))
    fixed = tuple((e, classes(roles)) for e, roles in fixed_roles.items())
    fixed = tuple((e, c) for e, c in fixed if c)

    def slot(parent: EntityId, type_name: str, index: int) -> Slot:
        child = child_entity(parent, type_name, index)
        label = type_name if (type_name in named or open_rules or child in fixed_roles) else ""
        return Slot(child, classes([Role("descendant", type_name)]), label, slots_under(child))

    def slots_under(parent: EntityId) -> tuple[tuple[Slot, ...], ...]:
        """The places under ``parent``: up to ``max_entities`` of each kind. A kind is a type, or
        the types that nothing tells apart (with the same shape inside), the first standing for all."""
        kinds: dict[Hashable, str] = {}
        for type_name in [t.name for t in policy.entity_types if t.parent == parent.type and t.name in reached]:
            first = slot(parent, type_name, 1)
            kinds.setdefault(type_name if first.label else ("", first.shape()), type_name)
        return tuple(
            tuple(slot(parent, type_name, index) for index in range(1, max_entities + 1))
            for type_name in kinds.values()
        )

    admin_configs: tuple[AdminConfig, ...] = ((frozenset(), frozenset()),)
    if any(op.name in changes_grants for op in case.operations):
        admin_configs = (
            (frozenset(), frozenset()),
            (frozenset(), frozenset({REQUESTER})),
            (frozenset({(REQUESTER, GROUP)}), frozenset({GROUP})),
        )
    return Space(
        case=case,
        fixed=fixed,
        groups=slots_under(entity),
        symmetric=not open_rules,
        admin_configs=admin_configs,
        through_groups=open_rules,
    )


def _facts_naming(proved: ProvedPolicy, operation: str) -> list[tuple[str, ...]]:
    return [
        tuple(str(t) for t in rule.head.terms)
        for rule in proved.policy.rules
        if not rule.body and any(str(t) == operation for t in rule.head.terms)
    ]


def _open_classes(
    operations: Sequence[Operation], actions: Sequence[str], constants: set[str]
) -> tuple[ActionClass, ...]:
    """For a policy with rules of its own: actions told apart by any option of the case's
    requirements, or named by the policy's rules. The rest are one class: a rule may read any grant."""
    by_signature: dict[frozenset[Hashable], str] = {}
    for action in actions:
        found: set[Hashable] = {
            (op.qualified, r, o)
            for op in operations
            for r, requirement in enumerate(op.requirements)
            for o, option in enumerate(requirement.options)
            if action in option.actions
        }
        if action in constants:
            found.add(("named", action))
        by_signature.setdefault(frozenset(found), action)
    return tuple(ActionClass(a, s) for s, a in by_signature.items())
