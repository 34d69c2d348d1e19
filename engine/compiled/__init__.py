"""The compiled backend: the default engine.

* ``relation``: rows with hash indexes on the columns lookups bind;
* ``plan``: rule bodies compiled to Python functions of nested loops;
* ``evaluate``: semi-naive evaluation, and upkeep of world-derived relations
  (insertions semi-naively, deletions by DRed, negation by re-evaluation);
* ``specialize``: one decision plan per operation, from its static facts;
* ``backend``: the Backend the authorizer drives.
"""

from privilog.engine.compiled.backend import CompiledBackend

__all__ = ["CompiledBackend"]
