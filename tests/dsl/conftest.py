"""Keep a failing hypothesis test readable under ``filterwarnings = ["error"]``.

For a failing example the hypothesis pytest plugin imports libcst (to suggest
an ``@example`` patch), and that import warns (``mypy_extensions.TypedDict is
deprecated``). As an error, the warning becomes a pytest INTERNALERROR that
hides the failure itself, so import libcst here once, with the warning off.
"""

from __future__ import annotations

import contextlib
import warnings

with warnings.catch_warnings(), contextlib.suppress(ImportError):
    warnings.simplefilter("ignore", DeprecationWarning)
    import libcst  # noqa: F401
