"""Answers about the past on a store with a long log: as-of checks cold and warm, the replay alone, store diff.

    python -m benchmarks.asof [--entries 100000] [--at 0.3] [--store PATH] [--keep]

Builds a SQLite store of ENTRIES log entries (mixed changes made through ``Store.change_many`` in
batches of 1,000: grants of one user, action and dataset; revokes of a live grant; memberships added
and removed; datasets created and deleted), so that about 10^4 grants are live at the end. Then, at
an old entry (``--at``: the fraction of the log, default 0.3), times:

* ``store.history(seq)`` alone (the log replayed from its start, no authorizer);
* a cold as-of check: ``history.as_of`` with its cache emptied (the replay, the policy then in force,
  the authorizer built) and one ``allows``; and the same split into its parts;
* a warm as-of check (cached: ``as_of`` and ``allows`` again);
* ``store.diff`` (what ``privilog store diff`` runs) over windows of 10 and 100 changes ending there.

Prints one JSON object. ``--store PATH`` keeps (or reuses) the store at PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from typing import Any

from privilog.engine.authorizer import Authorizer

from privilog import dsl
from privilog.store import history as past
from privilog.store import open_store
from privilog.store.diff import diff
from privilog.store.history import as_of

USERS = [f"user:u{n}" for n in range(2000)]
GROUPS = [f"group:g{n}" for n in range(100)]
NAMESPACES = [f"namespace:ns{n}" for n in range(50)]
DATASETS = [f"dataset:ns{n}.d{m}" for n in range(50) for m in range(40)]
ACTIONS = ["READ", "WRITE", "EXECUTE", "ADMIN"]


def build(path: str, entries: int, seed: int = 7) -> float:
    """A store of ``entries`` log entries; the seconds it took."""
    rng = random.Random(seed)
    policy = dsl.load_policy("cdap")
    started = time.perf_counter()
    live: list[list[str]] = []
    held: set[tuple[str, str, str]] = set()
    members: set[tuple[str, str]] = set()
    entities: set[str] = set()
    with open_store(path, policy.actions) as store:
        store.change("local:bench", "admin.add", ["user:root"], trusted=True)
        store.change("user:root", "entity.add", NAMESPACES)
        made = 2
        while made < entries:
            batch: list[tuple[str, list[Any]]] = []
            for _ in range(min(1000, entries - made)):
                roll = rng.random()
                if roll < 0.50 or not live:
                    grant = [rng.choice(USERS + GROUPS), rng.choice(ACTIONS), rng.choice(DATASETS)]
                    if tuple(grant) not in held:
                        held.add(tuple(grant))
                        live.append(grant)
                    batch.append(("grant", [grant]))
                elif roll < 0.85:
                    grant = live.pop(rng.randrange(len(live)))
                    held.discard(tuple(grant))
                    batch.append(("revoke", [grant]))
                elif roll < 0.95:
                    pair = (rng.choice(USERS), rng.choice(GROUPS))
                    kind = "member.remove" if pair in members else "member.add"
                    (members.discard if pair in members else members.add)(pair)
                    batch.append((kind, [list(pair)]))
                else:
                    dataset = rng.choice(DATASETS)
                    kind = "entity.delete" if dataset in entities else "entity.add"
                    (entities.discard if dataset in entities else entities.add)(dataset)
                    batch.append((kind, [dataset]))
            store.change_many("user:root", batch)
            made += len(batch)
    return time.perf_counter() - started


def timed(work: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    value = work()
    return value, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--at", type=float, default=0.3, help="the old entry asked about, as a fraction of the log")
    parser.add_argument("--store", help="keep (or reuse) the store at this path")
    args = parser.parse_args()
    path = args.store or os.path.join(tempfile.mkdtemp(), "authz.db")
    out: dict[str, Any] = {"store": path}
    if not os.path.exists(path):
        out["build_s"] = round(build(path, args.entries), 1)
    policy = dsl.load_policy("cdap")
    with open_store(path, policy.actions, create=False) as store:
        head = store.last_seq()
        seq = max(int(head * args.at), 101)
        now, now_s = timed(lambda: store.history(None, granted=False))
        out |= {"entries": head, "live_grants_now": len(now.world.grants), "history_now_s": round(now_s, 3)}
        then, replay_s = timed(lambda: store.history(seq))
        _, replay_bare_s = timed(lambda: store.history(seq, granted=False))
        out |= {"at": seq, "live_grants_then": len(then.world.grants), "history_at_s": round(replay_s, 3),
                "history_at_no_granted_s": round(replay_bare_s, 3)}
        request = ("user:u1", "dataset.read", DATASETS[0])
        past._cache.clear()
        (answer, cold_s) = timed(lambda: as_of(store, str(seq), policy).authorizer.allows(*request))
        _, warm_s = timed(lambda: as_of(store, str(seq), policy).authorizer.allows(*request))
        authorizer, build_s = timed(lambda: Authorizer(policy, then.world))
        _, first_s = timed(lambda: authorizer.allows(*request))
        out |= {"as_of_cold_s": round(cold_s, 3), "as_of_warm_s": round(warm_s, 6), "allowed": answer,
                "authorizer_build_s": round(build_s, 3), "first_check_s": round(first_s, 3)}
        for window in (10, 100):
            found, diff_s = timed(lambda window=window: diff(store, policy, seq - window, seq))
            out[f"diff_{window}_s"] = round(diff_s, 2)
            out[f"diff_{window}_accesses"] = len(found.gained) + len(found.lost)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
