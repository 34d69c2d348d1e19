"""What a one-grant revoke would do on a generated world: the whole re-decision against the fast one.

    python -m benchmarks.whatif [GRANTS] [--whole]

Builds benchmarks/worldgen.py's world of GRANTS grants (default 10000), revokes one grant (a
group's, so that its members lose too), and times ``engine.whatif.impact`` (deciding what the
change reaches) and, with ``--whole``, ``impact_whole`` (every user, operation and entity, on both
worlds), checking they agree. Prints one JSON line.
"""

from __future__ import annotations

import copy
import json
import sys
import time

from privilog.engine.whatif import impact, impact_whole, reach

from benchmarks.worldgen import generate
from privilog import dsl


def main(argv: list[str]) -> None:
    grants = int(next((a for a in argv if a.isdigit()), "10000"))
    policy = dsl.load_policy("cdap")
    before = generate(grants).world
    after = copy.deepcopy(before)
    grant = sorted(g for g in before.grants if g.principal.startswith("group:"))[0]
    after.grants.discard(grant)
    started = time.perf_counter()
    fast = impact(policy, before, after)
    fast_s = time.perf_counter() - started
    reached = reach(policy, before, after) or {}
    out = {
        "grants": len(before.grants),
        "entities": len(before.existing()),
        "users": len({p for p in before.principals() if p.startswith("user:")}),
        "revoked": f"{grant.principal} {grant.action} {grant.entity}",
        "reached_users": len(reached),
        "reached_pairs": sum(len(v) for v in reached.values()),
        "lost": len(fast.lost),
        "gained": len(fast.gained),
        "impact_s": round(fast_s, 3),
    }
    if "--whole" in argv:
        started = time.perf_counter()
        whole = impact_whole(policy, before, after)
        out["impact_whole_s"] = round(time.perf_counter() - started, 3)
        out["same"] = whole == fast
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
