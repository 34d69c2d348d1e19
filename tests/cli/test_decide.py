"""``privilog decide``: a file of requests decided in process, each in a fresh ``python -m privilog``.

The contract: one row per good request, with the pipeline's decisions columns, in CSV, JSON lines
or Parquet (by ``--format`` or the name of ``--out``); a bad row rejected with its file, line and
reason (the reference engine's words) while the others are decided; standard input; exit 0 once
decided, 2 when the file cannot be read or every row of it is rejected, one line each. And every
row the same as the reference backend's (pyDatalog), on a generated deployment and log.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from privilog.engine.authorizer import tabled

import privilog
from privilog.cli.decide import COLUMNS, DECIDED

SAMPLES = Path(privilog.__file__).parent / "samples"
WORLD = str(SAMPLES / "deployment")
LOG = str(SAMPLES / "access-log.csv")
HEADER = [*COLUMNS, *DECIDED]


def decide(*argv: str, stdin: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "privilog", "decide", *argv],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_the_sample_log_is_decided_and_its_bad_rows_rejected_with_their_lines() -> None:
    done = decide(LOG, "--world", WORLD)
    assert done.returncode == 0, done.stderr
    rows = _csv(done.stdout)
    assert list(rows[0]) == HEADER
    assert len(rows) == 9
    first = rows[0]
    assert (first["principal"], first["decision"], first["unmet"], first["bypass"], first["denied_by"]) == (
        "user:bob", "allow", "[]", "[]", "[]",
    )  # fmt: skip
    assert json.loads(first["allowed_by"]) == [
        {"requirement": "dataset.read#1", "principal": "user:bob", "action": "READ", "entity": "dataset:sales.orders"}
    ]
    denied = next(r for r in rows if r["decision"] == "deny")
    assert json.loads(denied["unmet"]) == [{"requirement": "dataset.write#1", "text": "WRITE", "lacking": []}]
    assert json.loads(denied["allowed_by"]) == []
    deploy = next(r for r in rows if r["operation"] == "application.deploy")
    assert json.loads(deploy["args"]) == {"artifact": "artifact:sales.etl-lib"}
    assert done.stderr.splitlines() == [
        f"{LOG}:6: unknown operation `application.update` in policy cdap: did you mean `application.delete`?",
        f"{LOG}:12: unknown operation `dataset.rread` in policy cdap: did you mean `dataset.read`?",
        "decided 9 requests (7 allowed, 2 denied), 2 rejected",
    ]


def test_json_lines_from_standard_input_to_json_lines(tmp_path: Path) -> None:
    lines = [
        {"principal": "user:bob", "operation": "dataset.read", "entity": "dataset:sales.orders", "timestamp": "t1"},
        {"principal": "user:carol", "operation": "application.deploy", "entity": "application:sales.reports",
         "args": {"artifact": "artifact:sales.etl-lib"}},
        {"principal": "user:bob", "operation": "dataset.read"},
        {"principal": "user:bob", "operation": "dataset.read", "entity": "dataset:sales"},
        "not an object",
    ]  # fmt: skip
    stdin = "\n".join(json.dumps(x) for x in lines) + "\n{broken\n"
    out = tmp_path / "decisions.jsonl"
    done = decide("-", "--world", WORLD, "--out", str(out), stdin=stdin)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [list(r) for r in rows] == [HEADER, HEADER]
    assert rows[0]["args"] is None and rows[0]["timestamp"] == "t1" and rows[0]["decision"] == "allow"
    assert json.loads(rows[1]["args"]) == {"artifact": "artifact:sales.etl-lib"}
    assert done.stderr.splitlines() == [
        "<stdin>:3: a request needs the columns principal, operation, entity; missing entity",
        "<stdin>:4: malformed dataset id `dataset:sales`: expected the form `dataset:ns1.sales`",
        "<stdin>:5: a request is a JSON object",
        "<stdin>:6: not valid JSON: Expecting property name enclosed in double quotes",
        "decided 2 requests (2 allowed, 0 denied), 4 rejected",
    ]


def test_rejects_to_a_file_with_their_file_line_reason_and_row(tmp_path: Path) -> None:
    rejects = tmp_path / "rejects.csv"
    done = decide(LOG, "--world", WORLD, "--rejects", str(rejects), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert done.stderr == "decided 9 requests (7 allowed, 2 denied), 2 rejected\n"
    found = _csv(rejects.read_text())
    assert list(found[0]) == ["file", "line", "reason", "row"]
    assert [(r["file"], r["line"]) for r in found] == [(LOG, "6"), (LOG, "12")]
    assert json.loads(found[0]["row"])["operation"] == "application.update"
    assert found[1]["reason"].startswith("unknown operation `dataset.rread`")
    assert len(done.stdout.splitlines()) == 9


def test_parquet_out_has_the_pipeline_s_schema(tmp_path: Path) -> None:
    import pyarrow.parquet as pq  # the test extra installs it

    out = tmp_path / "decisions.parquet"
    done = decide(LOG, "--world", WORLD, "--out", str(out))
    assert done.returncode == 0, done.stderr
    table = pq.read_table(out)
    assert table.column_names == HEADER
    assert str(table.schema.field("unmet").type) == (
        "list<element: struct<requirement: string, text: string, lacking: list<element: string>>>"
    )
    rows = table.to_pylist()
    assert len(rows) == 9
    assert rows[3]["unmet"] == [{"requirement": "dataset.write#1", "text": "WRITE", "lacking": []}]
    assert [p.name for p in tmp_path.iterdir()] == ["decisions.parquet"]  # nothing staged is left


def test_parquet_without_pyarrow_names_the_extra(tmp_path: Path) -> None:
    blocker = tmp_path / "blocked"
    (blocker / "pyarrow").mkdir(parents=True)
    (blocker / "pyarrow" / "__init__.py").write_text("raise ImportError('no pyarrow here')\n")
    import os

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), os.environ.get("PYTHONPATH", "")])}
    done = decide(LOG, "--world", WORLD, "--out", str(tmp_path / "d.parquet"), env=env)
    assert done.returncode == 2
    assert done.stderr == "privilog: writing Parquet needs pyarrow: `pip install 'privilog[parquet]'`\n"
    assert not (tmp_path / "d.parquet").exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("principal,operation\nuser:bob,dataset.read\n",
         "{path}:1: a request needs the columns principal, operation, entity; missing entity (found principal, operation)"),
        ('principal,operation,entity\nuser:bob,dataset.read,"dataset:sales.orders\n',
         "{path}:2: not valid CSV: unexpected end of data"),
    ],
)  # fmt: skip
def test_a_file_that_cannot_be_read_is_one_line_and_exit_2(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "requests.csv"
    path.write_text(content)
    done = decide(str(path), "--world", WORLD, "--out", str(tmp_path / "out.csv"))
    assert (done.returncode, done.stderr) == (2, "privilog: " + message.format(path=path) + "\n")
    assert not (tmp_path / "out.csv").exists()


def test_a_missing_file_and_a_log_of_only_bad_rows_exit_2(tmp_path: Path) -> None:
    done = decide(str(tmp_path / "nope.csv"), "--world", WORLD)
    assert (done.returncode, done.stderr) == (2, f"privilog: {tmp_path / 'nope.csv'}: no such file (the requests to decide)\n")
    bad = tmp_path / "bad.csv"
    bad.write_text("principal,operation,entity\nuser:bob,dataset.rread,dataset:sales.orders\nbob,dataset.read,x\n")
    done = decide(str(bad), "--world", WORLD)
    assert done.returncode == 2
    assert done.stdout.splitlines() == [",".join(HEADER)]
    lines = done.stderr.splitlines()
    assert lines[1] == f"{bad}:3: malformed principal `bob`: expected user:NAME, group:NAME or role:NAME; did you mean `user:bob`?"
    assert lines[-1] == "decided 0 requests (0 allowed, 0 denied), 2 rejected"
    empty = tmp_path / "empty.csv"
    empty.write_text("principal,operation,entity\n")
    done = decide(str(empty), "--world", WORLD)
    assert (done.returncode, done.stderr) == (0, "decided 0 requests (0 allowed, 0 denied), 0 rejected\n")


def test_a_row_of_the_wrong_width_and_bad_args_are_rejected_with_their_lines(tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    path.write_text(
        "principal,operation,entity,args\n"
        "user:bob,dataset.read,dataset:sales.orders\n"
        'user:carol,application.deploy,application:sales.reports,"{""artifact"": 1"\n'
        'user:carol,application.deploy,application:sales.reports,"{""artefact"": ""artifact:sales.etl-lib""}"\n'
        'user:carol,application.deploy,application:sales.reports,"[1]"\n'
        ",dataset.read,dataset:sales.orders,\n"
        "user:bob,dataset.read,dataset:sales.orders,\n"
    )
    done = decide(str(path), "--world", WORLD)
    assert done.returncode == 0
    assert done.stderr.splitlines() == [
        f"{path}:2: a row of 4 fields (principal, operation, entity, args) has 3",
        f"{path}:3: args `{{\"artifact\": 1` is not a JSON object",
        f"{path}:4: `application.deploy` takes $artifact, $new_artifact, $owner; not `$artefact`",
        f"{path}:5: args is a JSON object of NAME: VALUE, not [1]",
        f"{path}:6: missing principal",
        "decided 1 requests (1 allowed, 0 denied), 5 rejected",
    ]


def test_every_row_is_the_reference_backend_s(tmp_path: Path) -> None:
    """A generated deployment (creates, deploys with arguments, whole namespaces, groups) and its
    log, decided by ``privilog decide`` (compiled plans) and row by row by pyDatalog's check."""
    from privilog.cli import main

    folder = tmp_path / "gen"
    argv = ["generate", "--out", str(folder), "--format", "csv", "--seed", "3"]
    assert main([*argv, "--entities", "120", "--grants", "150", "--requests", "400", "--bad-rows", "2"]) == 0
    world = tmp_path / "world"
    world.mkdir()
    for table in ("entities", "grants", "members"):  # the world without the generated bad rows
        lines = (folder / f"{table}.csv").read_text().splitlines()
        (world / f"{table}.csv").write_text("\n".join(lines[:-2]) + "\n")
    out = tmp_path / "decisions.jsonl"
    done = decide(str(folder / "requests.csv"), "--world", str(world), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1].endswith(", 2 rejected")
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 400
    reference = privilog.load("cdap", str(world), backend="pydatalog", bind=False)
    differ: list[Any] = []
    for row in rows:
        args = json.loads(row["args"]) if row["args"] else None
        want = tabled(reference.check(reference.request(row["principal"], row["operation"], row["entity"], args)),
                      reference.policy)  # fmt: skip
        got = (
            row["decision"] == "allow",
            tuple((u["requirement"], u["text"], tuple(u["lacking"])) for u in row["unmet"]),
            tuple(row["bypass"]),
            tuple(row["denied_by"]),
            tuple((g["requirement"], g["principal"], g["action"], g["entity"]) for g in row["allowed_by"]),
        )
        if got != tuple(want):
            differ.append((row, want))
    assert differ == []
    decisions = [r["decision"] for r in rows]
    assert 0.05 < decisions.count("allow") / len(rows) < 0.95
    assert any(r["args"] for r in rows) and any(r["allowed_by"] for r in rows)


def test_parquet_requests_are_read_by_row(tmp_path: Path) -> None:
    import pyarrow as pa  # the test extra installs it
    import pyarrow.parquet as pq

    path = tmp_path / "requests.parquet"
    table = pa.table(
        {
            "principal": ["user:bob", "user:bob", "user:alice"],
            "operation": ["dataset.read", "dataset.write", "dataset.rread"],
            "entity": ["dataset:sales.orders", "dataset:sales.orders", "dataset:sales.orders"],
        }
    )
    pq.write_table(table, path)
    done = decide(str(path), "--world", WORLD, "--format", "json")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["operation"], r["decision"], r["args"]) for r in rows] == [
        ("dataset.read", "allow", None), ("dataset.write", "deny", None),
    ]  # fmt: skip
    assert done.stderr.splitlines()[0].startswith(f"{path}:3: unknown operation `dataset.rread`")


def test_the_reference_backend_and_a_store_give_the_same_file(tmp_path: Path) -> None:
    """``--backend pydatalog`` (no plans: each row read off its checked Decision) writes the same bytes
    as the compiled plans; so does the sample world imported into a SQLite store (``--store``)."""
    from privilog.cli import main

    compiled = decide(LOG, "--world", str(SAMPLES / "world.yaml"))
    reference = decide(LOG, "--world", str(SAMPLES / "world.yaml"), "--backend", "pydatalog")
    assert compiled.returncode == reference.returncode == 0
    assert compiled.stdout == reference.stdout and compiled.stderr == reference.stderr
    store = str(tmp_path / "authz.db")
    assert main(["store", "init", "--store", store, "--admin", "user:root"]) == 0
    assert main(["store", "import", str(SAMPLES / "world.yaml"), "--store", store]) == 0
    stored = decide(LOG, "--store", store)
    assert (stored.returncode, stored.stdout) == (0, compiled.stdout)


def test_a_postgresql_store_gives_the_same_file(fresh_postgres_url: str) -> None:
    from privilog.cli import main

    assert main(["store", "init", "--store", fresh_postgres_url, "--admin", "user:root"]) == 0
    assert main(["store", "import", str(SAMPLES / "world.yaml"), "--store", fresh_postgres_url]) == 0
    stored = decide(LOG, "--store", fresh_postgres_url)
    filed = decide(LOG, "--world", str(SAMPLES / "world.yaml"))
    assert (stored.returncode, stored.stdout) == (0, filed.stdout) and "allow" in stored.stdout


def test_a_progress_line_on_a_terminal_only(tmp_path: Path) -> None:
    import os
    import pty

    path = tmp_path / "log.csv"
    path.write_text("principal,operation,entity\n" + "user:bob,dataset.read,dataset:sales.orders\n" * 2048)
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "privilog", "decide", str(path), "--world", WORLD, "--out", str(tmp_path / "o.csv")],
            stderr=follower, stdout=subprocess.DEVNULL, check=False,
        )  # fmt: skip
        os.close(follower)
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(leader)
    assert done.returncode == 0
    text = shown.decode()
    assert "% decided 1,024 (" in text and "\r\x1b[K" in text  # drawn (with the share of the file read), then wiped
    assert text.rstrip().endswith("decided 2,048 requests (2,048 allowed, 0 denied), 0 rejected")


def test_text_that_is_not_utf8_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    path.write_bytes(b"principal,operation,entity\nuser:bob,dataset.read,dataset:sales.orders\nuser:\xff,x,y\n")
    done = decide(str(path), "--world", WORLD)
    assert done.returncode == 2
    assert done.stderr == f"privilog: {path}:3: not UTF-8 text (byte 6 of the line)\n"
    path.write_bytes(b"\xef\xbb\xbfprincipal,operation,entity\nuser:bob,dataset.read,dataset:sales.orders\n")
    done = decide(str(path), "--world", WORLD)  # a byte order mark is not a column's name
    assert (done.returncode, done.stderr.splitlines()[-1]) == (0, "decided 1 requests (1 allowed, 0 denied), 0 rejected")
