"""A command whose extra is not installed: one line naming `pip install 'privilog[EXTRA]'`, exit 2.

Each case runs privilog in a new process with the extra's library made unimportable
(``sys.modules[name] = None``, as Python does for a module that failed to import), so that the
rest of the install is the real one; tests/test_wheel.py does the same on a real base install.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "privilog" / "samples" / "world.yaml")
WHY = ["why", "user:bob", "dataset.write", "dataset:sales.orders", "--world", SAMPLE]


def _without(modules: tuple[str, ...], argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    script = (
        "import sys\n"
        f"for name in {modules!r}: sys.modules[name] = None\n"
        "from privilog.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script, *argv], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize(
    ("missing", "argv", "line"),
    [
        (("starlette", "uvicorn"), ["serve", "--store", "{tmp}/s.db"],
         "privilog: serve needs Starlette and uvicorn (privilog's serve extra), which is not installed: "
         "`pip install 'privilog[serve]'`"),
        (("psycopg",), ["store", "init", "--store", "postgresql://localhost/x", "--admin", "user:root"],
         "privilog: a store at postgresql://... needs psycopg, the PostgreSQL driver (privilog's postgres extra), "
         "which is not installed: `pip install 'privilog[postgres]'`"),
        (("psycopg",), ["check", "user:a", "namespace.get", "namespace:n", "--store", "postgresql://localhost/x"],
         "`pip install 'privilog[postgres]'`"),
        (("graphviz",), [*WHY, "--format", "svg"],
         "privilog: why --format svg needs the graphviz package (privilog's pictures extra), which is not "
         "installed: `pip install 'privilog[pictures]'`"),
        (("graphviz",), ["graph", "--world", SAMPLE], "privilog: graph --format dot needs the graphviz package"),
        (("hypothesis",), ["prove", "cdap", "-q"],
         "privilog: prove --examples needs Hypothesis (privilog's prove extra), which is not installed: "
         "`pip install 'privilog[prove]'`, or --examples 0 (the exhaustive search alone)"),
        (("pyarrow",), ["pipeline", "report", "{tmp}"], "`pip install 'privilog[parquet]'`"),
    ],
)  # fmt: skip
def test_a_missing_extra_is_one_line_naming_it(
    missing: tuple[str, ...], argv: list[str], line: str, tmp_path: Path
) -> None:
    done = _without(missing, [a.format(tmp=tmp_path) for a in argv], tmp_path)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert line in done.stderr


def test_what_needs_no_extra_runs_without_them(tmp_path: Path) -> None:
    everything = ("starlette", "uvicorn", "psycopg", "graphviz", "hypothesis", "pyarrow", "pyspark")
    assert _without(everything, WHY, tmp_path).returncode == 1  # denied, explained
    done = _without(everything, ["prove", "cdap", "--examples", "0", "-q"], tmp_path)
    assert done.returncode == 0 and "held" in done.stdout, done.stderr
