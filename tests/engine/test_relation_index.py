"""A relation's indexes (engine/compiled/relation.py) after any sequence of additions and removals:
each key's bucket (a tuple while small, a set beyond) holds exactly the rows with that key, and a key
without rows is gone. Buckets cross the tuple/set boundary both ways here (many rows share a key)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from privilog.engine.compiled.relation import SMALL, Relation

value = st.sampled_from("ab")
row = st.tuples(value, value, st.integers(0, 2 * SMALL).map(str))


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(st.tuples(st.booleans(), st.sets(row, max_size=2 * SMALL)), max_size=8),
    early=st.booleans(),
)
def test_every_index_groups_exactly_the_rows_there(steps: list[tuple[bool, set[tuple[str, ...]]]], early: bool) -> None:
    relation = Relation("r", 3)
    columns = [(0,), (1, 2), (0, 1)]
    if early:  # indexes kept current by each change, or built afterwards from the rows: the same
        for c in columns:
            relation.index(c)
    expected: set[tuple[str, ...]] = set()
    for adding, rows in steps:
        if adding:
            assert relation.add(rows) == rows - expected
            expected |= rows
        else:
            assert relation.remove(rows) == rows & expected
            expected -= rows
        assert relation.rows == expected
        for c in columns:
            index = relation.index(c)
            grouped: dict[object, set[tuple[str, ...]]] = {}
            for r in expected:
                k = r[c[0]] if len(c) == 1 else tuple(r[i] for i in c)
                grouped.setdefault(k, set()).add(r)
            assert {k: set(bucket) for k, bucket in index.items()} == grouped
            assert all(len(bucket) == len(set(bucket)) for bucket in index.values())
            assert all(len(b) <= SMALL for b in index.values() if isinstance(b, tuple))
