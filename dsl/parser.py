"""Policy text to a Lark tree, with errors that name file, line and column."""

from __future__ import annotations

import io
from collections.abc import Iterator
from functools import lru_cache
from importlib.resources import files
from typing import Any

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken
from privilog.dsl.errors import PolicyError, source_lines_of
from privilog.dsl.ir import Span

# A line ending in one of these continues on the next line.
_CONTINUES = frozenset(
    {"COMMA", "VBAR", "OR", "IF", "ELSE", "ON", "REQUIRES", "SHOWS", "IMPLIES", "EQUAL", "LPAR", "NOT"}
)

# How the grammar's terminals read in an "expected ..." message.
_TERMINAL_WORDS = {
    "NAME": "a name",
    "ARG": "an argument such as `$owner`",
    "STRING": "a quoted string",
    "ENTITY": "an entity id such as `namespace:ns1`",
    "NUMBER": "a number",
    "_NL": "the end of the line",
    "$END": "the end of the file",
    "COMMA": "`,`",
    "VBAR": "`|`",
    "LPAR": "`(`",
    "RPAR": "`)`",
    "COLON": "`:`",
    "DOT": "`.`",
    "EQUAL": "`=`",
    "CMP": "a comparison",
    "REQUIRES": "`requires`",
    "SHOWS": "`shows`",
    "SELF": "`self`",
    "PARENT": "`parent`",
    "EVERY": "`every`",
    "SELF_OR_DESCENDANT": "`self or descendant`",
    "SELF_OR_WITHIN": "`self or within`",
    "EVERY_DESCENDANT": "`every descendant`",
    "ON": "`on`",
    "OR": "`or`",
    "IF": "`if`",
    "ELSE": "`else`",
    "NOT": "`not`",
    "NOTHING": "`nothing`",
    "IMPLIES": "`:-`",
}


class Continuation:
    """Postlexer: drops a newline that cannot end a statement.

    A newline inside parentheses, or after a token that needs more (``,``,
    ``|``, ``:-``, ``or``, ``on`` ...), continues the statement, so long
    requirement lists and rule bodies can wrap.
    """

    always_accept = ("_NL",)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        depth = 0
        previous: Token | None = None
        for token in stream:
            if token.type == "_NL":
                if depth > 0 or previous is None or previous.type in _CONTINUES or previous.type == "_NL":
                    continue
            elif token.type == "LPAR":
                depth += 1
            elif token.type == "RPAR":
                depth = max(0, depth - 1)
            previous = token
            yield token


_OPTIONS = {"parser": "lalr", "lexer": "contextual", "propagate_positions": True, "maybe_placeholders": False}


def _lark(**given: Any) -> Lark:
    """The grammar's parser, with ``given`` (its postlexer and callbacks): its LALR tables read from the
    user's cache (:mod:`privilog.dsl.cache`) as Lark saved them, else built (30 ms) and kept there."""
    import lark
    from privilog.dsl import cache

    grammar = files("privilog.dsl").joinpath("policy.lark").read_text(encoding="utf-8")
    file = cache.key("grammar", grammar, lark.__version__, repr(sorted(_OPTIONS.items()))) + ".lark.pickle"
    saved = cache.read(file)
    if saved is not None:
        try:
            loaded: Lark = Lark.__new__(Lark)._load(io.BytesIO(saved), **given)  # as Lark's own cache=
            return loaded
        except Exception:  # a broken or foreign file: build the parser
            pass
    built = Lark(grammar, **_OPTIONS, **given)
    data = io.BytesIO()
    built.save(data, exclude_options=("postlex", "lexer_callbacks"))
    cache.write(file, data.getvalue())
    return built


@lru_cache(maxsize=1)
def _parser() -> Lark:
    return _lark(postlex=Continuation())


_COLLECTED: list[list[Token]] = []


@lru_cache(maxsize=1)
def _commenting_parser() -> Lark:
    """A second parser that hands comment tokens to the formatter.

    Lark calls lexer callbacks on a parser built with them, so the formatter's
    parser is separate from the plain one (which pays nothing for comments).
    """

    def collect(token: Token) -> Token:
        _COLLECTED[-1].append(token)
        return token

    return _lark(postlex=Continuation(), lexer_callbacks={"COMMENT": collect})


def _describe(expected: set[str]) -> str:
    words = sorted({_TERMINAL_WORDS.get(t, f"`{t.lower()}`") for t in expected if not t.startswith("__")})
    if not words:
        return "something else"
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " or " + words[-1]


def _found(token: Token) -> str:
    if token.type == "$END":
        return "end of file"
    if token.type == "_NL":
        return "end of line"
    return f"`{token}`"


def _error(exc: UnexpectedInput, file: str, text: str) -> PolicyError:
    line = getattr(exc, "line", 0) or 0
    column = getattr(exc, "column", 0) or 0
    if isinstance(exc, UnexpectedCharacters):
        position = exc.pos_in_stream or 0
        char = text[position] if position < len(text) else ""
        span = Span(file, line, column, line, column + 1)
        return PolicyError(
            f"unexpected character `{char}`",
            span,
            "names are letters, digits and `_`; comments start with `#`",
            text,
        )
    if isinstance(exc, UnexpectedEOF):
        lines = source_lines_of(text)
        span = Span(file, len(lines), len(lines[-1]) + 1)
        return PolicyError(f"unexpected end of file, expected {_describe(set(exc.expected))}", span, "", text)
    assert isinstance(exc, UnexpectedToken)
    token = exc.token
    if token.type == "$END":
        lines = source_lines_of(text)
        line, column = len(lines), len(lines[-1]) + 1
    end_column = (token.end_column or column + 1) if token.type not in ("_NL", "$END") else column + 1
    span = Span(file, line, column, line, end_column)
    # LALR merges lookaheads, so `expected` may name tokens that cannot follow
    # here (`:-` after a rule's body); `accepts` asks the parser itself.
    expected = set(exc.accepts or exc.expected)
    if "_NL" in expected:
        expected.discard("$END")
    hint = ""
    if token.type in ("_NL", "$END") and "DOT" in expected:
        hint = "a Datalog rule or fact ends with `.`"
    elif token.type == "_NL":
        hint = "to continue a statement on the next line, end the line with `,` or `|`"
    return PolicyError(f"unexpected {_found(token)}, expected {_describe(expected)}", span, hint, text)


def parse_tree(text: str, file: str = "<policy>", comments: list[Token] | None = None) -> Tree[Token]:
    """Parse policy text to a Lark tree; raise :class:`PolicyError` on bad syntax.

    When ``comments`` is given, the comment tokens are appended to it (for the formatter).
    """
    parser = _commenting_parser() if comments is not None else _parser()
    _COLLECTED.append([])
    try:
        return parser.parse(text)
    except UnexpectedInput as exc:
        raise _error(exc, file, text) from None
    finally:
        collected = _COLLECTED.pop()
        if comments is not None:
            comments.extend(collected)
