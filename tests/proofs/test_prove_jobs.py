"""``prove --jobs N`` shares a case of many worlds among N processes: the report is the one a single
process makes (the same counts, the same first smallest counterexample, the same operations in order)."""

from __future__ import annotations

from typing import Any

import pytest
from privilog.proofs import prover as prover_module
from privilog.proofs.load import load_proved
from privilog.proofs.prover import prove


def _report(jobs: int) -> dict[str, Any]:
    report = prove(load_proved("cdap-4.2"), examples=0, jobs=jobs).to_json()
    report.pop("seconds", None)
    return report


def test_a_shared_case_gives_the_report_of_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    alone = _report(1)
    monkeypatch.setattr(prover_module, "SPLIT_AT", 16)  # cdap-4.2's four cases of 16 worlds or more are shared
    shared_sizes: list[int] = []
    share = prover_module.Prover._shared

    def spied(self: prover_module.Prover, index: int, space: Any, points: Any) -> None:
        shared_sizes.append(len(points))
        share(self, index, space, points)

    monkeypatch.setattr(prover_module.Prover, "_shared", spied)
    shared = _report(2)
    assert sorted(shared_sizes) == [16, 16, 16, 36]
    assert shared == alone
    broken = [p for p in alone["properties"] if not p["held"]]
    assert broken and any(p["operations"] for p in broken)  # the merge had counterexamples to keep
