"""Load one engine from a world file in a fresh process: its load time and its peak memory.

    python -m benchmarks.engines.load ENGINE WORLD.json

Prints one JSON object: the phases (seconds), their total, and the process's
resident memory after its imports, its peak (VmHWM) and after the load, in MiB
(after: what the engine holds, the world file's parsed text let go first).
Imports come before the clock starts; parsing the policy is part of the load.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from benchmarks.engines import adapters, rego
from benchmarks.engines.common import proc_status
from benchmarks.engines.floor import Floor, existing_entities


def load(engine: str, path: str) -> dict[str, Any]:
    phases: dict[str, float] = {}
    held: list[Any] = []

    def phase(name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        value = fn()
        phases[name] = time.perf_counter() - t0
        return value

    def read_json() -> Any:
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    backend = adapters.backend_of(engine)
    if backend is not None:
        from privilog.engine.authorizer import Authorizer

        from privilog import dsl
        from privilog.api import load_world_for
    elif engine in ("regorus", "regorus-rvm"):
        import regorus  # noqa: F401
    before = proc_status()
    gc.collect()
    t0 = time.perf_counter()
    if engine == "floor":
        data = phase("read world file (json)", read_json)
        held.append(phase("build indexes", lambda: Floor(data)))
        data = None
    elif engine in ("regorus", "regorus-rvm"):
        data = phase("read world file (json)", read_json)
        shaped = phase("shape data for Rego (Python)", lambda: rego.rego_data(data))
        existing = phase("existing entities (for grants)", lambda: existing_entities(data))
        text = phase("encode data (json)", lambda: json.dumps(shaped))
        del data, shaped
        make = rego.Regorus if engine == "regorus" else rego.RegorusRvm
        held.append(phase("policy and data into regorus", lambda: make(text, existing)))
    elif backend is not None:
        policy = phase("parse and check policy", lambda: dsl.load_policy("cdap"))
        world = phase("read world file (privilog)", lambda: load_world_for(policy, path))
        held.append(phase("build Authorizer", lambda: Authorizer(policy, world, backend)))
    else:
        raise SystemExit(f"unknown engine {engine}")
    total = time.perf_counter() - t0
    gc.collect()
    after = proc_status()
    return {
        "engine": engine,
        "phases_s": phases,
        "total_s": total,
        "rss_before_mib": before.get("rss_mib"),
        "peak_rss_mib": after.get("hwm_mib"),
        "rss_after_mib": after.get("rss_mib"),
    }


if __name__ == "__main__":
    print(json.dumps(load(sys.argv[1], sys.argv[2])))
