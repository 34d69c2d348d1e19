"""Values as integers: every string a relation holds is joined and deduplicated as a 64-bit hash.

Joins and ``distinct`` over pairs of long integers are several times cheaper in
Spark than over pairs of strings (ENGINES.md). A value is encoded with Spark's
own ``xxhash64`` (seed 42), so a column of strings is encoded in place without a
join against a dictionary table, and :func:`xxhash64` computes the same hash on
the driver for constants and small fact tables without starting a job.

Distinct strings could share a hash. The odds are about n²/2⁶⁵ for n distinct
values (one in a million for ten million values), never zero, and a collision
could turn a deny into an allow, so every encoding is checked: a
:class:`Dictionary` refuses a second string for a hash it already holds, and
:func:`collisions` counts them over DataFrames in one Spark job.

>>> xxhash64("self")
8864189502076601006
>>> d = Dictionary()
>>> d.encode("namespace:ns1") == xxhash64("namespace:ns1")
True
>>> d.decode(d.encode("namespace:ns1"))
'namespace:ns1'
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from privilog.dsl.errors import PrivilogError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

SEED = 42
_MASK = (1 << 64) - 1
_P1 = 11400714785074694791
_P2 = 14029467366897019727
_P3 = 1609587929392839161
_P4 = 9650029242287828579
_P5 = 2870177450012600261


class EncodingError(PrivilogError):
    """Two distinct values share an encoding: evaluating with them could confuse one for the other."""


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (64 - bits))) & _MASK


def _round(acc: int, lane: int) -> int:
    acc = (acc + lane * _P2) & _MASK
    return (_rotl(acc, 31) * _P1) & _MASK


def _merge(acc: int, lane: int) -> int:
    acc ^= _round(0, lane)
    return (acc * _P1 + _P4) & _MASK


def xxhash64(text: str, seed: int = SEED) -> int:
    """Spark's ``xxhash64`` of a string (XXH64 of its UTF-8 bytes), as a signed 64-bit integer."""
    data = text.encode("utf-8")
    length, offset = len(data), 0
    if length >= 32:
        v1, v2 = (seed + _P1 + _P2) & _MASK, (seed + _P2) & _MASK
        v3, v4 = seed & _MASK, (seed - _P1) & _MASK
        while offset + 32 <= length:
            v1 = _round(v1, int.from_bytes(data[offset : offset + 8], "little"))
            v2 = _round(v2, int.from_bytes(data[offset + 8 : offset + 16], "little"))
            v3 = _round(v3, int.from_bytes(data[offset + 16 : offset + 24], "little"))
            v4 = _round(v4, int.from_bytes(data[offset + 24 : offset + 32], "little"))
            offset += 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _MASK
        for lane in (v1, v2, v3, v4):
            h = _merge(h, lane)
    else:
        h = (seed + _P5) & _MASK
    h = (h + length) & _MASK
    while offset + 8 <= length:
        h ^= _round(0, int.from_bytes(data[offset : offset + 8], "little"))
        h = (_rotl(h, 27) * _P1 + _P4) & _MASK
        offset += 8
    if offset + 4 <= length:
        h ^= (int.from_bytes(data[offset : offset + 4], "little") * _P1) & _MASK
        h = (_rotl(h, 23) * _P2 + _P3) & _MASK
        offset += 4
    while offset < length:
        h ^= (data[offset] * _P5) & _MASK
        h = (_rotl(h, 11) * _P1) & _MASK
        offset += 1
    h ^= h >> 33
    h = (h * _P2) & _MASK
    h ^= h >> 29
    h = (h * _P3) & _MASK
    h ^= h >> 32
    return h - (1 << 64) if h >= 1 << 63 else h


class Dictionary:
    """Strings to their codes and back, refusing two strings with one code."""

    def __init__(self, values: Iterable[str] = ()):
        self._text: dict[int, str] = {}
        for value in values:
            self.encode(value)

    def encode(self, value: str) -> int:
        code = xxhash64(value)
        known = self._text.setdefault(code, value)
        if known != value:
            raise EncodingError(f"`{known}` and `{value}` share the code {code}; they cannot be evaluated together")
        return code

    def decode(self, code: int) -> str:
        return self._text[code]

    def values(self) -> list[str]:
        """Every string encoded so far."""
        return sorted(self._text.values())

    def __len__(self) -> int:
        return len(self._text)


def encoded(column: str | Column) -> Column:
    """A string column as its codes (Spark computes the same hash as :func:`xxhash64`)."""
    from pyspark.sql import functions as F

    return F.xxhash64(F.col(column) if isinstance(column, str) else column)


def relation_columns(*columns: str) -> list[Column]:
    """String columns as a base relation's: their codes, named ``c0``, ``c1``, ..."""
    from pyspark.sql import functions as F

    return [F.xxhash64(F.col(c)).alias(f"c{i}") for i, c in enumerate(columns)]


def collisions(values: DataFrame) -> DataFrame:
    """The codes that more than one distinct string of ``values`` (one string column) shares."""
    from pyspark.sql import functions as F

    (name,) = values.columns
    pairs = values.where(F.col(name).isNotNull()).distinct().select(encoded(name).alias("code"), F.col(name))
    return (
        pairs.groupBy("code")
        .agg(F.count("*").alias("strings"), F.min(name).alias("first"), F.max(name).alias("second"))
        .where(F.col("strings") > 1)
    )


def check_collisions(values: DataFrame) -> None:
    """Raise :class:`EncodingError` if two distinct strings of ``values`` share a code (one Spark job)."""
    row = collisions(values).first()
    if row is not None:
        raise EncodingError(
            f"`{row['first']}` and `{row['second']}` share the code {row['code']}; they cannot be evaluated together"
        )
