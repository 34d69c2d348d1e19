"""privilog side by side with Rego (regorus) and a hand-coded Python index: issue 11's benchmark.

    python -m benchmarks.engines [--sizes 100k,1M,10M] [--engines ...] [--out benchmarks/engines/results.json]

See ``__main__.py`` for the options, benchmarks/README.md for what is measured, and
docs/benchmarks.md for the recorded results.
"""

from __future__ import annotations

import tempfile
from typing import Any

from benchmarks.engines.adapters import ALL_ENGINES


def agreement(size: int = 200, engines: tuple[str, ...] = ALL_ENGINES, per_kind: int = 30, visible: int = 20,
              why: int = 10, seed: int = 42) -> dict[str, Any]:
    """Check, in this process and without timing anything, that the engines agree on a world of ``size``
    grants; return the agreement record (``counts`` of disagreements by kind, ``examples``) and which
    engines ran or were skipped."""
    from benchmarks.engines.child import measure

    with tempfile.TemporaryDirectory(prefix="privilog-engines-") as workdir:
        result = measure({
            "size": size, "seed": seed, "engines": list(engines), "per_kind": per_kind, "visible": visible,
            "why": why, "changes": 0, "pydatalog_max": size, "workdir": workdir, "load_timeout": 0,
            "no_load_children": True, "agreement_only": True,
        })
    return {"engines": result["engines"], "skipped": result["skipped"], "truth": result["truth"],
            **result["agreement"]}
