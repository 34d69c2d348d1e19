"""Ranger's value globs, and a program glob over ``type.name`` as privilog's program patterns.

A Ranger resource value with wildcards is matched by ``FilenameUtils.wildcardMatch`` with
``IOCase.SENSITIVE`` (``RangerAbstractResourceMatcher``): ``*`` is any run of characters, the
empty one included, ``?`` exactly one character, everything else literal (``[`` too: this is not
:mod:`fnmatch`), case-sensitive. A value of only ``*`` is "match any", which also matches the
absence of a value (section 4.1 of docs/design/ranger.md).

Within one part of an id privilog's patterns read ``*`` and ``?`` the same way
(:mod:`engine.patterns`), so a namespace, dataset, application, ... value is the same glob in
privilog. A program is different: CDAP's plugin sends one value, ``type.name``
(``workflow.DataPipelineWorkflow``), where privilog's program id has the type and the name as two
parts. :func:`program_pieces` turns a Ranger program glob into the exact union, over CDAP's
program types, of privilog (type, name glob) pairs: the name globs are the glob's derivative by
the word ``TYPE.`` (what is left of the glob once ``TYPE.`` is consumed: a finite set of globs).

>>> program_pieces("w*")
[('worker', '*'), ('workflow', '*')]
>>> program_pieces("*flow*")  # doctest: +NORMALIZE_WHITESPACE
[('flow', '*'), ('mapreduce', '*flow*'), ('service', '*flow*'), ('spark', '*flow*'),
 ('worker', '*flow*'), ('workflow', '*')]
>>> program_pieces("*")
[('*', '*')]
"""

from __future__ import annotations

import re
from functools import lru_cache

from privilog.engine.ids import PROGRAM_KINDS

ANY = "*"


def squeeze(glob: str) -> str:
    """The glob with each run of ``*`` written once (the same globs: ``**`` is ``*``)."""
    return re.sub(r"\*+", "*", glob)


def is_match_any(value: str) -> bool:
    """Whether a Ranger value is "match any": only ``*`` (Ranger's ``isMatchAny``)."""
    return bool(value) and set(value) == {"*"}


@lru_cache(maxsize=4096)
def _regex(glob: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob) + r"\Z", re.S)


def glob_matches(glob: str, text: str) -> bool:
    """Whether a Ranger glob matches ``text`` (the whole of it)."""
    return _regex(glob).match(text) is not None


def derivative(glob: str, word: str) -> list[str]:
    """The globs ``r`` such that ``word + s`` matches ``glob`` exactly when ``s`` matches one of them.

    The glob read as a little automaton over its positions: after ``word`` the positions it may be
    at, each the rest of the glob from there. A rest ``r`` is dropped when ``*r`` is kept too (it
    matches all ``r`` does); sorted.

    >>> derivative("wor*.a?", "work")
    ['*.a?']
    >>> derivative("*k*", "work")
    ['*']
    >>> derivative("s?r*", "spark.")
    []
    """
    glob = squeeze(glob)

    def closure(states: set[int]) -> set[int]:
        todo, seen = list(states), set(states)
        while todo:
            i = todo.pop()
            if i < len(glob) and glob[i] == "*" and i + 1 not in seen:
                seen.add(i + 1)
                todo.append(i + 1)
        return seen

    states = closure({0})
    for char in word:
        moved = set()
        for i in states:
            if i < len(glob):
                if glob[i] == "*":
                    moved.add(i)
                elif glob[i] == "?" or glob[i] == char:
                    moved.add(i + 1)
        states = closure(moved)
        if not states:
            return []
    rests = {glob[i:] for i in states}
    if ANY in rests:
        return [ANY]
    return sorted(r for r in rests if "*" + r not in rests)


def program_pieces(glob: str) -> list[tuple[str, str]]:
    """The privilog (type, name glob) pairs whose programs are exactly those ``glob`` matches as ``type.name``.

    A match-any glob is every program: ``("*", "*")``. Otherwise, per program type, the derivative
    by ``TYPE.`` without the rests no program name can match (empty, or a literal ``.``: a
    program's name has no dot). An empty list: the glob matches no program.
    """
    if is_match_any(glob):
        return [(ANY, ANY)]
    pieces = []
    for kind in sorted(PROGRAM_KINDS):
        for rest in derivative(glob, kind + "."):
            if rest and "." not in rest:
                pieces.append((kind, rest))
    return pieces
