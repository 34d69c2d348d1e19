"""CDAP's entity ids as Spark column expressions: an id's type and name, what encloses it, its chain.

An entity's place in the hierarchy comes from its id alone (``namespace:ns1`` in
``instance:cdap``, ``dataset:ns1.orders`` in ``namespace:ns1``), as in
:class:`engine.ids.EntityId`; these are the same rules written over a column of ids,
for the hierarchy of the inventory and of the entities requests create.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from privilog.dsl.errors import PrivilogError
from privilog.dsl.ir import Operation, Policy
from privilog.engine.authorizer import check_hierarchy
from privilog.engine.ids import DEFAULT_INSTANCE, ENTITY_TYPES, parent_type

if TYPE_CHECKING:
    from pyspark.sql import Column


_ENCLOSED = {"namespace": 1, "application": 2}  # the parts of a name that name what encloses it


class IdForms:
    """A policy's entity types and operations, and CDAP's id forms, as Spark column expressions."""

    def __init__(self, policy: Policy, instance: str = DEFAULT_INSTANCE):
        check_hierarchy(policy)
        self.policy = policy
        self.instance = instance
        self.types = [t.name for t in policy.entity_types]
        self.operations: dict[str, Operation] = {op.qualified: op for op in policy.operations}
        self.above: dict[str, list[str]] = {}  # each type's enclosing types, nearest first
        for name in ENTITY_TYPES:
            chain, current = [], parent_type(name)
            while current is not None:
                chain.append(current)
                current = parent_type(current)
            self.above[name] = chain
        self.depth = max(len(chain) for chain in self.above.values())

    @staticmethod
    def entity_type(value: Column) -> Column:
        """The type of an id (``namespace`` of ``namespace:ns1``)."""
        from pyspark.sql import functions as F

        return F.substring_index(value, ":", 1)

    @staticmethod
    def name(value: Column) -> Column:
        """The name of an id, after its type (``ns1.orders`` of ``dataset:ns1.orders``)."""
        from pyspark.sql import functions as F

        return F.regexp_extract(value, r"(?s)^[^:]*:(.*)$", 1)

    def _enclosing(self, value: Column, above: str) -> Column:
        """The id of the entity of type ``above`` that encloses ``value``, from the id alone."""
        from pyspark.sql import functions as F

        if above == "instance":
            return F.lit(f"instance:{self.instance}")
        if above == "namespace":
            return F.concat(F.lit("namespace:"), F.substring_index(self.name(value), ".", 1))
        if above == "application":
            return F.concat(F.lit("application:"), F.substring_index(self.name(value), ".", 2))
        raise PrivilogError(f"no id form for an enclosing `{above}`")

    def enclosing(self, value: Column, kind: Column) -> Column:
        """The id of the entity of type ``kind`` (a column) that encloses ``value``, or null."""
        from pyspark.sql import functions as F

        own = self.entity_type(value)
        out = F.lit(None).cast("string")
        for above in sorted({a for chain in self.above.values() for a in chain}):
            types = [t for t, chain in self.above.items() if above in chain]
            out = F.when((kind == above) & own.isin(*types), self._enclosing(value, above)).otherwise(out)
        return out

    def parent(self, value: Column) -> Column:
        """The id of the entity ``value`` sits in (engine.ids.EntityId.parent), or null at the top."""
        from pyspark.sql import functions as F

        kind = self.entity_type(value)
        out = F.lit(None).cast("string")
        for above in {chain[0] for chain in self.above.values() if chain}:
            types = [t for t, chain in self.above.items() if chain and chain[0] == above]
            out = F.when(kind.isin(*types), self._enclosing(value, above)).otherwise(out)
        return out

    def last_name(self, value: Column) -> Column:
        """An entity's name within what encloses it (engine.facts.last_name_rows), or null for a
        principal's id."""
        from pyspark.sql import functions as F

        kind, name = self.entity_type(value), self.name(value)
        out = F.lit(None).cast("string")
        for depth, pattern in ((0, r"(?s)^(.*)$"), (1, r"(?s)^[^.]*\.(.*)$"), (2, r"(?s)^[^.]*\.[^.]*\.(.*)$")):
            types = [t for t, chain in self.above.items() if _ENCLOSED.get(chain[0] if chain else "", 0) == depth]
            out = F.when(kind.isin(*types), F.regexp_extract(name, pattern, 1)).otherwise(out)
        return out

    def chain(self, value: Column) -> Column:
        """An array of the entity and every entity enclosing it, nearest first."""
        from pyspark.sql import functions as F

        kind = self.entity_type(value)
        levels: list[Column] = [value]
        for depth in range(self.depth):
            found = F.lit(None).cast("string")
            for above in {chain[depth] for chain in self.above.values() if len(chain) > depth}:
                types = [t for t, chain in self.above.items() if len(chain) > depth and chain[depth] == above]
                found = F.when(kind.isin(*types), self._enclosing(value, above)).otherwise(found)
            levels.append(found)
        return F.filter(F.array(*levels), lambda x: x.isNotNull())
