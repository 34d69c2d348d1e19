"""The suite's tiers and Hypothesis profiles (docs/contributing.md says how to run each).

**Kinds.** A test slow by nature is marked with its kind by ``tests/conftest.py``'s collection hook,
from the table :data:`KINDS` (a folder or a module under ``tests/``), and every kind also marks it
``slow``: the fast tier a developer runs after each change is ``python -m pytest -m "not slow"``,
and ``-m spark`` (or ``cluster``, ``crash``...) runs one kind. The full run, CI's, selects nothing
and so runs every test, as before.

**Profiles.** ``PRIVILOG_HYPOTHESIS=quick|ci|long`` chooses the Hypothesis profile (so does
``--hypothesis-profile=NAME``, which wins when both are given):

* ``ci`` (the default when unset): nothing is loaded, so every test draws what it always drew
  (Hypothesis' own ``default`` profile, or its built-in ``ci`` profile when the ``CI`` variable
  is set: that one is Hypothesis', not registered here);
* ``quick``: each test draws a tenth of its own count (:func:`examples`), at least one, and no
  deadline. A test's ``@settings(max_examples=N)`` overrides any profile's count, so the hook
  :func:`scale_given_tests` rewrites the settings of each ``@given`` test it collects, and tests that
  build settings in their body (state machines, the fuzz campaign) ask :func:`examples` for
  their count;
* ``long``: the ``long`` profile registered in ``tests/conftest.py`` (thousands of programs).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import settings

TESTS = Path(__file__).resolve().parent
VARIABLE = "PRIVILOG_HYPOTHESIS"
PROFILES = ("quick", "ci", "long")
QUICK_FRACTION = 0.1  # of each test's own max_examples under `quick`

# A folder or module (relative to tests/) and the kinds of slowness of every test in it; each kind is
# a marker registered in pyproject.toml. Measured on the CI rehearsal of 2026-11-28 (docs/contributing.md).
KINDS: dict[str, tuple[str, ...]] = {
    "spark/": ("spark",),  # one JVM for the run, pipeline runs of tens of seconds
    "cluster/": ("cluster",),  # a standalone Spark cluster and a Spark Connect server
    "crash/": ("crash",),  # real writers killed with SIGKILL 60 times
    "serve/test_serve_crash.py": ("crash",),  # the server killed with SIGKILL 100 times
    "serve/attack/": ("attack",),  # real servers under slow clients, faults, full disks
    "pipeline_report/": ("browser",),  # every page opened in headless Chromium
    "pipeline_report/test_pipeline_report_run.py": ("browser", "spark"),
    "test_wheel.py": ("wheel",),  # builds the wheel and installs it in a fresh venv
    "proofs/test_shipped.py": ("proof",),  # `privilog prove` on every shipped policy at the default bound
    "test_docs_examples.py": ("docs",),  # every command of the README and docs/ run (servers among them)
    "test_docs_site.py": ("docs",),  # `mkdocs build --strict` of the whole site
}
# Modules of a folder above that start nothing slow: the Spark engine's pure-Python parts.
NOT_SLOW = {"spark/test_fused_shortcut.py"}


def kinds_of(path: Path) -> tuple[str, ...]:
    """The kinds of slowness of a test in the file at ``path`` (none for a fast test)."""
    try:
        relative = path.resolve().relative_to(TESTS).as_posix()
    except ValueError:
        return ()
    if relative in NOT_SLOW:
        return ()
    found: list[str] = []
    for prefix, kinds in KINDS.items():
        if relative == prefix or (prefix.endswith("/") and relative.startswith(prefix)):
            found.extend(k for k in kinds if k not in found)
    return tuple(found)


def mark_kinds(items: Iterable[pytest.Item]) -> None:
    for item in items:
        kinds = kinds_of(item.path)
        for kind in kinds:
            item.add_marker(getattr(pytest.mark, kind))
        if kinds:
            item.add_marker(pytest.mark.slow)


def chosen_profile(config: pytest.Config) -> str:
    """The profile this run uses: ``--hypothesis-profile`` if given, else ``PRIVILOG_HYPOTHESIS``, else ``ci``."""
    given = config.getoption("hypothesis_profile", None)
    if given:
        return str(given)
    name = os.environ.get(VARIABLE, "") or "ci"
    if name not in PROFILES:
        raise pytest.UsageError(f"{VARIABLE}={name}: not a profile; use one of {', '.join(PROFILES)} (unset: ci)")
    return name


_chosen: str | None = None  # the run's profile, once `load` has read it (None outside pytest)


def register() -> None:
    """Register ``quick`` (before Hypothesis' plugin may load it for ``--hypothesis-profile=quick``)."""
    settings.register_profile("quick", max_examples=100, deadline=None)  # each test's count scaled by the hook


def load(config: pytest.Config) -> None:
    """Load the profile chosen by the variable (``ci`` loads nothing; Hypothesis' plugin loads an option's)."""
    global _chosen
    _chosen = chosen_profile(config)
    if _chosen != "ci" and not config.getoption("hypothesis_profile", None):
        settings.load_profile(_chosen)


def quick() -> bool:
    return _chosen == "quick"


def examples(count: int) -> int:
    """A test's own example count under the profile in force: ``count``, or a tenth of it under ``quick``."""
    return max(1, math.ceil(count * QUICK_FRACTION)) if quick() else count


def scale_given_tests(items: Iterable[pytest.Item]) -> None:
    """Under ``quick``, each ``@given`` test draws :func:`examples` of its own count, without deadline.

    The settings a test runs with are the ones ``@given`` stored on it (read when it is called), so
    they are replaced there, once for each function (a parametrized test's items share it)."""
    if not quick():
        return
    done: set[int] = set()
    for item in items:
        test = getattr(item, "obj", None)
        test = getattr(test, "__func__", test)
        if not getattr(test, "is_hypothesis_test", False) or id(test) in done:
            continue
        done.add(id(test))
        own = getattr(test, "_hypothesis_internal_use_settings", None)
        if not isinstance(own, settings):
            raise pytest.UsageError(
                f"{VARIABLE}=quick: Hypothesis no longer keeps a test's settings where tests/tiers.py looks"
                f" ({item.nodeid}); run without it"
            )
        test._hypothesis_internal_use_settings = settings(
            own, max_examples=examples(own.max_examples), deadline=None
        )
