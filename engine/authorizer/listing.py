"""Listing: the entities of a type a principal sees, by the operation the policy marks `shows`."""

from __future__ import annotations

from privilog.dsl.check import ancestor_types
from privilog.dsl.errors import article, did_you_mean
from privilog.dsl.ir import Operation, Policy, Verb
from privilog.engine.authorizer.deciding import NO_ARGUMENTS, Deciding
from privilog.engine.authorizer.loaded import LoadedWorld
from privilog.engine.authorizer.requests import RequestError, Requests
from privilog.engine.decision import Request
from privilog.engine.ids import EntityId


class Listing:
    """What a principal sees of each listable type, decided without explanations."""

    def __init__(self, policy: Policy, loaded: LoadedWorld, requests: Requests, deciding: Deciding):
        self.policy = policy
        self.loaded = loaded
        self.requests = requests
        self.deciding = deciding

    def list_operation(self, entity_type: str) -> Operation:
        """The operation that lists entities of a type (the one the policy marks `shows`)."""
        if self.policy.entity_type(entity_type) is None:
            types = [t.name for t in self.policy.entity_types]
            hint = did_you_mean(entity_type, types) or "types are " + ", ".join(types)
            raise RequestError(f"unknown entity type `{entity_type}`: {hint}")
        for op in self.policy.operations:
            if op.entity_type == entity_type and op.verb is Verb.SHOWS:
                return op
        raise RequestError(f"policy {self.policy.name} has no listing (`shows`) operation for {entity_type}")

    def listable_types(self) -> list[str]:
        """The entity types the policy has a listing (`shows`) operation for."""
        return [op.entity_type for op in self.policy.operations if op.verb is Verb.SHOWS]

    def visible_entities(
        self, principal: str, entity_type: str, within: str | EntityId | None = None
    ) -> list[EntityId]:
        """The existing entities of a type (inside ``within``) that ``principal`` sees, sorted.

        Decided, not explained: each candidate by the listing operation's decision plan
        (CDAP's visibility filter asks only this); ``Authorizer.visible`` adds why.
        """
        op = self.list_operation(entity_type)
        parent = self.requests.entity(within) if within is not None else None
        if parent is not None and entity_type not in _types_inside(self.policy, parent.type):
            raise RequestError(f"{article(entity_type)} is never inside {article(parent.type)} such as `{parent}`")
        loaded = self.loaded
        candidates = loaded.inventory.inside(entity_type, parent)
        if not candidates:
            return []
        who = self.requests.request(principal, op.qualified, candidates[0]).principal
        plan = self.deciding.plan(op.qualified)
        if plan is None or loaded.patterns or loaded.uses_names:  # the request's own facts first (decide)
            return [e for e in candidates if self.deciding.decide(Request(who, op.qualified, e))]
        names = loaded.inventory.inside_names(entity_type, parent)
        return [e for e, name in zip(candidates, names, strict=True) if plan(who, name, NO_ARGUMENTS)]


def _types_inside(policy: Policy, type_name: str) -> set[str]:
    return {t.name for t in policy.entity_types if type_name in ancestor_types(policy, t.name)}
