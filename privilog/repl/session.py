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

import glob
import os
import re
import traceback
from collections.abc import Sequence
from dataclasses import dataclass

from privilog import dsl
from privilog.dsl.errors import PrivilogError, did_you_mean
from privilog.engine.world import ALL
from privilog.repl.command import Line
from privilog.repl.commands import ALIASES, COMMANDS, command_named
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
        """The end of ``text`` that a completion replaces: the word being typed, or in Datalog
        the name or constant after the last `(`, `,` or space."""
        if _is_datalog(text):
            match = _DATALOG_WORD.search(text)
            return match.group(0) if match else ""
        return "" if not text or text[-1].isspace() else text.split()[-1]

    def completions(self, text: str) -> list[str]:
        """What the word being typed at the end of ``text`` may become (for Tab)."""
        current = self.fragment(text)
        if _is_datalog(text):
            return self._datalog_completions(text[: len(text) - len(current)], current)
        words = text[: len(text) - len(current)].split()
        if not words:
            pool: Sequence[str] = [*COMMANDS, "exit"]
        else:
            pool = self._word_candidates(ALIASES.get(words[0], words[0]), words[1:], current)
        return sorted({c for c in pool if c.startswith(current)})

    def _word_candidates(self, command: str, words: list[str], current: str) -> Sequence[str]:
        at = len(words)
        principals = sorted(self.world.principals())
        operations = [o.qualified for o in self.policy.operations]
        if command in ("check", "why", "whynot"):
            if at == 0:
                return principals
            return self._request_candidates(words[1:], current, operations)
        if command == "who":
            return self._request_candidates(words, current, operations)
        if command == "list":
            if at == 0:
                return principals
            if words[-1] == "--in":
                return self.entity_names()
            return [*self.authorizer.listable_types(), "--in"] if at == 1 else ["--in"]
        if command in ("grant", "revoke"):
            return self._grant_candidates(words, principals)
        if command == "entity":
            if at == 0:
                return ["add", "delete"]
            if words[-1] == "as":
                return sorted(self.world.admins)
            if words[0] == "delete":
                return sorted(str(e) for e in self.world.existing())
            return [*self.entity_names(), *(f"{t.name}:" for t in self.policy.entity_types)]
        if command == "help":
            return list(COMMANDS) if not words else []
        return self._file_candidates(command, words, current)

    def _request_candidates(self, words: list[str], current: str, operations: list[str]) -> Sequence[str]:
        """Candidates after the principal: OPERATION ENTITY [NAME=VALUE]..."""
        if not words:
            return operations
        op = self.policy.operation(words[0])
        if len(words) == 1:
            names = self.entity_names()
            return [n for n in names if op is None or n.startswith(op.entity_type + ":")]
        if op is None:
            return []
        if "=" in current:
            name = current.split("=", 1)[0]
            param = next((p for p in op.params if p.name == name), None)
            if param is None:
                return []
            values = ["true", "false"] if param.type == "bool" else self.entity_names(param.type)
            return [f"{name}={v}" for v in values]
        return [f"{p.name}=" for p in op.params]

    def _grant_candidates(self, words: list[str], principals: list[str]) -> Sequence[str]:
        if not words:
            return principals
        if len(words) == 1:
            return [*self.policy.actions, ALL]
        if words[-1] == "as":
            return sorted(self.world.admins)
        return [*self.entity_names(), "as"] if "as" not in words else []

    def _file_candidates(self, command: str, words: list[str], current: str) -> Sequence[str]:
        """Policies and worlds: the shipped policies by name, and paths."""
        shipped = sorted(p.stem for p in dsl.rules_dir().glob("*.policy"))
        if command == "diff":
            return [*shipped, *_paths(current)] if not words else ["--world"]
        if command == "load":
            if not words:
                return ["policy", "world"]
            if len(words) == 1:
                return [*shipped, *_paths(current)] if words[0] == "policy" else _paths(current)
        if command == "save":
            if not words:
                return ["world"]
            if len(words) == 1:
                return _paths(current)
        return []

    def _datalog_completions(self, before: str, current: str) -> list[str]:
        if before.count("(") > before.count(")"):
            pool = [*self.entity_names(), *sorted(self.world.principals())]
            pool += [f'"{a}"' for a in self.policy.actions]
        else:
            pool = sorted(self.authorizer.program.relations)
        return sorted({c for c in pool if c.startswith(current)})


# ---- rendering -------------------------------------------------------------------------


_DATALOG_WORD = re.compile(r"[A-Za-z0-9_:.@\-\"]*$")


def _is_datalog(text: str) -> bool:
    return text.lstrip().startswith(("?-", "rule ", "rule\n"))


def _paths(prefix: str) -> list[str]:
    """Files and folders that complete ``prefix``."""
    found = sorted(glob.glob(os.path.expanduser(prefix) + "*"))[:50]
    return [p + "/" if os.path.isdir(p) else p for p in found]
