"""What every privilog command line shares: its argument parser and its exit codes.

The ``privilog`` command line (:mod:`privilog.cli`) and the pipeline's own
entry point for ``spark-submit`` (:mod:`privilog.pipeline`) both parse with
:class:`CommandParser`, so a bad command line is one :class:`UsageError`,
never argparse's exit. It imports nothing of privilog.
"""

from __future__ import annotations

import argparse
from typing import NoReturn

EXIT_OK, EXIT_DENY, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


class UsageError(Exception):
    """A command line that cannot be run as written."""


class MissingExtra(UsageError):
    """A command that needs an optional part of privilog (an extra) which is not installed."""


# Each extra (pyproject.toml's optional-dependencies): the module it is known by, and what it is called.
EXTRAS = {
    "serve": ("starlette", "Starlette and uvicorn"),
    "postgres": ("psycopg", "psycopg, the PostgreSQL driver"),
    "pictures": ("graphviz", "the graphviz package"),
    "prove": ("hypothesis", "Hypothesis"),
    "parquet": ("pyarrow", "pyarrow"),
    "spark": ("pyspark", "PySpark"),
}


def require_extra(extra: str, what: str, module: str | None = None, instead: str = "") -> None:
    """Raise :class:`MissingExtra`, one line naming ``pip install 'privilog[EXTRA]'``, when the module
    that ``extra`` installs (or ``module``) is not importable; ``what``: the command or option that needs it,
    ``instead``: what else works without it.

    >>> try:
    ...     require_extra("serve", "serve", module="no_such_module_here")
    ... except MissingExtra as error:
    ...     print(error)
    serve needs Starlette and uvicorn (privilog's serve extra), which is not installed: \
`pip install 'privilog[serve]'`
    """
    from importlib.util import find_spec

    name, package = EXTRAS[extra]
    try:
        found = find_spec(module or name) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise MissingExtra(
            f"{what} needs {package} (privilog's {extra} extra), which is not installed: "
            f"`pip install 'privilog[{extra}]'`" + (f", or {instead}" if instead else "")
        )


class CommandParser(argparse.ArgumentParser):
    """An argument parser that raises :class:`UsageError` instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see `{self.prog} --help`)")


def count(text: str) -> int:
    """An argparse type: a whole number of things, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, not {value}")
    return value


def add_least_privilege_options(p: argparse.ArgumentParser, verify: str, exact_limit: int) -> None:
    """The options ``privilog unused`` and ``privilog pipeline unused`` share (``verify``: how each re-decides)."""
    p.add_argument(
        "--verify",
        action="store_true",
        help=f"{verify}: every request allowed before must stay allowed",
    )
    p.add_argument(
        "--exact-limit",
        type=count,
        default=exact_limit,
        metavar="N",
        help=f"solve a part with at most N candidate grants exactly, larger ones greedily (default {exact_limit})",
    )
    p.add_argument("--json", action="store_true", help="print the report as one JSON object (every grant listed)")
