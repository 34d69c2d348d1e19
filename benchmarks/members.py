"""Deep and wide memberships (issue 18, item 11): how load and a decision grow with them.

    python -m benchmarks.members [--depths 1000,10000,100000] [--members 1000000] [--backend compiled]

* **chain**: user:u → group:g0 → … → group:gN, where group:gN holds READ on a dataset
  and ADMIN on its namespace. Timed: the world read from a JSON file and the authorizer
  built (``privilog.load``), the first ``allows`` (which compiles the decision plan),
  a ``check`` (the decision with its proof: the whole chain; the first builds the indexes
  the generic evaluator asks for), a denial with its fixes,
  and ``privilog check`` as a command, in a fresh process.
* **wide**: N users, each in one of four groups, the groups holding grants; the same
  calls, and ``visible_entities`` of one user.

Each case runs in a process of its own; each figure is the wall time of one run (the
command's in a further process), then the case's peak RSS. Every answer is checked.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from privilog.engine.decision import MembershipChange

import privilog

DATASET = "dataset:ns1.d"


def chain(depth: int) -> dict[str, Any]:
    members = [["user:u", "group:g0"], *([f"group:g{i}", f"group:g{i + 1}"] for i in range(depth))]
    top = f"group:g{depth}"
    return {
        "instance": "cdap",
        "entities": [DATASET],
        "grants": [[top, "READ", DATASET], [top, "ADMIN", "namespace:ns1"]],
        "members": members,
        "admins": ["user:root"],
    }


def wide(users: int) -> dict[str, Any]:
    groups = [f"group:team{i}" for i in range(4)]
    return {
        "instance": "cdap",
        "entities": [DATASET, "dataset:ns1.e"],
        "grants": [
            [groups[0], "READ", DATASET],
            [groups[1], "READ", "dataset:ns1.e"],
            [groups[2], "ADMIN", "namespace:ns1"],
        ],
        "members": [[f"user:u{i}", groups[i % 4]] for i in range(users)],
        "admins": ["user:root"],
    }


def timed(what: str, call: Callable[[], Any]) -> Any:
    start = time.perf_counter()
    result = call()
    print(f"  {what:<34} {time.perf_counter() - start:8.3f} s", flush=True)
    return result


def command(world: Path, principal: str) -> None:
    """`privilog check` in a fresh process (allowed: exit 0)."""
    args = [sys.executable, "-m", "privilog", "check", principal, "dataset.read", DATASET, "--world", str(world)]
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    print(f"  {'privilog check (fresh process)':<34} {time.perf_counter() - start:8.3f} s", flush=True)


def run(name: str, data: dict[str, Any], principal: str, backend: str, folder: Path) -> None:
    print(f"== {name}: {len(data['members']):,} memberships ==", flush=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    authz = timed("load (JSON file, authorizer)", lambda: privilog.load("cdap", str(path), backend))
    assert timed("first allows (plan compiled)", lambda: authz.allows(principal, "dataset.read", DATASET))
    assert timed("allows", lambda: authz.allows(principal, "dataset.read", DATASET))
    decision = timed("check (with its proof)", lambda: authz.check(authz.request(principal, "dataset.read", DATASET)))
    assert decision.allowed and decision.outcomes[0].witnesses
    timed("check again (indexes built)", lambda: authz.check(authz.request(principal, "dataset.read", DATASET)))
    stranger = authz.request("user:x", "dataset.read", DATASET)
    denial = timed("check of a denial (with fixes)", lambda: authz.check(stranger))
    assert any(isinstance(c, MembershipChange) for fix in denial.fixes for c in fix)
    timed("visible_entities (datasets)", lambda: authz.visible_entities(principal, "dataset"))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"  {'peak RSS of this process':<34} {peak:8,} MiB", flush=True)
    command(path, principal)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", default="1000,10000,100000", help="chain depths")
    parser.add_argument("--members", type=int, default=1_000_000, help="users of the wide world (0: none)")
    parser.add_argument("--backend", default="compiled")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # one case, in this process: chain:N or wide:N
    args = parser.parse_args(argv)
    if args.case:
        kind, size = args.case.split(":")
        with tempfile.TemporaryDirectory() as folder:
            if kind == "chain":
                run(f"chain of {int(size):,}", chain(int(size)), "user:u", args.backend, Path(folder))
            else:
                run(f"{int(size):,} users in 4 groups", wide(int(size)), "user:u0", args.backend, Path(folder))
        return
    print(
        f"privilog memberships benchmark, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, "
        f"Python {sys.version.split()[0]}, backend {args.backend}, load average {os.getloadavg()}",
        flush=True,
    )
    cases = [f"chain:{d}" for d in args.depths.split(",") if d] + ([f"wide:{args.members}"] if args.members else [])
    for case in cases:  # each in a process of its own, for its peak memory
        subprocess.run(
            [sys.executable, "-m", "benchmarks.members", "--backend", args.backend, "--case", case], check=True
        )


if __name__ == "__main__":
    main()
