"""A denial under `ranger-cdap` explained in Ranger's words: which policy denied it, or that none allows it.

`privilog why` names what is unmet; under Ranger the reason is a policy of the service: a deny item,
a deny-all-else policy, or no policy allowing the access. These lines follow the tree (docs/ranger.md).
"""

from __future__ import annotations

from typing import Any

from privilog.engine.decision import Decision

RELATION = "ranger_denies"


def reads_ranger(authorizer: Any) -> bool:
    """Whether the authorizer's policy is Ranger's evaluation (it derives ``ranger_denies``)."""
    return any(rule.head.predicate == RELATION for rule in authorizer.policy.rules)


def ranger_reasons(authorizer: Any, decision: Decision) -> list[str]:
    """For each action an unmet requirement names on the request's entity (or on what an `every` lacks),
    the Ranger policies that deny it to the principal, or that none allows it. [] for an allow or a
    policy that does not read Ranger's facts."""
    if decision.allowed or not reads_ranger(authorizer):
        return []
    request = decision.request
    actions = set(authorizer.policy.actions)
    names = {row[0]: row[1] for row in authorizer.backend.query("ranger_policy")}
    lines: list[str] = []
    for outcome in decision.unmet:
        asked = [word.strip(",") for word in outcome.text.replace("|", " ").split() if word.strip(",") in actions]
        entities = [str(e) for e in outcome.lacking] or [str(request.entity)]
        for entity in entities:
            for action in dict.fromkeys(asked):
                rows = authorizer.backend.query(RELATION, {0: request.principal, 1: action, 2: entity})
                denying = sorted({row[3] for row in rows})
                if entity.startswith("securekey:"):
                    lines.append(
                        f"Ranger: no policy is about {entity}: CDAP's plugin asks about `securekey`, "
                        "which the service definition names `secure_key`"
                    )
                elif denying:
                    by = ", ".join(f"{key} {names.get(key, '')!r}" for key in denying)
                    lines.append(f"Ranger: {by} denies {action} on {entity} to {request.principal}")
                else:
                    lines.append(f"Ranger: no policy allows {action} on {entity} to {request.principal}")
    if decision.fixes:
        lines.append("Ranger: CDAP refuses grants under Ranger: make a change above as a policy in Ranger Admin")
    return list(dict.fromkeys(lines))
