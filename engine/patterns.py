"""Wildcard grants: an entity id with ``*`` and ``?`` in its name, as Sentry and Ranger read it.

CDAP stores a grant on ``dataset:ns1.sales_*`` as it is given; its authorization
extensions (Sentry's ``WildcardAuthorizable``, Ranger's resource matchers) match
it part by part against an entity's id: the parts are the id's dotted levels
(namespace, application, program type and name, ...), a pattern matches an
entity of its own type only, with as many parts, and within each part ``*``
stands for any run of characters and ``?`` for exactly one. Everything else is
literal. A part that may itself hold dots (the name of a dataset, a dataset
module or type, or an artifact: ``dataset:ns1.sales.2024``) is one part, so
``*`` in it crosses its dots; ``*`` never crosses from one level to the next.

>>> pattern = parse_pattern("dataset:ns*.sales.*")
>>> matches(pattern, EntityId.parse("dataset:ns1.sales.2024")), matches(pattern, EntityId.parse("dataset:ns1.hr"))
(True, False)
>>> matches(parse_pattern("program:ns1.app.*.*"), EntityId.parse("program:ns1.app.service.api"))
True
>>> matches(parse_pattern("dataset:*.x"), EntityId.parse("dataset:ns1.a.x"))  # `*` stays in the namespace
False

A policy evaluates wildcard grants through the base relation ``matches(entity,
pattern)`` (rules/prelude/requirements.policy): the world gives a row for each
entity in the hierarchy (and each entity a request names) that a granted
pattern matches, so every backend reads the same rows and none has to match
text itself.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable
from functools import lru_cache

from privilog.dsl.errors import PrivilogError
from privilog.dsl.ir import Atom, Const, Rule
from privilog.dsl.limits import WILDCARD_TRIES, LimitError
from privilog.engine.ids import _SHORT, SHAPES, EntityId, IdError, _refuse_long

WILDCARDS = "*?"

# The types whose last part is a name that may hold dots (ids.py's EntityId.parts).
_DOTTED_LAST = frozenset({"dataset", "dataset_module", "dataset_type", "artifact"})
# The types whose name is one part, dots and all.
_WHOLE = frozenset({"kerberosprincipal", "instance", "namespace"})


def is_pattern(entity: EntityId | str) -> bool:
    """Whether an id (or its text) names a wildcard: ``*`` or ``?`` in its name."""
    name = entity[1] if isinstance(entity, EntityId) else str(entity).partition(":")[2]
    return "*" in name or "?" in name


def _wild(pattern: str) -> str:
    """A name's regex with ``*`` and ``?`` allowed wherever a name character is."""
    widened = pattern.replace("]+", "*?]+")
    # a program's kind is a word from a list; a wildcard may stand in it too
    return widened.replace("(mapreduce|", r"([a-z*?]*[*?][a-z*?]*|mapreduce|")


_SHAPES_WILD = {name: re.compile(_wild(shape.pattern) + r"\Z") for name, shape in SHAPES.items()}


def parse_pattern(text: str) -> EntityId:
    """An entity id whose name may hold wildcards, in the shape of its type's ids.

    Raise :class:`IdError` for an id that is malformed with or without wildcards; a
    plain id (no wildcard) is returned as :meth:`EntityId.parse` returns it.
    """
    if not isinstance(text, str):
        raise IdError(f"an entity id is text such as `namespace:ns1`, not {text!r}")
    if not is_pattern(text):
        return EntityId.parse(text)
    if len(text) > _SHORT:
        _refuse_long(text)
    type_name, _, name = text.partition(":")
    shape = _SHAPES_WILD.get(type_name)
    if shape is None:
        EntityId.parse(text)  # the unknown type, said as a plain id's
        raise IdError(f"unknown entity type in `{text}`")  # pragma: no cover - parse raised
    if not shape.match(name):
        example = SHAPES[type_name].example
        raise IdError(
            f"malformed {type_name} pattern `{text}`: expected the form `{example}`, "
            "with `*` (any run of characters) or `?` (one character) inside its parts"
        )
    return tuple.__new__(EntityId, (type_name, name))


def _parts(type_name: str, name: str) -> tuple[str, ...]:
    return EntityId._enclosing(type_name, name).parts


def _part_regex(part: str, crosses_dots: bool) -> str:
    star, one = (".*", ".") if crosses_dots else ("[^.]*", "[^.]")
    return "".join(star if c == "*" else one if c == "?" else re.escape(c) for c in part)


def _core(type_name: str, name: str) -> str:
    """The regex of a pattern's name: its parts, each matched within its own level (unanchored)."""
    if type_name in _WHOLE:
        return _part_regex(name, crosses_dots=True)
    parts = _parts(type_name, name)
    last = len(parts) - 1
    return r"\.".join(
        _part_regex(p, crosses_dots=(i == last and type_name in _DOTTED_LAST)) for i, p in enumerate(parts)
    )


@lru_cache(maxsize=4096)
def _compiled(type_name: str, name: str) -> re.Pattern[str]:
    return re.compile(_core(type_name, name) + r"\Z")


def java_regex(pattern: EntityId) -> str:
    """The pattern's name as a whole-string Java regular expression (Spark's ``rlike``).

    Its pieces are Python's ``re.escape`` of literal characters, ``[^.]``, ``.`` and ``\\.``,
    which Java reads the same way.

    >>> java_regex(parse_pattern("dataset:ns?.sales.*"))
    '^(?:ns[^.]\\\\.sales\\\\..*)\\\\z'
    """
    return "^(?:" + _core(pattern[0], pattern[1]) + r")\z"


def wild_shape(type_name: str) -> str:
    """The regex of a type's names with wildcards allowed in each part (what a grant may name)."""
    return _wild(SHAPES[type_name].pattern)


def matches(pattern: EntityId, entity: EntityId) -> bool:
    """Whether the wildcard ``pattern`` matches ``entity`` (a plain id matches only itself)."""
    if pattern[0] != entity[0]:
        return False
    if not is_pattern(pattern):
        return pattern[1] == entity[1]
    return _compiled(pattern[0], pattern[1]).match(entity[1]) is not None


def literal_prefix(pattern: EntityId) -> str:
    """The name's characters before its first wildcard: every match starts with them."""
    name = pattern[1]
    cut = min((i for i in (name.find("*"), name.find("?")) if i >= 0), default=len(name))
    return name[:cut]


def match_rows(patterns: Iterable[EntityId], entities: Iterable[EntityId]) -> set[tuple[str, ...]]:
    """``matches`` rows, (entity, pattern) as text, of every pattern against these entities."""
    patterns = list(patterns)
    if not patterns:
        return set()
    wanted = {p[0] for p in patterns}
    by_type: dict[str, list[EntityId]] = {}
    for entity in entities:
        if entity[0] in wanted:
            by_type.setdefault(entity[0], []).append(entity)
    for found in by_type.values():
        found.sort()
    tries = sum(len(_candidates(p, by_type.get(p[0], []))) for p in patterns)
    if tries > WILDCARD_TRIES.value():
        raise LimitError(WILDCARD_TRIES.refusal(f"matching {len(patterns)} wildcard grants", tries))
    out: set[tuple[str, ...]] = set()
    for pattern in patterns:
        out |= PatternIndex.rows_of(pattern, by_type.get(pattern[0], []))
    return out


def check_tries(pattern: EntityId, entities_of_type: list[EntityId]) -> list[EntityId]:
    """The entities one wildcard is tried on; :class:`LimitError` past ``PRIVILOG_MAX_WILDCARD_TRIES``."""
    candidates = _candidates(pattern, entities_of_type)
    if len(candidates) > WILDCARD_TRIES.value():
        raise LimitError(WILDCARD_TRIES.refusal(f"matching the wildcard grant on {pattern}", len(candidates)))
    return candidates


def _candidates(pattern: EntityId, entities_of_type: list[EntityId]) -> list[EntityId]:
    """The (sorted) entities of the pattern's type that start with its literal prefix."""
    prefix = literal_prefix(pattern)
    start = bisect_left(entities_of_type, EntityId._enclosing(pattern[0], prefix))
    end = bisect_left(entities_of_type, EntityId._enclosing(pattern[0], prefix + "\U0010ffff"))
    return entities_of_type[start:end]


def policy_patterns(rules: Iterable[Rule]) -> list[EntityId]:
    """The patterns a policy's rules name as constants (`matches(E, "dataset:*.system.queue*")`):
    the world gives their ``matches`` rows too. A malformed one is a policy error at its place."""
    found: dict[EntityId, None] = {}
    for rule in rules:
        for literal in rule.body:
            if isinstance(literal, Atom) and literal.predicate == "matches" and len(literal.terms) == 2:
                term = literal.terms[1]
                if isinstance(term, Const):
                    try:
                        found[parse_pattern(term.value)] = None
                    except IdError as error:
                        raise PrivilogError(f"{term.span if term.span.line else rule.span}: {error}") from None
    return list(found)


class PatternIndex:
    """The granted patterns, and which entities each matches.

    Entities are kept by type, sorted by name, so that a pattern is tried only on the
    entities of its type that start with its literal prefix.
    """

    def __init__(self, patterns: Iterable[EntityId] = ()):
        self._patterns: dict[str, set[EntityId]] = {}
        for pattern in patterns:
            self.add(pattern)

    def __bool__(self) -> bool:
        return any(self._patterns.values())

    def add(self, pattern: EntityId) -> bool:
        """Keep a pattern; True if it is new."""
        found = self._patterns.setdefault(pattern[0], set())
        if pattern in found:
            return False
        found.add(pattern)
        return True

    def discard(self, pattern: EntityId) -> None:
        self._patterns.get(pattern[0], set()).discard(pattern)

    def rows(self, entities: Iterable[EntityId]) -> set[tuple[str, ...]]:
        """``matches`` rows, (entity, pattern) as text, of these entities against every pattern."""
        out: set[tuple[str, ...]] = set()
        if not self:
            return out
        for entity in entities:
            for pattern in self._patterns.get(entity[0], ()):
                if matches(pattern, entity):
                    out.add((str(entity), str(pattern)))
        return out

    @staticmethod
    def rows_of(pattern: EntityId, entities_of_type: list[EntityId]) -> set[tuple[str, ...]]:
        """``matches`` rows of one pattern against the (sorted) entities of its type."""
        candidates = check_tries(pattern, entities_of_type)
        text = str(pattern)
        return {(str(entity), text) for entity in candidates if matches(pattern, entity)}
