"""A relation in memory: a set of rows and hash indexes on the columns lookups bind.

An index is built the first time a plan asks for it and kept current by every
later change, so a lookup with some columns bound costs one dict access. Keys
of a one-column index are the value itself, not a 1-tuple.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import itemgetter
from typing import Any

Row = tuple[str, ...]
Key = Any  # a value (one column) or a tuple of values
Index = dict[Key, set[Row]]


def key_of(columns: tuple[int, ...]) -> Callable[[Row], Key]:
    """The function that reads an index key from a row.

    >>> key_of((1,))(("a", "b", "c")), key_of((0, 2))(("a", "b", "c"))
    ('b', ('a', 'c'))
    """
    return itemgetter(*columns)


class Relation:
    """Rows of one arity, with indexes by bound columns."""

    __slots__ = ("arity", "indexes", "name", "rows")

    def __init__(self, name: str, arity: int, rows: Iterable[Row] = ()):
        self.name = name
        self.arity = arity
        self.rows: set[Row] = set(rows)
        self.indexes: dict[tuple[int, ...], tuple[Callable[[Row], Key], Index]] = {}

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
            k = key(row)
            bucket = index.get(k)
            if bucket is None:
                index[k] = {row}
            else:
                bucket.add(row)
        self.indexes[columns] = (key, index)
        return index

    def add(self, rows: Iterable[Row]) -> set[Row]:
        """Add rows; return those that were new."""
        new = set(rows) - self.rows
        if new:
            self.rows |= new
            for key, index in self.indexes.values():
                for row in new:
                    k = key(row)
                    bucket = index.get(k)
                    if bucket is None:
                        index[k] = {row}
                    else:
                        bucket.add(row)
        return new

    def remove(self, rows: Iterable[Row]) -> set[Row]:
        """Remove rows; return those that were there."""
        gone = self.rows.intersection(rows)
        if gone:
            self.rows -= gone
            for key, index in self.indexes.values():
                for row in gone:
                    k = key(row)
                    bucket = index[k]
                    bucket.discard(row)
                    if not bucket:
                        del index[k]
        return gone
