"""One Ranger access policy: read from its JSON (or refused, saying why), as facts, and as JSON again.

:func:`read_policy` checks a policy of an export and gives a :class:`Policy` (its levels, items
and flags) or the reasons it is refused; :func:`policy_facts` is the translation into the
``ranger_*`` rows (docs/ranger.md has the table); :func:`policy_json` writes a policy in Ranger
Admin's export format. The export (``exporting.py``) runs :func:`policy_facts` on each policy it
rebuilds, so that what it writes imports back to the same rows.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from itertools import product
from typing import Any

from privilog.engine.ids import IdError, parse_principal
from privilog.engine.patterns import parse_pattern
from privilog.ranger.globs import ANY, glob_matches, is_match_any, program_pieces
from privilog.ranger.servicedef import ACCESS_OF, ACCESSES, ENTITY_TYPE, ITEM_KINDS, ITEM_LIST_OF, hierarchy

RELATIONS: dict[str, tuple[str, ...]] = {
    "ranger_user": ("user",),
    "ranger_policy": ("policy", "name"),
    "ranger_override": ("policy",),
    "ranger_deny_all_else": ("policy",),
    "ranger_resource": ("policy", "pattern"),
    "ranger_inside": ("policy", "pattern"),
    "ranger_exclude": ("policy", "pattern"),
    "ranger_item": ("policy", "kind", "principal", "action"),
    "ranger_delegate": ("policy", "principal"),
}
PUBLIC = "public"  # Ranger's group of every user, and `{USER}` in an item's users
GRANT_LABEL = "privilog-grant"  # a policy the export made from a world's grants (read back as grants)
_MACRO = re.compile(r"\{[A-Za-z_.]*\}")

Facts = dict[str, set[tuple[str, ...]]]


def no_facts() -> Facts:
    return {name: set() for name in RELATIONS}


@dataclass(frozen=True)
class Level:
    """A level of a policy's resource: its values and whether they are excluded."""

    name: str
    values: tuple[str, ...]
    excludes: bool = False

    @property
    def match_any(self) -> bool:
        """Ranger's ``isMatchAny``: a value of only ``*``, not excluded (then it also matches no value)."""
        return not self.excludes and any(is_match_any(v) for v in self.values)


@dataclass
class Policy:
    """An enabled access policy of a CDAP service, checked."""

    id: int
    name: str
    levels: list[Level]  # a path of the service def's levels, instance first
    override: bool = False  # policyPriority 1
    deny_all_else: bool = False
    items: set[tuple[str, str, str]] = field(default_factory=set)  # (kind, principal, action)
    delegates: set[str] = field(default_factory=set)
    labels: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"policy {self.id}"


def described(policy: Any) -> str:
    """``policy 12 'finance ledger'``: how a message names a policy of an export."""
    if not isinstance(policy, dict):
        return "a policy"
    return f"policy {policy.get('id', '?')} {str(policy.get('name', ''))!r}"


# ---- a level's values as pieces of privilog ids ------------------------------------------------


def pieces(level: str, value: str) -> list[tuple[str, ...]]:
    """The parts a Ranger value puts into privilog ids at ``level`` (several: a union).

    A match-any value is the any-part (``*``; for a program ``*.*``). A program glob is the union
    of its (type, name glob) pairs (:func:`globs.program_pieces`); an artifact name without a
    version is the name itself and the name followed by any version (``NAME``, ``NAME.*``: the
    version is part of privilog's artifact name, after a dot).
    """
    if level == "program":
        return [tuple(p) for p in program_pieces(value)]
    if is_match_any(value):
        return [(ANY,)]
    if level == "artifact" and not value.endswith("*"):
        return [(value,), (value + ".*",)]
    return [(value,)]


def any_piece(level: str) -> tuple[str, ...]:
    return (ANY, ANY) if level == "program" else (ANY,)


def pattern_text(levels: list[str], parts: tuple[tuple[str, ...], ...], instance: str) -> str:
    """The privilog id (plain or a pattern) of the entities at ``levels[-1]`` whose levels below
    the instance have ``parts``."""
    deepest = levels[-1]
    if deepest == "instance":
        return f"instance:{instance}"
    flat = [p for part in parts for p in part]
    return f"{ENTITY_TYPE[deepest]}:{'.'.join(flat)}"


def _patterns(path: list[str], choices: list[list[tuple[str, ...]]], depth: int, instance: str) -> set[str]:
    """The patterns at ``path[depth]`` for the cross product of ``choices`` (one list per level below instance)."""
    return {pattern_text(path[: depth + 1], combo, instance) for combo in product(*choices[:depth])}


def policy_facts(policy: Policy, instance: str) -> Facts:
    """The rows of one policy (its instance level already matched against ``instance``).

    * ``ranger_resource``: the patterns of the whole resource (each level's values crossed), and
      the resource cut at a level below which every level is a bare ``*`` (Ranger's
      SELF_AND_ALL_DESCENDANTS);
    * ``ranger_inside``: the patterns of each proper prefix of the levels (DESCENDANT);
    * ``ranger_exclude``: per excluded level, each value at that level with every other level
      ``*``, at that level and every level below it (the level itself is ``*`` in the others);
    * the items, delegates, priority and deny-all-else as they are.
    """
    key = policy.key
    facts = no_facts()
    facts["ranger_policy"].add((key, policy.name))
    if policy.override:
        facts["ranger_override"].add((key,))
    if policy.deny_all_else:
        facts["ranger_deny_all_else"].add((key,))
    path = [level.name for level in policy.levels]
    below = policy.levels[1:]
    choices = [
        [any_piece(level.name)] if level.excludes else [p for v in level.values for p in pieces(level.name, v)]
        for level in below
    ]
    deepest = len(path) - 1
    for pattern in _patterns(path, choices, deepest, instance):
        facts["ranger_resource"].add((key, pattern))
    for depth in range(deepest):
        inside = _patterns(path, choices, depth, instance)
        facts["ranger_inside"].update((key, p) for p in inside)
        if all(level.match_any for level in policy.levels[depth + 1 :]):
            facts["ranger_resource"].update((key, p) for p in inside)
    for index, level in enumerate(below):
        if not level.excludes:
            continue
        for value in level.values:
            only = [list(pieces(level.name, value)) if i == index else [any_piece(other.name)]
                    for i, other in enumerate(below)]
            for depth in range(index + 1, deepest + 1):
                facts["ranger_exclude"].update((key, p) for p in _patterns(path, only, depth, instance))
    for kind, principal, action in policy.items:
        facts["ranger_item"].add((key, kind, principal, action))
    for principal in policy.delegates:
        facts["ranger_delegate"].add((key, principal))
    return facts


# ---- reading a policy of an export ------------------------------------------------------------

_VALUE_CHARS = {
    "instance": r"[A-Za-z0-9_\-*?]+",
    "program": r"[A-Za-z0-9_\-.*?]+",
}


def check_value(level: str, value: str) -> str | None:
    """Why ``value`` cannot be a value of ``level`` (privilog's id rules, wildcards allowed), or None."""
    shape = _VALUE_CHARS.get(level)
    if shape is not None and not re.fullmatch(shape, value):
        dot = ", `.`" if level == "program" else ""
        return f"`{value}` is not a valid {level} name (letters, digits, `_`, `-`{dot})"
    if level == "instance":
        return None
    found = pieces(level, value)
    if not found:
        return f"`{value}` matches no program: a program value is TYPE.NAME, TYPE one of mapreduce, spark, " \
               "workflow, service, worker, flow"
    path = {"program": ["namespace", "application", "program"], "application": ["namespace", "application"],
            "namespace": ["namespace"], "principal": ["principal"]}.get(level, ["namespace", level])
    for piece in found:
        parts = tuple(piece if name == level else any_piece(name) for name in path)
        text = pattern_text(["instance", *path], parts, "cdap")
        try:
            parse_pattern(text)
        except IdError:
            return f"`{value}` is not a valid {level} name for privilog's ids ({text} is refused)"
    return None


def _principal(kind: str, name: Any, refuse: list[str]) -> str | None:
    if not isinstance(name, str):
        refuse.append(f"a {kind} of an item is {name!r}, not a name")
        return None
    if kind == "user" and name == "{USER}":
        return PUBLIC
    if kind == "user" and name == "{OWNER}":
        refuse.append("`{OWNER}` in an item's users: CDAP's plugin sends no resource owner, so it never matches")
        return None
    if kind == "group" and name == PUBLIC:
        return PUBLIC
    if _MACRO.search(name):
        refuse.append(f"the macro `{name}` in an item's {kind}s is not supported")
        return None
    try:
        return parse_principal(f"{kind}:{name}")
    except IdError:
        refuse.append(f"`{name}` is not a valid {kind} name (letters, digits and `_ . @ -`)")
        return None


def _items(raw: dict[str, Any], refuse: list[str]) -> tuple[set[tuple[str, str, str]], set[str]]:
    items: set[tuple[str, str, str]] = set()
    delegates: set[str] = set()
    for key, kind in ITEM_KINDS.items():
        listed = raw.get(key) or []
        if not isinstance(listed, list):
            refuse.append(f"`{key}` is not a list")
            continue
        for item in listed:
            if not isinstance(item, dict):
                refuse.append(f"an item of `{key}` is not an object")
                continue
            if item.get("conditions"):
                refuse.append(f"an item of `{key}` has conditions (CDAP's service def defines none)")
            principals = []
            for field_name, kind_name in (("users", "user"), ("groups", "group"), ("roles", "role")):
                names = item.get(field_name) or []
                if not isinstance(names, list):
                    refuse.append(f"`{field_name}` of an item of `{key}` is not a list")
                    continue
                for name in names:
                    principal = _principal(kind_name, name, refuse)
                    if principal is not None:
                        principals.append(principal)
            actions = []
            accesses = item.get("accesses") or []
            if not isinstance(accesses, list):
                refuse.append(f"`accesses` of an item of `{key}` is not a list")
                accesses = []
            for access in accesses:
                kind_of = access.get("type") if isinstance(access, dict) else None
                if not isinstance(kind_of, str) or kind_of not in ACCESSES:
                    refuse.append(f"unknown access type {kind_of!r} (CDAP's are {', '.join(ACCESSES)})")
                    continue
                if access.get("isAllowed", True) is True:
                    actions.append(ACCESSES[kind_of])
            items.update((kind, p, a) for p in principals for a in actions)
            if item.get("delegateAdmin") is True:
                delegates.update(principals)
    return items, delegates


def _levels(raw: dict[str, Any], refuse: list[str]) -> list[Level] | None:
    resources = raw.get("resources")
    if not isinstance(resources, dict) or not resources:
        refuse.append("no `resources`")
        return None
    unknown = [name for name in resources if name not in ENTITY_TYPE]
    if unknown:
        refuse.append(f"unknown resource {', '.join(f'`{n}`' for n in unknown)} (CDAP's service def has "
                      f"{', '.join(ENTITY_TYPE)})")
        return None
    path = hierarchy(set(resources))
    if path is None:
        refuse.append(f"the resources {', '.join(sorted(resources))} are no hierarchy of CDAP's service def "
                      "(instance > namespace > application > program, instance > namespace > dataset, ...)")
        return None
    levels = []
    for name in path:
        spec = resources[name]
        if not isinstance(spec, dict) or not isinstance(spec.get("values"), list):
            refuse.append(f"resource `{name}` has no list of `values`")
            return None
        excludes = spec.get("isExcludes") is True
        if not isinstance(spec.get("isExcludes", False), bool):
            refuse.append(f"`isExcludes` of `{name}` is {spec.get('isExcludes')!r}, not true or false")
        before = len(refuse)
        if excludes and name == "instance":
            refuse.append("`isExcludes` on `instance` (Ranger Admin refuses it: the service def does not support it)")
        values = []
        for value in spec["values"]:
            if not isinstance(value, str):
                refuse.append(f"a value of `{name}` is {value!r}, not text")
                continue
            if value == "":
                continue  # Ranger drops empty values
            if _MACRO.search(value):
                refuse.append(f"the macro in `{name}` value `{value}`: resource macros are not imported")
                continue
            why = check_value(name, value)
            if why:
                refuse.append(why)
                continue
            values.append(value)
        if not values and len(refuse) == before:
            refuse.append(f"resource `{name}` has no values")
        levels.append(Level(name, tuple(dict.fromkeys(values)), excludes))
    return levels


def read_policy(raw: Any) -> tuple[Policy | None, list[str]]:
    """An enabled access policy from an export's JSON, or the reasons it is refused (each one line).

    A disabled policy is not read here: the caller skips it first.
    """
    refuse: list[str] = []
    if not isinstance(raw, dict):
        return None, ["is not a JSON object"]
    policy_id = raw.get("id")
    if isinstance(policy_id, str) and policy_id.isdigit():
        policy_id = int(policy_id)
    if not isinstance(policy_id, int) or isinstance(policy_id, bool):
        refuse.append("has no numeric `id`")
    name = raw.get("name")
    if not isinstance(name, str):
        refuse.append("has no `name`")
    elif not re.fullmatch(r"[^\x00-\x1f\x7f]{1,1000}", name):
        refuse.append("its name is empty, longer than 1000 characters or holds control characters (a fact's value "
                      "cannot)")
    policy_type = raw.get("policyType", 0)
    if policy_type in (1, 2):
        refuse.append(f"is a {'masking' if policy_type == 1 else 'row filter'} policy (policyType {policy_type}): "
                      "CDAP's service def has none, and privilog decides access only")
    elif policy_type not in (0, None):
        refuse.append(f"has an unknown policyType {policy_type!r}")
    if raw.get("conditions"):
        refuse.append("has policy conditions (CDAP's service def defines none)")
    if raw.get("validitySchedules"):
        refuse.append("has validitySchedules (time-limited policies are not imported)")
    if raw.get("additionalResources"):
        refuse.append("has additionalResources (one resource per policy is imported)")
    if raw.get("zoneName"):
        refuse.append(f"is in the security zone {raw.get('zoneName')!r} (zones are not imported)")
    priority = raw.get("policyPriority", 0) or 0
    if priority not in (0, 1):
        refuse.append(f"has policyPriority {priority!r} (0 normal, 1 override)")
    levels = _levels(raw, refuse)
    items, delegates = _items(raw, refuse)
    labels = raw.get("policyLabels") or []
    if refuse or levels is None:
        return None, refuse
    assert isinstance(policy_id, int) and isinstance(name, str)
    return Policy(
        id=policy_id,
        name=name,
        levels=levels,
        override=priority == 1,
        deny_all_else=raw.get("isDenyAllElse") is True,
        items=items,
        delegates=delegates,
        labels=tuple(str(x) for x in labels) if isinstance(labels, list) else (),
    ), []


def instance_matches(policy: Policy, instance: str) -> bool:
    """Whether the policy's instance values match the world's instance name (Ranger's glob match)."""
    return any(glob_matches(v, instance) for v in policy.levels[0].values)


# ---- writing a policy --------------------------------------------------------------------------


def policy_json(policy: Policy, service: str) -> dict[str, Any]:
    """A policy in Ranger Admin's export format (the fields a 2.x export has, in its order)."""
    lists: dict[str, list[dict[str, Any]]] = {key: [] for key in ITEM_KINDS}
    by_kind: dict[tuple[str, str], set[str]] = {}
    for kind, principal, action in policy.items:
        by_kind.setdefault((kind, principal), set()).add(action)
    for kind in ("allow",):
        for principal in policy.delegates:
            by_kind.setdefault((kind, principal), set())
    kind_order = list(ITEM_KINDS.values())
    for (kind, principal), actions in sorted(by_kind.items(), key=lambda kv: (kind_order.index(kv[0][0]), kv[0][1])):
        # an item per principal: its accesses, and whether it is a delegate admin
        delegate = kind == "allow" and principal in policy.delegates
        granted = tuple(a for a in ACCESSES.values() if a in actions)
        principals = [principal]
        users = sorted(p.partition(":")[2] for p in principals if p.startswith("user:"))
        groups_ = sorted(p.partition(":")[2] for p in principals if p.startswith("group:"))
        if PUBLIC in principals:
            groups_ = sorted([*groups_, PUBLIC])
        roles = sorted(p.partition(":")[2] for p in principals if p.startswith("role:"))
        lists[ITEM_LIST_OF[kind]].append({
            "accesses": [{"type": ACCESS_OF[a], "isAllowed": True} for a in granted],
            "users": users,
            "groups": groups_,
            "roles": roles,
            "conditions": [],
            "delegateAdmin": delegate,
        })
    return {
        "service": service,
        "name": policy.name,
        "policyType": 0,
        "policyPriority": 1 if policy.override else 0,
        "description": "",
        "isAuditEnabled": True,
        "resources": {
            level.name: {"values": list(level.values), "isExcludes": level.excludes, "isRecursive": False}
            for level in policy.levels
        },
        **lists,
        "dataMaskPolicyItems": [],
        "rowFilterPolicyItems": [],
        "serviceType": "cdap",
        "options": {},
        "validitySchedules": [],
        "policyLabels": list(policy.labels),
        "zoneName": "",
        "isDenyAllElse": policy.deny_all_else,
        "id": policy.id,
        "guid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"privilog:{service}:{policy.id}")),
        "isEnabled": True,
        "version": 1,
    }
