"""Ranger's policies read as CDAP would hold them: the grants their allow items would be.

`privilog diff ranger-cdap cdap-5.1 --world IMPORTED` compares Ranger's reading of a
deployment's policies with CDAP's. A policy that does not read Ranger's facts (cdap-5.1, cdap)
decides on what CDAP's own authorizer would hold had the same allow items been granted through
CDAP: each allow item's principal holds its actions on the policy's whole resource (each level's
values crossed; `*` as CDAP's wildcard). What CDAP has no counterpart for is not read, and said:
deny items, exceptions, excluded levels (such a policy is left out whole: CDAP would grant more),
deny-all-else, override priority and the shorter resource Ranger's bare `*` also covers. `public`
is every user the world knows. Secure-key policies are read as written (CDAP's own authorizer
has no plugin's mismatch).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from privilog.engine.world import World, world_from_data
from privilog.ranger.exporting import by_policy, rebuild
from privilog.ranger.translate import RELATIONS, Facts, whole_patterns
from privilog.ranger.worldfile import ACTIONS


@dataclass
class CdapReading:
    """The world of grants, and what of Ranger's policies it could not read."""

    world: World
    unread: list[str] = field(default_factory=list)  # one line per policy or item kind left out

    def note(self, policy: str) -> str:
        """One line for a user: who reads the policies as grants, and how many parts were not read."""
        left = f"; not read: {len(self.unread)} ({'; '.join(self.unread[:3])}{', ...' if len(self.unread) > 3 else ''})"
        return (
            f"note: {policy} does not read Ranger's policies: it decides on their allow items as CDAP grants"
            + (left if self.unread else "")
        )


def reads_ranger(relations: set[str]) -> bool:
    """Whether a policy declaring ``relations`` reads Ranger's facts itself."""
    return "ranger_item" in relations


def cdap_reading(world: World) -> CdapReading:
    """``world`` with its Ranger facts replaced by the grants CDAP would hold for their allow items."""
    facts: Facts = {r: set(rows) for r, rows in world.facts.items()}
    users = sorted(row[0] for row in facts.get("ranger_user", ()))
    grants: set[tuple[str, str, str]] = set()
    unread: list[str] = []
    for key, mine in sorted(by_policy(facts).items()):
        name = next(iter(mine.get("ranger_policy", {(key, "")})))[1]
        try:
            policy = rebuild(key, mine, world.instance)
        except ValueError as error:
            unread.append(f"{key} {name!r}: {error}")
            continue
        if any(level.excludes for level in policy.levels):
            unread.append(f"{key} {name!r}: an excluded level")
            continue
        lacking = sorted({kind for kind, _, _ in policy.items} - {"allow"})
        if lacking or policy.deny_all_else or policy.override:
            flags = [f for f, on in (("deny-all-else", policy.deny_all_else), ("override", policy.override)) if on]
            what = [*lacking, *flags]
            unread.append(f"{key} {name!r}: {', '.join(what)}")
        patterns = whole_patterns(policy, world.instance)
        for kind, principal, action in policy.items:
            if kind != "allow":
                continue
            for holder in users if principal == "public" else [principal]:
                grants.update((holder, action, pattern) for pattern in patterns)
    data = world.to_data()
    data["facts"] = {r: rows for r, rows in data.get("facts", {}).items() if r not in RELATIONS}
    data["grants"] = list(data.get("grants", [])) + [list(g) for g in sorted(grants)]
    return CdapReading(world_from_data(data, ACTIONS), unread)
