"""The tooling configured in pyproject.toml stays clean: ruff and mypy (strict on dsl and engine)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ["dsl", "engine", "privilog", "proofs"]


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True, check=False)


def test_ruff_is_clean() -> None:
    done = _run("ruff", "check", *SOURCES, "tests", "benchmarks")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_is_clean() -> None:
    from tests.typecheck import run

    done = run()
    assert done.returncode == 0, done.stdout + done.stderr
