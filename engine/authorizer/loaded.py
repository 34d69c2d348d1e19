"""A world's facts loaded into a backend, and kept in step with each change of the world.

:meth:`LoadedWorld.refresh` compares every fact of the world with what the backend holds;
a grant, a revocation, a membership, an admin or an entity changed through the authorizer
(or read from the world's file by another writer) reaches the backend as the few facts it
changes. Beside the facts it keeps what the other parts of the authorizer read of the world
without asking the backend: who holds each grant, the wildcards granted, what exists.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Mapping
from typing import Any

from privilog.dsl.limits import WORLD_ENTRIES, LimitError
from privilog.engine.backends import Backend
from privilog.engine.facts import check_facts, fact_patterns, hierarchy, names_of, within_rows, world_facts
from privilog.engine.ids import EntityId
from privilog.engine.inventory import Inventory
from privilog.engine.patterns import PatternIndex, check_tries, is_pattern, match_rows, matches, policy_patterns
from privilog.engine.program import Program, Row, reads
from privilog.engine.world import Grant, World


class LoadedWorld:
    """One world's facts in one backend: the world, what exists, who holds which grant."""

    def __init__(self, program: Program, backend: Backend, world: World):
        self.world = world
        self.backend = backend
        self.program = program
        self.named_patterns = policy_patterns(program.rules)
        # `name_of` (with `last_name_of`) and `within` rows are made only for a policy whose rules read them
        # (a row per id otherwise)
        self.uses_names = any(reads(program.rules, r, program.facts) for r in ("name_of", "last_name_of"))
        self.uses_within = reads(program.rules, "within", program.facts)
        self.facts: dict[str, set[Row]] = {}  # the base facts the backend holds, by relation
        self.inventory: Inventory  # what exists; these three are made by refresh
        self._holders: dict[tuple[str, EntityId], set[str]] | None = None  # made when first asked (holders)
        self.patterns: dict[EntityId, int]  # each wildcard granted, and by how many grants
        self.version = 0  # counts the changes of the world's facts: what was worked out before one is stale
        # entities whose `within` rows a grant gave since the last refresh (only a refresh takes rows away)
        self._within_named: set[EntityId] = set()

    def refresh(self, following: object | None = None) -> None:
        """Bring the backend's facts in line with a world that was changed or swapped wholesale
        (``following``: what follows the world's changes from now on, the authorizer).

        This diffs every fact of the world. A single change costs what it changes through
        :meth:`grant`, :meth:`revoke`, :meth:`add_members`, :meth:`remove_members`,
        :meth:`add_entity` and :meth:`delete_entity` instead.
        """
        gc.unfreeze()  # let what the last refresh froze, and this one retracts, be collected
        enabled = gc.isenabled()
        gc.disable()  # measured: millions of new objects and no cycles; collecting meanwhile is quadratic
        try:
            self._within_named = set()  # facts anew: which entities have `within` rows, known again as granted
            self._refresh(following)
        finally:
            if enabled:
                gc.enable()
        # measured: the loaded facts are millions of long-lived objects; a full collection
        # scans them all (0.8 s CPU at 100k grants). Move them out of the collector's sight.
        gc.freeze()

    def world_changed(self, world: World, kind: str, items: list[Any]) -> None:
        """A change another writer made to the world's file, read into the world (a change
        log's kind, with the values it changed; ``reload`` when the file was read anew): made
        here too, incrementally where it can be."""
        if world is not self.world:
            return
        if kind == "grant":
            self.granted(items)
        elif kind == "revoke":
            self.revoked(items)
        elif kind in ("member.add", "member.remove", "admin.add", "admin.remove"):
            rows = set(items) if kind.startswith("member") else {(a,) for a in items}
            changed: dict[str, set[Row]] = {"member_of" if kind.startswith("member") else "admin": rows}
            if kind.endswith(".add"):
                self.apply(changed, {})
            else:
                self.apply({}, changed)
        elif kind == "entity.add":
            for entity in items:
                self.apply(self.placed(self.inventory.add(entity)), {})
        else:  # entities removed, or a world read anew: every fact compared (the world is followed already)
            self.refresh()

    def _refresh(self, following: object | None) -> None:
        self.version += 1
        world = self.world
        size = len(world.entities) + len(world.grants) + len(world.members) + len(world.admins) + world.fact_rows()
        if size > WORLD_ENTRIES.value():  # refused before its facts are made: they cost the memory
            raise LimitError(WORLD_ENTRIES.refusal("the world", size))
        check_facts(self.program, world)  # its `facts:` are of relations the policy leaves to the world
        if following is not None:
            self.world.observers.add(following)
        parents = hierarchy(self.world)
        new = world_facts(self.world, self.named_patterns, self.uses_names, self.uses_within, parents)
        for relation in set(new) | set(self.facts):
            before, after = self.facts.get(relation, set()), new.get(relation, set())
            if before - after:
                self.backend.remove(relation, before - after)
            if after - before:
                self.backend.add(relation, after - before)
        self.facts = new
        self._holders = None
        # the policy's own patterns, and those among the world's facts, count once, always
        self.patterns = dict.fromkeys([*self.named_patterns, *fact_patterns(self.world)], 1)
        for grant in self.world.grants:
            if is_pattern(grant.entity):
                self.patterns[grant.entity] = self.patterns.get(grant.entity, 0) + 1
        self.inventory = Inventory(self.world.instance, self.world.entities, parents)

    @property
    def holders(self) -> dict[tuple[str, EntityId], set[str]]:
        """Who holds each action on each entity or wildcard: made from the world's grants the first
        time it is asked (only explanations ask: a million grants' worth of sets is not paid by a
        world that only answers checks), and kept current from then on."""
        if self._holders is None:
            holders: dict[tuple[str, EntityId], set[str]] = {}
            for grant in self.world.grants:
                holders.setdefault((grant.action, grant.entity), set()).add(grant.principal)
            self._holders = holders
        return self._holders

    def placed(self, entities: Iterable[EntityId]) -> dict[str, set[Row]]:
        """The hierarchy facts of these entities, and the wildcard grants they match."""
        entities = list(entities)
        facts = self.inventory.facts(entities)
        facts["matches"] = match_rows(self.patterns, entities) if self.patterns else set()
        return facts

    def _pattern_rows(self, pattern: EntityId, count_only: bool = False) -> set[Row]:
        """``matches`` rows of a wildcard against the existing entities of its type (with
        ``count_only``, none: only the refusal of one that would cost too much)."""
        entities = self.inventory.inside(pattern.type, None)
        if count_only:
            check_tries(pattern, entities)
            return set()
        return PatternIndex.rows_of(pattern, entities)

    def apply(self, added: Mapping[str, set[Row]], removed: Mapping[str, set[Row]]) -> None:
        """Apply a change of base facts to the backend (and to the facts kept for refresh). A new
        id gets its ``name_of`` row (when the policy reads them); a removed one keeps it until the
        next refresh: a name is the id's, whoever still names it."""
        self.version += 1
        if self.uses_names and added:
            ids = {v for rows in added.values() for row in rows for v in row}
            added = {**added, **{r: rows | set(added.get(r, ())) for r, rows in names_of(ids).items()}}
        for relation, rows in removed.items():
            rows = rows & self.facts.get(relation, set())
            if rows:
                self.facts[relation] -= rows
                self.backend.remove(relation, rows)
        for relation, rows in added.items():
            rows = rows - self.facts.setdefault(relation, set())
            if rows:
                self.facts[relation] |= rows
                self.backend.add(relation, rows)

    # ---- changes, each applied incrementally -----------------------------------------

    def grant(self, actor: str, grants: Iterable[Grant]) -> list[Grant]:
        """Add grants as the authorization admin ``actor``; return those that were new."""
        grants = list(grants)
        for g in grants:  # a wildcard's cost is refused before the world changes
            if isinstance(g, Grant) and is_pattern(g.entity) and g.entity not in self.patterns:
                self._pattern_rows(g.entity, count_only=True)
        new = self.world.grant(actor, grants)
        self.granted(new)
        return new

    def granted(self, new: list[Grant]) -> None:
        """Grants the world has now: their facts to the backend, in one :meth:`apply`."""
        added: dict[str, set[Row]] = {}
        if self.uses_within:  # kept once a grant names the entity: its place by its id never changes
            fresh = self._unplaced({g.entity for g in new})
            if fresh:
                added["within"] = within_rows(fresh, self.world.instance)
        matched: set[Row] = set()
        for g in new:
            if self._holders is not None:
                self._holders.setdefault((g.action, g.entity), set()).add(g.principal)
            if is_pattern(g.entity):
                count = self.patterns[g.entity] = self.patterns.get(g.entity, 0) + 1
                if count == 1:
                    matched |= self._pattern_rows(g.entity)
        if matched:
            added["matches"] = matched
        added["grant"] = {(g.principal, g.action, str(g.entity)) for g in new}
        self.apply(added, {})

    def _unplaced(self, entities: set[EntityId]) -> list[EntityId]:
        """The plain entities among these whose ``within`` rows the backend lacks. An entity's rows
        come and go together (:func:`within_rows` makes them all, a world's ``facts:`` may not give
        any), so the row of its nearest enclosing entity says whether it has them; an entity a grant
        named since the last refresh has them (only a refresh takes them away) and is not looked at
        again. Measured: working out every row of every grant's entity again was a quarter of a
        grant's cost."""
        have = self.facts.get("within", ())
        instance = self.world.instance
        named = self._within_named
        out = []
        for entity in entities:
            if entity in named or is_pattern(entity):
                continue
            named.add(entity)
            parent = entity.parent(instance)
            if parent is not None and (str(entity), str(parent)) not in have:
                out.append(entity)
        return out

    def revoke(self, actor: str, grants: Iterable[Grant]) -> list[Grant]:
        """Remove grants as the authorization admin ``actor``; return those that were there."""
        gone = self.world.revoke(actor, grants)
        self.revoked(gone)
        return gone

    def revoked(self, gone: list[Grant]) -> None:
        """Grants the world no longer has: their facts out of the backend."""
        unmatched: set[Row] = set()
        for g in gone:
            if self._holders is not None:
                self._holders.get((g.action, g.entity), set()).discard(g.principal)
            if g.entity in self.patterns:
                self.patterns[g.entity] -= 1
                if not self.patterns[g.entity]:
                    del self.patterns[g.entity]
                    unmatched |= self._pattern_rows(g.entity)
        self.apply({}, {"grant": {(g.principal, g.action, str(g.entity)) for g in gone}, "matches": unmatched})

    def add_members(self, actor: str, members: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        """Put principals in groups or roles, as an authorization admin; return the new memberships."""
        new = self.world.add_members(actor, members)
        self.apply({"member_of": set(new)}, {})
        return new

    def remove_members(self, actor: str, members: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        """Take principals out of groups or roles, as an authorization admin."""
        gone = self.world.remove_members(actor, members)
        self.apply({}, {"member_of": set(gone)})
        return gone

    def add_admins(self, actor: str, principals: Iterable[str]) -> list[str]:
        """Make principals authorization admins, as the authorization admin ``actor``; the new ones."""
        new = self.world.add_admins(actor, principals)
        self.apply({"admin": {(a,) for a in new}}, {})
        return new

    def remove_admins(self, actor: str, principals: Iterable[str]) -> list[str]:
        """Take principals out of the authorization admins, as the authorization admin ``actor``."""
        gone = self.world.remove_admins(actor, principals)
        self.apply({}, {"admin": {(a,) for a in gone}})
        return gone

    def add_entity(self, actor: str, entity: EntityId) -> list[EntityId]:
        """Create an entity (and what encloses it) as the authorization admin ``actor``;
        return the entities that exist now and did not."""
        self.world.add_entity(actor, entity)
        born = self.inventory.add(entity)
        self.apply(self.placed(born), {})
        return born

    def delete_entity(self, actor: str, entity: EntityId) -> set[EntityId]:
        """Delete an entity and everything inside it (grants are kept) as the authorization admin
        ``actor``; return what was deleted."""
        doomed = {entity, *self.inventory.within(entity)} if self.inventory.exists(entity) else set()
        listed = {e for e in doomed if e in self.world.entities} | ({entity} & self.world.entities)
        self.world.forget_entities(actor, listed)
        gone = self.inventory.remove(entity)
        self.apply({}, self.placed(gone))
        return doomed

    # ---- who holds what ----------------------------------------------------------------

    def granted_as(self, holder: str, action: str, entity: EntityId) -> list[EntityId]:
        """What ``holder``'s own grants of ``action`` that hold on ``entity`` name: the entity itself
        (first) and every wildcard that matches it."""
        named = [entity] if holder in self.holders.get((action, entity), ()) else []
        for pattern in sorted(self.patterns):
            if holder in self.holders.get((action, pattern), ()) and matches(pattern, entity):
                named.append(pattern)
        return named

    def membership_chain(self, principal: str, group: str) -> tuple[str, ...]:
        """The shortest chain principal → ... → group through the world's memberships."""
        previous = self.memberships(principal, until=group)
        chain = [group]
        while chain[-1] != principal and chain[-1] in previous:
            chain.append(previous[chain[-1]])
        return tuple(reversed(chain))

    def memberships(self, principal: str, until: str | None = None) -> dict[str, str]:
        """Every group or role ``principal`` is in, directly or through others, each with the
        member it was first reached from (breadth first, so along a shortest chain); the walk
        stops early once ``until`` is reached. One visit a group: linear in the memberships,
        cycles included (``in_group``, their closure, is quadratic in a deep chain)."""
        previous: dict[str, str] = {principal: principal}
        frontier = [principal]
        while frontier:
            following = []
            for current in frontier:
                for _, parent in sorted(self.backend.query("member_of", {0: current})):
                    if parent not in previous:
                        previous[parent] = current
                        if parent == until:
                            return previous
                        following.append(parent)
            frontier = following
        return previous
