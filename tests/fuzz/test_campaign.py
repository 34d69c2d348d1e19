"""The fuzz harness as a standing check: a small campaign over every input kind with a fixed seed,
and every input the big campaigns found replayed from the corpus.

Both run in two worker processes under the harness's deadline, against one real
``privilog serve`` on 127.0.0.1 (started once for the module).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fuzz.harness import CORPUS, FAILURE, KINDS, ROOT, generate, read_corpus, run_cases
from tests.fuzz.http import running_server
from tests.tiers import examples

PER_KIND = 150  # about 40 s on two cores for all kinds
SEED = 17


@pytest.fixture(scope="module")
def server_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with running_server(tmp_path_factory.mktemp("fuzz")) as env:
        yield env


def _explain(report: object) -> str:
    return report.table()  # type: ignore[attr-defined, no-any-return]


def test_a_small_campaign_finds_nothing(server_env: dict[str, str], tmp_path: Path) -> None:
    per_kind = examples(PER_KIND)  # a tenth under PRIVILOG_HYPOTHESIS=quick (tests/tiers.py)
    report = run_cases(
        generate(KINDS, per_kind * len(KINDS), SEED), jobs=2, env=server_env, log=tmp_path / "workers.log"
    )
    assert report.total == per_kind * len(KINDS)
    assert not report.failures, _explain(report)
    for kind in KINDS:  # each kind reaches privilog: some inputs answered, some refused
        counts = report.counts[kind]
        assert counts["answered"] and counts["refused"], (kind, dict(counts))


def test_the_corpus_replays_without_a_failure(server_env: dict[str, str], tmp_path: Path) -> None:
    kept = list(read_corpus())
    assert kept, f"the corpus {CORPUS.relative_to(ROOT)} holds the inputs the big campaigns found"
    report = run_cases(
        ((kind, case) for kind, _path, case in kept), jobs=2, env=server_env, log=tmp_path / "workers.log"
    )
    assert report.counts and not report.failures, _explain(report)
    assert sum(c[FAILURE] for c in report.counts.values()) == 0
