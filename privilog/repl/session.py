"""The REPL's logic: a :class:`Session` that answers one line at a time.

``privilog repl`` is a thin terminal loop (privilog.repl.terminal) around a
Session; everything a line can do is reached from here and is tested through
:meth:`Session.one_shot`, which returns the text to print.

What a session holds (its policy, world and authorizer) is a
:class:`~privilog.repl.state.SessionState`; a Session is that state with the
command table (``privilog.repl.commands``) over it: a line's first word names
the command, whose handler runs the line.

>>> session = Session("cdap", {"entities": ["dataset:ns1.ds"], "admins": ["user:root"],
...                            "grants": [["user:bob", "WRITE", "dataset:ns1.ds"]]})
>>> print(session.one_shot("check user:bob dataset.read dataset:ns1.ds"))
DENY user:bob dataset.read dataset:ns1.ds: unmet: READ
>>> print(session.one_shot("grant user:bob READ dataset:ns1.ds as user:root"))
granted READ on dataset:ns1.ds to user:bob
>>> print(session.one_shot("check user:bob dataset.read dataset:ns1.ds"))
ALLOW user:bob dataset.read dataset:ns1.ds
>>> print(session.one_shot("?- child_of(dataset:ns1.ds, P)."))
P
-------------
namespace:ns1
(1 row)
"""

from __future__ import annotations

import os
import traceback
from dataclasses import dataclass

from privilog.dsl.errors import PrivilogError, did_you_mean
from privilog.repl import completion
from privilog.repl.command import Line
from privilog.repl.commands import COMMANDS, command_named
from privilog.repl.state import ReplError, SessionState


@dataclass(frozen=True)
class Reply:
    """What a line produced: the text to print, and whether it is an error (or a bug)."""

    text: str
    error: bool = False
    internal: bool = False


# ---- one line ------------------------------------------------------------------------


class Session(SessionState):
    """A session's state with the commands over it: each line runs one."""

    # ---- running a line ------------------------------------------------------------

    def one_shot(self, line: str) -> str:
        """Run one line (or a multi-line rule or query) and return the text to print."""
        return self.run(line).text

    def run(self, line: str) -> Reply:
        """Run one line; never raises (bad input and bugs become a Reply)."""
        try:
            if self.interrupted:
                self.rebuild()  # an interrupted evaluation may have left the backend half way
                self.interrupted = False
            if self.deployment is not None:
                self.deployment.catch_up()  # what others changed in the store meanwhile
                self.authorizer = self.deployment.authorizer
            notes = self.take_in()
            text = self._dispatch(line)
            return Reply("\n".join([*notes, text]) if notes else text)
        except KeyboardInterrupt:
            self.interrupted = True
            return Reply("cancelled", error=True)
        except PrivilogError as error:
            return Reply(str(error), error=True)
        except Exception as error:  # a bug in privilog: say so, and keep the session
            text = f"internal error: {type(error).__name__}: {error} (please report it)"
            if os.environ.get("PRIVILOG_DEBUG"):
                text += "\n" + traceback.format_exc().rstrip()
            return Reply(text, error=True, internal=True)

    def needs_more(self, text: str) -> bool:
        """Whether ``text`` continues on the next line: a line ending in `:-` or `,` starts a
        statement that goes on until a line ends in `.` (an empty line ends it too)."""
        lines = text.split("\n")
        if not lines[-1].strip():
            return False
        if lines[-1].rstrip().endswith("."):
            return False
        return any(line.rstrip().endswith((":-", ",")) for line in lines)

    def _dispatch(self, line: str) -> str:
        """The line run by its command's handler, found in the table (``commands.COMMANDS``)."""
        text = line.strip()
        if not text or text.startswith("#"):
            return ""
        if text.startswith("?-"):
            word, rest = "?-", text[2:]
        else:
            word, *others = text.split(None, 1)
            rest = others[0] if others else ""
        command = command_named(word)
        if command is None:
            hint = did_you_mean(word, COMMANDS) or "type `help` for the commands"
            raise ReplError(f"unknown command `{word}`: {hint}")
        return command.run(self, Line.read(command, rest))

    # ---- completion ----------------------------------------------------------------

    def fragment(self, text: str) -> str:
        """The end of ``text`` that a completion replaces (see ``privilog.repl.completion``)."""
        return completion.fragment(text)

    def completions(self, text: str) -> list[str]:
        """What the word being typed at the end of ``text`` may become (for Tab), from the table."""
        return completion.completions(self, text)
