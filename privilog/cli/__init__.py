"""The ``privilog`` command line: argument parsing and output, one function per command.

Each command calls the API (``privilog.api``) or an application room
(``privilog.repl``, ``privilog.testing``, ``privilog.pipeline``) and prints
what it returns through ``privilog.render``. It is the one room that may import
the others; it decides nothing itself. ``main`` is the console script.
"""

from privilog.cli.commands import build_parser, main

__all__ = ["build_parser", "main"]
