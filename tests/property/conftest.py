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
