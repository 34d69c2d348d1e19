"""Grant and revoke applied in memory, timed alone: the engines benchmark's `changes` figure, quickly.

    python -m benchmarks.engines.churn WORLD.json [--backend compiled] [--changes 200] [--rounds 3]
                                                  [--profile N] [--json]

Loads the world file (as ``benchmarks.engines.load`` does), draws ``--changes`` grants
(READ on an existing dataset, each to a user the world's grants name and who may not read
it: seeded), and applies each as the benchmark does: ``Authorizer.grant`` of one Grant made
from the strings, then a check that must allow, ``Authorizer.revoke``, a check that must
deny. Only the grant and the revoke are timed; ``--rounds`` passes over the same changes.
Prints p50 / p99 in microseconds (wall time, the collector on, the loaded world frozen as
the benchmark freezes it); with ``--profile N``, a cProfile of N grant and revoke pairs.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import pstats
import random
import time

from privilog.engine.authorizer import Authorizer
from privilog.engine.ids import EntityId
from privilog.engine.world import Grant

from privilog import dsl
from privilog.api import load_world_for


def _quantile(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.engines.churn", description=__doc__.split("\n\n")[0])
    parser.add_argument("world", help="a world file (the benchmark's generator writes one per size)")
    parser.add_argument("--backend", default="compiled")
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=38)
    parser.add_argument("--profile", type=int, default=0, metavar="N")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    policy = dsl.load_policy("cdap")
    began = time.perf_counter()
    world = load_world_for(policy, args.world)
    authz = Authorizer(policy, world, args.backend)
    load_s = time.perf_counter() - began
    gc.collect()
    gc.freeze()

    admin = min(world.admins)
    users = sorted({g.principal for g in world.grants if g.principal.startswith("user:")})
    datasets = sorted(str(e) for e in world.entities if e.type == "dataset")
    held = {(g.principal, g.action, str(g.entity)) for g in world.grants}
    rng = random.Random(args.seed)
    changes: list[tuple[str, str, str]] = []
    while len(changes) < args.changes:
        change = (rng.choice(users), "READ", rng.choice(datasets))
        if change not in held and change not in changes and authz.allows(change[0], "dataset.read", change[2]) is False:
            changes.append(change)

    grant, revoke, allows, parse, clock = authz.grant, authz.revoke, authz.allows, EntityId.parse, time.perf_counter_ns
    granting: list[int] = []
    revoking: list[int] = []
    gc.collect()
    for _ in range(args.rounds):
        for principal, action, entity in changes:
            t0 = clock()
            grant(admin, [Grant(principal, action, parse(entity))])
            t1 = clock()
            if allows(principal, "dataset.read", entity) is not True:
                raise SystemExit(f"grant not seen: {principal} {action} {entity}")
            t2 = clock()
            revoke(admin, [Grant(principal, action, parse(entity))])
            t3 = clock()
            if allows(principal, "dataset.read", entity) is not False:
                raise SystemExit(f"revoke not seen: {principal} {action} {entity}")
            granting.append(t1 - t0)
            revoking.append(t3 - t2)
    found = {
        "grants": len(world.grants), "load_s": round(load_s, 2), "n": len(granting),
        "grant_p50_us": _quantile(granting, 0.5), "grant_p99_us": _quantile(granting, 0.99),
        "revoke_p50_us": _quantile(revoking, 0.5), "revoke_p99_us": _quantile(revoking, 0.99),
    }
    if args.json:
        print(json.dumps(found))
    else:
        print(f"{found['grants']:,} grants (loaded in {load_s:.1f} s), {len(granting)} changes: "
              f"grant p50 {found['grant_p50_us']:.1f} / p99 {found['grant_p99_us']:.1f} µs, "
              f"revoke p50 {found['revoke_p50_us']:.1f} / p99 {found['revoke_p99_us']:.1f} µs")
    if args.profile:
        pairs = (changes * (args.profile // len(changes) + 1))[: args.profile]
        profile = cProfile.Profile()
        profile.enable()
        for principal, action, entity in pairs:
            grant(admin, [Grant(principal, action, parse(entity))])
            revoke(admin, [Grant(principal, action, parse(entity))])
        profile.disable()
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(30)
        print(text.getvalue())


if __name__ == "__main__":
    main()
