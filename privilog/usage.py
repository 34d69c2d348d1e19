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


class CommandParser(argparse.ArgumentParser):
    """An argument parser that raises :class:`UsageError` instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see `{self.prog} --help`)")
