"""A pipeline run's folder (privilog/pipeline/runs.py), without Spark: staged, moved in whole, read with its manifest.

Runs here are written by a small script through the same :class:`Staging` the pipeline's
commands use, with tables as a Spark job leaves them (a folder of part files). A run
killed with SIGKILL (a real subprocess) at each moment of its writing
(``PRIVILOG_PIPELINE_HOLD``) leaves the previous run whole and readable, and no part of
its own in ``OUT``; the next run clears what it left. tests/spark/test_kill.py kills real
Spark runs the same way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from privilog.pipeline.runs import HOLD, MANIFEST, Staging, balance, open_run
from privilog.pipeline.tables import PipelineError

ROOT = Path(__file__).resolve().parents[2]

# A run's writer: the tables decisions and rejects, one row each saying which run wrote it.
WRITER = """\
import sys
from pathlib import Path
from privilog.pipeline.runs import Output, Staging

out, word, exchange = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "exchange"
with Staging(out, "decide", "json", exchange=exchange) as run:
    for name in ("decisions", "rejects"):
        path = run.table(name)
        path.mkdir()
        (path / "part-00000.json").write_text('{"word": "%s"}\\n' % word)
        (path / "_SUCCESS").write_text("")
        run.wrote(Output(name, "json", [{"name": "word", "type": "string"}], 1))
    run.publish(policies=[], inputs={})
"""


def write_run(out: Path, word: str, hold: str | None = None, exchange: bool = True) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != HOLD}
    if hold is not None:
        env[HOLD] = hold
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(out), word, "exchange" if exchange else "renames"],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished_run(out: Path, word: str) -> None:
    done = write_run(out, word)
    _, err = done.communicate(timeout=60)
    assert done.returncode == 0, err


def words(out: Path) -> set[str]:
    """The word in every table of the run in ``out`` (opened through its manifest)."""
    run = open_run(out)
    found = set()
    for table in run.tables:
        for part in run.path(table).glob("part-*"):
            found |= {json.loads(line)["word"] for line in part.read_text().splitlines()}
    return found


def beside(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.") and p.suffix != ".lock")


MOMENTS = ["staging", "table:decisions", "table:rejects", "manifest", "publish"]


@pytest.mark.parametrize("exchange", [True, False], ids=["exchange", "two renames"])
@pytest.mark.parametrize("moment", MOMENTS)
def test_a_run_killed_while_writing_leaves_the_previous_run_whole(tmp_path: Path, moment: str, exchange: bool) -> None:
    out = tmp_path / "out"
    finished_run(out, "old")
    writer = write_run(out, "new", hold=moment, exchange=exchange)
    assert writer.stderr is not None
    line = writer.stderr.readline()
    assert f"holding at {moment}" in line, line + writer.stderr.read()
    writer.kill()  # SIGKILL
    writer.communicate(timeout=60)
    assert words(out) == {"old"}
    assert open_run(out).manifest["command"] == "decide"
    # the next run clears what the killed one left, and replaces the previous one whole
    finished_run(out, "newer")
    assert words(out) == {"newer"}
    assert beside(out) == []


def test_a_run_killed_between_the_two_renames_is_put_back_by_the_next(tmp_path: Path) -> None:
    out = tmp_path / "out"
    finished_run(out, "old")
    writer = write_run(out, "new", hold="aside", exchange=False)
    assert writer.stderr is not None
    assert "holding at aside" in writer.stderr.readline()
    writer.kill()
    writer.communicate(timeout=60)
    assert not out.exists()
    with pytest.raises(PipelineError, match=r"left the previous run in .*\.previous \(the next run into"):
        open_run(out)
    with Staging(out, "decide"):
        pass  # a run that fails at once: it still puts the previous run back first
    assert words(out) == {"old"}


def test_the_first_run_into_a_new_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    finished_run(out, "first")
    assert words(out) == {"first"}
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["kind"] == "privilog pipeline run" and manifest["version"] == 1
    assert manifest["outputs"] == {
        name: {"format": "json", "rows": 1, "columns": [{"name": "word", "type": "string"}]}
        for name in ("decisions", "rejects")
    }
    assert manifest["started"] <= manifest["finished"] and manifest["finished"].endswith("Z")
    assert beside(out) == []


def test_a_failed_run_leaves_the_previous_one_and_no_staging(tmp_path: Path) -> None:
    out = tmp_path / "out"
    finished_run(out, "old")
    with pytest.raises(RuntimeError), Staging(out, "decide") as run:
        run.table("decisions").mkdir()
        raise RuntimeError("the Spark job failed")
    assert words(out) == {"old"}
    assert beside(out) == []


def test_a_run_refuses_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    out = tmp_path / "data"
    out.mkdir()
    (out / "precious.csv").write_text("a,b\n")
    with pytest.raises(PipelineError, match=r"is not an earlier run's folder \(it has no run.json\)"):
        Staging(out, "decide").__enter__()
    assert (out / "precious.csv").read_text() == "a,b\n"
    empty = tmp_path / "empty"
    empty.mkdir()
    finished_run(empty, "fine")
    assert words(empty) == {"fine"}


def test_two_runs_into_one_folder_at_once_are_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with Staging(out, "decide"), pytest.raises(PipelineError, match="another run is writing it now"):
        Staging(out, "decide").__enter__()
    with Staging(out, "decide"):
        pass  # the lock is free again


def test_readers_refuse_a_folder_without_a_manifest(tmp_path: Path) -> None:
    (tmp_path / "old" / "decisions").mkdir(parents=True)
    with pytest.raises(PipelineError, match=r"has no run.json: it is not the folder of a finished pipeline run"):
        open_run(tmp_path / "old")
    with pytest.raises(PipelineError, match="no such folder"):
        open_run(tmp_path / "nowhere")
    (tmp_path / "old" / MANIFEST).write_text("{not json")
    with pytest.raises(PipelineError, match="not a pipeline run's manifest"):
        open_run(tmp_path / "old")


def test_a_manifest_naming_a_missing_table_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    finished_run(out, "old")
    import shutil

    shutil.rmtree(out / "rejects")
    with pytest.raises(PipelineError, match="names the table rejects, which is not there"):
        open_run(out)


def test_the_rows_in_check() -> None:
    balance({"requests": {"rows": 10, "used": 7, "rejected": 3}, "grants": {"rows": 0, "used": 0, "rejected": 0}})
    with pytest.raises(PipelineError, match=r"^rows lost: requests: 10 read, but 7 used \+ 2 rejected = 9$"):
        balance({"requests": {"rows": 10, "used": 7, "rejected": 2}})
    with pytest.raises(PipelineError, match=r"^rows gained: entities: 3 read, but 3 used \+ 1 rejected = 4$"):
        balance({"entities": {"rows": 3, "used": 3, "rejected": 1}})
    with pytest.raises(PipelineError, match="requests under cdap: "):
        balance({"requests": {"rows": 4, "used": {"cdap-4.2": 3, "cdap": 4}, "rejected": {"cdap-4.2": 1, "cdap": 1}}})
