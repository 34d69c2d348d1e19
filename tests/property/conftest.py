"""Setup for the property tests.

(Kept in tests/property, not tests/: a conftest.py in tests/ would put tests/ on
sys.path, where tests/dsl and tests/engine would shadow the dsl and engine packages.)

When a Hypothesis test fails, Hypothesis' pytest plugin imports
``hypothesis.extra._patching`` (to suggest an ``@example`` patch), which imports
libcst, which triggers a DeprecationWarning from mypy_extensions. With
``filterwarnings = ["error"]`` (pyproject.toml) that warning becomes an
INTERNALERROR that aborts the whole session and hides the failing example.
Importing the module once here, with that warning silenced, keeps a failing
property test an ordinary failure.
"""

from __future__ import annotations

import contextlib
import warnings

# ImportError: hypothesis (or libcst) is not installed, and there is nothing to pre-import.
with warnings.catch_warnings(), contextlib.suppress(ImportError):
    warnings.simplefilter("ignore", DeprecationWarning)
    import hypothesis.extra._patching  # noqa: F401

from hypothesis import settings

# `--hypothesis-profile=long`: the program-level differential tests (test_programs.py) draw
# thousands of programs instead of the suite's few hundred (tests/README.md, "Programs").
settings.register_profile("long", max_examples=5000, deadline=None)
# `--hypothesis-profile=mutation`: a few programs, derandomized, for each mutant of a mutation run
settings.register_profile("mutation", max_examples=40, deadline=None, derandomize=True)
