"""The engines benchmark's engines agree (agreement only: no timing is asserted), and a run stops at the
first disagreement."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.engines import agreement, workload  # noqa: E402
from benchmarks.engines.adapters import ALL_ENGINES, backend_of, build  # noqa: E402
from benchmarks.engines.rego import POLICY_PATH  # noqa: E402
from privilog import dsl  # noqa: E402


def test_engines_agree_on_a_small_world() -> None:
    """Every engine, regorus's two included (gordon-to-regorus is in the test extra): none may be skipped."""
    result = agreement(200, ALL_ENGINES, per_kind=30, visible=20, why=10)
    assert result["skipped"] == {}
    assert sorted(result["engines"]) == sorted(ALL_ENGINES)
    assert result["truth"] == "privilog-pydatalog"
    assert result["checked"]["decisions"] >= 30 * len(workload.KINDS) * len(result["engines"])
    assert result["counts"] == {}, result["examples"]


# A namespace whose only grant to alice is on a dataset that does not exist yet (a pre-grant):
# cdap.policy's `get requires any on self or within` counts it. cdap.rego once counted only grants
# on existing entities and denied (issue 38: `user:u00371 namespace.get namespace:ns0029` at 10k).
PRE_GRANT_WORLD = {
    "instance": "cdap",
    "entities": ["namespace:ns1", "dataset:ns1.ds1", "namespace:ns2", "dataset:ns2.ds1"],
    "grants": [
        ["user:alice", "READ", "dataset:ns1.future1"],
        ["group:team", "ADMIN", "dataset:ns2.future2"],
        ["user:bob", "READ", "dataset:ns2.ds1"],
    ],
    "members": [["user:carol", "group:team"]],
    "admins": ["user:root"],
}
PRE_GRANT_CASES = [
    ("user:alice", "namespace.get", "namespace:ns1", {}, True),  # the pre-grant inside it
    ("user:alice", "namespace.get", "namespace:ns2", {}, False),
    ("user:carol", "namespace.get", "namespace:ns2", {}, True),  # a group's pre-grant
    ("user:bob", "namespace.get", "namespace:ns1", {}, False),
    ("user:carol", "dataset.create", "dataset:ns2.future2", {}, True),  # a create the pre-grant allows
    ("user:alice", "dataset.create", "dataset:ns1.future1", {}, False),  # READ is not ADMIN
    ("user:carol", "dataset.create", "dataset:ns2.future2", {"owner": "kerberosprincipal:svc@EX.COM"}, False),
]


@pytest.mark.parametrize("engine", ALL_ENGINES)
def test_a_pre_grant_shows_its_namespace_in_every_engine(engine: str) -> None:
    """Each engine answers as cdap.policy on pre-grants (the reference backend among them)."""
    policy = dsl.load_policy("cdap")
    world = None
    if backend_of(engine):
        from privilog.engine.world.readers import world_from_data

        world = world_from_data(PRE_GRANT_WORLD, workload.ACTIONS)
    adapter = build(engine, PRE_GRANT_WORLD, world, policy)
    answers = [adapter.allows(p, op, e, args) for p, op, e, args, _ in PRE_GRANT_CASES]
    assert answers == [expected for *_, expected in PRE_GRANT_CASES]


def test_a_run_stops_at_the_first_disagreement(tmp_path: Path) -> None:
    """A Rego policy that denies every namespace.get: the run stops there, says so, and times nothing."""
    broken = tmp_path / "broken.rego"
    text = POLICY_PATH.read_text(encoding="utf-8")
    assert "\tself_or_within_any(input.entity)\n" in text
    broken.write_text(text.replace("\tself_or_within_any(input.entity)\n", "\tfalse\n"), encoding="utf-8")
    out = tmp_path / "results.json"
    env = {**os.environ, "PRIVILOG_BENCH_REGO": str(broken), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.engines", "--sizes", "2k,3k", "--engines", "floor,regorus",
         "--per-kind", "20", "--visible", "4", "--why", "0", "--changes", "2", "--rounds", "1",
         "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 3, done.stderr[-3000:]
    results = json.loads(out.read_text(encoding="utf-8"))
    assert [s["size"] for s in results["sizes"]] == [2000]  # the second size never ran
    size = results["sizes"][0]
    found = size["disagreement"]
    assert found["what"] == "decision namespace.get"
    assert found["answers"] == {"floor": True, "regorus": False}
    assert found["world"]["grants"] >= 1  # the grants that allow it, for the reader
    assert "checks" not in size  # nothing timed on engines that disagree
    assert "DISAGREEMENT (decision namespace.get)" in done.stdout and found["request"] in done.stdout
    assert "DISAGREEMENT (decision namespace.get)" in done.stderr
