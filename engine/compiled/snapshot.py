"""The compiled backend's state as plain data, and a backend started again from it (``privilog serve --snapshot``).

What a load of a large world spends its time on is not reading the world but deriving from it:
the world-derived relations (``holds``), the joins the decision plans keep (specialize's aux
relations, ``_joinN``, most of a server's warm-up) and the hash indexes plans look rows up in.
:func:`capture` takes exactly those as plain data (a dict of relation name to arity, rows and
indexes: tuples, sets, dicts, strings), which ``marshal`` writes and reads back (no code runs on
reading; identical rows are written once, so rows shared by a relation and its indexes stay shared).
Everything else is rebuilt around them as a load does: the transitive closures (walked when asked,
over their edges), the decision plans (compiled anew, their joins claimed from the data instead of
evaluated), the world's own facts and inventory (from the world read from the store).

:class:`Preloaded` is the data made relations again. A backend made with it (``CompiledBackend(program,
preloaded)``) holds the snapshot's relations as they stood; the world the authorizer is given may be
later than the snapshot. Its facts are compared with the snapshot's base relations (the same diff a
world read anew costs), and the difference is applied by the backend's own upkeep, after the decision
plans have claimed their joins, so that every maintained relation, joins included, is brought to the
world given, as a grant or a revocation is applied to a running server (:meth:`CompiledBackend.settle`).
The data must be the compiled backend's own, for the same policy and code: the caller checks that (a
keyed hash, the policy's version, :func:`code_version`) before reading it.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Any

from privilog.engine.analysis import Kind
from privilog.engine.compiled.relation import Relation, key_of

FORMAT = 1  # the layout of capture's data; a snapshot of another layout is not read


class SnapshotError(ValueError):
    """Data that is not a compiled backend's state of this layout (one line: what is wrong)."""


def code_version() -> str:
    """A hash of what the state depends on besides the policy and the world: the engine's and the dsl's
    code (a relation's rows, the joins a plan keeps and their names), and Python's version."""
    root = Path(__file__).resolve().parents[1]  # engine/
    h = hashlib.sha256(f"{sys.version}|{FORMAT}".encode())
    for folder in (root, root.parent / "dsl"):
        for path in sorted(folder.rglob("*.py")):
            h.update(str(path.relative_to(folder)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:32]


def capture(authorizer: Any) -> dict[str, Any]:
    """The compiled backend's relations (base, world-derived, the plans' joins) with their indexes, the
    joins' keys and the world's facts where they differ from the base relations: plain data for
    ``marshal``. Take it holding whatever lock keeps the authorizer still (an engine.authorizer.Authorizer)."""
    backend = authorizer.backend
    if getattr(backend, "name", None) != "compiled":
        raise SnapshotError(f"only the compiled backend's state is captured, not {type(backend).__name__}'s")
    kinds, on_demand = backend.analysis.kinds, backend.analysis.on_demand
    relations: dict[str, Any] = {}
    for name, relation in backend.store.items():
        if type(relation) is not Relation or kinds.get(name) is Kind.REQUEST or name in on_demand:
            continue  # closures are walked when asked; requests' rows are a request's; on-demand ones made when asked
        # sets as tuples (marshal sorts a set's elements, measured: twice the time of a tuple's), each index's
        # buckets of many rows (sets) named, to be made sets again
        indexes = {
            columns: (index, tuple(k for k, bucket in index.items() if type(bucket) is not tuple))
            for columns, (_, index) in relation.indexes.items()
        }
        relations[name] = (relation.arity, tuple(relation.rows), indexes)
    facts: dict[str, Any] = {}  # the world's facts, where they are not exactly the relation's rows
    for name, rows in authorizer.loaded.facts.items():
        held = backend.store.get(name)
        if type(held) is not Relation or held.rows != rows:
            facts[name] = tuple(rows)
    aux = dict(backend._plans().aux_keys())
    return {"format": FORMAT, "relations": relations, "aux": aux, "fact_names": sorted(authorizer.loaded.facts),
            "facts": facts}


class Preloaded:
    """A captured state made relations again, for ``CompiledBackend(program, preloaded)``."""

    def __init__(self, data: Any):
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise SnapshotError(f"not a compiled backend's state of layout {FORMAT}")
        try:
            self.relations: dict[str, Relation] = {}
            for name, (arity, rows, indexes) in data["relations"].items():
                if not (isinstance(name, str) and isinstance(arity, int) and isinstance(rows, tuple)
                        and isinstance(indexes, dict)):
                    raise SnapshotError(f"relation {name!r} is not (arity, rows, indexes)")
                relation = Relation(name, arity)
                relation.rows = set(rows)
                for columns, (index, many) in indexes.items():
                    for key in many:
                        index[key] = set(index[key])
                    relation.indexes[tuple(columns)] = (key_of(tuple(columns)), index)
                self.relations[name] = relation
            self.aux: dict[str, str] = dict(data["aux"])
            explicit: dict[str, Any] = data["facts"]
            self.facts: dict[str, set[Any]] = {}  # the world's facts when captured, by relation
            self.shared: list[str] = []  # the base relations whose rows were exactly the world's facts
            for name in data["fact_names"]:
                held = self.relations.get(name)
                if name in explicit or held is None:
                    self.facts[name] = set(explicit.get(name, ()))
                else:
                    self.facts[name] = held.rows
                    self.shared.append(name)
        except (KeyError, TypeError, ValueError) as error:
            if isinstance(error, SnapshotError):
                raise
            raise SnapshotError(f"the state is not laid out as captured ({type(error).__name__}: {error})") from None

    def rows(self) -> int:
        """Rows over every relation (for a message)."""
        return sum(len(r.rows) for r in self.relations.values())
