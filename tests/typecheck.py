"""mypy over privilog as it is installed: ``python -m tests.typecheck [MYPY OPTIONS]``.

The repository keeps ``dsl/``, ``engine/``, ``proofs/`` and ``rules/`` at its top level and pyproject.toml
installs them as ``privilog.dsl`` and so on. mypy reads folders, not that mapping (nor the import hook of
an editable install), so this builds the installed layout out of symlinks in a scratch folder and checks
``-p privilog`` there, with pyproject.toml's settings. Errors name ``privilog/engine/...`` for
``engine/...``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAPPED = ("dsl", "engine", "proofs", "rules")  # pyproject.toml's [tool.setuptools.package-dir]


def installed_view(into: Path) -> Path:
    """``into/privilog``: privilog/'s entries and the mapped folders, as symlinks to the repository."""
    view = into / "privilog"
    view.mkdir()
    for entry in (ROOT / "privilog").iterdir():
        if entry.name != "__pycache__":
            (view / entry.name).symlink_to(entry)
    for folder in MAPPED:
        (view / folder).symlink_to(ROOT / folder)
    return view


def run(*options: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="privilog-mypy-") as scratch:
        installed_view(Path(scratch))
        argv = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), *options, "-p", "privilog"]
        env = {**os.environ, "MYPY_CACHE_DIR": str(ROOT / ".mypy_cache" / "view")}
        return subprocess.run(argv, cwd=scratch, capture_output=True, text=True, check=False, env=env)


if __name__ == "__main__":
    done = run(*sys.argv[1:])
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    sys.exit(done.returncode)
