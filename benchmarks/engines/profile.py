"""Where privilog's time goes on the engines benchmark's requests: the figures behind "what dominates".

    python -m benchmarks.engines.profile [--size 100k] [--backend compiled] [--top 12] [--kinds ...]

For each kind of check it times, on the same world and requests as the
benchmark, the two halves of ``authz.allows``: turning the strings into a
checked Request (``authz.request``) and deciding it (``authz.decide``), split
by whether the principal is one of the three holding the most grants (and
their groups' members); then a cProfile of ``allows`` over the kind's
requests. Then the same for ``visible``, ``why`` (``check``), ``grant`` and
``revoke``. Medians in microseconds, wall time.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks.engines import workload
from benchmarks.engines.__main__ import size_arg
from benchmarks.engines.adapters import Privilog
from privilog import dsl


def _median_us(fn: Callable[[], Any], repeat: int = 5) -> float:
    clock = time.perf_counter_ns
    out = []
    for _ in range(repeat):
        t0 = clock()
        fn()
        out.append(clock() - t0)
    return statistics.median(out) / 1e3


def _profile(fn: Callable[[], Any], top: int) -> str:
    profile = cProfile.Profile()
    profile.enable()
    fn()
    profile.disable()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(top)
    lines = [line for line in text.getvalue().splitlines() if line.strip()]
    return "\n".join(lines[3:])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.engines.profile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=size_arg, default=100_000)
    parser.add_argument("--backend", default="compiled")
    parser.add_argument("--kinds", default=",".join(workload.KINDS))
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    work = workload.build(args.size, args.seed)
    engine = Privilog(args.backend, work.world, dsl.load_policy("cdap"))
    authz = engine.authz
    gc.collect()
    gc.freeze()
    heavy = {p for p, _ in work.heavy}
    print(f"{args.size:,} grants, backend {args.backend}; heavy principals {work.heavy}")
    for kind in args.kinds.split(","):
        reqs = work.requests[kind]
        for r in reqs:  # warm-up, and compile the plans
            engine.allows(*r.call())
        rows: dict[tuple[bool, bool], list[tuple[float, float]]] = {}
        for r in reqs:
            call = r.call()
            request = authz.request(*call)
            allowed = authz.decide(request)
            parse = _median_us(lambda call=call: authz.request(*call))
            decide = _median_us(lambda request=request: authz.decide(request))
            rows.setdefault((r.heavy or r.principal in heavy, allowed), []).append((parse, decide))
        print(f"\n== {kind}: strings to Request | decide, median µs (n)")
        for (is_heavy, allowed), found in sorted(rows.items()):
            print(f"   {'heavy' if is_heavy else 'other'} {'allowed' if allowed else 'denied ':<8} "
                  f"{statistics.median(p for p, _ in found):8.1f} | {statistics.median(d for _, d in found):8.1f}"
                  f"   ({len(found)})")
        calls = [r.call() for r in reqs]
        print(_profile(lambda calls=calls: [engine.allows(*c) for c in calls for _ in range(5)], args.top))

    vis = [(p, "dataset", ns) for p, ns in work.visible]
    took = statistics.median(_median_us(lambda c=c: engine.visible(*c), 3) for c in vis)
    print(f"\n== visible: median {took:.1f} µs")
    print(_profile(lambda: [engine.visible(*c) for c in vis], args.top))
    why = [r.call() for reqs in work.requests.values() for r in reqs[:100]]
    print(f"\n== why: median {statistics.median(_median_us(lambda c=c: engine.why(*c), 3) for c in why):.1f} µs")
    print(_profile(lambda: [engine.why(*c) for c in why], args.top))
    changes = work.change_candidates[:200]

    def churn() -> None:
        for p, a, e in changes:
            engine.grant(p, a, e)  # type: ignore[misc]
            engine.revoke(p, a, e)  # type: ignore[misc]

    print("\n== grant + revoke")
    print(_profile(churn, args.top))


if __name__ == "__main__":
    main()
