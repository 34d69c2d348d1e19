"""Golden files for policy errors: what a user reads when a policy is broken.

Each ``errors/NAME.policy`` holds one mistake; ``errors/NAME.txt`` is the full
rendering of the error it raises (``file:line:col: error: ...``, the source
line, the caret, the hint). Policies are named by their path relative to the
repository, so the rendering is the same wherever the repository lives.
Regenerate with ``PRIVILOG_REGEN_GOLDEN=1 python -m pytest tests/golden`` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from privilog import dsl
from privilog.dsl.errors import PrivilogError

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent / "errors"
POLICIES = sorted(HERE.glob("*.policy"))


def rendering(policy: Path) -> str:
    """The error loading ``policy`` raises, as the command line prints it."""
    name = policy.relative_to(ROOT).as_posix()
    try:
        dsl.load_policy(name)
    except PrivilogError as error:
        return f"{error}\n"
    raise AssertionError(f"{name} loads without error; a golden policy must hold one mistake")


@pytest.mark.parametrize("policy", POLICIES, ids=[p.stem for p in POLICIES])
def test_error_rendering(policy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    text = rendering(policy)
    golden = policy.with_suffix(".txt")
    if os.environ.get("PRIVILOG_REGEN_GOLDEN"):
        golden.write_text(text, encoding="utf-8")
    assert golden.exists(), f"no golden file {golden.name}; run with PRIVILOG_REGEN_GOLDEN=1"
    assert text == golden.read_text(encoding="utf-8")
    assert text.count(": error: ") == 1, "a golden policy holds exactly one mistake"


def test_every_golden_rendering_has_its_policy() -> None:
    orphans = sorted(t.name for t in HERE.glob("*.txt") if not t.with_suffix(".policy").exists())
    assert not orphans, f"golden renderings without a policy: {orphans}"
