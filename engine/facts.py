"""A world as base facts: what the policy's rules are evaluated over."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Mapping

from privilog.dsl.errors import did_you_mean
from privilog.engine.analysis import PRELUDE_GIVEN, world_fact_relations
from privilog.engine.ids import ENTITY_TYPES, EntityId, IdError, parent_type
from privilog.engine.patterns import is_pattern, match_rows, parse_pattern
from privilog.engine.program import Program, Row
from privilog.engine.world import World, WorldError


def name_rows(ids: Iterable[str]) -> set[Row]:
    """``name_of`` rows: each id (text with a kind: a principal's, an entity's) and its name.

    >>> sorted(name_rows(["user:alice", "kerberosprincipal:alice@EX.COM", "READ"]))
    [('kerberosprincipal:alice@EX.COM', 'alice@EX.COM'), ('user:alice', 'alice')]
    """
    return {(i, i.partition(":")[2]) for i in ids if ":" in i}


# how many dot-separated parts of an id's name name what encloses it: none at the top, one in a
# namespace (`ns1.`), two in an application (`ns1.app.`)
_ENCLOSED_PARTS = {t: {"namespace": 1, "application": 2}.get(parent_type(t) or "", 0) for t in ENTITY_TYPES}


def last_name_rows(ids: Iterable[str]) -> set[Row]:
    """``last_name_of`` rows: each entity id and its name within what encloses it (what follows the
    enclosing entity's name), for comparing entities of one name in different places. A principal's
    id has none.

    >>> sorted(last_name_rows(["dataset_type:ns1.table", "dataset:ns1.sales.2024", "program:ns1.app.service.api",
    ...                        "namespace:ns1", "kerberosprincipal:a@EX.COM", "user:alice"]))
    ... # doctest: +NORMALIZE_WHITESPACE
    [('dataset:ns1.sales.2024', 'sales.2024'), ('dataset_type:ns1.table', 'table'),
     ('kerberosprincipal:a@EX.COM', 'a@EX.COM'), ('namespace:ns1', 'ns1'),
     ('program:ns1.app.service.api', 'service.api')]
    """
    rows: set[Row] = set()
    for i in ids:
        kind, _, name = i.partition(":")
        depth = _ENCLOSED_PARTS.get(kind)
        if depth is None or not name:
            continue
        parts = name.split(".", depth)
        if len(parts) > depth and parts[depth]:
            rows.add((i, parts[depth]))
    return rows


def names_of(ids: Iterable[str]) -> dict[str, set[Row]]:
    """The ``name_of`` and ``last_name_of`` rows of these ids (made together: a policy that reads one
    gets both)."""
    ids = list(ids)
    return {"name_of": name_rows(ids), "last_name_of": last_name_rows(ids)}


def within_rows(grants: Iterable[EntityId], instance: str) -> set[Row]:
    """``within`` rows: each plain entity a grant names, and each entity enclosing it by its id."""
    return {(str(g), str(a)) for g in grants if not is_pattern(g) for a in g.ancestors(instance)}


def fact_patterns(world: World) -> set[EntityId]:
    """Each value of the world's ``facts:`` that is a wildcard entity id (``dataset:fin*.sales_*``):
    it gets ``matches`` rows, as a wildcard grant's pattern does. A value that does not read as
    one (``policy 12``, ``a*b``) is only text."""
    return given_patterns(world.facts)


def given_patterns(facts: Mapping[str, Iterable[Row]]) -> set[EntityId]:
    """The wildcard entity ids among the values of these facts (:func:`fact_patterns`)."""
    found: set[EntityId] = set()
    seen: set[str] = set()
    for rows in facts.values():
        for row in rows:
            for value in row:
                if value not in seen and is_pattern(value):
                    seen.add(value)
                    with contextlib.suppress(IdError):
                        found.add(parse_pattern(value))
    return found


def check_facts(program: Program, world: World) -> None:
    """The world's ``facts:`` checked against the policy: each relation one the policy declares with
    ``relation NAME(...)`` that the world's own sections do not give, no rule derives and the
    policy writes no fact of (:func:`engine.analysis.world_fact_relations`), each row as wide as
    the relation; else one line naming the relation, the world file (and line) and the fix."""
    if not world.facts:
        return
    allowed = world_fact_relations(program)
    declared = {r.name: r for r in program.policy.relations}
    derived = {r.head.predicate: r for r in program.policy.rules if r.body}
    for relation, rows in sorted(world.facts.items()):
        if relation in allowed and all(len(row) == declared[relation].arity for row in rows):
            continue
        where = _fact_place(world, relation)
        if relation in allowed:
            arity = declared[relation].arity
            wrong = min(row for row in rows if len(row) != arity)
            columns = ", ".join(declared[relation].columns)
            raise WorldError(
                f"{where}: a `{relation}` fact has {_values(len(wrong))} {list(wrong)}, and the policy declares "
                f"`{relation}({columns})`: give each row {_values(arity)}"
            )
        given = f"{where}: `facts:` gives rows of `{relation}`"
        if relation in PRELUDE_GIVEN:
            raise WorldError(
                f"{given}, which is the prelude's: the world's own sections (entities, grants, members, admins, "
                "config, owners) or a request give it; write them there, or use a relation of the policy's own"
            )
        if relation in derived:
            rule = derived[relation]
            raise WorldError(
                f"{given}, which the policy's rules derive ({rule.span.file}:{rule.span.line}); a world gives "
                "rows only of a relation the policy declares with `relation` and derives by no rule"
            )
        if relation in declared or relation in program.facts:
            raise WorldError(f"{given}, whose facts the policy writes itself; give them in one place, the policy or "
                             "the world")
        hint = did_you_mean(relation, sorted(allowed))
        raise WorldError(
            f"{given}, which the policy does not declare{f' ({hint})' if hint else ''}; declare it in the policy "
            f"with `relation {relation}(COLUMN, ...)`, or take it out of `facts:`"
        )


def _values(count: int) -> str:
    return f"{count} value" if count == 1 else f"{count} values"


def _fact_place(world: World, relation: str) -> str:
    """Where a relation's facts are written: the world file and the line of its key, as near as is known."""
    file = world.origin or (str(world.path) if world.path is not None else "the world")
    if world.source:
        start = re.search(r"^facts:", world.source, re.MULTILINE)
        if start is not None:
            key = re.compile(rf"^[ \t]+[\"']?{re.escape(relation)}[\"']?[ \t]*:", re.MULTILINE)
            found = key.search(world.source, start.end())
            if found is not None:
                return f"{file}:{world.source.count(chr(10), 0, found.start()) + 1}"
    return file


def hierarchy(world: World) -> dict[EntityId, EntityId | None]:
    """Every existing entity (listed, or enclosing one that is) and its parent (None at the top),
    each found once: what :func:`world_facts` and the inventory both read."""
    parents: dict[EntityId, EntityId | None] = {}
    instance = world.instance
    for entity in world.entities:
        while entity not in parents:
            parent = parents[entity] = entity.parent(instance)
            if parent is None:
                break
            entity = parent
    return parents


def world_facts(
    world: World,
    named: Iterable[EntityId] = (),
    with_names: bool = False,
    with_within: bool = False,
    parents: Mapping[EntityId, EntityId | None] | None = None,
) -> dict[str, set[Row]]:
    """``grant``, ``member_of``, ``admin``, and the hierarchy of existing entities.

    Only entities that exist (listed, or enclosing one that is) are in the
    hierarchy; a grant on an entity that does not exist is kept but makes
    nothing above it visible, and applies again once the entity is created.
    A wildcard grant's pattern, and each pattern of ``named`` (those the policy's rules
    name), gets a ``matches`` row for each of these entities it matches (engine.patterns).
    With ``with_names``, every principal and entity id gets its ``name_of`` row (an entity its
    ``last_name_of`` too). The rows of the world's ``facts:`` (checked: :func:`check_facts`) are
    base facts too, and a wildcard among their values gets ``matches`` rows. ``parents`` is
    :func:`hierarchy`'s answer, when the caller has it already.

    Each id's text is made once and shared by every row that names it (a million grants name
    a few hundred thousand entities and some thousands of principals): the rows' memory is then
    mostly the tuples.
    """
    if parents is None:
        parents = hierarchy(world)
    names = {e: str(e) for e in parents}
    text: dict[str, str] = {}  # each principal's and action's text, once
    one = text.setdefault
    grants = []
    granted: dict[EntityId, str] = {}
    patterns = set(named) | fact_patterns(world)
    for g in world.grants:
        entity = g.entity
        name = names.get(entity) or granted.get(entity)
        if name is None:
            name = granted[entity] = str(entity)
            if is_pattern(entity):
                patterns.add(entity)
        grants.append((one(g.principal, g.principal), one(g.action, g.action), name))
    owners = [str(o) for o in world.owners.values()]
    ids = [*world.principals(), *names.values(), *granted.values(), *owners] if with_names else []
    within: set[Row] = set()
    if with_within:
        instance = world.instance
        for entity, name in [*((e, names[e]) for e in {g.entity for g in world.grants} if e in names),
                             *((e, n) for e, n in granted.items() if not is_pattern(e))]:
            above = parents.get(entity) if entity in parents else entity.parent(instance)
            while above is not None:
                within.add((name, names.get(above) or str(above)))
                above = parents.get(above) if above in parents else above.parent(instance)
    return {
        **{relation: set(rows) for relation, rows in world.facts.items()},  # checked: none of those below
        "within": within,
        **names_of(ids),
        "matches": match_rows(patterns, parents),
        "grant": set(grants),
        "member_of": {(one(m, m), one(g, g)) for m, g in world.members},
        "admin": {(one(a, a),) for a in world.admins},
        "config": {(key, value) for key, values in world.config.items() for value in values},
        "owned_by": {(str(e), str(o)) for e, o in world.owners.items()},
        "is_a": {(name, e.type) for e, name in names.items()},
        "child_of": {(names[e], names[p]) for e, p in parents.items() if p is not None},
    }
