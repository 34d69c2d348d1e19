"""The floor: cdap.policy for the benchmarked operations, hand-coded over Python dicts and sets.

What a programmer would write for this one policy and nothing else: no
policy language, no explanations, ids split with string methods and not
validated beyond their type prefix. It answers from strings, like the other
engines, and keeps its indexes current under grant and revoke (memberships
and entities are fixed after load).

Indexes, built from a world in the file format (``World.to_data()``):

* ``grants[principal][entity]``: the actions held, as bits (``BIT``), for
  every grant (on an existing entity or not): a small int, not a set per
  grant (at 10^7 grants a set each would be 2 GiB);
* ``groups[principal]``: the principal and every group or role it is in;
* ``inside[place][type]``: the existing entities of a type strictly inside a
  namespace or application;
* ``held_inside[principal][place]``: how many grants the principal itself
  holds on ids strictly inside ``place``, existing or not (any action);
* ``held_by_place[principal][(place, type)]``: the existing entities of a type
  the principal holds something on, in a list, by namespace or application
  (``visible`` asks within one); the places and keys made once each (at 10^7
  grants a copy per grant, and a Counter per key, were 5 GiB and more).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

ACTIONS = ("READ", "WRITE", "EXECUTE", "ADMIN")
BIT = {action: 1 << i for i, action in enumerate(ACTIONS)}
TRUE_WORDS = {"true", "yes", "1", "on"}
_NAMESPACE_CHILDREN = {"artifact", "application", "dataset", "dataset_module", "dataset_type", "stream", "securekey"}
_OPERATION_TYPES = {
    "dataset.read": "dataset",
    "dataset.list": "dataset",
    "namespace.get": "namespace",
    "namespace.delete": "namespace",
    "application.deploy": "application",
    "dataset.create": "dataset",
}


def ancestors(entity: str, instance: str = "cdap") -> list[str]:
    """The entities enclosing ``entity`` (``type:name``), nearest first, from the id alone."""
    kind, _, name = entity.partition(":")
    if kind == "namespace":
        return [f"instance:{instance}"]
    if kind in _NAMESPACE_CHILDREN:
        return [f"namespace:{name.partition('.')[0]}", f"instance:{instance}"]
    if kind in ("program", "schedule"):
        ns, app = name.split(".", 2)[:2]
        return [f"application:{ns}.{app}", f"namespace:{ns}", f"instance:{instance}"]
    return []


def existing_entities(data: Mapping[str, Any]) -> set[str]:
    """The entities listed in a world and every entity enclosing one."""
    instance = data.get("instance", "cdap")
    out: set[str] = set()
    for entity in data.get("entities", ()):
        if entity not in out:
            out.add(entity)
            out.update(ancestors(entity, instance))
    return out


def grant_rows(data: Mapping[str, Any]) -> Iterable[tuple[str, str, str]]:
    """(principal, action, entity) of each grant in a world, ``ALL`` spelled out."""
    for principal, action, entity in data.get("grants", ()):
        if action == "ALL":
            for a in ACTIONS:
                yield principal, a, entity
        else:
            yield principal, action, entity


class Floor:
    """cdap.policy's checks for the benchmarked operations over hand-made indexes."""

    name = "floor"

    def __init__(self, data: Mapping[str, Any]):
        self.instance = data.get("instance", "cdap")
        self.existing = existing_entities(data)
        self.grants: dict[str, dict[str, int]] = defaultdict(dict)
        self.held_inside: dict[str, Counter[str]] = defaultdict(Counter)
        self.held_by_place: dict[str, dict[tuple[str, str], list[str]]] = defaultdict(dict)
        self._one: dict[Any, Any] = {}  # each place and (place, type) key, made once
        self.inside: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        for entity in self.existing:
            kind = entity.partition(":")[0]
            for place in ancestors(entity, self.instance)[:-1]:  # namespaces and applications, not the instance
                self.inside[place][kind].append(entity)
        self.inside = {place: dict(types) for place, types in self.inside.items()}  # type: ignore[assignment]
        for principal, action, entity in grant_rows(data):
            self.grant(principal, action, entity)
        direct: dict[str, list[str]] = defaultdict(list)
        for member, group in data.get("members", ()):
            direct[member].append(group)
        self.groups: dict[str, tuple[str, ...]] = {}
        for principal in direct:
            found = [principal]
            seen = {principal}
            for current in found:
                for group in direct.get(current, ()):
                    if group not in seen:
                        seen.add(group)
                        found.append(group)
            self.groups[principal] = tuple(found)
        self._checks: dict[str, Callable[[tuple[str, ...], str, Mapping[str, Any]], bool]] = {
            "dataset.read": lambda who, e, args: self._holds(who, "READ", e),
            "dataset.list": lambda who, e, args: self._holds_any(who, e),
            "namespace.get": self._self_or_descendant_any,
            "namespace.delete": self._delete,
            "application.deploy": self._deploy,
            "dataset.create": self._create_dataset,
        }

    # ---- changes --------------------------------------------------------------------

    def _places(self, entity: str) -> list[str]:
        """``ancestors``, each place the same string object every time."""
        one = self._one
        return [one.setdefault(place, place) for place in ancestors(entity, self.instance)]

    def grant(self, principal: str, action: str, entity: str) -> bool:
        held = self.grants[principal]
        bits = held.get(entity, 0)
        bit = BIT[action]
        if bits & bit:
            return False
        held[entity] = bits | bit
        places = self._places(entity)
        inside = self.held_inside[principal]
        for place in places:  # by id, existing or not: cdap.policy's `self or within`
            inside[place] += 1
        if not bits and entity in self.existing:  # the principal's first action on it
            kind = entity.partition(":")[0]
            by_place = self.held_by_place[principal]
            one = self._one
            for place in places[:-1]:  # namespaces and applications, not the instance
                key = (place, kind)
                found = by_place.get(key)
                if found is None:
                    by_place[one.setdefault(key, key)] = [entity]
                else:
                    found.append(entity)
        return True

    def revoke(self, principal: str, action: str, entity: str) -> bool:
        held = self.grants.get(principal, {})
        bits = held.get(entity, 0)
        bit = BIT[action]
        if not bits & bit:
            return False
        if bits == bit:
            del held[entity]
        else:
            held[entity] = bits & ~bit
        places = self._places(entity)
        inside = self.held_inside[principal]
        for place in places:
            inside[place] -= 1
            if not inside[place]:
                del inside[place]
        if bits == bit and entity in self.existing:  # its last action on it
            kind = entity.partition(":")[0]
            by_place = self.held_by_place[principal]
            for place in places[:-1]:
                found = by_place[(place, kind)]
                found.remove(entity)
                if not found:
                    del by_place[(place, kind)]
        return True

    # ---- checks ---------------------------------------------------------------------

    def principals(self, principal: str) -> tuple[str, ...]:
        return self.groups.get(principal) or (principal,)

    def _holds(self, who: tuple[str, ...], action: str, entity: str) -> bool:
        grants = self.grants
        bit = BIT[action]
        for p in who:
            held = grants.get(p)
            if held and held.get(entity, 0) & bit:
                return True
        return False

    def _holds_any(self, who: tuple[str, ...], entity: str) -> bool:
        grants = self.grants
        for p in who:
            held = grants.get(p)
            if held and held.get(entity):
                return True
        return False

    def _self_or_descendant_any(self, who: tuple[str, ...], entity: str, args: Mapping[str, Any]) -> bool:
        if self._holds_any(who, entity):
            return True
        held_inside = self.held_inside
        return any(p in held_inside and held_inside[p].get(entity) for p in who)

    def _delete(self, who: tuple[str, ...], entity: str, args: Mapping[str, Any]) -> bool:
        if not self._holds(who, "ADMIN", entity):
            return False
        return all(
            self._holds(who, "ADMIN", d) for found in self.inside.get(entity, {}).values() for d in found
        )

    def _deploy(self, who: tuple[str, ...], entity: str, args: Mapping[str, Any]) -> bool:
        if not self._holds(who, "ADMIN", entity):
            return False
        artifact = args.get("artifact")
        if artifact is None:
            return False
        if str(args.get("new_artifact", "")).strip().lower() in TRUE_WORDS:
            if not self._holds(who, "ADMIN", artifact):
                return False
        elif not self._holds_any(who, artifact):
            return False
        owner = args.get("owner")
        return owner is None or self._holds(who, "ADMIN", owner)

    def _create_dataset(self, who: tuple[str, ...], entity: str, args: Mapping[str, Any]) -> bool:
        """ADMIN on the new dataset (granted before it exists), any on its type, ADMIN on its owner."""
        if not self._holds(who, "ADMIN", entity):
            return False
        dataset_type = args.get("dataset_type")
        if dataset_type is not None and not self._holds_any(who, dataset_type):
            return False
        owner = args.get("owner")
        return owner is None or self._holds(who, "ADMIN", owner)

    def allows(self, principal: str, operation: str, entity: str, args: Mapping[str, Any] | None = None) -> bool:
        """Whether ``principal`` may do ``operation`` on ``entity``; KeyError/ValueError on bad input."""
        check = self._checks[operation]
        if entity.partition(":")[0] != _OPERATION_TYPES[operation]:
            raise ValueError(f"{operation} acts on a {_OPERATION_TYPES[operation]}, not {entity}")
        return check(self.groups.get(principal) or (principal,), entity, args or {})

    def visible(self, principal: str, entity_type: str, within: str) -> set[str]:
        """The existing entities of a type inside ``within`` that the principal may list (any privilege)."""
        out: set[str] = set()
        key = (within, entity_type)
        by_place = self.held_by_place
        for p in self.groups.get(principal) or (principal,):
            places = by_place.get(p)
            if places:
                found = places.get(key)
                if found:
                    out.update(found)
        return out
