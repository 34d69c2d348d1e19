"""The pipeline's dictionary: every string a run holds, with its code, and the collision check.

Ids are evaluated as 64-bit hashes; two strings of one run that share a code would be one id
to the engine, so the run refuses them (``privilog.engine.spark.decide.dictionary``). No two real
strings are known to share an xxhash64, so the collisions here come from an encoding passed in
that gives two chosen strings one code.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from privilog import dsl

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

WORLD = {
    "entities": [("namespace:ns1",), ("application:ns1.app",), ("program:ns1.app.service.p1",)],
    "grants": [("user:alice", "EXECUTE", "program:ns1.app.service.p1"), ("group:ops", "ALL", "namespace:ns1")],
    "members": [("user:alice", "group:ops")],
}
REQUESTS = [
    # zed appears nowhere in the world; the schedule does not exist yet (its chain is new)
    ("user:zed", "schedule.resume", "schedule:ns1.app.s9", json.dumps({"program": "program:ns1.app.service.p2"})),
    ("user:alice", "namespace.get", "namespace:ns2", None),
]


def _run(spark: SparkSession, code: Any = None) -> dict[int, str]:
    from privilog.engine.program import compile_policy
    from privilog.engine.spark.decide import dictionary
    from privilog.engine.spark.evaluate import SparkEngine
    from privilog.engine.spark.session import released
    from pyspark.sql import functions as F

    from privilog.pipeline.inputs import Vocabulary, check_requests, load_deployment, number_requests
    from privilog.pipeline.tables import Progress

    policy = dsl.load_policy("cdap")
    vocabulary = Vocabulary(policy)
    frames = {
        "entities": spark.createDataFrame(WORLD["entities"], "entity string"),
        "grants": spark.createDataFrame(WORLD["grants"], "principal string, action string, entity string"),
        "members": spark.createDataFrame(WORLD["members"], "principal string, group string"),
    }
    log = spark.createDataFrame(REQUESTS, "principal string, operation string, entity string, args string")
    log = log.withColumn("timestamp", F.lit("2026-11-26T00:00:00Z"))
    with released():
        deployment = load_deployment(spark, vocabulary, frames["entities"], frames["grants"], frames["members"])
        requests = check_requests(spark, vocabulary, number_requests(log))
        assert requests.rejects.count() == 0, requests.rejects.collect()
        engine = SparkEngine(compile_policy(policy), spark, progress=Progress(quiet=True))
        table = dictionary(spark, engine, deployment, requests, code=code)
        return {int(r["code"]): r["value"] for r in table.collect()}


def _colliding(first: str, second: str) -> Any:
    """An encoding that is xxhash64 but for ``first`` and ``second``, which both get 7."""
    from pyspark.sql import functions as F

    def code(value: Column) -> Column:
        return F.when(value.isin(first, second), F.lit(7).cast("long")).otherwise(F.xxhash64(value))

    return code


def test_the_dictionary_holds_every_string_of_the_run_once_by_its_code(spark: SparkSession) -> None:
    from privilog.engine.spark.encoding import xxhash64

    table = _run(spark)
    values = set(table.values())
    assert len(values) == len(table), "each string once"
    assert all(code == xxhash64(value) for code, value in table.items())
    wanted = {
        "user:alice", "group:ops", "EXECUTE", "READ", "ADMIN", "WRITE", "program:ns1.app.service.p1",  # the world
        "user:zed", "schedule:ns1.app.s9", "namespace:ns2", "program:ns1.app.service.p2",  # only the requests
        "schedule.resume", "namespace.get", "program", "schedule", "namespace", "instance:cdap",
    }  # fmt: skip
    assert wanted <= values, sorted(wanted - values)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("namespace:ns1", "user:alice"),  # two strings of the world
        ("user:zed", "namespace:ns1"),  # a principal that only a request names, and an entity of the world
        ("program:ns1.app.service.p2", "group:ops"),  # an argument's value, and a group
        ("schedule:ns1.app.s9", "EXECUTE"),  # an entity a request creates, and an action
    ],
)
def test_two_strings_that_share_a_code_are_refused_naming_both(spark: SparkSession, first: str, second: str) -> None:
    from privilog.engine.spark.encoding import EncodingError

    low, high = sorted((first, second))
    with pytest.raises(EncodingError, match=f"^`{low}` and `{high}` share the code 7; cannot evaluate them$"):
        _run(spark, _colliding(first, second))
