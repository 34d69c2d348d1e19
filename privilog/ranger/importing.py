"""A Ranger policies export (and a roles export, and a base world) to a world with Ranger's facts.

:func:`read_json` reads an export, a roles export or a members file; :func:`import_ranger` does the
translation: every policy checked (every refusal collected, then :class:`Refused` with all of
them), each enabled access policy of this instance written as rows (``translate.policy_facts``),
on request a policy the export made from grants (labelled ``privilog-grant``, of a grant's shape)
read back as those grants, the roles' memberships added, and every user named anywhere a ``ranger_user``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from privilog.dsl.errors import PrivilogError
from privilog.dsl.files import read_world_text
from privilog.engine.ids import DEFAULT_INSTANCE, IdError, parse_principal
from privilog.engine.patterns import parse_pattern
from privilog.engine.world import Grant, World, check_membership
from privilog.ranger.servicedef import ENTITY_TYPE
from privilog.ranger.translate import (
    GRANT_LABEL,
    Facts,
    Policy,
    described,
    instance_matches,
    no_facts,
    policy_facts,
    read_policy,
)


class Refused(PrivilogError):
    """Policies (or roles) the import will not translate: every reason, one line each."""

    def __init__(self, lines: list[str]):
        super().__init__("\n".join(lines))
        self.lines = lines


@dataclass
class Imported:
    """What an import makes: the world (base, members, grants read back) and its facts, and what it saw."""

    world: World
    facts: Facts
    policies: int = 0
    imported: int = 0
    disabled: list[str] = field(default_factory=list)
    grants: int = 0  # policies read back as grants
    other_instance: int = 0
    members: int = 0  # memberships added from the roles export and --members
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "policies": self.policies,
            "imported": self.imported,
            "disabled": len(self.disabled),
            "disabled_policies": self.disabled,
            "grant_policies": self.grants,
            "other_instance": self.other_instance,
            "members_added": self.members,
            "users": len(self.facts["ranger_user"]),
            "facts": {relation: len(rows) for relation, rows in self.facts.items()},
            "warnings": self.warnings,
        }


def read_json(path: str | Path, what: str) -> Any:
    """A JSON (or YAML) file's document; a syntax error is one line with its place."""
    text = read_world_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError:
            raise PrivilogError(f"{path}:{error.lineno}:{error.colno}: not JSON: {error.msg}") from None


def policies_of(doc: Any, where: str) -> list[Any]:
    """The policies of a Ranger Admin export (``policies``) or of the plugin's download (``ServicePolicies``)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("policies"), list):
        raise PrivilogError(
            f"{where}: not a Ranger policies export: expected an object with a `policies` list "
            "(Ranger Admin's exportJson, or the plugin's ServicePolicies download)"
        )
    service_def = doc.get("serviceDef")
    if isinstance(service_def, dict) and service_def.get("name") not in (None, "cdap"):
        raise PrivilogError(f"{where}: the service def is {service_def.get('name')!r}, not CDAP's (`cdap`)")
    return list(doc["policies"])


def role_members(doc: Any, where: str, warnings: list[str]) -> set[tuple[str, str]]:
    """The memberships of a Ranger roles export: users, groups and roles in each role."""
    roles = doc.get("roles") if isinstance(doc, dict) else doc
    if not isinstance(roles, list):
        raise PrivilogError(f"{where}: not a Ranger roles export: expected an object with a `roles` list")
    out: set[tuple[str, str]] = set()
    problems = []
    for index, role in enumerate(roles, 1):
        if not isinstance(role, dict) or not isinstance(role.get("name"), str):
            problems.append(f"{where}: role {index} has no `name`")
            continue
        try:
            group = parse_principal(f"role:{role['name']}")
        except IdError as error:
            problems.append(f"{where}: role {role['name']!r}: {error}")
            continue
        if role.get("isEnabled") is False:
            warnings.append(f"role {role['name']!r} is disabled: its members are not imported")
            continue
        for field_name, kind in (("users", "user"), ("groups", "group"), ("roles", "role")):
            listed = role.get(field_name) or []
            if not isinstance(listed, list):
                problems.append(f"{where}: role {role['name']!r}: `{field_name}` is not a list")
                continue
            for member in listed:
                name = member.get("name") if isinstance(member, dict) else member
                if not isinstance(name, str):
                    problems.append(f"{where}: role {role['name']!r}: a member of `{field_name}` has no name")
                    continue
                try:
                    out.add(check_membership(parse_principal(f"{kind}:{name}"), group))
                except IdError as error:
                    problems.append(f"{where}: role {role['name']!r}: {error}")
    if problems:
        raise Refused(problems)
    return out


def members_file(doc: Any, where: str) -> set[tuple[str, str]]:
    """Memberships from ``--members``: a list of [member, group] pairs, or a mapping with ``members:``."""
    pairs = doc.get("members") if isinstance(doc, dict) else doc
    if not isinstance(pairs, list):
        raise PrivilogError(f"{where}: expected a list of [member, group] pairs (or `members:` holding one)")
    out = set()
    for index, pair in enumerate(pairs, 1):
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)):
            raise PrivilogError(f"{where}: member {index}: expected [MEMBER, GROUP], such as [user:alice, group:eng]")
        try:
            out.add(check_membership(parse_principal(pair[0]), parse_principal(pair[1])))
        except IdError as error:
            raise PrivilogError(f"{where}: member {index}: {error}") from None
    return out


def grant_entity(policy: Policy) -> str | None:
    """The id a policy of a grant's shape names (each level one value, none excluded), or None."""
    levels = policy.levels
    if any(level.excludes or len(level.values) != 1 for level in levels):
        return None
    values = {level.name: level.values[0] for level in levels}
    deepest = levels[-1].name
    if deepest == "instance":
        text = f"instance:{values['instance']}"
    elif deepest in ("namespace", "principal"):
        text = f"{ENTITY_TYPE[deepest]}:{values[deepest]}"
    else:
        text = f"{ENTITY_TYPE[deepest]}:" + ".".join(values[level.name] for level in levels[1:])
    try:
        return str(parse_pattern(text))
    except IdError:
        return None


def as_grants(policy: Policy, instance: str) -> list[Grant] | None:
    """The grants a ``privilog-grant`` policy was made from, when it still has a grant's shape."""
    if policy.override or policy.deny_all_else or policy.delegates or policy.levels[0].values != (instance,):
        return None
    if any(kind != "allow" or principal.partition(":")[0] not in ("user", "group", "role")
           for kind, principal, _ in policy.items):
        return None
    entity = grant_entity(policy)
    if entity is None or not policy.items:
        return None
    target = parse_pattern(entity)
    return [Grant(principal, action, target) for _, principal, action in policy.items]


def import_ranger(
    export: Any,
    where: str = "<export>",
    roles: Any = None,
    roles_where: str = "<roles>",
    base: World | None = None,
    members: set[tuple[str, str]] | None = None,
    instance: str | None = None,
    grants_back: bool = False,
) -> Imported:
    """Translate an export into a world: :class:`Refused` with every reason when any policy is refused.

    With ``grants_back``, a policy labelled ``privilog-grant`` (``ranger export`` made it from a
    world's grants) of a grant's shape is read back as those grants, which a policy then decides
    as grants, not as Ranger would (another policy's deny does not take them away); without it,
    it is a Ranger policy like any other.
    """
    world = base if base is not None else World()
    if instance is not None:
        world.instance = instance
    instance = world.instance or DEFAULT_INSTANCE
    result = Imported(world=world, facts=no_facts())
    refusals: list[str] = []
    seen: dict[int, str] = {}
    raws = policies_of(export, where)
    result.policies = len(raws)
    for raw in raws:
        if isinstance(raw, dict) and raw.get("isEnabled") is False:
            result.disabled.append(described(raw))
            continue
        policy, reasons = read_policy(raw)
        if reasons or policy is None:
            refusals.extend(f"{described(raw)}: {reason}" for reason in reasons)
            continue
        if policy.id in seen:
            refusals.append(f"{described(raw)}: its id is also {seen[policy.id]}'s")
            continue
        seen[policy.id] = described(raw)
        if not instance_matches(policy, instance):
            result.other_instance += 1
            result.warnings.append(
                f"{described(raw)}: its instance {list(policy.levels[0].values)} does not match this world's "
                f"`{instance}`: it is about nothing here, not imported"
            )
            continue
        if GRANT_LABEL in policy.labels and grants_back:
            grants = as_grants(policy, instance)
            if grants is not None:
                world.grants.update(grants)
                result.grants += 1
                continue
            result.warnings.append(
                f"{described(raw)}: labelled {GRANT_LABEL} but not of a grant's shape: imported as a Ranger policy"
            )
        if any(level.name == "secure_key" for level in policy.levels):
            result.warnings.append(
                f"{described(raw)}: secure keys: CDAP's plugin asks Ranger about `securekey`, which is no "
                "resource of the service def, so under Ranger this policy matches no request (imported as written)"
            )
        for relation, rows in policy_facts(policy, instance).items():
            result.facts[relation].update(rows)
        result.imported += 1
    added: set[tuple[str, str]] = set()
    if roles is not None:
        try:
            added |= role_members(roles, roles_where, result.warnings)
        except Refused as error:
            refusals.extend(error.lines)
    if refusals:
        raise Refused(refusals)
    labelled = sum(1 for raw in raws if isinstance(raw, dict) and raw.get("isEnabled") is not False
                   and isinstance(raw.get("policyLabels"), list) and GRANT_LABEL in raw["policyLabels"])
    if labelled and not grants_back:
        result.warnings.append(
            f"{labelled} policies labelled {GRANT_LABEL} imported as Ranger policies (--grants-back reads them "
            "back as the grants they were exported from)"
        )
    added |= members or set()
    result.members = len(added - world.members)
    world.members |= added
    users = {p for _, _, p, _ in result.facts["ranger_item"] if p.startswith("user:")}
    users |= {p for _, p in result.facts["ranger_delegate"] if p.startswith("user:")}
    users |= {p for pair in world.members for p in pair if p.startswith("user:")}
    users |= {g.principal for g in world.grants if g.principal.startswith("user:")}
    result.facts["ranger_user"] = {(u,) for u in users}
    return result
