"""The Spark engine behind the :class:`~engine.backends.Backend` protocol (add, remove, query).

Facts are kept on the driver and encoded there; the first query after a change
evaluates the program in Spark and later queries read the same evaluation.
This serves small worlds and tests: every change re-evaluates the whole program
and reads every derived relation back in one job, so the authorizer's
one-request-at-a-time use costs several Spark jobs a check.
Bulk work goes through :class:`~engine.spark.evaluate.SparkEngine` directly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from privilog.engine.program import Program, Row
from privilog.engine.spark.evaluate import EngineSettings, Evaluation, Progress, SparkEngine
from privilog.engine.spark.plan import Relation

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class SparkBackend:
    """Evaluates a program bottom-up in Spark; answers equal the reference backend's."""

    name = "spark"

    def __init__(
        self,
        program: Program,
        spark: SparkSession,
        settings: EngineSettings | None = None,
        progress: Progress | None = None,
    ):
        self.program = program
        self.engine = SparkEngine(program, spark, settings, progress)
        self._facts: dict[str, set[Row]] = {}
        self._base: dict[str, Relation] = {}
        self._evaluation: Evaluation | None = None
        self._answers: dict[str, set[Row]] = {}

    def _changed(self, relation: str) -> None:
        if relation in self.engine.rules:
            raise ValueError(f"`{relation}` is derived by rules; only base relations take facts")
        self._base.pop(relation, None)
        self._answers.clear()
        if self._evaluation is not None:
            self._evaluation.release()
            self._evaluation = None

    def add(self, relation: str, rows: Iterable[Row]) -> None:
        self._facts.setdefault(relation, set()).update(rows)
        self._changed(relation)

    def remove(self, relation: str, rows: Iterable[Row]) -> None:
        self._facts.setdefault(relation, set()).difference_update(rows)
        self._changed(relation)

    def query(self, relation: str, bound: Mapping[int, str] | None = None) -> set[Row]:
        bound = bound or {}
        if relation not in self._answers:
            self._answers[relation] = self._rows(relation)
        return {row for row in self._answers[relation] if all(row[i] == v for i, v in bound.items())}

    def _rows(self, relation: str) -> set[Row]:
        if relation not in self.engine.rules:
            return set(self._facts.get(relation, set())) | set(self.program.facts.get(relation, frozenset()))
        if self._evaluation is None:
            for name, rows in self._facts.items():
                if name not in self._base:
                    self._base[name] = self.engine.facts(name, rows)
            self._evaluation = self.engine.evaluate(self._base)
            # one job answers every derived relation until the facts change
            self._answers.update(self._evaluation.collect(self.engine.rules, self.engine.dictionary))
        return self._answers[relation]
