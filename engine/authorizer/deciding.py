"""Requests asserted in the backend and their relations read back; allow or deny, bare.

A request becomes facts (``request``, ``request_arg``, and the place of an entity it names
that does not exist yet), asserted while the backend answers and retracted after. For allow
or deny alone, a backend with decision plans (:class:`~engine.backends.FastDecisions`)
answers without evaluating the rules: the path ``privilog serve`` and CDAP's enforce take.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any

from privilog.dsl.ir import Operation, Policy
from privilog.engine.authorizer.loaded import LoadedWorld
from privilog.engine.authorizer.requests import ID_CACHE, Requests
from privilog.engine.backends import Backend, Decider, FastDecisions
from privilog.engine.decision import Request
from privilog.engine.facts import names_of
from privilog.engine.ids import EntityId
from privilog.engine.patterns import match_rows
from privilog.engine.program import Row, by_rule_names

NO_ARGUMENTS: Mapping[str, str] = MappingProxyType({})
DECIDING = ("allowed", "applies", "met", "covered", "lacking", "bypass")  # what a decision reads back


class Deciding:
    """Requests evaluated by one backend over one loaded world."""

    def __init__(self, policy: Policy, backend: Backend, loaded: LoadedWorld, requests: Requests):
        self.backend = backend
        self.loaded = loaded
        self.requests = requests
        self._by_rules = by_rule_names(policy)
        self._plans: FastDecisions[Any] | None = backend if isinstance(backend, FastDecisions) else None
        self._counter = itertools.count()
        self._deciders: dict[str, Decider | None] = {}
        self._arguments: dict[tuple[object, ...], Mapping[str, str]] = {}  # checked arguments, by what was given

    # ---- evaluation ----------------------------------------------------------------

    def request_id(self, prefix: str = "r") -> str:
        """A request id not given before (``r0``, ``r1``, ...)."""
        return f"{prefix}{next(self._counter)}"

    def request_facts(self, rid: str, request: Request) -> dict[str, set[Row]]:
        """The facts of a request, under the id ``rid``."""
        facts: dict[str, set[Row]] = {
            "request": {(rid, request.principal, request.operation, str(request.entity))},
            "request_arg": {(rid, k, v) for k, v in request.args},
        }
        facts.update(self.absent(request))
        return facts

    def absent(self, request: Request) -> dict[str, set[Row]]:
        """The facts of the entities a request names that do not exist, for its evaluation only.

        A request may name an entity that does not exist yet (create): its place in the
        hierarchy comes from its id. It, and an entity an argument names, match the
        wildcard grants their ids match.
        """
        loaded = self.loaded
        chain = (request.entity, *request.entity.ancestors(loaded.world.instance))
        absent = [e for e in chain if not loaded.inventory.exists(e)]
        facts = loaded.inventory.facts(absent)
        if loaded.patterns:
            named = [EntityId.parse(v) for _, v in request.args if ":" in v]
            named = [e for e in named if not loaded.inventory.exists(e)]
            facts["matches"] = match_rows(loaded.patterns, [*absent, *named])
        if loaded.uses_names:  # the request's ids the world does not name already
            ids = [request.principal, *(str(e) for e in absent), *(v for _, v in request.args)]
            for relation, rows in names_of(ids).items():
                facts[relation] = rows - loaded.facts.get(relation, set())
        return facts

    def evaluate(
        self, requests: list[Request], relations: tuple[str, ...] = DECIDING
    ) -> tuple[dict[str, Request], dict[str, set[Row]]]:
        """Assert the requests, read back every relation the decisions need (and the policy's
        `by` rules), retract."""
        relations = (*relations, *self._by_rules)
        answers: dict[str, set[Row]] = {}
        with self.asserted(requests) as ids:
            for relation in relations:
                if len(ids) == 1:
                    answers[relation] = self.backend.query(relation, {0: next(iter(ids))})
                else:
                    answers[relation] = {r for r in self.backend.query(relation) if r[0] in ids}
        return ids, answers

    @contextmanager
    def asserted(self, requests: list[Request]) -> Iterator[dict[str, Request]]:
        """The requests' facts in the backend while the block runs (by request id), retracted after.

        Inside, ``backend.query`` answers the request-derived relations for them (``privilog test
        --coverage`` asks which rules derive anything this way).
        """
        ids = {self.request_id(): r for r in requests}
        added: dict[str, set[Row]] = {}
        for rid, request in ids.items():
            for relation, rows in self.request_facts(rid, request).items():
                added.setdefault(relation, set()).update(rows)
        for relation, rows in added.items():
            self.backend.add(relation, rows)
        try:
            yield ids
        finally:
            for relation, rows in added.items():
                self.backend.remove(relation, rows)

    # ---- allow or deny, by a decision plan where the backend has one ------------------------

    def plan(self, operation: str) -> Decider | None:
        """The backend's decision plan for ``operation``, if it compiles one."""
        try:
            return self._deciders[operation]
        except KeyError:
            found = self._deciders[operation] = self._plans.decider(operation) if self._plans is not None else None
            return found

    def decide(self, request: Request) -> bool:
        """Allow (True) or deny, without building the proof or the unmet requirements."""
        plan = self.plan(request.operation)
        if plan is None:
            _, answers = self.evaluate([request], ("allowed",))
            return bool(answers["allowed"])
        entity = request.entity
        loaded = self.loaded
        exists = loaded.inventory.exists(entity)
        if exists and not loaded.patterns and not loaded.uses_names:  # so does what encloses it
            return plan(request.principal, str(entity), dict(request.args))
        absent = self.absent(request)
        if not any(absent.values()):
            return plan(request.principal, str(entity), dict(request.args))
        if self._plans is not None:  # a create: the entity's place, for this decision only
            changes = self._plans.assume(absent)
            try:
                return plan(request.principal, str(entity), dict(request.args))
            finally:
                self._plans.retract(changes)
        for relation, rows in absent.items():
            if rows:
                self.backend.add(relation, rows)
        try:
            return plan(request.principal, str(entity), dict(request.args))
        finally:
            for relation, rows in absent.items():
                if rows:
                    self.backend.remove(relation, rows)

    def allows(
        self, principal: str, operation: str, entity: str | EntityId, args: Mapping[str, object] | None = None
    ) -> bool:
        """Whether ``principal`` may do ``operation`` on ``entity``: from strings to a decision.

        Raises RequestError for a request that is not well formed (never an allow).
        """
        given = self.in_place(principal, operation, entity, args)
        if given is not None:
            plan = self.plan(operation)
            if plan is not None:
                return plan(principal, entity, given)  # type: ignore[arg-type]
        return self.decide(self.requests.request(principal, operation, entity, args))

    def in_place(
        self, principal: object, operation: object, entity: object, args: Mapping[str, object] | None
    ) -> Mapping[str, str] | None:
        """The checked arguments of a request a plan can decide as it is, from its strings, without
        building a Request: the common case of a principal and an entity seen (and checked) before,
        on an existing entity of the operation's type, needing no facts of its own; else None."""
        requests = self.requests
        if not (
            isinstance(principal, str)
            and isinstance(operation, str)
            and isinstance(entity, str)
            and principal in requests.principals
        ):
            return None
        op = requests.operations.get(operation)
        known = requests.entities.get(entity)
        if op is None or known is None or known.type != op.entity_type or not self.loaded.inventory.exists(known):
            return None
        given = self._checked_args(op, known, entity, args) if args else NO_ARGUMENTS
        if given is None or not self._in_place(principal, given):
            return None
        return given

    def _in_place(self, principal: str, args: Mapping[str, str]) -> bool:
        """Whether a request on an existing entity needs no facts of its own for its decision
        (what :meth:`absent` would add is there already): the ``name_of`` row of its principal
        and of each id an argument names, when the policy reads names; the ``matches`` rows of
        an argument's entity, when wildcards are granted, which only an existing one has."""
        loaded = self.loaded
        if loaded.uses_names:
            named = loaded.facts.get("name_of", set())
            ids = (principal, *args.values())
            if any(":" in i and (i, i.partition(":")[2]) not in named for i in ids):
                return False
        if loaded.patterns:
            for value in args.values():
                if ":" in value and not loaded.inventory.exists(self.requests.entity(value)):
                    return False
        return True

    def _checked_args(
        self, op: Operation, target: EntityId, entity: str, args: Mapping[str, object]
    ) -> Mapping[str, str] | None:
        """A request's arguments checked (as ``Requests.request`` does) and kept for the next time the
        same ones come; None when they cannot be kept (a value that is not hashable)."""
        try:
            key = (op.qualified, entity, tuple(args.items()))
            found = self._arguments.get(key)
        except TypeError:
            return None
        if found is None:
            if len(self._arguments) >= ID_CACHE:  # bounded, as the id caches
                self._arguments.clear()
            found = self._arguments[key] = MappingProxyType(dict(self.requests.arguments(op, args, target)))
        return found
