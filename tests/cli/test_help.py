"""Every command, subcommand, argument and option of `privilog` says what it is for in --help."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from privilog.cli import build_parser


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # an alias is the same parser
                yield from _parsers(sub)


def test_every_option_and_argument_has_help() -> None:
    missing = [
        f"{parser.prog}: {'/'.join(action.option_strings) or action.dest}"
        for parser in _parsers(build_parser())
        for action in parser._actions
        if not isinstance(action, argparse._SubParsersAction) and not (action.help or "").strip()
    ]
    assert missing == []


def test_every_command_has_help_in_the_list_of_commands() -> None:
    missing = [
        f"{parser.prog} {choice.dest}"
        for parser in _parsers(build_parser())
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for choice in action._choices_actions
        if not (choice.help or "").strip()
    ]
    assert missing == []


def test_the_walk_sees_every_command() -> None:
    progs = {parser.prog for parser in _parsers(build_parser())}
    assert {"privilog who", "privilog query", "privilog store audit", "privilog pipeline decide"} <= progs
