"""The pipeline where data teams run it: a standalone cluster, Spark Connect, catalog tables (issue 20).

This module starts, on 127.0.0.1 and on ports chosen free, a standalone Spark cluster (a master and one
worker) and a Spark Connect server with a Hive catalog (tests/cluster/servers.py), and stops them at its
end. One generated deployment (with bad rows in every table) is decided, shown and compared:

* locally (``--master local[2]``), the reference run;
* on the cluster (``--master spark://...``) and over Spark Connect (``--remote sc://...``): ``decide``,
  ``visibility`` and ``impact`` give every table row for row as the local run, rejects included;
* from catalog tables and into them, over Connect, with a local ``--warehouse`` and on the cluster with
  one: the same decisions, each row tagged with its run, partitioned by day, appended or replaced, the
  run recorded last;
* what cannot work is refused in one line, exit 2: a bad address, a server that does not answer, options
  that only a local driver takes, a malformed or missing table, a catalog table without a catalog.

Every pipeline run is a real ``privilog`` process, as a user runs it.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

# The test extra installs these (grpc is Spark Connect's client, from pyspark[connect]): without them the
# module fails, it is not skipped.
import grpc  # noqa: F401
import pyarrow
import pyarrow.parquet
import pyspark  # noqa: F401
import pytest

from tests.cluster.servers import ConnectServer, Standalone, free_port, spark_env, start_connect, start_standalone

pytestmark = pytest.mark.slow

# The generated log, cut to operations that between them need every kind of rule: ADMIN on every
# descendant (deletes), arguments and entities created by the request (deploy, create), listings
# (visibility), groups' grants, and plain reads and writes. Fewer operations keep each run's planning short.
OPERATIONS = {
    "application.deploy", "application.delete", "application.list", "dataset.create", "dataset.read",
    "dataset.write", "namespace.delete", "namespace.get", "program.start", "securekey.read", "stream.write",
    "artifact.add", "schedule.resume", "dataset.reed",  # the last: a bad row the generator plants
}  # fmt: skip
TABLE_NAMES = ("decisions", "visibility", "changes", "by_operation", "rejects")
RUN_TIMEOUT = 900  # seconds: a run here takes under two minutes; a hung one fails the test, not CI


def privilog(*args: str, check: bool = True, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``privilog ARGS`` in a process of its own (``env``: variables added to its environment); with
    ``check``, its exit code 0 (or 1 for impact)."""
    argv = [sys.executable, "-m", "privilog", *args]
    done = subprocess.run(argv, capture_output=True, text=True, env=dict(spark_env(), **(env or {})), timeout=RUN_TIMEOUT)
    if check and done.returncode not in (0, 1):
        raise AssertionError(f"privilog {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("deployments")


@pytest.fixture(scope="module")
def deployment(folder: Path) -> Path:
    """A generated deployment in CSV, with 2 bad rows in each table, its log cut to OPERATIONS."""
    data = folder / "data"
    privilog("generate", "--out", str(data), "--entities", "200", "--grants", "250", "--requests", "1500",
             "--bad-rows", "2", "--seed", "20")  # fmt: skip
    log = data / "requests.csv"
    with log.open(newline="") as f:
        rows = list(csv.reader(f))
    kept = [rows[0], *(r for r in rows[1:] if r[1] in OPERATIONS or r[1] not in ALL_OPERATIONS)]
    with log.open("w", newline="") as f:
        csv.writer(f).writerows(kept)
    assert len(kept) > 300
    return data


def _all_operations() -> set[str]:
    from privilog import dsl

    return {op.name for policy in ("cdap", "cdap-4.2") for op in dsl.load_policy(policy).operations}


ALL_OPERATIONS = _all_operations()


def inputs(data: Path, requests: bool = True) -> list[str]:
    args = ["--entities", str(data / "entities.csv"), "--grants", str(data / "grants.csv"),
            "--members", str(data / "members.csv")]  # fmt: skip
    return [*args, "--requests", str(data / "requests.csv")] if requests else args


def world_tables(prefix: str) -> list[str]:
    """The world's inputs as catalog tables ``PREFIX_entities``, ... (as privilog generate --out-table names them)."""
    return [arg for t in ("entities", "grants", "members") for arg in (f"--{t}", f"table:{prefix}_{t}")]


def runs(data: Path, out: Path, where: list[str], decide_env: dict[str, str] | None = None) -> dict[str, Path]:
    """decide, visibility and impact of the deployment, run ``where`` (--master URL, --remote URL); their folders.
    With ``decide_env``, decide runs with those variables instead of ``where``, and not quiet: what it printed
    on standard error is in ``out/decide.stderr``."""
    done = {
        "decide": ["pipeline", "decide", *inputs(data)],
        "visibility": ["pipeline", "visibility", *inputs(data, requests=False)],
        "impact": ["pipeline", "impact", "cdap-4.2", "cdap", *inputs(data)],
    }
    folders = {}
    out.mkdir(parents=True, exist_ok=True)
    for command, args in done.items():
        folders[command] = out / command
        if command == "decide" and decide_env is not None:
            run = privilog(*args, "--out", str(folders[command]), "--partitions", "2", env=decide_env)
            assert run.returncode == 0, run.stderr[-2000:]
            (out / "decide.stderr").write_text(run.stderr)
        else:
            privilog(*args, "--out", str(folders[command]), "--partitions", "2", "--quiet", *where)
    return folders


def rows(path: Path, drop: tuple[str, ...] = ()) -> list[str]:
    """A table's rows (a Parquet folder, partitions as columns), each as canonical JSON, sorted."""
    import pyarrow.dataset as ds

    table = ds.dataset(str(path), format="parquet", partitioning="hive").to_table()
    out = []
    for row in table.to_pylist():
        for column in drop:
            row.pop(column, None)
        out.append(json.dumps(row, sort_keys=True, default=str))
    return sorted(out)


def run_tables(folders: dict[str, Path]) -> dict[tuple[str, str], list[str]]:
    found = {}
    for command, folder in folders.items():
        for name in TABLE_NAMES:
            if (folder / name).exists():
                found[(command, name)] = rows(folder / name)
    return found


@pytest.fixture(scope="module")
def local(deployment: Path, folder: Path) -> dict[tuple[str, str], list[str]]:
    """The reference: every table of decide, visibility and impact, run in local mode."""
    tables = run_tables(runs(deployment, folder / "local", ["--master", "local[2]"]))
    assert {name for _, name in tables} == set(TABLE_NAMES)
    assert len(tables[("decide", "decisions")]) > 300 and len(tables[("decide", "rejects")]) == 8
    assert tables[("impact", "changes")], "the two policies decide some request differently"
    return tables


@pytest.fixture(scope="module")
def standalone(folder: Path) -> Iterator[Standalone]:
    cluster = start_standalone(folder / "standalone")
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def connect(folder: Path) -> Iterator[ConnectServer]:
    server = start_connect(folder / "connect")
    yield server
    server.stop()


def differences(local: dict[tuple[str, str], list[str]], other: dict[tuple[str, str], list[str]]) -> list[str]:
    said = []
    for key in sorted(set(local) | set(other)):
        a, b = local.get(key, []), other.get(key, [])
        if a != b:
            only = sorted(set(a) ^ set(b))[:2]
            said.append(f"{key}: {len(a)} rows locally, {len(b)} here; e.g. {only}")
    return said


def test_a_standalone_cluster_gives_the_local_run_row_for_row(
    standalone: Standalone, deployment: Path, folder: Path, local: dict[tuple[str, str], list[str]]
) -> None:
    folders = runs(deployment, folder / "standalone-runs", ["--master", standalone.url, "--driver-memory", "2g"])
    assert differences(local, run_tables(folders)) == []
    manifest = json.loads((folders["decide"] / "run.json").read_text())
    assert manifest["rows_in_check"].startswith("passed")


@pytest.fixture(scope="module")
def connect_runs(connect: ConnectServer, deployment: Path, folder: Path) -> Path:
    """decide, visibility and impact over Spark Connect, in ``connect-runs``: visibility and impact told the
    server by ``--remote``, decide by ``SPARK_REMOTE`` in its environment (as a notebook's session is; decide
    is told by ``--remote`` in test_catalog_tables_in_and_out_over_spark_connect). One run of each serves
    both tests below: a run over Connect costs tens of seconds."""
    out = folder / "connect-runs"
    runs(deployment, out, ["--remote", connect.url], decide_env={"SPARK_REMOTE": connect.url})
    return out


def test_spark_connect_gives_the_local_run_row_for_row(
    connect_runs: Path, local: dict[tuple[str, str], list[str]]
) -> None:
    folders = {command: connect_runs / command for command in ("decide", "visibility", "impact")}
    assert differences(local, run_tables(folders)) == []


def test_spark_remote_in_the_environment_is_used_as_remote_is(
    connect: ConnectServer, connect_runs: Path, local: dict[tuple[str, str], list[str]]
) -> None:
    assert f"connecting to Spark Connect at {connect.url}" in (connect_runs / "decide.stderr").read_text()
    assert rows(connect_runs / "decide" / "decisions") == local[("decide", "decisions")]


def _warehouse_tables(root: Path) -> Path:
    """The folder holding a catalog's tables: a warehouse's default database."""
    return root / "warehouse"


def test_catalog_tables_in_and_out_over_spark_connect(
    connect: ConnectServer, deployment: Path, folder: Path, local: dict[tuple[str, str], list[str]]
) -> None:
    # The world into the server's catalog, as privilog generate loads one: the same seed draws the same
    # entities, grants and members (their bad rows, drawn after the log, differ). The cut log stays a file:
    # a run may mix tables and files.
    loaded = privilog("generate", "--out", str(folder / "gen-connect"), "--entities", "200", "--grants", "250",
                      "--requests", "10", "--bad-rows", "2", "--seed", "20", "--remote", connect.url,
                      "--out-table", "gen")  # fmt: skip
    assert "tables gen_*" in loaded.stdout
    done = privilog("pipeline", "decide", *world_tables("gen"), "--requests", str(deployment / "requests.csv"),
                    "--out-table", "res", "--remote", connect.url)  # fmt: skip
    assert "appended to res_decisions, res_rejects and res_runs" in done.stdout
    tables = _warehouse_tables(connect.warehouse)
    decided = rows(tables / "res_decisions", drop=("run_id", "day"))
    assert decided == local[("decide", "decisions")]
    days = {p.name for p in (tables / "res_decisions").iterdir() if p.name.startswith("day=")}
    assert days and all(len(d) == len("day=2026-11-01") for d in days), days
    recorded = pyarrow.parquet.read_table(str(tables / "res_runs")).to_pylist()
    assert len(recorded) == 1
    manifest = json.loads(recorded[0]["manifest"])
    assert manifest["outputs"]["decisions"]["rows"] == len(decided)
    assert manifest["inputs"]["entities"]["path"] == "table:gen_entities"
    assert manifest["inputs"]["entities"]["rejected"] == 2
    rejects = [json.loads(r) for r in rows(tables / "res_rejects")]
    assert {r["file"] for r in rejects if r["table"] == "entities"} == {"table:gen_entities"}
    assert all(r["row_number"] >= 1 for r in rejects)


def test_a_warehouse_appends_runs_and_a_run_on_the_cluster_replaces_them(
    standalone: Standalone, deployment: Path, folder: Path, local: dict[tuple[str, str], list[str]]
) -> None:
    """A local ``--warehouse``: two runs appended, each tagged with its run; then a run on the standalone
    cluster with the same catalog (the driver's, its executors reading and writing its tables) replaces them."""
    warehouse = folder / "warehouse"
    where = ["--warehouse", str(warehouse)]
    privilog("generate", "--out", str(folder / "gen-local"), "--entities", "200", "--grants", "250",
             "--requests", "10", "--bad-rows", "2", "--seed", "20", "--out-table", "d", *where,
             "--master", "local[2]")  # fmt: skip
    decide = ["pipeline", "decide", *world_tables("d"), "--requests", str(deployment / "requests.csv"),
              "--out-table", "r", "--partitions", "2", "--quiet", *where]  # fmt: skip
    first, second = privilog(*decide, "--master", "local[2]"), privilog(*decide, "--master", "local[2]")
    assert "appended to r_decisions" in first.stdout
    tables = _warehouse_tables(warehouse)
    both = rows(tables / "r_decisions", drop=("day",))
    ids = {json.loads(r)["run_id"] for r in both}
    assert len(ids) == 2 and all(i in first.stdout + second.stdout for i in ids)
    assert rows(tables / "r_decisions", drop=("run_id", "day")) == sorted(local[("decide", "decisions")] * 2)
    assert len(pyarrow.parquet.read_table(str(tables / "r_runs")).to_pylist()) == 2
    on_cluster = ["--master", standalone.url, "--driver-memory", "2g"]
    replaced = privilog(*decide, *on_cluster, "--table-mode", "replace")
    assert "replaced r_decisions" in replaced.stdout
    last = {json.loads(r)["run_id"] for r in rows(tables / "r_decisions", drop=("day",))}
    assert len(last) == 1 and last.pop() not in ids
    assert rows(tables / "r_decisions", drop=("run_id", "day")) == local[("decide", "decisions")]
    assert len(pyarrow.parquet.read_table(str(tables / "r_runs")).to_pylist()) == 1
    assert (warehouse / "metastore_db").is_dir()


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--remote", "http://127.0.0.1:15002"], "a Spark Connect address is sc://HOST:PORT"),
        (["--remote", "sc://127.0.0.1:{closed}"], "no Spark Connect server answers at 127.0.0.1:{closed}"),
        (["--remote", "sc://127.0.0.1:{connect}", "--master", "local[1]"], "--master cannot be used with --remote"),
        (["--remote", "sc://127.0.0.1:{connect}", "--driver-memory", "2g"], "--driver-memory cannot be used with"),
        (["--remote", "sc://127.0.0.1:{connect}", "--warehouse", "w"], "--warehouse cannot be used with --remote"),
        (["--out-table", "res"], "catalog tables (table:NAME, --out-table) need a catalog"),
        (["--out-table", "a b", "--warehouse", "w"], "`a b` is not a table name"),
        (["--out-table", "nodb.x", "--remote", "sc://127.0.0.1:{connect}"], "the catalog has no database `nodb`"),
        (["--entities", "table:nosuch", "--remote", "sc://127.0.0.1:{connect}"], "table:nosuch: no such table"),
        (["--entities", "table:a.b.c.d", "--remote", "sc://127.0.0.1:{connect}"], "`a.b.c.d` is not a table name"),
        (["--out", "OUT", "--out-table", "x", "--warehouse", "w"], "say where the run goes"),
    ],
)
def test_what_cannot_run_is_refused_in_one_line(
    extra: list[str], said: str, connect: ConnectServer, deployment: Path, folder: Path
) -> None:
    ports = {"closed": str(free_port()), "connect": str(connect.port)}
    extra = [a.format(**ports) for a in extra]
    if "--entities" in extra:  # the bad entities table replaces the file
        i = extra.index("--entities")
        base = inputs(deployment)
        base[base.index("--entities") + 1] = extra[i + 1]
        extra = extra[:i] + extra[i + 2 :]
    else:
        base = inputs(deployment)
    out = [] if "--out-table" in extra and "--out" not in extra else ["--out", str(folder / "refused")]
    extra = [str(folder / "refused") if a == "OUT" else a for a in extra]
    done = privilog("pipeline", "decide", *base, *out, *extra, check=False)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if not line.startswith("[")]
    assert lines == [f"privilog: {lines[0].removeprefix('privilog: ')}"] and said.format(**ports) in lines[0], lines
    assert not (folder / "refused").exists()


def test_generate_writes_parquet_through_spark_connect(connect: ConnectServer, folder: Path) -> None:
    out = folder / "gen-parquet"
    privilog("generate", "--out", str(out), "--entities", "50", "--grants", "50", "--requests", "100",
             "--format", "parquet", "--remote", connect.url)  # fmt: skip
    assert len(rows(out / "requests")) == 100


def test_spark_servers_are_stopped_with_their_process_groups(folder: Path) -> None:
    """The fixtures' stop ends a server's whole process group (no JVM left behind by the suite)."""
    from tests.cluster.servers import Server, group_alive

    server = Server("a sleeper", ["bash", "-c", "sleep 300 & sleep 300"], folder / "sleeper.log")
    server.start()
    assert server.process is not None
    group = server.process.pid
    assert group_alive(group)
    server.stop()
    assert server.process.poll() is not None
    assert not group_alive(group)
