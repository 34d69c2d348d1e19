"""The Spark engine's door for bulk work: a deployment's tables and an access log in, DataFrames out.

A caller (privilog.pipeline) reads and checks its inputs, and asks here for the rest:

* :func:`engine`: the engine of a policy;
* :func:`deployment`: a deployment's good rows as the engine's encoded base relations;
* :func:`decide`: every request's decision (allow or deny, the unmet requirements, the bypasses,
  the policy's own deny rules that deny it, the grants that allow it) and, if asked, the needs of
  the allowed ones (every grant that can meet each requirement: least privilege);
* :func:`visibility`: for every principal, each entity a listing shows it, and the grant that shows it.

How (fused plans or rounds, the encoding and its check, the hierarchy cut from the ids) is the
engine's: :mod:`engine.spark.decide`, :mod:`engine.spark.decisions`, :mod:`engine.spark.visibility`.
Importing this module imports neither PySpark nor the planner; each function imports what it runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from privilog.engine.spark.decide import Decided, Requests
from privilog.engine.spark.decisions import ALLOWED_BY_TYPE
from privilog.engine.spark.deployment import Deployment
from privilog.engine.spark.ids import IdForms

if TYPE_CHECKING:
    from privilog.dsl.ir import Policy
    from privilog.engine.ids import EntityId
    from privilog.engine.spark.evaluate import Progress
    from privilog.engine.spark.evaluate import SparkEngine as SparkEngine  # for the caller's annotations
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "ALLOWED_BY_TYPE",
    "Decided",
    "Deployment",
    "IdForms",
    "Requests",
    "decide",
    "deployment",
    "engine",
    "visibility",
]


def engine(
    policy: Policy, spark: SparkSession, progress: Progress, trace: bool = False, local_rows: int | None = None
) -> SparkEngine:
    """The engine of ``policy``, its own deny rules named by place (for the decisions' denied_by);
    ``trace``: each join told to ``progress`` as it is planned; ``local_rows``: relations of at
    most that many rows are evaluated on the driver (0: all in Spark)."""
    from dataclasses import replace

    from privilog.engine.denial import with_denied_by
    from privilog.engine.program import compile_policy
    from privilog.engine.spark.evaluate import EngineSettings, SparkEngine
    from privilog.engine.spark.plan import Settings

    settings = EngineSettings(planner=Settings(trace=progress if trace else None))
    if local_rows is not None:
        settings = replace(settings, local_rows=local_rows, local_base_rows=local_rows)
    # with_denied_by: the policy's own deny rules named by place, for the decisions' denied_by
    return SparkEngine(with_denied_by(compile_policy(policy)), spark, settings, progress=progress)


def deployment(
    spark: SparkSession,
    vocabulary: IdForms,
    entities: DataFrame,
    grants: DataFrame,
    members: DataFrame,
    config: Mapping[str, tuple[str, ...]],
    patterns: list[EntityId],
    facts: Mapping[str, Iterable[tuple[str, ...]]] | None = None,
    facts_from: str | None = None,
) -> Deployment:
    """A deployment's good rows as base relations (:func:`engine.spark.deployment.encode_deployment`),
    with a world's ``facts:`` as the relations they are of (checked against the policy: a mismatch is a
    ``WorldError`` naming ``facts_from``)."""
    from privilog.engine.spark.deployment import encode_deployment

    return encode_deployment(spark, vocabulary, entities, grants, members, config, patterns, facts, facts_from)


def decide(
    spark: SparkSession,
    engine: SparkEngine,
    deployment: Deployment,
    requests: Requests,
    progress: Progress,
    witnesses: bool = True,
    needs_for: DataFrame | None = None,
) -> Decided:
    """Every good request decided (:func:`engine.spark.decide.decide_all`): ``witnesses``, the
    grants that allow each allowed request; ``needs_for`` (rid), the needs of those requests."""
    from privilog.engine.spark.decide import decide_all

    return decide_all(spark, engine, deployment, requests, progress, witnesses=witnesses, needs_for=needs_for)


def visibility(spark: SparkSession, engine: SparkEngine, deployment: Deployment, progress: Progress) -> DataFrame:
    """For every principal, each entity a listing shows it, with the grant that shows it
    (:func:`engine.spark.visibility.visibility`)."""
    from privilog.engine.spark.visibility import visibility as shown

    return shown(spark, engine, deployment, progress)
