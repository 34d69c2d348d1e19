"""The shape of a REPL command, and of the line it runs on.

A :class:`Command` is one row of the session's table (``privilog.repl.commands``): its name
and other spellings, how it is written, its help, the handler that runs it and the completer
that offers its next word on Tab. A
:class:`Line` is what a handler is given: its command, and the words after the command's
name (or, for a command that takes Datalog, that text as written).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass

from privilog.repl.state import ReplError, SessionState

Handler = Callable[[SessionState, "Line"], str]
"""A command's work: the session and the line in, the text to print out (or a ReplError)."""

Completer = Callable[[SessionState, list[str], str], Sequence[str]]
"""What the word being typed may become: the session, the words after the command's name, and
the word being typed (a completer may offer more; only those that start with it are kept)."""


@dataclass(frozen=True)
class Command:
    """One REPL command: how it is written, what it does, an example, its handler and its completer."""

    name: str
    usage: str
    summary: str
    example: str
    detail: str = ""
    _: KW_ONLY
    run: Handler
    complete: Completer | None = None  # None: Tab offers nothing after the name
    aliases: tuple[str, ...] = ()  # other spellings a line may use
    tab_offers_aliases: bool = False  # Tab offers the other spellings too, beside the name
    takes_text: bool = False  # Datalog: the handler reads the line as written, not split into words


@dataclass(frozen=True)
class Line:
    """A line the session runs: its command, the words after the command's name, and that text."""

    command: Command
    words: list[str]
    text: str

    @classmethod
    def read(cls, command: Command, text: str) -> Line:
        """The line for ``command`` whose text after the name is ``text``; words as a shell splits
        them (quotes keep spaces), unless the command takes its text as written."""
        if command.takes_text:
            return cls(command, [], text)
        try:
            return cls(command, shlex.split(text), text)
        except ValueError as error:
            raise ReplError(f"cannot read the line: {error}") from None

    def misused(self) -> ReplError:
        """The error for a line that does not fit its command: how it is written, and an example."""
        return ReplError(f"usage: {self.command.usage}  (for example: {self.command.example})")
