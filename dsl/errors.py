"""Errors with a location: what is wrong, where, and how to fix it."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from privilog.dsl.ir import Span


class PrivilogError(Exception):
    """Any error privilog reports to a user: bad input, never a bug.

    The command line prints ``str(error)`` and exits 2.
    """

    located = False  # True when the message starts with the place it is about (file:line:col)


def one_line(text: str) -> str:
    r"""``text`` with line breaks and other control characters escaped, so a message stays one line.

    >>> one_line("user:e v\nil\x00")
    'user:e v\\nil\\x00'
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


class OneLineError(PrivilogError):
    """An error whose message is one line, whatever the input it quotes (a crafted id, a key)."""

    def __init__(self, message: str = "", *args: object):
        super().__init__(one_line(str(message)), *args)


class PolicyError(PrivilogError):
    """An error in a policy's text, rendered as ``file:line:col: message``,
    the offending line with a caret under the span, and a hint.
    """

    def __init__(self, message: str, span: Span, hint: str = "", source: str | None = None):
        self.message = message
        self.span = span
        self.hint = hint
        self.source = source
        super().__init__(self.render())

    def with_source(self, source: str) -> PolicyError:
        """The same error, able to show the offending line of ``source``."""
        return PolicyError(self.message, self.span, self.hint, source)

    def headline(self) -> str:
        """The one-line form: ``file:line:col: error: message``."""
        return f"{self.span}: error: {self.message}"

    def render(self) -> str:
        lines = [self.headline()]
        if self.source is not None and self.span.line > 0:
            source_lines = source_lines_of(self.source)
            if self.span.line <= len(source_lines):
                text = source_lines[self.span.line - 1]
                width = 1
                if self.span.end_line == self.span.line and self.span.end_column > self.span.column:
                    width = self.span.end_column - self.span.column
                lines.append(f"    {text}")
                lines.append("    " + " " * (self.span.column - 1) + "^" * width)
        if self.hint:
            lines.append(f"  hint: {self.hint}")
        return "\n".join(lines)


class PolicyErrors(PrivilogError):
    """Several policy errors found by one pass; shown one after the other."""

    located = True

    def __init__(self, errors: list[PolicyError]):
        self.errors = errors
        super().__init__("\n".join(e.render() for e in errors))

    def with_source(self, source: str) -> PolicyErrors:
        return PolicyErrors([e.with_source(source) for e in self.errors])


def source_lines_of(text: str) -> list[str]:
    """The lines of ``text`` as the parser counts them: split at ``\\n`` only.

    ``str.splitlines`` also splits at form feeds, ``\\x1c``-``\\x1e``, ``\\x85`` and
    ``\\u2028``/``\\u2029``, which may stand in comments and strings.

    >>> source_lines_of("a\\fb\\r\\nc\\n")
    ['a\\x0cb', 'c']
    """
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def did_you_mean(word: str, choices: Iterable[str], sigil: str = "") -> str:
    """A hint naming the closest of ``choices`` to ``word``, or an empty string.

    >>> did_you_mean("ADMN", ["READ", "ADMIN"])
    'did you mean `ADMIN`?'
    >>> did_you_mean("ownr", ["owner"], sigil="$")
    'did you mean `$owner`?'
    >>> did_you_mean("zzz", ["READ"])
    ''
    """
    pool = list(choices)
    close = difflib.get_close_matches(word, pool, n=1, cutoff=0.6)
    if not close:
        close = [c for c in pool if c.lower() == word.lower()]
    return f"did you mean `{sigil}{close[0]}`?" if close else ""


def relocate(error: PolicyError, offset: int, source: str, file: str) -> PolicyError:
    """An error found past ``offset`` lines of a combined text, placed in ``source`` instead.

    A query or a session's rule is parsed after lines it does not own (a rule head, the
    policy); its errors point into what the user typed.
    """
    span = error.span
    if span.line <= offset:
        return error
    moved = Span(file, span.line - offset, span.column, max(span.end_line - offset, 0), span.end_column)
    return PolicyError(error.message, moved, error.hint, source)


def relocate_all(errors: PolicyError | PolicyErrors, offset: int, source: str, file: str) -> PrivilogError:
    """:func:`relocate` for one error or several."""
    if isinstance(errors, PolicyErrors):
        return PolicyErrors([relocate(e, offset, source, file) for e in errors.errors])
    return relocate(errors, offset, source, file)


def article(word: str) -> str:
    """``word`` with `a` or `an` before it, as its sound starts.

    >>> article("artifact"), article("dataset"), article("instance")
    ('an artifact', 'a dataset', 'an instance')
    """
    return f"{'an' if word[:1].lower() in 'aeio' else 'a'} {word}"
