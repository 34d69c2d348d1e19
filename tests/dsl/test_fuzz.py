"""The parser fuzzed from its own grammar (`hypothesis.extra.lark.from_lark`).

Properties:

* parsing (``parse_unchecked``, ``parse_policy``) raises nothing but a
  :class:`~dsl.errors.PrivilogError`, whatever the text, and a located error
  points inside the text;
* parse → format → parse round-trips (``format_text`` and ``format_policy``),
  and ``format_text`` is idempotent.

The grammar's text is generated without the postlexer (`from_lark` ignores
lexers); every token is followed by a space so keywords and names stay apart,
and names are drawn mostly from a small vocabulary so that a fair share of the
generated policies lower, or even pass the checks. The examples the fuzzer
found that broke a property are pinned at the end as regression tests.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st
from hypothesis.extra.lark import from_lark
from lark import Lark
from privilog.dsl.errors import PolicyError, PolicyErrors, PrivilogError

from privilog import dsl

ROOT = Path(__file__).resolve().parents[2]
FILE = "fuzz.policy"

FUZZ = settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)


@lru_cache(maxsize=1)
def grammar() -> Lark:
    """dsl/policy.lark as a plain Lark object: no postlexer, nothing but the grammar."""
    text = (ROOT / "dsl" / "policy.lark").read_text(encoding="utf-8")
    return Lark(text, parser="lalr", lexer="contextual")


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


# Words for the terminals that are not fixed strings: mostly names the checks
# know (so some policies pass them), a near miss or two, and the terminal's own
# regular expression for everything else.
_VOCABULARY: dict[str, st.SearchStrategy[str]] = {
    "NAME": st.sampled_from(
        [
            "READ", "WRITE", "EXECUTE", "ADMIN", "ADMN", "any",
            "namespace", "application", "program", "dataset", "kerberosprincipal", "bool",
            "get", "create", "delete", "deploy",
            "grant", "member_of", "child_of", "p", "q", "P", "X", "Y", "_",
        ]
    ),
    "ARG": st.sampled_from(["$owner", "$artifact", "$new_artifact", "$program"]),
    "ENTITY": st.sampled_from(["namespace:ns1", "user:alice", "dataset:ns1.a.b", "kerberosprincipal:alice@EXAMPLE.COM"]),
    "STRING": st.text(st.sampled_from('ab "\\$:#.'), max_size=6).map(_quote),
    "NUMBER": st.integers(-99, 99).map(str),
    "CMP": st.sampled_from(["==", "!=", "<", "<=", ">", ">="]),
    "SELF_OR_DESCENDANT": st.sampled_from(["self or descendant", "self \tor  descendant"]),
    "EVERY_DESCENDANT": st.sampled_from(["every descendant", "every\tdescendant"]),
}
_NEWLINES = st.sampled_from(["\n", "\n\n", "\n  ", "\r\n", "\n\t\n    "])
# Mostly nothing: a comment that ends its line mid-statement usually breaks it.
_COMMENTS = st.sampled_from(["", "  # why\n", "  # to the end of the line"] + [""] * 20)
_BLANKS = st.sampled_from(["", " ", "\t"])


def _explicit(start: str) -> dict[str, st.SearchStrategy[str]]:
    """A strategy per terminal reachable from ``start``, each token followed by a space."""
    lark = grammar()
    terminals, _rules, ignored = lark.grammar.compile([start], ())
    out: dict[str, st.SearchStrategy[str]] = {}
    for terminal in terminals:
        own = st.from_regex(terminal.pattern.to_regexp(), fullmatch=True)
        if terminal.name == "_NL":
            out[terminal.name] = _NEWLINES
            continue
        if terminal.name in _VOCABULARY:
            word = _VOCABULARY[terminal.name] | _VOCABULARY[terminal.name] | own
        elif terminal.pattern.type == "str":
            word = st.just(terminal.pattern.value)
        else:
            word = own
        out[terminal.name] = word.map(lambda w: w + " ")
    for name in ignored:
        out[name] = _COMMENTS if name == "COMMENT" else _BLANKS
    return out


HEADER = """\
actions READ, WRITE, EXECUTE, ADMIN
set any = READ | WRITE | EXECUTE | ADMIN
entity namespace
entity application in namespace
entity program in application
entity dataset in namespace
entity kerberosprincipal
"""


def raw_policies() -> st.SearchStrategy[str]:
    """Sentences of the grammar with terminals as its regular expressions draw them (no spaces)."""
    return from_lark(grammar())


def policies() -> st.SearchStrategy[str]:
    """Whole policies, sometimes inside a block (operations lower only there) or after a vocabulary."""
    prefix = st.sampled_from(["", "namespace:\n", HEADER + "application:\n"])
    return st.builds(str.__add__, prefix, from_lark(grammar(), explicit=_explicit("start")))


def operation_blocks() -> st.SearchStrategy[str]:
    """A declared vocabulary and one block of generated operations: the part of the language with the most syntax."""
    operations = from_lark(grammar(), start="operation", explicit=_explicit("operation"))
    return st.lists(operations, min_size=1, max_size=3).map(lambda ops: HEADER + "application:\n" + "\n".join(ops))


def cdap_mutants() -> st.SearchStrategy[str]:
    """rules/cdap.policy with a few slices replaced by fragments of the language: text that mostly parses."""
    source = (ROOT / "rules" / "cdap.policy").read_text(encoding="utf-8")
    fragment = st.sampled_from(
        ["", "\n", ",", "|", "(", ")", ":", ".", "or", "if", "else", "not", "on", "every", "self", "parent",
         "$owner", "$new_artifact", "bool", "ADMN", "namespace", "nothing", ":-", "X", "p(X)", "#", '"']
    )
    edit = st.tuples(st.integers(0, len(source)), st.integers(0, 12), st.lists(fragment, max_size=3).map(" ".join))

    def apply(edits: list[tuple[int, int, str]]) -> str:
        text = source
        for position, cut, insert in edits:
            position %= len(text) + 1
            text = text[:position] + insert + text[position + cut :]
        return text

    return st.lists(edit, min_size=1, max_size=3).map(apply)



def assert_located_in(error: PolicyError, text: str) -> None:
    """A located error points inside ``text`` and shows the line it points at."""
    if error.span.file != "<policy>":
        return
    lines = text.split("\n")
    assert 1 <= error.span.line <= len(lines), error.render()
    assert error.span.column >= 1, error.render()
    rendered = error.render().split("\n")
    assert rendered[0].startswith(f"<policy>:{error.span.line}:{error.span.column}: error: ")
    shown = lines[:-1] if text.endswith("\n") else lines
    if error.source is not None and error.span.line <= len(shown):
        assert rendered[1] == "    " + shown[error.span.line - 1].removesuffix("\r"), error.render()
        assert rendered[2].lstrip(" ").startswith("^"), error.render()


def assert_only_privilog_errors(text: str, *, prelude: bool = False) -> None:
    """Parsing ``text`` succeeds or raises a PrivilogError; a located error lies inside the text."""
    for parse in (
        lambda: dsl.parse_unchecked(text),
        lambda: dsl.parse_policy(text, include_prelude=prelude),
    ):
        try:
            parse()
        except (PolicyError, PolicyErrors) as error:
            for one in error.errors if isinstance(error, PolicyErrors) else [error]:
                assert_located_in(one, text)
        except PrivilogError:
            pass


def assert_round_trips(text: str) -> None:
    """parse → format → parse gives the same IR, and formatting is idempotent."""
    try:
        policy = dsl.parse_unchecked(text)
    except PrivilogError:
        return
    canonical = dsl.format_text(text)
    assert dsl.parse_unchecked(canonical) == policy
    assert dsl.format_text(canonical) == canonical
    # Parsed from a named file, a policy without a `policy` line is named after
    # the file (see test_format_policy_of_an_unnamed_policy_parses).
    named = dsl.parse_unchecked(text, FILE)
    assert dsl.parse_unchecked(dsl.format_policy(named), FILE) == named
    try:
        checked = dsl.parse_policy(text, FILE, include_prelude=False)
    except PrivilogError:
        return
    assert dsl.parse_policy(canonical, FILE, include_prelude=False) == checked


def assert_parses_cleanly_and_round_trips(text: str) -> None:
    assert_only_privilog_errors(text)
    assert_round_trips(text)


@settings(FUZZ, max_examples=50)
@given(raw_policies())
def test_grammar_sentences_raise_only_privilog_errors(text: str) -> None:
    assert_only_privilog_errors(text)


@settings(FUZZ, max_examples=200)
@given(st.text())
def test_arbitrary_text_raises_only_privilog_errors(text: str) -> None:
    assert_only_privilog_errors(text)


@settings(FUZZ, max_examples=100)
@given(policies())
def test_generated_policies_parse_cleanly_and_round_trip(text: str) -> None:
    assert_parses_cleanly_and_round_trips(text)


@settings(FUZZ, max_examples=40)
@given(operation_blocks())
def test_generated_operation_blocks_parse_cleanly_and_round_trip(text: str) -> None:
    assert_parses_cleanly_and_round_trips(text)


@settings(FUZZ, max_examples=15)
@given(cdap_mutants())
def test_edited_cdap_policy_parses_cleanly_and_round_trips(text: str) -> None:
    """The shipped policy, with the prelude, a few edits away from valid: the checks see most of it."""
    assert_only_privilog_errors(text, prelude=True)
    assert_round_trips(text)


def _has_rules(text: str) -> bool:
    try:
        policy = dsl.parse_unchecked(text)
    except PrivilogError:
        return False
    return bool(policy.rules and policy.entity_types)


def _has_condition(text: str) -> bool:
    try:
        policy = dsl.parse_unchecked(text)
    except PrivilogError:
        return False
    return any(r.condition for op in policy.operations for r in op.requirements)


def _passes_checks(text: str) -> bool:
    try:
        policy = dsl.parse_policy(text, include_prelude=False)
    except PrivilogError:
        return False
    return bool(policy.operations)


@pytest.mark.parametrize(
    ("strategy", "wanted"),
    [(policies, _has_rules), (operation_blocks, _has_condition), (operation_blocks, _passes_checks)],
    ids=["rules-and-declarations", "guarded-requirements", "operations-that-pass-the-checks"],
)
def test_the_generators_reach_the_language(
    strategy: Callable[[], st.SearchStrategy[str]], wanted: Callable[[str], bool]
) -> None:
    """The round trips are worth their time only if the generators make policies that lower, with syntax in them."""
    find(strategy(), wanted, settings=settings(FUZZ, max_examples=300, database=None, phases=[Phase.generate]))


# -- examples the fuzzer found ------------------------------------------------


def test_format_text_keeps_each_actions_line() -> None:
    text = "actions READ\nactions WRITE\n"
    assert dsl.format_text(text) == text
    assert dsl.parse_unchecked(dsl.format_text(text)) == dsl.parse_unchecked(text)


@pytest.mark.parametrize(
    "text",
    [
        'policy p "say \\"hi\\""\n',
        'policy p "a\\\\"\n',
        'include "a\\"b"\n',
        'p(x).\nproperty p "no \\"p\\""\n',
    ],
    ids=["quote-in-title", "backslash-in-title", "quote-in-include", "quote-in-property"],
)
def test_format_escapes_declared_strings(text: str) -> None:
    policy = dsl.parse_unchecked(text, FILE)
    assert dsl.parse_unchecked(dsl.format_text(text)) == dsl.parse_unchecked(text)
    assert dsl.parse_unchecked(dsl.format_policy(policy), FILE) == policy


def test_format_policy_of_an_unnamed_policy_parses() -> None:
    policy = dsl.parse_unchecked("actions READ\n")
    assert dsl.parse_unchecked(dsl.format_policy(policy)) == policy


def test_format_text_reports_an_operation_outside_a_block() -> None:
    with pytest.raises(PrivilogError, match="not inside an entity block"):
        dsl.format_text("  get requires READ\n")


def test_an_unreadable_include_is_a_privilog_error(tmp_path: Path) -> None:
    binary = tmp_path / "binary.policy"
    binary.write_bytes(b"\xff\xfe\x00 not text")
    with pytest.raises(PrivilogError, match="binary"):
        dsl.parse_policy(f'include "{binary}"\n', include_prelude=False)


@pytest.mark.parametrize("separator", ["\f", "\x1e", "\u2028"], ids=["form-feed", "record-separator", "line-separator"])
def test_error_lines_count_only_newlines(separator: str) -> None:
    text = f"# page one{separator}page two\nentity a in\n"
    with pytest.raises(PolicyError) as raised:
        dsl.parse_unchecked(text)
    assert str(raised.value.span) == "<policy>:2:12"
    assert raised.value.render().split("\n")[1] == "    entity a in"
