"""What an administrator mistypes: a command, an option, an operation. One line, exit 2, the closest
thing suggested, and never the internal name (argparse's ``dest``) of an argument."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from privilog.cli import build_parser, main

SAMPLE_REQUEST = ["user:alice", "namespace.get", "namespace:sales"]


def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert (code, out) == (2, ""), err
    assert err.startswith("privilog: ") and err.count("\n") == 1 and "Traceback" not in err
    return err.strip()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["chek", *SAMPLE_REQUEST], "privilog: unknown command `chek`: did you mean `check`? (see `privilog --help`)"),
        (["lsit", "user:alice"], "privilog: unknown command `lsit`: did you mean `list`? (see `privilog --help`)"),
        (["store", "imprt", "w.yaml"],
         "privilog: store: unknown command `imprt`: did you mean `import`? (see `privilog store --help`)"),
        (["pipeline", "shw", "out"],
         "privilog: pipeline: unknown command `shw`: did you mean `show`? (see `privilog pipeline --help`)"),
        (["frobnicate"], "privilog: unknown command `frobnicate`: the commands are check, why, list,"),
    ],
)  # fmt: skip
def test_a_mistyped_command_gets_the_closest(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert _error(capsys, *argv).startswith(message)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["check", *SAMPLE_REQUEST, "--wrold", "w.yaml"],
         "privilog: check: unknown option `--wrold`: did you mean `--world`? (see `privilog check --help`)"),
        (["why", *SAMPLE_REQUEST, "--polcy=cdap"],
         "privilog: why: unknown option `--polcy`: did you mean `--policy`? (see `privilog why --help`)"),
        (["store", "export", "--stroe", "x.db"],
         "privilog: store export: unknown option `--stroe`: did you mean `--store`? (see `privilog store export --help`)"),
        (["check", *SAMPLE_REQUEST, "-z"], "privilog: check: unknown option `-z` (see `privilog check --help`)"),
        (["check", *SAMPLE_REQUEST, "more"], "privilog: check: unexpected argument: more (see `privilog check --help`)"),
        (["why", *SAMPLE_REQUEST, "--format", "sgv"],
         "privilog: why: --format must be one of text, dot, svg, png, not `sgv`; did you mean `svg`? "
         "(see `privilog why --help`)"),
    ],
)  # fmt: skip
def test_a_mistyped_option_gets_the_closest(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert _error(capsys, *argv) == message


@pytest.mark.parametrize(
    ("operation", "entity", "meant"),
    [
        ("namespace.read", "namespace:sales", "namespace.get"),  # the closest spelling is namespace.create
        ("dataset.delete", "dataset:sales.orders", "dataset.drop"),
        ("dataset.modify", "dataset:sales.orders", "dataset.update"),
        ("program.run", "program:sales.etl.workflow.nightly", "program.start"),
        ("namespace.crate", "namespace:sales", "namespace.create"),  # a plain typo: the closest spelling
    ],
)
def test_an_operation_named_by_another_word_suggests_the_one_that_does_it(
    capsys: pytest.CaptureFixture[str], operation: str, entity: str, meant: str
) -> None:
    message = _error(capsys, "check", "user:alice", operation, entity)
    assert message == f"privilog: unknown operation `{operation}` in policy cdap: did you mean `{meant}`?"


def _parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


def _internal_names(parser: argparse.ArgumentParser) -> set[str]:
    """The argument names a user never types nor sees in --help: a subcommand's dest, an option's dest."""
    names = set()
    for _, p in _parsers(parser):
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                names.add(action.dest)
            elif action.option_strings and action.dest != argparse.SUPPRESS:
                shown = {o.lstrip("-").replace("-", "_") for o in action.option_strings}
                if action.dest not in shown:
                    names.add(action.dest)  # such as --in's `within`
    return names


def _named(err: str) -> list[str]:
    """The arguments an error names the way argparse does: `argument NAME: ...`, `... are required: A, B`,
    or any word in backquotes."""
    named = re.findall(r"argument (\S+?):", err) + re.findall(r"`([^`]+)`", err)
    for listed in re.findall(r"required: (.*?) \(see", err):
        named += listed.split(", ")
    return named


def test_no_error_names_an_argument_by_its_internal_name(capsys: pytest.CaptureFixture[str]) -> None:
    """Every command and subcommand, given nothing, an unknown option, and each option with a bad value."""
    parser = build_parser()
    internal = _internal_names(parser)
    assert {"command", "store_command", "within"} <= internal
    lines = []
    for path, p in _parsers(parser):
        tries = [[*path], [*path, "--no-such-option"]]
        for action in p._actions:
            if action.option_strings and action.nargs != 0 and not isinstance(action, argparse._HelpAction):
                tries.append([*path, action.option_strings[-1]])  # the value missing
                if action.choices is not None or action.type is not None:
                    tries.append([*path, f"{action.option_strings[-1]}=not-a-value-@"])
        for argv in tries:
            code = main(argv)
            err = capsys.readouterr().err
            if code == 2:
                lines.append((argv, err))
    assert len(lines) > 100
    leaks = [
        f"privilog {' '.join(argv)}: {err.strip()}"
        for argv, err in lines
        for named in _named(err)
        if named in internal
    ]
    assert leaks == []
    assert all(err.count("\n") == 1 and "Traceback" not in err for _, err in lines)
