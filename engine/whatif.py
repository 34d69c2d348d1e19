"""What a change to a world would do: the (principal, operation, entity) answers it changes.

:func:`impact` compares the decisions of one policy on a world before and after a change:
every access a user holds on one side and not the other, as lost and gained accesses. The
accesses asked about are those :meth:`engine.compare.Comparison.compare_world` asks about:
every user of either world, every operation of the policy (without arguments), on every
entity that exists or is granted on, in either world.

:func:`impact_whole` decides every one of them on both worlds: the reference. :func:`impact`
gives the same answer deciding only the accesses the change can reach (:func:`reach`): the
users whose own grants or memberships differ (and the members of a changed group, down any
depth), on the entities at, under and over the changed ones. The bound is read from the
policy's rules (:func:`locality`): the prelude's reach only as far as a principal's own grants
and groups and an entity's line in the hierarchy, and each rule of the policy's own is checked
to reach no further; a policy whose rules it cannot bound, or a change of settings (`config:`),
of admins a rule reads, of the world's `facts:` (read as the policy's own facts are: no change of
grants, memberships or entities changes them), or of the instance, is decided whole. By the same
bound, those accesses are
decided on the part of each world they read (:func:`_part`: the lines of their entities, the grants
and memberships of their users and of their groups), so that neither world is loaded whole.

:func:`redecide` re-decides logged requests on both worlds and keeps those decided
differently.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from privilog.dsl.ir import Atom, Const, Policy, Rule, Var
from privilog.engine.analysis import world_fact_relations
from privilog.engine.authorizer import Authorizer
from privilog.engine.decision import Request
from privilog.engine.ids import EntityId
from privilog.engine.patterns import is_pattern, matches
from privilog.engine.program import compile_policy
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


PLANNED = 64  # from this many requests of one operation on, decided by its plan (``Authorizer.allows``)


def _accesses(
    authorizer: Authorizer, principals: Sequence[str], entities: Sequence[EntityId] | Mapping[str, Iterable[EntityId]]
) -> set[Access]:
    """The allowed accesses among ``principals`` × ``entities`` (or each principal × its own entities)."""
    pairs = (
        [(p, e) for p in principals for e in entities]
        if not isinstance(entities, Mapping)
        else [(p, e) for p in principals for e in entities.get(p, ())]
    )
    allowed: set[Access] = set()
    for op in authorizer.policy.operations:
        name, asked = op.qualified, [(p, e) for p, e in pairs if e.type == op.entity_type]
        if len(asked) >= PLANNED:  # an operation's decision plan costs more to make than a few checks
            allowed.update(Access(p, name, e) for p, e in asked if authorizer.allows(p, name, e))
            continue
        requests = [authorizer.request(p, name, e) for p, e in asked]
        for request, decision in zip(requests, authorizer.check_many(requests, explain_denials=False), strict=True):
            if decision.allowed:
                allowed.add(Access(request.principal, request.operation, request.entity))
    return allowed


def _universe(
    before: World, after: World, existing: tuple[set[EntityId], set[EntityId]] | None = None
) -> tuple[list[str], list[EntityId]]:
    principals = sorted(p for p in before.principals() | after.principals() if p.startswith("user:"))
    granted = {g.entity for g in before.grants} | {g.entity for g in after.grants}
    old, new = existing or (before.existing(), after.existing())
    entities = sorted(old | new | {e for e in granted if not is_pattern(e)})
    return principals, entities


def impact_whole(policy: Policy, before: World, after: World, backend: str = "compiled") -> Impact:
    """The accesses that differ between ``before`` and ``after`` under ``policy``: each world decided whole
    (every user, every operation, every entity): the reference :func:`impact` is held to."""
    principals, entities = _universe(before, after)
    old = _accesses(Authorizer(policy, before, backend=backend), principals, entities)
    new = _accesses(Authorizer(policy, after, backend=backend), principals, entities)
    return Impact(tuple(sorted(old - new)), tuple(sorted(new - old)))


# ---- how far a change reaches ----------------------------------------------------------

PRELUDE = "requirements.policy"
# relations the prelude derives for a request (first column the request): reading one of them for
# the request itself reaches no further than the prelude's rules do
REQUEST_KEYED = frozenset(
    {"target", "met", "covered", "held", "covered_held", "lacking", "some_lacking", "every_met", "satisfied",
     "given", "applies", "unmet", "denied", "allowed", "bypass"}
)
# a policy's own rule may add to these (a deny rule, a bypass, a `by NAME` rule, ...), keyed by the request
OWN_HEADS_OK = REQUEST_KEYED - {"given"}
# relations below an entity (first column) and above it (second): the hierarchy by id
BELOW_ABOVE = {"child_of": (0, 1), "ancestor": (0, 1), "within": (0, 1), "descendant": (1, 0)}
HIERARCHY = frozenset({"child_of", "ancestor", "descendant", "within", "is_a", "matches", "owned_by"})
# policy tables: no world in them
TABLES = frozenset({"operation", "requires", "guard"})
P, E, UP, DOWN, PAT, R, OWNER = "principal", "entity", "up", "down", "pattern", "request", "owner"
ANCHORED = frozenset({E, UP, DOWN, PAT})


@dataclass(frozen=True)
class Locality:
    """How far a change can reach under a policy, read from its rules.

    ``bounded``: the policy's own rules read nothing the analysis cannot place (else every change is
    decided whole). ``held_anywhere``: some rule reads a principal's grants, holds or memberships
    without tying the entity to the request's, so a change to them reaches all of that principal's
    entities. ``admins``: some rule reads `admin`. ``why``: the first rule that kept it unbounded.
    """

    bounded: bool
    held_anywhere: bool = False
    admins: bool = False
    why: str = ""


def _is_prelude(rule: Rule) -> bool:
    return rule.span.file.endswith(PRELUDE)


def _kinds_in(rule: Rule, head_kinds: Sequence[frozenset[str]], args: bool = False) -> dict[str, set[str]]:
    """Each variable's kinds in ``rule``'s body: the request, its principal, its entity, an entity above
    or below it, a pattern matching one of those, an owner of one, from the head and the body's atoms.
    With ``args``, an entity a request argument names counts as the request's entity (its kind E)."""
    kinds: dict[str, set[str]] = {}
    for term, given in zip(rule.head.terms, head_kinds, strict=False):
        if isinstance(term, Var):
            kinds.setdefault(term.name, set()).update(given)
    atoms = [b for b in rule.body if isinstance(b, Atom)]

    def of(term: Any) -> set[str]:
        return kinds.get(term.name, set()) if isinstance(term, Var) else set()

    def add(term: Any, kind: str) -> bool:
        if isinstance(term, Var) and not term.name.startswith("_") and kind not in kinds.setdefault(term.name, set()):
            kinds[term.name].add(kind)
            return True
        return False

    changed = True
    while changed:
        changed = False
        for atom in atoms:
            t = atom.terms
            if atom.predicate == "request" and len(t) == 4 and R in of(t[0]) and not atom.negated:
                changed |= add(t[1], P) | add(t[3], E)
            elif args and atom.predicate == "request_arg" and len(t) == 3 and R in of(t[0]) and not atom.negated:
                changed |= add(t[2], E)
            elif atom.predicate in BELOW_ABOVE and len(t) == 2:
                below, above = (t[i] for i in BELOW_ABOVE[atom.predicate])
                if of(above) & {E, DOWN}:
                    changed |= add(below, DOWN)
                if of(below) & {E, UP}:
                    changed |= add(above, UP)
            elif atom.predicate == "matches" and len(t) == 2 and of(t[0]) & {E, UP, DOWN}:
                changed |= add(t[1], PAT)
            elif atom.predicate == "owned_by" and len(t) == 2 and of(t[0]) & {E, UP, DOWN}:
                changed |= add(t[1], OWNER)
    return kinds


def _anchored(term: Any, kinds: Mapping[str, set[str]], allowed: frozenset[str]) -> bool:
    if isinstance(term, Const):
        return False
    return isinstance(term, Var) and bool(kinds.get(term.name, set()) & allowed)


def _given(term: Any, rule: Rule, given: frozenset[str]) -> bool:
    """Whether ``term`` is a value of a world's fact in ``rule``: a pattern among them has its ``matches``
    rows whatever the grants (as a pattern the rules name does)."""
    return isinstance(term, Var) and any(
        isinstance(b, Atom) and not b.negated and b.predicate in given and term in b.terms for b in rule.body
    )


def _own_grant(term: Any, rule: Rule, kinds: Mapping[str, set[str]]) -> bool:
    """Whether ``term`` is the entity of a grant (or a holding) of the request's principal in ``rule``."""
    return isinstance(term, Var) and any(
        isinstance(b, Atom)
        and not b.negated
        and b.predicate in ("grant", "holds")
        and _anchored(b.terms[0], kinds, frozenset({P}))
        and b.terms[2] == term
        for b in rule.body
    )


@cache
def locality(policy: Policy, args: bool = False) -> Locality:
    """How far a change to a world can reach under ``policy`` (see :class:`Locality`).

    The prelude's rules decide a request of P on E from P's own grants and groups' grants (`holds`),
    on E, above it and below it in the hierarchy by id (and the patterns matching those), from E's
    line in the hierarchy, and from the settings. Each rule of the policy's own is checked to read
    no more: its request's principal only in `grant`, `holds`, `member_of`, `in_group`; entities only
    tied to the request's by the hierarchy (up from it, or down from it, never both: that is a
    sibling); settings (`config`) anywhere (a change of them is decided whole). A rule with a
    request argument in its body never holds for the requests :func:`impact` asks (none has any).

    ``args``: for requests with arguments (a cache's, ``privilog.store.affected``): rules reading a
    request argument are checked too, an argument's entity counting as the request's (its line in the
    hierarchy is as near as the entity's).
    """
    program = compile_policy(policy)
    own = [r for r in program.rules if not _is_prelude(r)]
    reads_admin = any(isinstance(b, Atom) and b.predicate == "admin" for r in program.rules for b in r.body)
    own_relations = {r.head.predicate for r in own}
    written = {name for name, rows in program.facts.items() if rows}  # the policy's own facts
    # and the world's `facts:`, which no change of grants, memberships or entities changes (a world
    # whose facts differ is decided whole: _reach)
    given = world_fact_relations(program)
    written |= given
    prelude_heads = {r.head.predicate for r in program.rules if _is_prelude(r)}
    # the kinds each column of an own relation is called with: the meet over every call (None: not called yet)
    columns: dict[str, list[frozenset[str] | None]] = {}
    for rule in own:
        if rule.head.predicate in OWN_HEADS_OK:
            columns[rule.head.predicate] = [frozenset({R}), *([None] * (len(rule.head.terms) - 1))]
    held_anywhere = False

    def unbounded(rule: Rule, why: str) -> Locality:
        return Locality(False, why=f"{rule.span.file}:{rule.span.line}: {why}")

    for _ in range(len(own) + 2):  # the kinds only shrink: a fixed point within as many rounds as rules
        before = {k: list(v) for k, v in columns.items()}
        for rule in own:
            head = rule.head.predicate
            if head in prelude_heads and head not in OWN_HEADS_OK:
                return unbounded(rule, f"adds to the prelude's `{head}`, which reaches beyond a request")
            reads_arg = any(isinstance(b, Atom) and b.predicate == "request_arg" and not b.negated for b in rule.body)
            if reads_arg and not args:
                continue  # needs a request argument: never holds for the requests impact asks
            called = columns.get(head)
            if called is None:
                continue  # not read by any rule checked so far
            kinds = _kinds_in(rule, [c or frozenset() for c in called], args)
            for atom in (b for b in rule.body if isinstance(b, Atom)):
                name, t = atom.predicate, atom.terms
                if name in own_relations:
                    calls = columns.setdefault(name, [None] * len(t))
                    for i, term in enumerate(t):
                        found = frozenset(kinds.get(term.name, set())) if isinstance(term, Var) else frozenset()
                        calls[i] = found if calls[i] is None else calls[i] & found  # type: ignore[operator]
                elif name in written or name in TABLES or name in ("request_arg", "given", "config"):
                    continue
                elif name == "request" or name in REQUEST_KEYED:
                    if not _anchored(t[0], kinds, frozenset({R})):
                        return unbounded(rule, f"reads `{name}` of another request than its own")
                elif name in ("grant", "holds"):
                    if not _anchored(t[0], kinds, frozenset({P})):
                        return unbounded(rule, f"reads `{name}` of another principal than the request's")
                    if not _anchored(t[2], kinds, ANCHORED):
                        held_anywhere = True
                elif name in ("member_of", "in_group"):
                    if not _anchored(t[0], kinds, frozenset({P})):
                        return unbounded(rule, f"reads `{name}` of another principal than the request's")
                    held_anywhere = True
                elif name in ("within", "matches"):
                    # a row for each grant's entity or pattern, whoever holds it: only the principal's own
                    subject, pattern = (t[0], t[0]) if name == "within" else (t[0], t[1])
                    if not _anchored(subject, kinds, ANCHORED) or not (
                        isinstance(pattern, Const) or _own_grant(pattern, rule, kinds) or _given(pattern, rule, given)
                    ):
                        return unbounded(rule, f"reads `{name}` of an entity or pattern not tied to the request's")
                elif name in HIERARCHY:
                    # a row that holds while its subject (the entity below, or the one typed or owned) exists
                    subject = t[BELOW_ABOVE[name][0]] if name in BELOW_ABOVE else t[0]
                    if not _anchored(subject, kinds, ANCHORED):
                        return unbounded(rule, f"reads `{name}` of an entity not tied to the request's")
                elif name in ("name_of", "last_name_of"):
                    if not _anchored(t[0], kinds, frozenset({P, OWNER, E})):
                        return unbounded(rule, f"reads `{name}` of an id not tied to the request")
                elif name == "admin":
                    continue
                else:
                    return unbounded(rule, f"reads `{name}`, which the analysis does not place")
        if columns == before:
            break
    return Locality(True, held_anywhere=held_anywhere, admins=reads_admin)


@dataclass
class _Hierarchy:
    """The entities asked about, indexed by what encloses them (by id)."""

    entities: list[EntityId]
    instance: str
    below: dict[EntityId, list[EntityId]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for entity in self.entities:
            for above in entity.ancestors(self.instance):
                self.below.setdefault(above, []).append(entity)

    def line(self, entity: EntityId) -> set[EntityId]:
        """The entity, what encloses it and what it encloses, or for a pattern those of each it matches."""
        if is_pattern(entity):
            out: set[EntityId] = {entity}
            for each in self.entities:
                if not is_pattern(each) and matches(entity, each):
                    out |= self.line(each)
            return out
        return {entity, *entity.ancestors(self.instance), *self.below.get(entity, ())}


def _members_index(*worlds: World) -> dict[str, set[str]]:
    index: dict[str, set[str]] = {}
    for world in worlds:
        for member, group in world.members:
            index.setdefault(group, set()).add(member)
    return index


def _with_members(principal: str, members: Mapping[str, set[str]]) -> set[str]:
    found, frontier = {principal}, [principal]
    while frontier:
        for member in members.get(frontier.pop(), ()):
            if member not in found:
                found.add(member)
                frontier.append(member)
    return found


def reach(policy: Policy, before: World, after: World) -> dict[str, set[EntityId]] | None:
    """The accesses the change from ``before`` to ``after`` can change: each user's entities to decide
    again (among those :func:`impact_whole` asks about), or None where they cannot be bounded (decide
    the worlds whole)."""
    found = _reach(policy, before, after)
    return None if found is None else found.users


@dataclass
class _Reached:
    """What :func:`reach` found, and what it read on the way that :func:`impact` reads again."""

    users: dict[str, set[EntityId]]
    hierarchy: _Hierarchy
    existing: tuple[set[EntityId], set[EntityId]]


def _reach(policy: Policy, before: World, after: World) -> _Reached | None:
    found = locality(policy)
    if (
        not found.bounded
        or before.instance != after.instance
        or before.config != after.config
        or before.facts != after.facts
        or (found.admins and before.admins != after.admins)
    ):
        return None
    existing = (before.existing(), after.existing())
    users, entities = _universe(before, after, existing)
    hierarchy = _Hierarchy(entities, before.instance)
    everything = set(entities)
    members = _members_index(before, after)
    out: dict[str, set[EntityId]] = {}

    def add(principals: Iterable[str], reached: set[EntityId]) -> None:
        for p in principals:
            if p.startswith("user:"):
                out.setdefault(p, set()).update(reached)

    changed_grants = before.grants ^ after.grants
    for grant in changed_grants:
        reached = everything if found.held_anywhere else hierarchy.line(grant.entity)
        add(_with_members(grant.principal, members), reached)
    changed_members = before.members ^ after.members
    if changed_members:
        grants_of: dict[str, set[EntityId]] = {}
        for grant in before.grants | after.grants:
            grants_of.setdefault(grant.principal, set()).add(grant.entity)
        for member in {m for m, _ in changed_members}:
            for p in _with_members(member, members):
                if not p.startswith("user:"):
                    continue
                if found.held_anywhere:  # a rule may read a direct membership, not only the closure
                    add([p], everything)
                    continue
                moved = before.groups_of(p) ^ after.groups_of(p)
                if not moved:
                    continue
                for group in moved:
                    for entity in grants_of.get(group, ()):
                        add([p], hierarchy.line(entity))
    places = existing[0] ^ existing[1]
    owned = {e for e in before.owners.keys() | after.owners.keys() if before.owners.get(e) != after.owners.get(e)}
    if places or owned:
        lines: set[EntityId] = set()
        for entity in places | owned:
            lines |= hierarchy.line(entity)
        add(users, lines & everything)
    # only entities of a type some operation acts on are asked about (an instance is not, in CDAP)
    types = {op.entity_type for op in policy.operations}
    asked = {e for e in everything if e.type in types}
    return _Reached({p: es & asked for p, es in out.items()}, hierarchy, existing)


def impact(policy: Policy, before: World, after: World, backend: str = "compiled") -> Impact:
    """The accesses that differ between ``before`` and ``after`` under ``policy``: the same answer as
    :func:`impact_whole`, deciding only the accesses the change can reach (:func:`reach`)."""
    found = _reach(policy, before, after)
    if found is None:
        return impact_whole(policy, before, after, backend)
    reached = {p: es for p, es in found.users.items() if es}
    if not reached:
        return Impact((), ())
    principals = sorted(reached)
    asked = {p: sorted(es) for p, es in reached.items()}
    kept: set[EntityId] = set()
    for entity in {e for es in reached.values() for e in es}:
        kept |= found.hierarchy.line(entity)
    old_part = _part(before, found.existing[0], principals, kept)
    new_part = _part(after, found.existing[1], principals, kept)
    old = _accesses(Authorizer(policy, old_part, backend=backend), principals, asked)
    new = _accesses(Authorizer(policy, new_part, backend=backend), principals, asked)
    return Impact(tuple(sorted(old - new)), tuple(sorted(new - old)))


def _part(world: World, existing: set[EntityId], principals: Iterable[str], entities: set[EntityId]) -> World:
    """The part of ``world`` the decisions of ``principals`` on ``entities`` read, by :func:`locality`'s
    bound: the entities' lines in the hierarchy (given as ``entities``), the grants of the principals
    and of their groups and roles, their memberships, and the settings, admins, owners and facts whole."""
    holders: set[str] = set()
    for principal in principals:
        holders |= {principal, *world.groups_of(principal)}
    return World(
        entities=existing & entities,
        grants={g for g in world.grants if g.principal in holders},
        members={(m, g) for m, g in world.members if m in holders},
        admins=set(world.admins),
        instance=world.instance,
        config=dict(world.config),
        owners=dict(world.owners),
        facts=dict(world.facts),
        actions=world.actions,
    )


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
