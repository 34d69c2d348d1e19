"""``privilog test -k EXPR``: which cases run, chosen by their names.

An expression is made of terms joined by ``and``, ``or`` and ``not`` (in that
order of binding: ``not`` tightest, then ``and``, then ``or``) and grouped with
parentheses. A term is one or more words that are not ``and``, ``or``, ``not``
or a parenthesis, joined by single spaces; it selects the cases whose name
contains it, ignoring case.

>>> selects = parse_selection("delete and not ns2")
>>> selects("Alice may DELETE ns1"), selects("alice may delete ns2"), selects("alice reads")
(True, False, False)
>>> parse_selection("may delete")("bob may delete ns1")
True
"""

from __future__ import annotations

import re
from collections.abc import Callable

from privilog.dsl.errors import PrivilogError

Selection = Callable[[str], bool]
KEYWORDS = ("and", "or", "not")


class SelectionError(PrivilogError):
    """A -k expression that does not parse."""


def _tokens(text: str) -> list[str]:
    return re.findall(r"\(|\)|[^\s()]+", text)


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = _tokens(text)
        self.at = 0

    def fail(self, what: str) -> SelectionError:
        return SelectionError(
            f"-k `{self.text}`: {what}; write words of case names joined by and, or, not, "
            "with parentheses, such as -k 'delete and not ns2'"
        )

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self) -> str:
        token = self.tokens[self.at]
        self.at += 1
        return token

    def parse(self) -> Selection:
        if not self.tokens:
            raise self.fail("the expression is empty")
        found = self.any_of()
        if self.peek() is not None:
            raise self.fail(f"unexpected `{self.peek()}`")
        return found

    def any_of(self) -> Selection:
        parts = [self.all_of()]
        while self.peek() == "or":
            self.take()
            parts.append(self.all_of())
        return parts[0] if len(parts) == 1 else (lambda name: any(p(name) for p in parts))

    def all_of(self) -> Selection:
        parts = [self.negation()]
        while self.peek() == "and":
            self.take()
            parts.append(self.negation())
        return parts[0] if len(parts) == 1 else (lambda name: all(p(name) for p in parts))

    def negation(self) -> Selection:
        if self.peek() == "not":
            self.take()
            inner = self.negation()
            return lambda name: not inner(name)
        return self.term()

    def term(self) -> Selection:
        token = self.peek()
        if token is None:
            raise self.fail("it ends where a name was expected")
        if token == "(":
            self.take()
            inner = self.any_of()
            if self.peek() != ")":
                raise self.fail("a `(` is not closed")
            self.take()
            return inner
        if token == ")" or token in KEYWORDS:
            raise self.fail(f"`{token}` where a name was expected")
        words = []
        while (word := self.peek()) is not None and word not in ("(", ")", *KEYWORDS):
            words.append(self.take())
        wanted = " ".join(words).casefold()
        return lambda name: wanted in name.casefold()


def parse_selection(text: str) -> Selection:
    """The cases ``-k text`` selects, as a test on a case's name."""
    return _Parser(text).parse()
