"""Who may do an operation on an entity: the reverse of a check, over the world's principals.

The REPL's ``who`` and ``privilog who`` both ask :func:`who`; it checks every
principal the world names (users first) in one evaluation and keeps the allowed
decisions, each with the grants that met its requirements.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from privilog.engine.authorizer import Authorizer
from privilog.engine.decision import Decision, Request

ANYONE = "user:anyone"  # asked when the world names no principal, so that the request is still checked


@dataclass(frozen=True)
class Who:
    """The principals allowed an operation on an entity, out of the ``checked`` ones the world names.

    ``request`` is the request as asked of the first principal checked (its operation,
    entity and arguments are those of every other).
    """

    request: Request
    checked: int
    allowed: tuple[Decision, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "operation": self.request.operation,
            "entity": str(self.request.entity),
            "args": self.request.arguments(),
            "checked": self.checked,
            "allowed": [
                {
                    "principal": d.request.principal,
                    "because": [o.witnesses[0].to_json() for o in d.outcomes if o.witnesses],
                }
                for d in self.allowed
            ],
        }


def who(authorizer: Authorizer, operation: str, entity: str, args: Mapping[str, object] | None = None) -> Who:
    """Every principal of the authorizer's world that may do ``operation`` on ``entity``."""
    principals = sorted(authorizer.world.principals(), key=lambda p: (p.split(":")[0] != "user", p))
    if not principals:
        return Who(authorizer.request(ANYONE, operation, entity, args), 0, ())
    requests = [authorizer.request(p, operation, entity, args) for p in principals]
    decisions = authorizer.check_many(requests, explain_denials=False)
    return Who(requests[0], len(principals), tuple(d for d in decisions if d.allowed))
