"""Shell completion: ``privilog completion bash|zsh|fish`` prints the script a shell sources.

The shell then runs ``privilog`` itself with argcomplete's variables set; :func:`complete` answers and
exits before any command runs. Beyond commands and options (from the parser, so never out of date),
it completes what a command's arguments name:

* a policy (``--policy``, ``diff``'s two, ``fmt``, ``prove``): the policies in ``rules/`` and ``*.policy`` files;
* an operation: those of the policy the line names (``--policy``, default ``cdap``);
* a principal and an entity: those of the world the line names (``--world``), when it names one.

A completer that fails (a policy that does not parse, a world that cannot be read) offers nothing:
completion never prints an error into the user's prompt.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

from privilog.usage import EXIT_OK

SHELLS = ("bash", "zsh", "fish")


def register(sub: Any) -> None:
    text = "print the shell completion script for bash, zsh or fish"
    p = sub.add_parser(
        "completion",
        help=text,
        description=text + '. Load it in the running shell with `eval "$(privilog completion bash)"` '
        "(zsh: the same with zsh; fish: `privilog completion fish | source`), or add that line to the "
        "shell's start-up file.",
    )
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    p.set_defaults(run=cmd_completion)


def cmd_completion(args: argparse.Namespace) -> int:
    from argcomplete.shell_integration import shellcode

    sys.stdout.write(shellcode(["privilog"], shell=args.shell))
    return EXIT_OK


def complete(parser: argparse.ArgumentParser) -> None:
    """When the shell asks (argcomplete's ``_ARGCOMPLETE`` is set), print the completions and exit."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    import argcomplete

    _attach(parser)
    argcomplete.autocomplete(parser, always_complete_options=False)  # options once a - is typed


def _quietly(completer: Callable[..., Iterable[str]]) -> Callable[..., list[str]]:
    def run(prefix: str, parsed_args: argparse.Namespace | None = None, **_: Any) -> list[str]:
        try:
            return sorted({c for c in completer(prefix, parsed_args) if c.startswith(prefix)})
        except Exception:  # a policy or world that cannot be read: nothing to offer, and nothing printed
            return []

    return run


def _policies(prefix: str, parsed_args: Any) -> Iterable[str]:
    from argcomplete.completers import FilesCompleter

    from privilog import dsl

    yield from (path.stem for path in dsl.rules_dir().glob("*.policy"))
    yield from FilesCompleter(allowednames=("policy",))(prefix)  # folders too, to walk into


def _operations(prefix: str, parsed_args: Any) -> Iterable[str]:
    from privilog import dsl

    return [op.qualified for op in dsl.load_policy(getattr(parsed_args, "policy", None) or "cdap").operations]


def _world(parsed_args: Any) -> Any:
    path = getattr(parsed_args, "world", None)
    if not path:
        return None
    from privilog import dsl
    from privilog.api import load_world_for

    return load_world_for(dsl.load_policy(getattr(parsed_args, "policy", None) or "cdap"), path)


def _principals(prefix: str, parsed_args: Any) -> Iterable[str]:
    world = _world(parsed_args)
    return world.principals() if world is not None else ()


def _entities(prefix: str, parsed_args: Any) -> Iterable[str]:
    world = _world(parsed_args)
    return [str(e) for e in world.existing()] if world is not None else ()


COMPLETERS = {
    "policy": _policies,
    "left": _policies,
    "right": _policies,
    "files": _policies,
    "policies": _policies,
    "operation": _operations,
    "principal": _principals,
    "entity": _entities,
    "within": _entities,
}


def _attach(parser: argparse.ArgumentParser) -> None:
    """Give each argument named in COMPLETERS its completer, in every subcommand's parser."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in set(action.choices.values()):
                _attach(child)
        elif action.dest in COMPLETERS and not action.choices:
            action.completer = _quietly(COMPLETERS[action.dest])  # type: ignore[attr-defined]
