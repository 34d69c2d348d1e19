"""Answers about one policy over one world: check, visible, explain, fix.

The authorizer turns a request into facts, lets the backend evaluate the
policy's rules, and reads the derived relations back into a
:class:`~engine.decision.Decision`. All of the policy's meaning is in the
rules; this package only validates input, asks, and assembles answers.

:class:`Authorizer` composes one object per part, each in its own module, and
hands each question to the part that answers it:

* ``loaded``: the world's facts in the backend, kept in step with each change;
* ``requests``: requests read from text and checked (``RequestError``);
* ``deciding``: requests asserted and their relations read back; allow or deny
  by a decision plan where the backend has one;
* ``answers``: the derived rows read into a decision, with its witnesses;
* ``fixing``: a denial explained, the policy's own deny rules and the changes
  that would allow it;
* ``listing``: what a principal sees of a type;
* ``tabling``: a request's row of the pipeline's decisions table (``privilog decide``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from typing import Any

from privilog.dsl.ir import Operation, Policy
from privilog.engine.authorizer.answers import Answers
from privilog.engine.authorizer.deciding import Deciding
from privilog.engine.authorizer.fixing import Fixing
from privilog.engine.authorizer.listing import Listing
from privilog.engine.authorizer.loaded import LoadedWorld
from privilog.engine.authorizer.requests import FALSE_WORDS, TRUE_WORDS, RequestError, Requests, check_hierarchy
from privilog.engine.authorizer.tabling import Tabled, Tabling, tabled
from privilog.engine.backends import Backend, make_backend
from privilog.engine.decision import Decision, Denial, GrantChange, Request, Visible
from privilog.engine.ids import EntityId
from privilog.engine.inventory import Inventory
from privilog.engine.program import Program, Row, compile_policy
from privilog.engine.world import Grant, World

__all__ = ["FALSE_WORDS", "TRUE_WORDS", "Authorizer", "RequestError", "Tabled", "check_hierarchy", "tabled"]


class Authorizer:
    """One policy evaluated over one world."""

    def __init__(self, policy: Policy, world: World | None = None, backend: str = "compiled", preloaded: Any = None):
        """``preloaded``: the compiled backend's state captured earlier (engine.compiled.snapshot.Preloaded) for
        this policy, maybe of an earlier state of the world: started from it, brought to ``world`` by the
        backend's upkeep, every decision plan made (see that module)."""
        check_hierarchy(policy)
        self.policy = policy
        self.program: Program = compile_policy(policy)
        self.backend_name = backend
        self.backend: Backend = make_backend(backend, self.program, preloaded)
        self.loaded = LoadedWorld(self.program, self.backend, world if world is not None else World())
        if preloaded is not None:  # the world's facts compared with the captured ones, not with none
            self.loaded.facts = dict(preloaded.facts)
        self.requests = Requests(policy, self.loaded)
        self.deciding = Deciding(policy, self.backend, self.loaded, self.requests)
        self.answers = Answers(policy, self.requests, self.loaded)
        self.fixing = Fixing(policy, self.program, self.backend, self.loaded, self.deciding, self.answers)
        self.listing = Listing(policy, self.loaded, self.requests, self.deciding)
        self.tabling = Tabling(
            policy, self.program, self.backend, self.loaded, self.requests, self.deciding, self.answers, self.fixing
        )
        self.refresh()
        if preloaded is not None:
            self.prepare()  # the plans claim the captured joins ...
            self.backend.settle()  # type: ignore[attr-defined]  # ... then the world's changes since reach them too
            # a base relation captured as exactly the world's facts is them again, changes applied: the facts
            # kept as a copy of its set share its rows (else each row is held twice, once as the world made it)
            for name in preloaded.shared:
                self.loaded.facts[name] = set(self.backend.store[name].rows)  # type: ignore[attr-defined]

    # ---- the world -----------------------------------------------------------------

    @property
    def world(self) -> World:
        """The world decided in; one set in its place is loaded by :meth:`refresh`."""
        return self.loaded.world

    @world.setter
    def world(self, world: World) -> None:
        self.loaded.world = world

    @property
    def inventory(self) -> Inventory:
        """What exists in the world, kept current."""
        return self.loaded.inventory

    def refresh(self) -> None:
        """Bring the backend's facts in line with a world that was changed or swapped wholesale
        (and follow the world's changes from now on): ``LoadedWorld.refresh``."""
        self.loaded.refresh(following=self)

    def world_changed(self, world: World, kind: str, items: list[Any]) -> None:
        """A change another writer made to the world's file, made here too (``LoadedWorld.world_changed``)."""
        self.loaded.world_changed(world, kind, items)

    # ---- changes, each applied incrementally -----------------------------------------

    def grant(self, actor: str, grants: Iterable[Grant]) -> list[Grant]:
        """Add grants as the authorization admin ``actor``; return those that were new."""
        return self.loaded.grant(actor, grants)

    def revoke(self, actor: str, grants: Iterable[Grant]) -> list[Grant]:
        """Remove grants as the authorization admin ``actor``; return those that were there."""
        return self.loaded.revoke(actor, grants)

    def add_members(self, actor: str, members: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        """Put principals in groups or roles, as an authorization admin; return the new memberships."""
        return self.loaded.add_members(actor, members)

    def remove_members(self, actor: str, members: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        """Take principals out of groups or roles, as an authorization admin."""
        return self.loaded.remove_members(actor, members)

    def add_admins(self, actor: str, principals: Iterable[str]) -> list[str]:
        """Make principals authorization admins, as the authorization admin ``actor``; the new ones."""
        return self.loaded.add_admins(actor, principals)

    def remove_admins(self, actor: str, principals: Iterable[str]) -> list[str]:
        """Take principals out of the authorization admins, as the authorization admin ``actor``."""
        return self.loaded.remove_admins(actor, principals)

    def add_entity(self, actor: str, entity: EntityId) -> list[EntityId]:
        """Create an entity (and what encloses it) as the authorization admin ``actor``;
        return the entities that exist now and did not."""
        return self.loaded.add_entity(actor, entity)

    def delete_entity(self, actor: str, entity: EntityId) -> set[EntityId]:
        """Delete an entity and everything inside it (grants are kept) as the authorization admin
        ``actor``; return what was deleted."""
        return self.loaded.delete_entity(actor, entity)

    def granted_as(self, holder: str, action: str, entity: EntityId) -> list[EntityId]:
        """What ``holder``'s own grants of ``action`` that hold on ``entity`` name: the entity itself
        (first) and every wildcard that matches it."""
        return self.loaded.granted_as(holder, action, entity)

    # ---- requests ------------------------------------------------------------------

    def operation(self, name: str) -> Operation:
        """The operation called ``name`` (``type.name``), or a RequestError saying what exists."""
        return self.requests.operation(name)

    def entity(self, text: str | EntityId) -> EntityId:
        """Parse an entity id and check that the policy knows its type."""
        return self.requests.entity(text)

    def granted_entity(self, text: str | EntityId) -> EntityId:
        """What a grant names: an entity id, or a wildcard pattern (engine.patterns) of a type the policy knows."""
        return self.requests.granted_entity(text)

    def request(
        self, principal: str, operation: str, entity: str | EntityId, args: Mapping[str, object] | None = None
    ) -> Request:
        """Validate a request; raise RequestError with what is wrong and what is expected."""
        return self.requests.request(principal, operation, entity, args)

    # ---- deciding ------------------------------------------------------------------

    def asserted(self, requests: list[Request]) -> AbstractContextManager[dict[str, Request]]:
        """The requests' facts in the backend while the block runs (by request id), retracted after
        (``Deciding.asserted``)."""
        return self.deciding.asserted(requests)

    def prepare(self) -> None:
        """Every operation's decision plan made now, where the backend makes them (a server, before it
        answers: the first check of an operation then costs what every later one does)."""
        for op in self.policy.operations:
            self.deciding.plan(op.qualified)

    def decide(self, request: Request) -> bool:
        """Allow (True) or deny, without building the proof or the unmet requirements."""
        return self.deciding.decide(request)

    def allows(
        self, principal: str, operation: str, entity: str | EntityId, args: Mapping[str, object] | None = None
    ) -> bool:
        """Whether ``principal`` may do ``operation`` on ``entity``: from strings to a decision.

        Raises RequestError for a request that is not well formed (never an allow).
        """
        return self.deciding.allows(principal, operation, entity, args)

    def tabled(
        self, principal: str, operation: str, entity: str | EntityId, args: Mapping[str, object] | None = None
    ) -> Tabled:
        """A request's row of the pipeline's decisions table (allow or deny, unmet, bypass, denied_by,
        allowed_by), from strings; RequestError for a request that is not well formed
        (``Tabling.row_of``: by plans where the backend has them, else read off its Decision)."""
        if isinstance(entity, EntityId):
            return self.tabling.row(self.request(principal, operation, entity, args))
        return self.tabling.row_of(principal, operation, entity, args)

    def check(self, request: Request) -> Decision:
        """Decide one request, with its proof or its unmet requirements and the fixes."""
        ids, rows = self.deciding.evaluate([request])
        (rid,) = ids
        return self._decision(rid, request, rows)

    def check_many(self, requests: list[Request], explain_denials: bool = True) -> list[Decision]:
        """Decide several requests; those on existing entities in one evaluation.

        Without ``explain_denials`` a denial carries its unmet requirements but not the
        changes that would allow it (``visible`` needs only allow or deny).

        A request on an entity that does not exist places it in the hierarchy for its
        own evaluation; evaluated together with others, that entity would count as a
        descendant for them too, so such requests are decided one by one.
        """
        shared = [r for r in requests if self.inventory.exists(r.entity)]
        decided: dict[int, Decision] = {}
        if shared:
            ids, rows = self.deciding.evaluate(shared)
            by_request: dict[str, dict[str, set[Row]]] = {rid: {} for rid in ids}
            for relation, found in rows.items():
                for row in found:
                    by_request[row[0]].setdefault(relation, set()).add(row)
            for rid, request in ids.items():
                decided[id(request)] = self._decision(rid, request, by_request[rid], explain_denials)
        return [decided[id(r)] if id(r) in decided else self.check(r) for r in requests]

    def _decision(
        self, rid: str, request: Request, rows: Mapping[str, set[Row]], explain_denials: bool = True
    ) -> Decision:
        decision = self.answers.decision(rid, request, rows)
        return self.fixing.explained(decision) if explain_denials else decision

    # ---- a denial explained --------------------------------------------------------

    def denials(self, request: Request) -> tuple[Denial, ...]:
        """The policy's own `denied` rules that hold for a request, each with a proof (engine.denial)."""
        return self.fixing.denials(request)

    def minimal_grant_sets(self, decision: Decision, limit: int = 256) -> list[frozenset[GrantChange]]:
        """Every inclusion-minimal set of new grants that would meet all of a decision's unmet
        requirements (up to ``limit`` of them), for comparing policies exactly."""
        return self.fixing.minimal_grant_sets(decision, limit)

    # ---- listing -------------------------------------------------------------------

    def list_operation(self, entity_type: str) -> Operation:
        """The operation that lists entities of a type (the one the policy marks `shows`)."""
        return self.listing.list_operation(entity_type)

    def listable_types(self) -> list[str]:
        """The entity types the policy has a listing (`shows`) operation for."""
        return self.listing.listable_types()

    def visible_entities(
        self, principal: str, entity_type: str, within: str | EntityId | None = None
    ) -> list[EntityId]:
        """The existing entities of a type (inside ``within``) that ``principal`` sees, sorted.

        Decided, not explained: each candidate by the listing operation's decision plan
        (CDAP's visibility filter asks only this); :meth:`visible` adds why.
        """
        return self.listing.visible_entities(principal, entity_type, within)

    def visible(self, principal: str, entity_type: str, within: str | EntityId | None = None) -> list[Visible]:
        """The existing entities of a type (inside ``within``) that ``principal`` sees, with why."""
        shown = self.visible_entities(principal, entity_type, within)
        if not shown:
            return []
        op = self.list_operation(entity_type)
        who = self.request(principal, op.qualified, shown[0]).principal
        out = []
        # the rules are evaluated (for the witness) only for the entities shown
        for decision in self.check_many([Request(who, op.qualified, e) for e in shown], explain_denials=False):
            if decision.allowed:
                witnesses = [w for o in decision.outcomes for w in o.witnesses]
                out.append(Visible(decision.request.entity, min(witnesses) if witnesses else None))
        return out
