"""The tooling configured in pyproject.toml stays clean: ruff and mypy (strict on dsl and engine)."""

from __future__ import annotations

import re
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


def _repository_files() -> list[Path]:
    """The files of the repository: git's list in a checkout, else every file below ROOT but the build's."""
    done = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    if done.returncode == 0 and done.stdout:
        return [ROOT / name for name in done.stdout.decode().split("\0") if name]
    skipped = {".git", ".venv", "build", "site", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
    return [p for p in ROOT.rglob("*") if p.is_file() and not skipped.intersection(p.relative_to(ROOT).parts)]


def test_no_file_cites_the_design_document_that_is_not_in_the_repository() -> None:
    # What the code relies on is written in docs/ (the ids and operations: docs/reference/ids.md); a
    # citation of the design document sends a reader to a file they do not have.
    word = "DE" + "SIGN"  # (spelled apart, so that this file does not cite it)
    citing = re.compile(rf"\b{word}(\.md)?\b")
    found = []
    for path in _repository_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        found += [f"{path.relative_to(ROOT)}:{n}" for n, line in enumerate(text.splitlines(), 1) if citing.search(line)]
    assert not found, f"these cite {word}.md, which is not in the repository; cite docs/ instead: {found}"
