"""Ranger's globs against a matcher written here from Ranger's definition, and privilog's patterns against both.

Ranger (``FilenameUtils.wildcardMatch``, case-sensitive): ``*`` any run of characters (none
included), ``?`` one character, everything else literal: ``[`` too, which is why :mod:`fnmatch`
is not the reference. The reference below is a regex built with ``re.escape``.
"""

from __future__ import annotations

import fnmatch
import re

from hypothesis import given, settings
from hypothesis import strategies as st
from privilog.engine.ids import PROGRAM_KINDS, EntityId
from privilog.engine.patterns import matches, parse_pattern

from privilog.ranger.globs import derivative, glob_matches, program_pieces
from privilog.ranger.translate import pieces


def ranger(glob: str, text: str) -> bool:
    """Ranger's wildcard match, from its definition."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob)
    return re.fullmatch(regex, text, re.DOTALL) is not None


# program globs: letters that make up the program types, the dot, wildcards, and a few others
GLOB_CHARS = "wforkspaecm.*?-_lv"
NAME_CHARS = "wforkspaecmlv-_"
globs = st.text(GLOB_CHARS, min_size=0, max_size=9)
names = st.text(NAME_CHARS, min_size=1, max_size=7)
kinds = st.sampled_from(PROGRAM_KINDS)


def program_matches(glob: str, kind: str, name: str) -> bool:
    """Whether the privilog patterns of ``glob`` match the program ``ns.app.KIND.NAME``."""
    entity = EntityId("program", f"ns.app.{kind}.{name}")
    return any(matches(parse_pattern(f"program:ns.app.{t}.{r}"), entity) for t, r in program_pieces(glob))


@settings(max_examples=1500, deadline=None)
@given(globs, kinds, names)
def test_a_program_glob_is_exactly_its_pieces(glob: str, kind: str, name: str) -> None:
    assert program_matches(glob, kind, name) == ranger(glob, f"{kind}.{name}")


@settings(max_examples=400, deadline=None)
@given(globs, kinds)
def test_a_program_glob_matches_names_made_from_its_own_letters(glob: str, kind: str) -> None:
    """Names taken from the glob itself (its literal runs, wildcards filled), so that matches are common."""
    for filler in ("", "a", "flow", "w.x"):
        name = glob.replace("*", filler).replace("?", "k").replace(".", "")
        rest = glob.partition(".")[2].replace("*", filler).replace("?", "k").replace(".", "") or "x"
        for candidate in {name or "x", rest}:
            assert program_matches(glob, kind, candidate) == ranger(glob, f"{kind}.{candidate}")


@settings(max_examples=1000, deadline=None)
@given(st.text("ab.*?", max_size=7), st.text("ab.", max_size=4), st.text("ab.", max_size=5))
def test_the_derivative_by_a_word_is_what_follows_it(glob: str, word: str, rest: str) -> None:
    assert any(ranger(r, rest) for r in derivative(glob, word)) == ranger(glob, word + rest)


@settings(max_examples=600, deadline=None)
@given(st.text("ab[]!.*?", max_size=7), st.text("ab[]!.", max_size=7))
def test_the_import_matches_instances_as_ranger_does(glob: str, text: str) -> None:
    assert glob_matches(glob, text) == ranger(glob, text)


def test_brackets_are_literal_not_fnmatch_classes() -> None:
    assert ranger("[ab]", "[ab]") and not ranger("[ab]", "a")
    assert fnmatch.fnmatchcase("a", "[ab]")  # what fnmatch would have said
    assert glob_matches("[ab]", "[ab]") and not glob_matches("[ab]", "a")


DATASET_CHARS = "ab.$-_"


@settings(max_examples=800, deadline=None)
@given(st.text(DATASET_CHARS + "*?", min_size=1, max_size=7), st.text(DATASET_CHARS, min_size=1, max_size=7))
def test_a_dataset_value_is_the_same_glob_in_privilog(glob: str, name: str) -> None:
    entity = EntityId("dataset", f"ns.{name}")
    found = any(matches(parse_pattern(f"dataset:ns.{p[0]}"), entity) for p in pieces("dataset", glob))
    assert found == ranger(glob, name)


@settings(max_examples=800, deadline=None)
@given(st.text("ab1-_*?", min_size=1, max_size=6), st.text("ab1-_", min_size=1, max_size=5),
       st.one_of(st.none(), st.text("01.", min_size=1, max_size=5).filter(lambda v: v[0] != "." and v[-1] != ".")))
def test_an_artifact_value_covers_every_version(glob: str, name: str, version: str | None) -> None:
    """An artifact id is ns.NAME or ns.NAME.VERSION; a Ranger value is matched against NAME only. Every
    version of a NAME the value matches is matched; without a version, exactly the names it matches."""
    entity = EntityId("artifact", f"ns.{name}" + (f".{version}" if version else ""))
    found = any(matches(parse_pattern(f"artifact:ns.{p[0]}"), entity) for p in pieces("artifact", glob))
    if ranger(glob, name):
        assert found
    elif version is None:
        assert not found


def test_an_artifact_wildcard_that_runs_into_the_version_matches_more_than_ranger() -> None:
    """The one approximation of the import (docs/ranger.md): privilog's artifact name holds the
    version after a dot, and a wildcard may run into it."""
    entity = EntityId("artifact", "ns.etl.1.0")
    assert not ranger("*0", "etl")
    assert any(matches(parse_pattern(f"artifact:ns.{p[0]}"), entity) for p in pieces("artifact", "*0"))
    assert not any(matches(parse_pattern(f"artifact:ns.{p[0]}"), entity) for p in pieces("artifact", "et?x"))
    assert any(matches(parse_pattern(f"artifact:ns.{p[0]}"), entity) for p in pieces("artifact", "etl"))


def test_examples_of_program_globs() -> None:
    assert program_pieces("workflow.DataPipelineWorkflow") == [("workflow", "DataPipelineWorkflow")]
    assert program_pieces("service.*") == [("service", "*")]
    assert program_pieces("?*") == [(k, "*") for k in sorted(PROGRAM_KINDS)]
    assert program_pieces("*.api") == [(k, "api") for k in sorted(PROGRAM_KINDS)]
    assert program_pieces("nothing.x") == []
    assert program_pieces("work*") == [("worker", "*"), ("workflow", "*")]
