"""What every privilog command line shares: its argument parser and its exit codes.

The ``privilog`` command line (:mod:`privilog.cli`) and the pipeline's own
entry point for ``spark-submit`` (:mod:`privilog.pipeline`) both parse with
:class:`CommandParser`, so a bad command line is one :class:`UsageError`,
never argparse's exit: a mistyped command or option gets a did-you-mean, and no argument's internal
name (its ``dest``) is shown. It imports nothing of privilog but ``did_you_mean``, when a line is wrong.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

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


def _closest(word: str, choices: Iterable[str]) -> str:
    """``did you mean `X`?``, or an empty string (dsl.errors.did_you_mean, as for an operation)."""
    from privilog.dsl.errors import did_you_mean

    return did_you_mean(word, choices)


class CommandParser(argparse.ArgumentParser):
    """An argument parser that raises :class:`UsageError` instead of exiting.

    Unlike argparse's own, its messages name a missing or unknown command as a command (never the
    internal name of the argument that holds it) and suggest the closest command or option.
    """

    def error(self, message: str) -> NoReturn:
        for action in self._subcommands():
            # argparse names a missing command by the action's dest (`store_command`): say what it is
            if message == f"the following arguments are required: {action.dest}":
                message = f"a command is missing: one of {', '.join(action.choices)}"
        raise UsageError(f"{self.prog}: {message} (see `{self.prog} --help`)")

    def _subcommands(self) -> list[argparse._SubParsersAction[Any]]:
        return [a for a in self._actions if isinstance(a, argparse._SubParsersAction)]

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if isinstance(action, argparse._SubParsersAction) and value not in action.choices:
            hint = _closest(value, action.choices) or f"the commands are {', '.join(action.choices)}"
            raise argparse.ArgumentError(None, f"unknown command `{value}`: {hint}")
        if action.choices is not None and value not in action.choices and isinstance(value, str):
            name = "/".join(action.option_strings) or action.metavar or action.dest
            choices = ", ".join(str(c) for c in action.choices)
            hint = _closest(value, [str(c) for c in action.choices])
            message = f"{name} must be one of {choices}, not `{value}`" + (f"; {hint}" if hint else "")
            raise argparse.ArgumentError(None, message)
        super()._check_value(action, value)

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            chosen = self._chosen(parsed)
            chosen.error(chosen._unrecognized(extras))
        return parsed

    def _chosen(self, parsed: argparse.Namespace) -> CommandParser:
        """The parser of the (sub)command the line chose: the one whose options an unknown option was meant for."""
        for action in self._subcommands():
            parser = action.choices.get(getattr(parsed, action.dest, None) or "")
            if isinstance(parser, CommandParser):
                return parser._chosen(parsed)
        return self

    def _unrecognized(self, extras: list[str]) -> str:
        """What is wrong with arguments no parser took: an unknown option (with the closest), or one too many."""
        options = [o for a in self._actions for o in a.option_strings if o.startswith("--")]
        for extra in extras:
            if extra.startswith("-") and extra != "-":
                option = extra.split("=", 1)[0]
                hint = _closest(option, options) if option.startswith("--") else ""
                return f"unknown option `{option}`" + (f": {hint}" if hint else "")
        return f"unexpected argument{'s' if len(extras) > 1 else ''}: {' '.join(extras)}"


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
