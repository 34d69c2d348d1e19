"""``privilog pipeline unused``: the same least-privilege answers on Spark as ``privilog unused`` in memory.

A generated deployment (with bad rows in every table) is analysed by both commands: every grant
listed as unused, sole or removable, the counts, the examples, the principals and the window must
be the same, and ``--verify`` must find that no allowed request changes. The needs that Spark
gathers from the fused plans must be the needs the generic evaluation (in rounds) gives, and
a recommendation that would deny a request must be caught by ``--verify``.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyspark  # noqa: F401  (the test extra installs it: without it the module fails, it is not skipped)
import pytest

from privilog.cli import main
from privilog.pipeline.generate import TABLES, table_path

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.slow

REQUESTS = 1500
CLEANER = "user:cleaner"


@dataclass(frozen=True)
class Generated:
    folder: Path
    world: Path  # the good rows as a world file, for privilog unused
    log: Path  # the access log (with its bad rows)

    def inputs(self) -> list[str]:
        args = []
        for table in TABLES:
            args += [f"--{table}", str(table_path(self.folder, table, "csv"))]
        return args


def _main(argv: list[str]) -> tuple[int, str, str]:
    printed, errors = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(errors):
        code = main(argv)
    return code, printed.getvalue(), errors.getvalue()


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Generated:
    folder = tmp_path_factory.mktemp("unused")
    code, _, err = _main(
        [
            *("generate", "--out", str(folder), "--format", "csv", "--seed", "11"),
            *("--entities", "300", "--grants", "300", "--requests", str(REQUESTS), "--bad-rows", "2"),
        ]
    )
    assert code == 0, err

    # a user who may drop every stream and dataset of one namespace (the needs of an "every" requirement),
    # by its own grants and, for one stream, also a group's; added before each table's two bad rows
    tables = {}
    for table in TABLES:
        with table_path(folder, table, "csv").open(encoding="utf-8", newline="") as f:
            tables[table] = list(csv.DictReader(f))
    entities = [r["entity"] for r in tables["entities"][:-2]]
    namespace = next(e.split(":")[1].split(".")[0] for e in entities if e.startswith("stream:"))
    inside = [e for e in entities if e.startswith((f"stream:{namespace}.", f"dataset:{namespace}."))]
    extra = {
        "grants": [{"principal": CLEANER, "action": "ADMIN", "entity": e} for e in [f"namespace:{namespace}", *inside]]
        + [{"principal": "group:cleaners", "action": "ADMIN", "entity": inside[0]}],
        "members": [{"principal": CLEANER, "group": "group:cleaners"}],
        "requests": [
            {"principal": CLEANER, "operation": f"namespace.{op}", "entity": f"namespace:{namespace}"}
            for op in ("drop_all_streams", "drop_all_datasets")
        ],
    }
    for table, rows in tables.items():
        good = rows[:-2] + extra.get(table, [])
        with table_path(folder, table, "csv").open("w", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows({k: row.get(k, "") for k in rows[0]} for row in good + rows[-2:])
        tables[table] = good

    def rows(table: str) -> list[dict[str, str]]:
        return tables[table]

    world = {
        "entities": [r["entity"] for r in rows("entities")],
        "grants": [[r["principal"], r["action"], r["entity"]] for r in rows("grants")],
        "members": [[r["principal"], r["group"]] for r in rows("members")],
    }
    (folder / "world.json").write_text(json.dumps(world), encoding="utf-8")
    return Generated(folder, folder / "world.json", table_path(folder, "requests", "csv"))


@dataclass(frozen=True)
class Both:
    memory: dict[str, Any]
    spark: dict[str, Any]
    out: Path
    printed: str


@pytest.fixture(scope="module", params=["cdap", "cdap-4.2"])
def both(
    request: pytest.FixtureRequest, generated: Generated, spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> Both:
    policy = request.param
    code, memory, err = _main(
        [
            "unused",
            "--policy",
            policy,
            "--world",
            str(generated.world),
            "--log",
            str(generated.log),
            "--json",
            "--verify",
        ]
    )
    assert code == 0, err
    out = tmp_path_factory.mktemp("unused-run") / "out"
    code, on_spark, err = _main(
        [
            "pipeline",
            "unused",
            "--policy",
            policy,
            *generated.inputs(),
            "--out",
            str(out),
            "--json",
            "--verify",
            "--quiet",
        ]
    )
    assert code == 0, err
    code, printed, err = _main(["pipeline", "show", str(out)])
    assert code == 0, err
    return Both(json.loads(memory), json.loads(on_spark), out, printed)


def test_the_pipeline_answers_as_privilog_unused_does(both: Both) -> None:
    memory, spark = both.memory, both.spark
    summary = memory["summary"]
    assert summary["allowed"] and summary["denied"] and summary["unused"] and summary["sole"]
    assert summary["recommended_removals"] > summary["unused"], "some used grants are removable too"
    assert summary["rejected"] >= 2  # the bad rows (cdap-4.2 also refuses the operations it lacks)
    for key in ("summary", "window", "unused", "sole", "recommended_removals", "principals", "inactive"):
        assert spark[key] == memory[key], key


def test_verify_finds_that_no_allowed_request_changes(both: Both) -> None:
    assert both.memory["verify"] == {"changed": []}
    assert both.spark["verify"] == {"changed": []}


def test_the_run_holds_the_report_as_tables(both: Both) -> None:
    from privilog.pipeline.runs import open_run
    from privilog.pipeline.show import read_rows

    run = open_run(both.out)
    window = both.memory["window"]
    unused = read_rows(run, "unused", None)
    assert sorted((r["principal"], r["action"], r["entity"]) for r in unused) == sorted(
        (g["principal"], g["action"], g["entity"]) for g in both.memory["unused"]
    )
    assert {(r["window_start"], r["window_end"]) for r in unused} == {tuple(window)}
    removals = read_rows(run, "removals", None)
    assert [{k: r[k] for k in ("principal", "action", "entity", "used")} for r in removals] == both.memory[
        "recommended_removals"
    ]
    sole = read_rows(run, "sole", None)
    assert [(r["principal"], r["action"], r["entity"], r["requests"]) for r in sole] == [
        (s["principal"], s["action"], s["entity"], s["requests"]) for s in both.memory["sole"]
    ]
    principals = {r["principal"]: r for r in read_rows(run, "principals", None)}
    for p in both.memory["principals"]:
        row = principals[p["principal"]]
        assert (row["held"], row["used"], row["unused"], row["requests"]) == (
            p["held"],
            p["used"],
            p["unused"],
            p["requests"],
        )
        if p["principal"].startswith("user:"):
            assert row["active"] == (p["principal"] not in both.memory["inactive"])
        else:
            assert row["active"] is None
    manifest = json.loads((both.out / "run.json").read_text(encoding="utf-8"))
    assert manifest["command"] == "unused"
    assert manifest["least_privilege"]["recommended_removals"] == both.memory["summary"]["recommended_removals"]
    assert manifest["least_privilege"]["verify"] == {"changed": 0}
    assert "unused" in both.printed and "removals" in both.printed


def test_the_needs_of_the_fused_plans_are_those_of_the_rounds(generated: Generated, spark: SparkSession) -> None:
    from privilog.engine.program import compile_policy
    from privilog.engine.spark.decide import decide_all
    from privilog.engine.spark.evaluate import SparkEngine
    from privilog.engine.spark.session import released
    from pyspark.sql import functions as F

    from privilog import dsl
    from privilog.pipeline.inputs import Vocabulary, check_requests, load_deployment, number_requests
    from privilog.pipeline.tables import Progress, read_table

    policy = dsl.load_policy("cdap")
    vocabulary = Vocabulary(policy, "cdap")

    def table(name: str) -> Any:
        return read_table(spark, table_path(generated.folder, name, "csv"), "csv", name)

    deployment = load_deployment(spark, vocabulary, table("entities"), table("grants"), table("members"))
    # the requests of a few users: the generic evaluation in rounds holds every relation of the program
    few = [CLEANER, *(f"user:u{i:06d}" for i in range(4))]
    requests = check_requests(spark, vocabulary, number_requests(table("requests").where(F.col("principal").isin(few))))
    engine = SparkEngine(compile_policy(policy), spark)
    found = {}
    for fused in (True, False):
        with released():
            every = requests.good.select("rid")
            decided = decide_all(spark, engine, deployment, requests, Progress(quiet=True), fused, False, every)
            assert decided.needs is not None
            found[fused] = {tuple(r) for r in decided.needs.select("rid", "i", "c", "p", "a", "e").collect()}
    assert found[True], "the allowed requests have needs"
    assert any(r[2] is not None for r in found[True]), "some need is of an entity inside (a delete)"
    assert found[True] == found[False]


def test_verify_catches_a_removal_that_denies_a_request(
    generated: Generated, spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recommendation that took away a sole grant (a bug, planted here) is reported, exit 1."""
    from privilog.pipeline import unused

    honest = unused.report

    def planted(*args: Any, **kwargs: Any) -> Any:
        found = honest(*args, **kwargs)
        found.removals = [*found.removals, found.sole[0].grant]
        return found

    monkeypatch.setattr(unused, "report", planted)
    code, out, err = _main(
        ["pipeline", "unused", *generated.inputs(), "--out", str(tmp_path / "out"), "--verify", "--quiet"]
    )
    assert code == 1, err
    assert "allowed requests would be denied: please report it" in err
    assert "verify: FAILED:" in out


SAMPLES = Path(__file__).resolve().parents[2] / "privilog" / "samples"


def test_the_sample_deployment_is_the_sample_world() -> None:
    from privilog.dsl import load_policy

    from privilog.api import load_world_for

    policy = load_policy("cdap")
    world = load_world_for(policy, SAMPLES / "world.yaml")

    def rows(name: str) -> list[dict[str, str]]:
        with (SAMPLES / "deployment" / f"{name}.csv").open(encoding="utf-8", newline="") as f:
            return list(csv.DictReader(f))

    tables = load_world_for(
        policy,
        {
            "entities": [r["entity"] for r in rows("entities")],
            "grants": [[r["principal"], r["action"], r["entity"]] for r in rows("grants")],
            "members": [[r["principal"], r["group"]] for r in rows("members")],
        },
    )
    assert (tables.entities, tables.grants, tables.members) == (world.entities, world.grants, world.members)


def test_pipeline_unused_on_the_sample_prints_what_privilog_unused_does(spark: SparkSession, tmp_path: Path) -> None:
    """docs/least-privilege.md's two commands: the same report, but for what the tables cannot hold (admins) and
    where a rejected row is (the pipeline numbers rows of data, in the file it read)."""
    log = str(SAMPLES / "access-log.csv")
    code, memory, err = _main(["unused", "--world", str(SAMPLES / "world.yaml"), "--log", log, "--verify"])
    assert code == 0, err
    inputs = [f"--{t}={SAMPLES / 'deployment' / f'{t}.csv'}" for t in ("entities", "grants", "members")]
    out = tmp_path / "run"
    code, on_spark, err = _main(
        ["pipeline", "unused", *inputs, f"--requests={log}", f"--out={out}", "--verify", "--quiet"]
    )
    assert code == 0, err

    def sections(text: str) -> list[str]:
        lines, skip = [], False
        for line in text.splitlines():
            if not line.startswith("  "):
                skip = line.startswith(("users with no request", "rejected rows", "wrote "))
            if not skip:
                lines.append(line)
        return lines

    assert sections(on_spark) == sections(memory)
    assert "user:root" in memory and "user:root" not in on_spark
    assert "access-log.csv:5: unknown operation `application.update`" in on_spark
    assert f"wrote {out} (parquet: unused, sole, removals, principals, rejects)" in on_spark
    code, page, err = _main(["pipeline", "report", str(out)])
    assert code == 0, err
    assert "least privilege: 11 grants: 6 used, 5 unused, 6 sole; 5 can be removed together (exact)" in page
    code, _, err = _main(["pipeline", "report", str(out), "--html", "--out", str(tmp_path / "page.html")])
    assert code == 0, err
    html = (tmp_path / "page.html").read_text(encoding="utf-8")
    assert "Least privilege: grants held, used and unused, by principal" in html
    assert "user:alice READ namespace:sales" in html and "Verified: the log decided again without them, 0" in html
