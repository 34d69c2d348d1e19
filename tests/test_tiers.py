"""The suite's tiers (tests/tiers.py): what the fast tier leaves out, and the Hypothesis profiles.

The profiles are checked in pytest runs of their own (real subprocesses), since a run's profile is
chosen once, when it starts."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib

import pytest

from tests.tiers import KINDS, NOT_SLOW, TESTS, VARIABLE, kinds_of

ROOT = TESTS.parent
# A @given test whose own settings ask 30 examples (tests/engine/test_world_tables.py).
GIVEN = "tests/engine/test_world_tables.py::test_a_world_written_as_tables_reads_back_the_same"


def pytest_run(*args: str, profile: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != VARIABLE}
    if profile is not None:
        env[VARIABLE] = profile
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )


def passing(run: subprocess.CompletedProcess[str]) -> int:
    found = re.search(r"- (\d+) passing, 0 failing", run.stdout)
    assert found and run.returncode == 0, run.stdout + run.stderr
    return int(found.group(1))


def test_every_kind_is_a_registered_marker_and_every_path_is_there() -> None:
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    registered = {line.split(":")[0] for line in markers["markers"]}
    assert {kind for kinds in KINDS.values() for kind in kinds} | {"slow"} <= registered
    for path in [*KINDS, *NOT_SLOW]:
        assert (TESTS / path).exists(), path


@pytest.mark.parametrize(
    ("path", "kinds"),
    [
        ("spark/test_engine.py", ("spark",)),
        ("spark/test_fused_shortcut.py", ()),  # the Spark engine's pure-Python part: in the fast tier
        ("pipeline_report/test_pipeline_report_run.py", ("browser", "spark")),
        ("pipeline_report/test_pipeline_report.py", ("browser",)),
        ("serve/attack/test_attack_changes.py", ("attack",)),
        ("serve/test_serve_crash.py", ("crash",)),
        ("serve/test_serve_api.py", ()),
        ("proofs/test_shipped.py", ("proof",)),
        ("proofs/test_broken.py", ()),
        ("test_wheel.py", ("wheel",)),
        ("pipeline/test_runs.py", ()),
    ],
)
def test_a_module_has_the_kinds_of_its_folder(path: str, kinds: tuple[str, ...]) -> None:
    assert kinds_of(TESTS / path) == kinds


def test_the_fast_tier_leaves_out_each_kind_and_keeps_the_rest() -> None:
    run = pytest_run("--co", "-q", "-m", "not slow", "tests/spark", "tests/proofs", profile=None)
    assert run.returncode == 0, run.stdout + run.stderr
    collected = {line.split("::")[0] for line in run.stdout.splitlines() if "::" in line}
    assert "tests/spark/test_fused_shortcut.py" in collected
    assert "tests/proofs/test_broken.py" in collected
    assert not collected & {"tests/spark/test_engine.py", "tests/spark/test_dictionary.py", "tests/proofs/test_shipped.py"}


def test_quick_draws_a_tenth_of_a_tests_own_examples_and_ci_all_of_them() -> None:
    assert passing(pytest_run(GIVEN, "--hypothesis-show-statistics", profile="quick")) == 3
    assert passing(pytest_run(GIVEN, "--hypothesis-show-statistics", profile=None)) == 30
    assert passing(pytest_run(GIVEN, "--hypothesis-show-statistics", profile="ci")) == 30


def test_a_profile_that_is_not_one_is_refused_in_one_line() -> None:
    run = pytest_run("--co", "-q", GIVEN, profile="fast")
    assert run.returncode == 4
    assert f"ERROR: {VARIABLE}=fast: not a profile; use one of quick, ci, long (unset: ci)" in run.stderr
    assert "Traceback" not in run.stdout + run.stderr
