"""A process bound to a world file that grants and revokes until it is killed or done (for the crash tests).

    python tests/crash/world_writer.py WORLD SEED PREFIX [CHANGES]

Each change grants or revokes READ, WRITE and EXECUTE at once on one of its keys (a principal
``user:PREFIX_N`` and a dataset), whichever changes something. Before a change it prints
``begin grant|revoke PRINCIPAL DATASET``, and after the change returns ``ack grant|revoke ...``,
each flushed: what the test reads to know which changes were acknowledged.
"""

from __future__ import annotations

import random
import sys

import privilog
from privilog import EntityId, Grant

ACTIONS = ("READ", "WRITE", "EXECUTE")
KEYS = 6


def main() -> None:
    world, seed, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    changes = int(sys.argv[4]) if len(sys.argv) > 4 else -1
    rng = random.Random(seed)
    authz = privilog.load("cdap", world, bind=True)
    while changes != 0:
        changes -= 1
        principal = f"user:{prefix}_{rng.randrange(KEYS)}"
        dataset = f"dataset:ns1.d{rng.randrange(KEYS)}"
        grants = [Grant(principal, action, EntityId.parse(dataset)) for action in ACTIONS]
        kind = "revoke" if grants[0] in authz.world.grants else "grant"
        print(f"begin {kind} {principal} {dataset}", flush=True)
        (authz.grant if kind == "grant" else authz.revoke)("user:root", grants)
        print(f"ack {kind} {principal} {dataset}", flush=True)


if __name__ == "__main__":
    main()
