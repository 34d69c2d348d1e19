"""Random changes over a small vocabulary, and what two deployments are compared on.

Also a command, for a second process on the same store:
``python -m tests.store.random_changes URL SEED COUNT`` makes COUNT changes as ``user:root``.
"""

from __future__ import annotations

import itertools
import random
import sys
from typing import Any

from privilog.store import StoreError, open_store
from privilog.store.deployment import Deployment

PRINCIPALS = ["user:ann", "user:bob", "group:eng", "role:ops"]
ENTITIES = ["namespace:ns1", "dataset:ns1.orders", "application:ns1.etl", "program:ns1.etl.service.api",
            "namespace:ns2", "dataset:ns2.clicks"]
ACTIONS = ["READ", "WRITE", "EXECUTE", "ADMIN"]
OPERATIONS = {"namespace": ["namespace.get", "namespace.update", "namespace.delete"],
              "dataset": ["dataset.read", "dataset.write", "dataset.drop"],
              "application": ["application.get", "application.delete"],
              "program": ["program.start", "program.get"]}


def random_change(rng: random.Random) -> tuple[str, list[Any]]:
    """A kind and its items, as an admin would ask."""
    kind = rng.choice(["grant", "grant", "grant", "revoke", "revoke", "member.add", "member.remove",
                       "entity.add", "entity.add", "entity.delete", "role.drop"])
    if kind in ("grant", "revoke"):
        return kind, [[rng.choice(PRINCIPALS), rng.choice(ACTIONS), rng.choice(ENTITIES)] for _ in range(rng.randint(1, 3))]
    if kind.startswith("member."):
        member = rng.choice(["user:ann", "user:bob", "group:eng"])
        group = rng.choice([p for p in ["group:eng", "role:ops", "group:all"] if p != member])
        return kind, [[member, group]]
    if kind == "role.drop":
        return kind, ["role:ops"]
    return kind, [rng.choice(ENTITIES)]


def decisions(deployment: Deployment) -> dict[str, bool]:
    """Every (principal, operation, entity) of the vocabulary, decided."""
    out = {}
    with deployment.lock:
        authorizer = deployment.authorizer
        for principal, entity in itertools.product(PRINCIPALS, ENTITIES):
            for operation in OPERATIONS[entity.split(":")[0]]:
                out[f"{principal} {operation} {entity}"] = authorizer.allows(principal, operation, entity)
    return out


def state(deployment: Deployment) -> dict[str, Any]:
    """What a deployment holds, comparable across processes."""
    with deployment.lock:
        world = deployment.authorizer.world
        return {
            "seq": deployment.seq,
            "grants": sorted(str(g) for g in world.grants),
            "members": sorted(map(list, world.members)),
            "entities": sorted(map(str, world.entities)),
            "admins": sorted(world.admins),
            "decisions": decisions(deployment),
        }


def main(url: str, seed: int, count: int) -> None:
    rng = random.Random(seed)
    with open_store(url, ACTIONS) as store:
        for _ in range(count):
            kind, items = random_change(rng)
            try:
                store.change("user:root", kind, items)
            except StoreError as error:
                print(error, file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
