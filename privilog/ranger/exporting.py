"""A world's Ranger facts and grants back to a Ranger Admin policies export (and a roles export).

Each ``ranger_policy`` is rebuilt from its rows: the levels from its patterns (the whole
resource's patterns factored into a product of each level's values; a program's (type, name)
pairs covered by Ranger globs; an artifact's ``NAME`` and ``NAME.*`` joined again), the excluded
levels from its ``ranger_exclude`` rows, its items grouped by principal and access. A rebuilt
policy is translated again (``translate.policy_facts``) and must give exactly the rows it came
from: what the export writes, the import reads back to the same world, or the export refuses
that policy, saying so. A grant becomes one policy per entity (or pattern) it names, labelled
``privilog-grant`` so that the import reads it back as those grants.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from itertools import combinations, product
from typing import Any

from privilog.engine.world import World
from privilog.ranger.globs import ANY
from privilog.ranger.importing import Refused
from privilog.ranger.servicedef import ACCESS_OF, LEVEL_OF_TYPE, path_to
from privilog.ranger.translate import (
    GRANT_LABEL,
    PUBLIC,
    RELATIONS,
    Facts,
    Level,
    Policy,
    pieces,
    policy_facts,
    policy_json,
    read_policy,
)

Piece = tuple[str, ...]


def split_pattern(text: str) -> tuple[str, list[Piece]]:
    """A pattern's level (the service def's name) and its pieces per level below the instance."""
    kind, _, name = text.partition(":")
    level = LEVEL_OF_TYPE[kind]
    if level == "instance":
        return level, []
    if level in ("namespace", "principal"):
        return level, [(name,)]
    if level == "application":
        ns, app = name.split(".", 1)
        return level, [(ns,), (app,)]
    if level == "program":
        ns, app, kind_, prog = name.split(".", 3)
        return level, [(ns,), (app,), (kind_, prog)]
    ns, _, rest = name.partition(".")
    return level, [(ns,), (rest,)]


def _cover(found: set[Piece], level: str) -> list[str] | None:
    """Ranger values whose pieces at ``level`` are exactly ``found`` (a greedy cover of candidates)."""
    if level != "program":
        names = {p[0] for p in found}
        if level != "artifact":
            return sorted(names)
        values = []
        rest = set(names)
        for name in sorted(names):
            if not name.endswith("*") and name + ".*" in names:
                values.append(name)
                rest -= {name, name + ".*"}
        return sorted(values + sorted(rest))
    candidates: set[str] = {"?*"}
    for kind, prog in found:
        candidates.add(f"{kind}.{prog}")
        if prog.startswith("*"):
            word = kind + "."
            candidates.update(word[:i] + prog for i in range(len(word)))
    if (ANY, ANY) in found:
        candidates.add(ANY)
    usable = {c: set(pieces("program", c)) for c in candidates}
    usable = {c: p for c, p in usable.items() if p and p <= found}
    chosen: list[str] = []
    left = set(found)
    while left:
        best = max(usable, key=lambda c: (len(usable[c] & left), "." in c, -len(c), c), default=None)
        if best is None or not usable[best] & left:
            return None
        chosen.append(best)
        left -= usable[best]
    return sorted(chosen)


def by_policy(facts: Facts) -> dict[str, Facts]:
    """Each policy's rows of the ``ranger_*`` relations (but ``ranger_user``), by its key."""
    out: dict[str, Facts] = {}
    for relation, rows in facts.items():
        if relation not in RELATIONS or relation == "ranger_user":
            continue
        for row in rows:
            if row:
                out.setdefault(row[0], {}).setdefault(relation, set()).add(row)
    return out


def rebuild(key: str, mine: Facts, instance: str) -> Policy:
    """The policy whose translation is exactly ``mine``, ``key``'s rows; :class:`ValueError` saying why none is."""
    match = re.fullmatch(r"policy (\d+)", key)
    if match is None:
        raise ValueError("its key is not `policy ID`")
    names = [row[1] for row in mine.get("ranger_policy", ())]
    if len(names) != 1:
        raise ValueError(f"it has {len(names)} ranger_policy rows")
    resources = [row[1] for row in mine.get("ranger_resource", ())]
    if not resources:
        raise ValueError("it has no ranger_resource row")
    split = [split_pattern(p) for p in resources]
    deepest = max((level for level, _ in split), key=lambda level: len(path_to(level)))
    path = path_to(deepest)
    full = {tuple(parts) for level, parts in split if level == deepest}
    per_level = [{combo[i] for combo in full} for i in range(len(path) - 1)]
    if set(product(*per_level)) != full:
        raise ValueError("its resource patterns are not a product of each level's values")
    excluded: dict[int, set[Piece]] = {}
    any_excluded = False
    for pattern in (row[1] for row in mine.get("ranger_exclude", ())):
        level, parts = split_pattern(pattern)
        if level != deepest:
            continue
        named = [i for i, part in enumerate(parts) if set(part) != {ANY}]
        if len(named) > 1:
            raise ValueError(f"its exclude pattern {pattern} names more than one level")
        if named:
            excluded.setdefault(named[0], set()).add(parts[named[0]])
        else:
            any_excluded = True
    values: list[list[str]] = []
    for i, found in enumerate(per_level):
        level = path[i + 1]
        if i in excluded:
            covered = _cover(excluded[i], level)
        elif found == {(ANY,) if level != "program" else (ANY, ANY)}:
            covered = [ANY]
        else:
            covered = _cover(found, level)
        if covered is None:
            raise ValueError(f"no Ranger values give its {level} patterns")
        values.append(covered)
    items = {(kind, principal, action) for _, kind, principal, action in mine.get("ranger_item", ())}
    delegates = {principal for _, principal in mine.get("ranger_delegate", ())}
    wild = [i for i, found in enumerate(per_level) if found in ({(ANY,)}, {(ANY, ANY)})]
    choices: list[tuple[int, ...]] = [()]
    if any_excluded:
        choices = [c for n in range(1, len(wild) + 1) for c in combinations(wild, n)]
    for star in choices:
        levels = [Level("instance", (instance,))]
        for i, level in enumerate(path[1:]):
            if i in excluded or i in star:
                extra = [ANY] if i in star else []
                levels.append(Level(level, tuple(dict.fromkeys(values[i] + extra)) if i in excluded else (ANY,), True))
            else:
                levels.append(Level(level, tuple(values[i])))
        policy = Policy(
            id=int(match.group(1)),
            name=names[0],
            levels=levels,
            override=bool(mine.get("ranger_override")),
            deny_all_else=bool(mine.get("ranger_deny_all_else")),
            items=items,
            delegates=delegates,
        )
        again = policy_facts(policy, instance)
        if all(again.get(r, set()) == mine.get(r, set()) for r in set(again) | set(mine)):
            return policy
    raise ValueError("no Ranger policy translates to exactly its rows (were they edited by hand?)")


def _grant_levels(entity: str, instance: str) -> list[Level]:
    kind, _, name = entity.partition(":")
    level = LEVEL_OF_TYPE.get(kind)
    if level is None:
        raise ValueError(f"{kind} is no Ranger resource of CDAP's service def")
    path = path_to(level)
    if level == "instance":
        return [Level("instance", (name,))]
    if level in ("namespace", "principal"):
        parts = [name]
    elif level == "application":
        parts = name.split(".", 1)
    elif level == "program":
        parts = name.split(".", 2)
    else:
        parts = list(name.partition(".")[::2])
    return [Level("instance", (instance,)), *(Level(lv, (v,)) for lv, v in zip(path[1:], parts, strict=True))]


def grant_policies(world: World, first_id: int) -> tuple[list[Policy], list[str]]:
    """One policy per entity the world's grants name: an allow item per principal, an access per action."""
    by_entity: dict[str, set[tuple[str, str]]] = {}
    refusals: list[str] = []
    for grant in sorted(world.grants):
        actions = ["READ", "WRITE", "EXECUTE", "ADMIN"] if grant.action == "ALL" else [grant.action]
        bad = [a for a in actions if a not in ACCESS_OF]
        if bad:
            refusals.append(f"grant {grant}: {bad[0]} is no Ranger access of CDAP's (read, write, execute, admin)")
            continue
        by_entity.setdefault(str(grant.entity), set()).update((grant.principal, a) for a in actions)
    policies = []
    for offset, entity in enumerate(sorted(by_entity)):
        try:
            levels = _grant_levels(entity, world.instance)
        except ValueError as error:
            refusals.append(f"grants on {entity}: {error}")
            continue
        if levels[0].values != (world.instance,):
            refusals.append(f"grants on {entity}: not this world's instance `{world.instance}`")
            continue
        policy = Policy(
            id=first_id + offset,
            name=f"privilog grant: {entity}",
            levels=levels,
            items={("allow", p, a) for p, a in by_entity[entity]},
            labels=(GRANT_LABEL,),
        )
        _, reasons = read_policy(policy_json(policy, "check"))
        if reasons:
            refusals.append(f"grants on {entity}: as a Ranger policy: {reasons[0]}")
            continue
        policies.append(policy)
    return policies, refusals


def roles_export(members: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """The world's memberships in roles as a Ranger roles export."""
    roles: dict[str, dict[str, list[str]]] = {}
    for member, group in sorted(members):
        if not group.startswith("role:"):
            continue
        kind, _, name = member.partition(":")
        entry = roles.setdefault(group.partition(":")[2], {"users": [], "groups": [], "roles": []})
        entry[f"{kind}s"].append(name)
    return {
        "metaDataInfo": {"Exported by": "privilog", "Exported count": len(roles)},
        "roles": [
            {
                "name": name,
                "description": "",
                "options": {},
                "users": [{"name": u, "isAdmin": False} for u in entry["users"]],
                "groups": [{"name": g, "isAdmin": False} for g in entry["groups"]],
                "roles": [{"name": r, "isAdmin": False} for r in entry["roles"]],
                "id": index,
                "isEnabled": True,
            }
            for index, (name, entry) in enumerate(sorted(roles.items()), 1)
        ],
    }


def export_ranger(world: World, facts: Facts, service: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The export, the roles export and a summary; :class:`Refused` with every policy or grant that cannot be."""
    refusals: list[str] = []
    policies: list[Policy] = []
    keys = sorted({row[0] for row in facts.get("ranger_policy", ())}, key=_order)
    rows = by_policy(facts)
    orphans = set(rows) - set(keys)
    refusals.extend(f"{key}: has rows but no ranger_policy row: cannot be exported" for key in sorted(orphans))
    for key in keys:
        try:
            policies.append(rebuild(key, rows[key], world.instance))
        except ValueError as error:
            refusals.append(f"{key}: cannot be exported: {error}")
    first = max((p.id for p in policies), default=0) + 1
    made, refused = grant_policies(world, first)
    refusals.extend(refused)
    if refusals:
        raise Refused(refusals)
    doc = {
        "metaDataInfo": {"Exported by": "privilog", "Ranger apache version": "2.4.0"},
        "policies": [policy_json(p, service) for p in policies + made],
        "startIndex": 0,
        "pageSize": 0,
        "totalCount": 0,
        "resultSize": 0,
        "queryTimeMS": 0,
    }
    roles = roles_export(world.members)
    elsewhere = sorted(m for m in world.members if not m[1].startswith("role:"))
    summary = {
        "policies": len(policies),
        "grant_policies": len(made),
        "roles": len(roles["roles"]),
        "memberships_not_exported": len(elsewhere),
        "public": any(row[2] == PUBLIC for row in facts.get("ranger_item", ())),
    }
    return doc, roles, summary


def _order(key: str) -> tuple[int, str]:
    match = re.fullmatch(r"policy (\d+)", key)
    return (int(match.group(1)) if match else -1, key)

