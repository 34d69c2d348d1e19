"""What exists in a world, kept current as entities are created and deleted.

An entity exists when it is listed or encloses one that is (``World.existing``).
The inventory counts, for each entity, itself (if listed) and the listed
entities inside it, so a creation or a deletion touches only the entities on
the chains it changes, never the whole world; and it keeps the existing
entities by type and by each enclosing entity, for ``visible``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping

from privilog.engine.ids import EntityId
from privilog.engine.program import Row


class Inventory:
    """The existing entities of a world and the hierarchy facts they give."""

    def __init__(
        self, instance: str, listed: Iterable[EntityId] = (), parents: Mapping[EntityId, EntityId | None] | None = None
    ):
        """``parents``: each existing entity's parent, when the caller has found them already
        (``engine.facts.hierarchy``): the chains are then read from it, not from the ids again."""
        self.instance = instance
        self._listed: set[EntityId] = set()
        self._count: Counter[EntityId] = Counter()
        self._inside: dict[EntityId | None, dict[str, set[EntityId]]] = {}  # place -> type -> entities
        self._sorted: dict[tuple[str, EntityId | None], list[EntityId]] = {}
        self._names: dict[tuple[str, EntityId | None], list[str]] = {}
        self._chains: dict[EntityId, tuple[EntityId, ...]] = {}  # an enclosing entity and its own enclosers
        self._listed.update(listed)
        count = self._count
        inside = self._inside
        chain = self.chain if parents is None else self._chain_of(parents)
        for entity in self._listed:  # in bulk: count, then index each existing entity once
            for encloser in chain(entity):
                count[encloser] += 1
        for entity in count:
            for place in (None, *chain(entity)[1:]):
                by_type = inside.get(place)
                if by_type is None:
                    by_type = inside[place] = {}
                found = by_type.get(entity.type)
                if found is None:
                    by_type[entity.type] = {entity}
                else:
                    found.add(entity)

    def _chain_of(self, parents: Mapping[EntityId, EntityId | None]) -> Callable[[EntityId], tuple[EntityId, ...]]:
        """:meth:`chain`, reading parents from ``parents`` (every existing entity's)."""
        chains = self._chains

        def chain(entity: EntityId) -> tuple[EntityId, ...]:
            parent = parents[entity]
            if parent is None:
                return (entity,)
            above = chains.get(parent)
            if above is None:
                above = chains[parent] = chain(parent)
            return (entity, *above)

        return chain

    def exists(self, entity: EntityId) -> bool:
        """Whether ``entity`` exists; if it does, so does everything that encloses it."""
        return entity in self._count

    def __iter__(self) -> Iterator[EntityId]:
        return iter([e for e, n in self._count.items() if n > 0])

    def __len__(self) -> int:
        return sum(1 for n in self._count.values() if n > 0)

    def facts(self, entities: Iterable[EntityId]) -> dict[str, set[Row]]:
        """``is_a`` and ``child_of`` of these entities, as ``engine.facts.world_facts`` writes them."""
        is_a: set[Row] = set()
        child_of: set[Row] = set()
        for entity in entities:
            is_a.add((str(entity), entity.type))
            parent = entity.parent(self.instance)
            if parent is not None:
                child_of.add((str(entity), str(parent)))
        return {"is_a": is_a, "child_of": child_of}

    def add(self, entity: EntityId) -> list[EntityId]:
        """List ``entity``; return the entities that exist now and did not before."""
        if entity in self._listed:
            return []
        self._listed.add(entity)
        born = []
        count = self._count
        for place in self.chain(entity):
            count[place] += 1
            if count[place] == 1:
                born.append(place)
                self._index(place, add=True)
        return born

    def chain(self, entity: EntityId) -> tuple[EntityId, ...]:
        """``entity`` and every entity enclosing it, nearest first (enclosers' chains kept:
        an id's place never changes, and there are few of them)."""
        parent = entity.parent(self.instance)
        if parent is None:
            return (entity,)
        above = self._chains.get(parent)
        if above is None:
            above = self._chains[parent] = self.chain(parent)
        return (entity, *above)

    def remove(self, entity: EntityId) -> list[EntityId]:
        """Unlist ``entity`` and everything listed inside it; return what no longer exists."""
        doomed = [d for d in self.within(entity) if d in self._listed]
        if entity in self._listed:
            doomed.append(entity)
        gone = []
        for listed in doomed:
            self._listed.discard(listed)
            for place in self.chain(listed):
                self._count[place] -= 1
                if self._count[place] == 0:
                    del self._count[place]
                    gone.append(place)
                    self._index(place, add=False)
        return gone

    def within(self, entity: EntityId) -> list[EntityId]:
        """Every existing entity strictly inside ``entity``."""
        return [d for found in self._inside.get(entity, {}).values() for d in found]

    def inside(self, entity_type: str, place: EntityId | None) -> list[EntityId]:
        """The existing entities of a type inside ``place`` (anywhere for None), sorted."""
        key = (entity_type, place)
        if key not in self._sorted:
            self._sorted[key] = sorted(self._inside.get(place, {}).get(entity_type, ()))
        return self._sorted[key]

    def inside_names(self, entity_type: str, place: EntityId | None) -> list[str]:
        """:meth:`inside` as id text, in the same order."""
        key = (entity_type, place)
        if key not in self._names:
            self._names[key] = [str(e) for e in self.inside(entity_type, place)]
        return self._names[key]

    def _index(self, entity: EntityId, add: bool) -> None:
        for place in (None, *self.chain(entity)[1:]):
            found = self._inside.setdefault(place, {}).setdefault(entity.type, set())
            if add:
                found.add(entity)
            else:
                found.discard(entity)
            self._sorted.pop((entity.type, place), None)
            self._names.pop((entity.type, place), None)
