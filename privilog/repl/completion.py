"""Tab completion: what the word being typed may become, from the command table.

The first word is completed from the table's names (and the spellings it offers); the words
after it by the command's own completer. A query (``?-``) or a rule is Datalog: its words are
the policy's relations, and inside parentheses the world's entities, principals and quoted
actions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from privilog.repl.commands import COMMANDS, command_named
from privilog.repl.state import SessionState

DATALOG = ("?-", "rule ", "rule\n")  # a query, however spaced; a rule, after its command's name
_DATALOG_WORD = re.compile(r"[A-Za-z0-9_:.@\-\"]*$")


def fragment(text: str) -> str:
    """The end of ``text`` that a completion replaces: the word being typed, or in Datalog
    the name or constant after the last `(`, `,` or space.

    >>> fragment("check user:b")
    'user:b'
    >>> fragment("?- descendant(namespace:m")
    'namespace:m'
    """
    if _is_datalog(text):
        match = _DATALOG_WORD.search(text)
        return match.group(0) if match else ""
    return "" if not text or text[-1].isspace() else text.split()[-1]


def completions(session: SessionState, text: str) -> list[str]:
    """What the word being typed at the end of ``text`` may become (for Tab)."""
    current = fragment(text)
    if _is_datalog(text):
        return _datalog(session, text[: len(text) - len(current)], current)
    words = text[: len(text) - len(current)].split()
    pool: Sequence[str] = []
    if not words:
        pool = [name for c in COMMANDS.values() for name in (c.name, *(c.aliases if c.tab_offers_aliases else ()))]
    else:
        command = command_named(words[0])
        if command is not None and command.complete is not None:
            pool = command.complete(session, words[1:], current)
    return sorted({c for c in pool if c.startswith(current)})


def _datalog(session: SessionState, before: str, current: str) -> list[str]:
    if before.count("(") > before.count(")"):
        pool = [*session.entity_names(), *sorted(session.world.principals())]
        pool += [f'"{a}"' for a in session.policy.actions]
    else:
        pool = sorted(session.authorizer.program.relations)
    return sorted({c for c in pool if c.startswith(current)})


def _is_datalog(text: str) -> bool:
    return text.lstrip().startswith(DATALOG)
