"""The engines benchmark's engines agree on a small world (agreement only: no timing is asserted)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.engines import agreement  # noqa: E402
from benchmarks.engines.adapters import ALL_ENGINES  # noqa: E402


def test_engines_agree_on_a_small_world() -> None:
    """Every engine, regorus's two included (gordon-to-regorus is in the test extra): none may be skipped."""
    result = agreement(200, ALL_ENGINES, per_kind=30, visible=20, why=10)
    assert result["skipped"] == {}
    assert sorted(result["engines"]) == sorted(ALL_ENGINES)
    assert result["truth"] == "privilog-pydatalog"
    assert result["checked"]["decisions"] >= 150 * len(result["engines"])
    assert result["counts"] == {}, result["examples"]
