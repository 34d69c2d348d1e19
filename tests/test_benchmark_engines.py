"""The engines benchmark's engines agree on a small world (agreement only: no timing is asserted)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.engines import agreement  # noqa: E402
from benchmarks.engines.adapters import ALL_ENGINES  # noqa: E402


def test_engines_agree_on_a_small_world() -> None:
    engines = tuple(e for e in ALL_ENGINES if not e.startswith("regorus") or importlib.util.find_spec("regorus"))
    result = agreement(200, engines, per_kind=30, visible=20, why=10)
    assert "floor" in result["engines"] and "privilog-pydatalog" in result["engines"], result["skipped"]
    assert result["truth"] == "privilog-pydatalog"
    assert result["checked"]["decisions"] >= 150 * len(result["engines"])
    assert result["counts"] == {}, result["examples"]
