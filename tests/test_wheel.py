"""privilog as a user installs it: the wheel built from this tree, in a fresh venv, without Spark.

The wheel must put nothing in site-packages but ``privilog`` (no top-level ``dsl``, ``engine``, ``rules``
or ``proofs`` to collide with other projects), carry its policies, grammar, proofs and samples, and run
every command from a folder that is not the repository. The venv has the base package only (no extras):
check, why, list, who, query, test, fmt, diff, ops, the REPL and a SQLite store work; a command that needs an
extra (serve, a PostgreSQL store, pictures, prove's generated worlds, Parquet, Spark) stops with one line
naming the `pip install 'privilog[EXTRA]'` it needs, exit 2, no traceback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # built from a copy: setuptools keeps a build/ folder in the tree it builds, and a stale one would ship
    # files the tree no longer has
    source = tmp_path_factory.mktemp("source") / "privilog"
    ignored = shutil.ignore_patterns(".*", "build", "dist", "*.egg-info", "__pycache__", "tests", "benchmarks")
    shutil.copytree(ROOT, source, ignore=ignored)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)],
        check=True,
        capture_output=True,
        text=True,
    )
    (found,) = out.glob("privilog-*.whl")
    return found


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel and its dependencies (not its extras): its bin folder."""
    env = tmp_path_factory.mktemp("venv") / "env"
    venv.create(env, with_pip=True)
    done = subprocess.run(
        [str(env / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return env / "bin"


def test_the_wheel_holds_privilog_and_nothing_beside_it(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"privilog", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info"}
    for needed in (
        "privilog/dsl/policy.lark",
        "privilog/rules/cdap.policy",
        "privilog/rules/prelude/requirements.policy",
        "privilog/proofs/common.proof",
        "privilog/samples/world.yaml",
        "privilog/engine/compiled/__init__.py",
    ):
        assert needed in names, f"the wheel lacks {needed}"
    metadata = zipfile.ZipFile(wheel).read(f"{sorted(tops - {'privilog'})[0]}/METADATA").decode()
    assert "Requires-Dist: pyspark" in metadata and "extra == \"spark\"" in metadata
    for optional in ("pyspark", "starlette", "uvicorn", "psycopg", "graphviz", "hypothesis", "pyarrow"):
        assert not any(
            line.startswith(f"Requires-Dist: {optional}") and "extra" not in line for line in metadata.splitlines()
        ), f"{optional} is a base dependency, not an extra's"


def _run(bin_dir: Path, cwd: Path, *argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PRIVILOG_STORE", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(bin_dir / "privilog"), *argv], cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=300
    )


WORLD = """\
entities: [namespace:sales, dataset:sales.orders]
grants:
  - [user:alice, ADMIN, namespace:sales]
  - [group:analysts, READ, dataset:sales.orders]
members:
  - [user:dave, group:analysts]
admins: [user:root]
"""

SCENARIO = """\
policy: cdap
world: world.yaml
cases:
  - {request: {principal: user:alice, operation: namespace.get, entity: namespace:sales}, expect: allow}
  - {request: {principal: user:dave, operation: dataset.read, entity: dataset:sales.orders}, expect: allow}
  - {request: {principal: user:dave, operation: dataset.write, entity: dataset:sales.orders}, expect: deny}
"""


def test_every_command_runs_from_the_installed_wheel(installed: Path, tmp_path: Path) -> None:
    (tmp_path / "world.yaml").write_text(WORLD)
    (tmp_path / "scenario.yaml").write_text(SCENARIO)
    (tmp_path / "mine.policy").write_text((ROOT / "rules" / "cdap.policy").read_text())
    store = f"sqlite:///{tmp_path / 'grants.db'}"
    expected = [
        # (argv, exit code, something the output must contain)
        (["--version"], 0, "privilog 0.1.0"),
        (["check", "user:alice", "namespace.get", "namespace:sales", "--world", "world.yaml"], 0, "ALLOW"),
        (["why", "user:dave", "dataset.write", "dataset:sales.orders", "--world", "world.yaml"], 1, "DENY"),
        (["list", "user:dave", "--world", "world.yaml"], 0, "dataset:sales.orders"),
        (["who", "dataset.read", "dataset:sales.orders", "--world", "world.yaml"], 0, "user:dave"),
        (["query", "member_of(P, G)", "--world", "world.yaml"], 0, "group:analysts"),
        (["test", "scenario.yaml"], 0, "3 passed"),
        (["fmt", "--check", "mine.policy"], 0, ""),
        (["diff", "cdap-draft", "cdap"], 1, "namespace."),
        (["ops", "--policy", "cdap-4.2"], 0, "namespace.create"),
        (["prove", "cdap", "--examples", "0", "-q"], 0, "held"),
        (["store", "init", "--store", store, "--admin", "user:root"], 0, ""),
        (["store", "import", "world.yaml", "--store", store], 0, ""),
        (["store", "export", "--store", store], 0, "user:alice"),
        (["store", "audit", "--store", store], 0, ""),
        (["token", "create", "--store", store, "--principal", "user:root"], 0, "plg_"),
        (["completion", "bash"], 0, "complete"),
        (["generate", "--out", "gen", "--requests", "50", "--entities", "50", "--grants", "50"], 0, ""),
        (["pipeline", "decide", "--entities", "gen/entities.csv", "--grants", "gen/grants.csv",
          "--requests", "gen/requests.csv", "--out", "out"], 2, "privilog[spark]"),
        # what an extra adds: one line naming it, exit 2
        (["pipeline", "report", "gen"], 2, "pip install 'privilog[parquet]'"),  # pyarrow reads a run's tables
        (["pipeline", "show", "gen"], 2, "pip install 'privilog[parquet]'"),
        (["prove", "cdap", "-q"], 2, "pip install 'privilog[prove]'"),
        (["graph", "--world", "world.yaml", "--principal", "user:dave"], 2, "pip install 'privilog[pictures]'"),
        (["why", "user:dave", "dataset.write", "dataset:sales.orders", "--world", "world.yaml", "--format", "svg"],
         2, "pip install 'privilog[pictures]'"),
        (["serve", "--store", store], 2, "pip install 'privilog[serve]'"),
        (["store", "init", "--store", "postgresql://localhost/privilog", "--admin", "user:root"],
         2, "pip install 'privilog[postgres]'"),
        (["check", "user:alice", "namespace.get", "namespace:sales", "--store", "postgresql://localhost/privilog"],
         2, "pip install 'privilog[postgres]'"),
    ]  # fmt: skip
    failures = []
    for argv, code, shown in expected:
        done = _run(installed, tmp_path, *argv)
        output = done.stdout + done.stderr
        one_line = code != 2 or (done.stderr.count("\n") == 1 and shown in done.stderr)
        if done.returncode != code or shown not in output or "Traceback" in output or not one_line:
            failures.append(f"privilog {' '.join(argv)}: exit {done.returncode} (expected {code})\n{output[-2000:]}")
    repl = _run(installed, tmp_path, "repl", "--world", "world.yaml", stdin="check user:alice namespace.get namespace:sales\n")
    if repl.returncode != 0 or "ALLOW" not in repl.stdout:
        failures.append(f"privilog repl: exit {repl.returncode}\n{repl.stdout}{repl.stderr}")
    assert not failures, "\n\n".join(failures)


def test_the_base_install_holds_no_extra(installed: Path) -> None:
    """`pip install privilog` brings the base only: no server, no PostgreSQL driver, no pictures, no prover search."""
    done = subprocess.run(
        [str(installed / "python"), "-c", "import importlib.util as u; "
         "print([m for m in ('starlette', 'uvicorn', 'psycopg', 'graphviz', 'hypothesis', 'pyarrow', 'pyspark') "
         "if u.find_spec(m)])"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == "[]"


def test_the_installed_package_imports_nothing_from_the_repository(installed: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [str(installed / "python"), "-c", "import privilog, privilog.engine, privilog.dsl; "
         "print(privilog.__file__); print(privilog.engine.__file__); import importlib.util; "
         "print([m for m in ('dsl', 'engine', 'rules', 'proofs') if importlib.util.find_spec(m)])"],
        cwd=tmp_path, capture_output=True, text=True, check=True,
    )  # fmt: skip
    own, engine, strays = done.stdout.splitlines()
    assert "site-packages" in own and "site-packages" in engine
    assert strays == "[]"
