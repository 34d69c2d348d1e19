"""What one input may cost: the limits on ids, policies, scenario files and queries.

Each limit is far above any real input and is changed with an environment
variable; an input over it is refused with one line naming the limit and the
variable. The byte limits on files live with the reading (:mod:`privilog.dsl.files`),
the query's time and rows with the query (:mod:`privilog.engine.query`).

>>> OPERATIONS.refusal("the policy big", 12000, limit=10000)
'the policy big has 12000 operations; the limit is 10000 (set PRIVILOG_MAX_OPERATIONS to raise it)'
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from privilog.dsl.errors import OneLineError, PrivilogError


@dataclass(frozen=True)
class Limit:
    """A cap on a count (``unit``), read from ``variable`` when it is set, else ``default``."""

    variable: str
    default: int
    unit: str  # what is counted, in the plural: "characters", "operations"
    least: int = 1  # a smaller value is refused: below it the limit would refuse real inputs

    def value(self) -> int:
        """The limit in force: ``variable`` if set (a whole number, at least ``least``), else the default."""
        raw = os.environ.get(self.variable, "").strip()
        if not raw:
            return self.default
        try:
            value = int(raw)
        except ValueError:
            value = self.least - 1
        if value < self.least:
            raise PrivilogError(
                f"{self.variable} must be a whole number of {self.unit}, at least {self.least}, not `{raw}`"
            )
        return value

    def refusal(self, subject: str, count: int, limit: int | None = None) -> str:
        """The line that refuses ``subject`` for having ``count`` of the unit."""
        limit = self.value() if limit is None else limit
        return f"{subject} has {count} {self.unit}; the limit is {limit} (set {self.variable} to raise it)"


# An id is matched by a regular expression in linear time, but it is kept in every
# relation it stands in and shown in every answer: a longer one is a crafted one.
ID_LENGTH = Limit("PRIVILOG_MAX_ID_LENGTH", 1024, "characters", least=64)
# Compiling a policy costs about linear time in its operations and rules (10,000 rules:
# about 7 s and 120 MB); the shipped policies have fewer than 100 of each.
OPERATIONS = Limit("PRIVILOG_MAX_OPERATIONS", 10_000, "operations")
RULES = Limit("PRIVILOG_MAX_RULES", 10_000, "rules")
# A world in memory costs about 2.5 KB an entity or grant (a million entities under one
# namespace: 2.4 GB and 35 s for the first check; 3.3 GB and 65 s for a namespace.delete).
WORLD_ENTRIES = Limit(
    "PRIVILOG_MAX_WORLD_ENTRIES", 2_000_000, "entries (entities, grants, memberships, admins, rows of facts)"
)
# A scenario file is read whole, with a position on every value, before its first case runs:
# about 6 s and 100 MB a megabyte (100,000 one-line cases, 12 MB: 75 s and 1 GB), then about
# 1 ms a case.
SCENARIO_BYTES = Limit("PRIVILOG_MAX_SCENARIO_BYTES", 4 << 20, "bytes")
CASES = Limit("PRIVILOG_MAX_CASES", 10_000, "cases")
# Wildcard grants are matched against the entities of their type that start with their literal
# prefix: each comparison is a regular expression (about a microsecond). A few wildcards over a
# large inventory cost little; a crafted world of many `*` patterns would cost their product.
WILDCARD_TRIES = Limit("PRIVILOG_MAX_WILDCARD_TRIES", 20_000_000, "entity-pattern comparisons", least=1000)
# The pipeline broadcasts the distinct wildcards and tries each entity against its type's.
WILDCARDS = Limit("PRIVILOG_MAX_WILDCARDS", 10_000, "distinct wildcard grants", least=10)
# A list argument (`$datasets: [dataset]`) is a fact a value, each checked and kept with the
# request: an application creates tens of datasets, not tens of thousands.
LIST_ARGUMENT = Limit("PRIVILOG_MAX_LIST_ARGUMENT", 10_000, "entities", least=10)
# A query's answer is kept whole, sorted and printed.
ANSWER_ROWS = Limit("PRIVILOG_QUERY_ANSWER_ROWS", 10_000, "rows")
# What an evaluation (a query, a REPL rule) may add to the process's resident memory.
EVALUATION_MEGABYTES = Limit("PRIVILOG_QUERY_MEGABYTES", 2048, "megabytes", least=16)

LIMITS = (
    ID_LENGTH,
    OPERATIONS,
    RULES,
    WORLD_ENTRIES,
    LIST_ARGUMENT,
    SCENARIO_BYTES,
    CASES,
    ANSWER_ROWS,
    EVALUATION_MEGABYTES,
    WILDCARD_TRIES,
    WILDCARDS,
)


class LimitError(OneLineError):
    """An input over one of the limits above."""
