"""Focused probes behind the findings in benchmarks/README.md, runnable against any source tree.

    python benchmarks/probe.py gc      [--grants 100000] [--tree PATH]
    python benchmarks/probe.py nsget   [--grants 10000]  [--tree PATH]
    python benchmarks/probe.py visible [--grants 100000] [--tree PATH]

``--tree`` is a checkout of privilog to import (default: the one this file is
in), so a patch can be tried in a copy and compared with the original. Times
are CPU (thread) time unless said otherwise: the machines are shared.

* gc: how long a full collection takes once a world is loaded, and after
  ``gc.freeze()``;
* nsget: ``namespace.get`` (a grant on the namespace or anything inside it)
  for the three principals holding the most grants and for 20 random users,
  ``application.get`` for some users, and a digest of the decisions, so two
  trees can be shown to decide alike;
* visible: ``visible(principal, "dataset", namespace)`` split into finding
  the candidates (``world.existing()``) and the rest.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def cpu(fn: Callable[[], Any]) -> tuple[Any, float]:
    """fn's value and the CPU seconds it took (this thread)."""
    start = time.thread_time()
    value = fn()
    return value, time.thread_time() - start


def load(grants: int) -> tuple[Any, Any]:
    import worldgen
    from privilog.engine.authorizer import Authorizer

    from privilog import dsl

    gen = worldgen.generate(grants)
    authz, seconds = cpu(lambda: Authorizer(dsl.load_policy("cdap"), gen.world))
    print(f"{grants} grants loaded in {seconds:.2f}s CPU")
    return gen, authz


def probe_gc(grants: int) -> None:
    _gen, _authz = load(grants)
    print(f"objects tracked by the collector: {len(gc.get_objects()):,}")
    for label in ("full collection", "full collection, again"):
        _, seconds = cpu(gc.collect)
        print(f"{label}: {seconds * 1000:.0f} ms CPU")
    gc.freeze()
    _, seconds = cpu(gc.collect)
    print(f"full collection after gc.freeze(): {seconds * 1000:.1f} ms CPU")


def probe_nsget(grants: int) -> None:
    gen, authz = load(grants)
    holders = Counter(g.principal for g in gen.world.grants)
    heavy = [p for p, _ in holders.most_common(3)]
    rng = random.Random(5)
    light = rng.sample(gen.users, 20)
    namespaces = [str(n) for n in rng.sample(gen.by_type["namespace"], 5)]

    def run(label: str, users: list[str], operation: str, entities: list[str]) -> None:
        times, allowed = [], 0
        for user in users:
            for entity in entities:
                decision, seconds = cpu(lambda u=user, e=entity: authz.check(authz.request(u, operation, e)))
                times.append(seconds)
                allowed += decision.allowed
        print(f"{label:44} median {statistics.median(times) * 1000:8.1f} ms, max {max(times) * 1000:8.0f} ms "
              f"CPU ({allowed}/{len(times)} allowed)")

    run("warm-up", light[:2], "namespace.get", namespaces[:2])
    tops = ", ".join(f"{p} ({holders[p]} grants)" for p in heavy)
    print(f"heaviest principals: {tops}")
    run("namespace.get, the 3 heaviest principals", heavy, "namespace.get", namespaces[:2])
    run("namespace.get, 20 random users", light, "namespace.get", namespaces[:2])
    apps = [str(a) for a in rng.sample(gen.by_type["application"], 3)]
    run("application.get, 10 random users", light[:10], "application.get", apps)
    digest = hashlib.sha256()
    for user in heavy + light[:10]:
        for entity in namespaces:
            decision = authz.check(authz.request(user, "namespace.get", entity))
            witnesses = sorted(str(w.entity) for o in decision.outcomes for w in o.witnesses)
            digest.update(repr((user, entity, decision.allowed, witnesses)).encode())
    print(f"decisions digest: {digest.hexdigest()[:16]}")


def probe_visible(grants: int) -> None:
    gen, authz = load(grants)
    rng = random.Random(7)
    _, existing = cpu(gen.world.existing)
    print(f"world.existing() alone: {existing * 1000:.0f} ms CPU (the engine at a271b48 recomputes it in every call)")
    times = []
    for _ in range(5):
        user, namespace = rng.choice(gen.users), str(rng.choice(gen.by_type["namespace"]))
        shown, seconds = cpu(lambda u=user, n=namespace: authz.visible(u, "dataset", n))
        times.append(seconds)
        print(f"visible({user}, dataset, {namespace}): {seconds * 1000:.0f} ms CPU, {len(shown)} shown")
    print(f"median {statistics.median(times) * 1000:.0f} ms CPU")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("probe", choices=("gc", "nsget", "visible"))
    parser.add_argument("--grants", type=int)
    parser.add_argument("--tree", default=str(HERE.parent), help="the privilog checkout to import")
    args = parser.parse_args()
    sys.path[:0] = [str(Path(args.tree).resolve()), str(HERE)]
    from privilog import engine

    print(f"tree: {Path(engine.__file__).parent.parent}")
    if args.probe == "gc":
        probe_gc(args.grants or 100_000)
    elif args.probe == "nsget":
        probe_nsget(args.grants or 10_000)
    else:
        probe_visible(args.grants or 100_000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
