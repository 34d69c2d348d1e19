"""A world's `facts:` decided by Spark as by the in-memory backends (docs/worlds.md, "Facts of
your own relations"): the pipeline's deployment carries them as encoded base relations, and a
wildcard among their values gets `matches` rows, over the inventory and the requests' entities.
The in-memory backends are compared in tests/engine/test_world_facts.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyspark  # noqa: F401  (the test extra installs it: without it the module fails, it is not skipped)
import pytest
from privilog.engine.backends.pydatalog import PyDatalogBackend
from privilog.engine.facts import world_facts

from privilog import Authorizer, dsl
from privilog.api import load_world_for

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.slow

# the policy and world of tests/engine/test_world_facts.py: a blocklist (a pattern) and a clearance
# read under negation
POLICY = """
policy cleared "a blocklist and clearances given by the world"
include "cdap"
relation blocked(principal, entity)
relation clearance(principal, entity)
cleared(P, E) :- clearance(P, E).
cleared(P, E) :- clearance(P, X), matches(E, X).
denied(R) :- request(R, P, _, E), blocked(P, E).
denied(R) :- request(R, P, _, E), blocked(P, X), matches(E, X).
denied(R) :- request(R, P, "dataset.write", E), not cleared(P, E).
"""
WORLD = {
    "entities": ["dataset:ns1.sales_2024", "dataset:ns1.sales_2025", "dataset:ns1.hr", "dataset:ns2.sales_x"],
    "grants": [["user:eve", "ALL", "dataset:ns*.*"], ["user:bob", "ALL", "dataset:ns*.*"]],
    "facts": {
        "blocked": [["user:eve", "dataset:ns1.sales_*"], ["user:bob", "dataset:ns1.hr"]],
        "clearance": [["user:bob", "dataset:ns1.*"], ["user:eve", "dataset:ns2.sales_x"]],
    },
}
ENTITIES = [*WORLD["entities"], "dataset:ns1.sales_new"]  # and one the requests name that does not exist


def test_spark_decides_a_worlds_facts_as_the_compiled_backend(spark: SparkSession) -> None:
    from privilog.engine.spark.backend import SparkBackend
    from privilog.engine.spark.decide import decide_all
    from privilog.engine.spark.evaluate import SparkEngine

    from privilog.pipeline.inputs import Vocabulary, check_requests, load_deployment, number_requests
    from privilog.pipeline.tables import Progress

    policy = dsl.parse_policy(POLICY, "cleared.policy")
    world = load_world_for(policy, WORLD)
    authz = Authorizer(policy, world)
    asked = [(p, op, e) for p in ("user:eve", "user:bob") for op in ("dataset.read", "dataset.write") for e in ENTITIES]
    expected = {(p, op, e): authz.check(authz.request(p, op, e)).allowed for p, op, e in asked}
    assert sum(expected.values()) >= 3 and not all(expected.values())  # both ways, or the test shows nothing

    # the pipeline: the deployment's tables with the world's facts, every request decided in Spark
    frames = {
        "entities": spark.createDataFrame([(e,) for e in WORLD["entities"]], "entity string"),
        "grants": spark.createDataFrame(
            [tuple(g) for g in WORLD["grants"]], "principal string, action string, entity string"
        ),
        "members": spark.createDataFrame([], "principal string, group string"),
    }
    vocabulary = Vocabulary(policy)
    deployment = load_deployment(
        spark, vocabulary, frames["entities"], frames["grants"], frames["members"], facts=world.facts
    )
    rows = [(p, op, e, "", str(i)) for i, (p, op, e) in enumerate(asked)]
    log = spark.createDataFrame(
        rows, "principal string, operation string, entity string, args string, timestamp string"
    )
    checked = check_requests(spark, vocabulary, number_requests(log))
    engine = SparkEngine(authz.program, spark, progress=Progress(quiet=True))
    decided = decide_all(spark, engine, deployment, checked, Progress(quiet=True))
    got = {asked[int(r["timestamp"])]: r["decision"] == "allow" for r in decided.table.collect()}
    assert got == expected

    # the Spark backend over the facts the authorizer gives its backend: every derived relation as pyDatalog's
    facts = world_facts(world, authz.loaded.patterns)
    assert ("dataset:ns1.sales_2024", "dataset:ns1.sales_*") in facts["matches"]
    reference, candidate = PyDatalogBackend(authz.program), SparkBackend(authz.program, spark)
    for relation, found in facts.items():
        if found:
            reference.add(relation, found)
            candidate.add(relation, found)
    assert candidate.query("cleared") == reference.query("cleared") != set()
    assert candidate.query("denied") == reference.query("denied")
