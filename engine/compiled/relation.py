"""A relation in memory: a set of rows and hash indexes on the columns lookups bind.

An index is built the first time a plan asks for it and kept current by every
later change, so a lookup with some columns bound costs one dict access. Keys
of a one-column index are the value itself, not a 1-tuple.

A key's rows (its bucket) are a tuple while there are few of them (up to
:data:`SMALL`) and a set beyond: most keys of most indexes have one row (an
entity's parent; a principal's grant of one action on one entity), and a
tuple of one row is a quarter of a set's memory. Readers only iterate a bucket
or test whether it is empty, which both forms do alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import islice
from operator import itemgetter
from typing import Any

Row = tuple[str, ...]
Key = Any  # a value (one column) or a tuple of values
Bucket = tuple[Row, ...] | set[Row]
Index = dict[Key, Bucket]
SMALL = 8  # rows a bucket holds as a tuple before it becomes a set
SAMPLE = 4096  # rows looked at to guess how selective a lookup is


def key_of(columns: tuple[int, ...]) -> Callable[[Row], Key]:
    """The function that reads an index key from a row.

    >>> key_of((1,))(("a", "b", "c")), key_of((0, 2))(("a", "b", "c"))
    ('b', ('a', 'c'))
    """
    return itemgetter(*columns)


class Relation:
    """Rows of one arity, with indexes by bound columns."""

    __slots__ = ("arity", "generation", "indexes", "name", "rows")

    def __init__(self, name: str, arity: int, rows: Iterable[Row] = ()):
        self.name = name
        self.arity = arity
        self.rows: set[Row] = set(rows)
        self.indexes: dict[tuple[int, ...], tuple[Callable[[Row], Key], Index]] = {}
        self.generation = 0  # counts the changes that changed a row: what was read of it before is stale

    def __len__(self) -> int:
        return len(self.rows)

    def __repr__(self) -> str:
        return f"Relation({self.name}/{self.arity}, {len(self.rows)} rows)"

    def index(self, columns: tuple[int, ...]) -> Index:
        """The index on ``columns`` (some but not all columns), built on first use."""
        found = self.indexes.get(columns)
        if found is not None:
            return found[1]
        key = key_of(columns)
        index: Index = {}
        for row in self.rows:
            _put(index, key(row), row)
        self.indexes[columns] = (key, index)
        return index

    def add(self, rows: Iterable[Row]) -> set[Row]:
        """Add rows; return those that were new."""
        new = set(rows) - self.rows
        if new:
            self.generation += 1
            self.rows |= new
            for key, index in self.indexes.values():
                for row in new:
                    _put(index, key(row), row)
        return new

    def remove(self, rows: Iterable[Row]) -> set[Row]:
        """Remove rows; return those that were there."""
        gone = self.rows.intersection(rows)
        if gone:
            self.generation += 1
            self.rows -= gone
            for key, index in self.indexes.values():
                for row in gone:
                    _drop(index, key(row), row)
        return gone


def _put(index: Index, k: Key, row: Row) -> None:
    """Add a row (not there yet) to its key's bucket."""
    bucket = index.get(k)
    if bucket is None:
        index[k] = (row,)
    elif type(bucket) is tuple:
        index[k] = (*bucket, row) if len(bucket) < SMALL else {*bucket, row}
    else:
        bucket.add(row)  # type: ignore[union-attr]


def _drop(index: Index, k: Key, row: Row) -> None:
    """Take a row (there) out of its key's bucket; the key goes with its last row."""
    bucket = index[k]
    if type(bucket) is tuple:
        rest = tuple(r for r in bucket if r != row)
        if rest:
            index[k] = rest
        else:
            del index[k]
        return
    bucket.discard(row)  # type: ignore[union-attr]
    if not bucket:
        del index[k]


def lookup_rows(relation: Relation, columns: tuple[int, ...]) -> float:
    """Rows of ``relation`` expected for one lookup with ``columns`` bound, as it is now: for
    choosing a join order. From the index on ``columns`` when there is one; else from a sample of
    rows, so that weighing a join order builds no index that the plan will not use (an index
    kept is memory and upkeep for as long as the relation lives)."""
    rows = len(relation.rows)
    if not rows:
        return 0.0
    if not columns:
        return float(rows)
    if len(columns) == relation.arity:
        return 0.0
    if not isinstance(relation, Relation):  # a closure walked when asked: its own estimate, from its edges
        return float(relation.estimate(columns))
    found = relation.indexes.get(columns)
    if found is not None:
        return rows / max(len(found[1]), 1)
    sample = list(islice(relation.rows, SAMPLE))
    keys = len({tuple(row[c] for c in columns) for row in sample})
    if keys * 10 < len(sample):  # few distinct keys (an action, a type): each has a share of all rows
        return rows / keys
    return len(sample) / keys
