"""A world's `facts:` decided by Spark as by the in-memory backends (docs/worlds.md, "Facts of
your own relations"): `privilog pipeline decide --facts` carries them into the deployment as
encoded base relations, and a wildcard among their values gets `matches` rows, over the
inventory and the requests' entities.
The in-memory backends are compared in tests/engine/test_world_facts.py."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import TYPE_CHECKING

import pyspark  # noqa: F401  (the test extra installs it: without it the module fails, it is not skipped)
import pytest
from privilog.engine.backends.pydatalog import PyDatalogBackend
from privilog.engine.facts import world_facts
from privilog.engine.world import write_tables

from privilog import Authorizer, dsl
from privilog.api import load_world_for
from tests.engine.test_world_facts import POLICY

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.slow

# its world, as data (a blocklist with a pattern, clearances read under negation)
WORLD = {
    "entities": ["dataset:ns1.sales_2024", "dataset:ns1.sales_2025", "dataset:ns1.hr", "dataset:ns2.sales_x"],
    "grants": [["user:eve", "ALL", "dataset:ns*.*"], ["user:bob", "ALL", "dataset:ns*.*"]],
    "facts": {
        "blocked": [["user:eve", "dataset:ns1.sales_*"], ["user:bob", "dataset:ns1.hr"]],
        "clearance": [["user:bob", "dataset:ns1.*"], ["user:eve", "dataset:ns2.sales_x"]],
    },
}
ENTITIES = [*WORLD["entities"], "dataset:ns1.sales_new"]  # and one the requests name that does not exist


def test_spark_decides_a_worlds_facts_as_the_compiled_backend(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from privilog.engine.spark.backend import SparkBackend

    from privilog.cli import main
    from privilog.pipeline.runs import open_run
    from privilog.pipeline.show import read_rows

    policy = dsl.parse_policy(POLICY, "cleared.policy")
    world = load_world_for(policy, WORLD)
    authz = Authorizer(policy, world)
    asked = [(p, op, e) for p in ("user:eve", "user:bob") for op in ("dataset.read", "dataset.write") for e in ENTITIES]
    expected = {(p, op, e): authz.check(authz.request(p, op, e)).allowed for p, op, e in asked}
    assert sum(expected.values()) >= 3 and not all(expected.values())  # both ways, or the test shows nothing

    # `privilog pipeline decide --facts`: the deployment's tables and a folder of facts, decided in Spark
    (tmp_path / "cleared.policy").write_text(POLICY)
    write_tables(world, tmp_path / "world", "csv")  # its facts as world/facts/RELATION.csv
    with (tmp_path / "requests.csv").open("w", newline="") as file:
        csv.writer(file).writerows([["principal", "operation", "entity"], *asked])
    tables = [f"--{t}={tmp_path / 'world' / f'{t}.csv'}" for t in ("entities", "grants", "members")]
    common = [*tables, f"--requests={tmp_path / 'requests.csv'}", "--policy", str(tmp_path / "cleared.policy")]
    code = main(["pipeline", "decide", *common, "--facts", str(tmp_path / "world" / "facts"),
                 "--out", str(tmp_path / "run"), "--out-format", "json", "--quiet"])
    assert code == 0, capsys.readouterr().err
    rows = read_rows(open_run(tmp_path / "run"), "decisions", None)
    got = {(r["principal"], r["operation"], r["entity"]): r["decision"] == "allow" for r in rows}
    assert got == expected

    # facts the policy does not declare: one line naming the folder, exit 2
    (tmp_path / "world" / "facts" / "blockd.csv").write_text("user:eve,dataset:ns1.hr\n")
    capsys.readouterr()
    code = main(["pipeline", "decide", *common, "--facts", str(tmp_path / "world" / "facts"),
                 "--out", str(tmp_path / "run2"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "`facts:` gives rows of `blockd`, which the policy does not declare (did you mean `blocked`?)" in err

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
