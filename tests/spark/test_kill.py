"""A pipeline run killed while it writes, and what a run prints while it works.

A real run (``python -m privilog.pipeline visibility``, a subprocess in its own process
group, so that its JVM goes with it) is killed with SIGKILL at moments of its writing:
held there by ``PRIVILOG_PIPELINE_HOLD`` (between its tables; every table written but
not moved in), or as soon as its staging folder holds a table Spark is writing. After
each kill the previous run is in ``OUT``, whole, readable with its manifest, with the
same rows; or, for a kill that came after the move, the new run is, whole. The next run
clears what the killed ones left.

Every line the killed runs printed on stderr is one of the pipeline's own: the JVM's and
log4j's lines are filtered out. The heartbeat is tested on a Spark job held until it has
reported it.
"""

from __future__ import annotations

import io
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pyspark  # noqa: F401  (the test extra installs it: without it the module fails, it is not skipped)
import pytest

from privilog.cli import main
from privilog.pipeline.generate import table_path
from privilog.pipeline.runs import HOLD, open_run

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 600.0  # seconds for a run to reach a moment (Spark starting on a busy machine included)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """A small deployment's arguments for ``visibility``."""
    folder = tmp_path_factory.mktemp("world")
    argv = ["generate", "--out", str(folder), "--entities", "60", "--grants", "60", "--requests", "10"]
    assert main([*argv, "--bad-rows", "1"]) == 0
    return [a for t in ("entities", "grants", "members") for a in (f"--{t}", str(table_path(folder, t, "csv")))]


def _visible(out: Path) -> tuple[str, list[dict[str, object]]]:
    """The run in ``out``, opened through its manifest: its id and its visibility rows."""
    from privilog.pipeline.show import read_rows

    run = open_run(out)
    rows = read_rows(run, "visibility", None)
    assert len(rows) == run.tables["visibility"]["rows"]
    assert len(read_rows(run, "rejects", None)) == run.tables["rejects"]["rows"]
    return run.manifest["id"], sorted(rows, key=repr)


def _lines(stream: io.TextIOBase, into: queue.Queue[str | None]) -> None:
    for line in stream:
        into.put(line)
    into.put(None)


def _killed_run(world: list[str], out: Path, moment: str) -> list[str]:
    """Start a run, kill it (and its JVM) at ``moment``; what it printed on stderr."""
    env = {k: v for k, v in os.environ.items() if k not in (HOLD, "PRIVILOG_DEBUG")}
    if moment != "while Spark writes":
        env[HOLD] = moment
    argv = [sys.executable, "-m", "privilog.pipeline", "visibility", *world, "--out", str(out), "--partitions", "2"]
    writing = f".{out.name}.*.staging/visibility"
    left = set(out.parent.glob(writing))  # by a run killed before: not this one's
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    printed: queue.Queue[str | None] = queue.Queue()
    assert proc.stderr is not None
    reader = threading.Thread(target=_lines, args=(proc.stderr, printed), daemon=True)
    reader.start()
    lines: list[str] = []
    deadline = time.monotonic() + DEADLINE
    try:
        if moment == "while Spark writes":
            # the staging folder holds the table Spark is writing (a folder appears when its job starts)
            while not set(out.parent.glob(writing)) - left:
                assert proc.poll() is None, "the run ended before it wrote"
                assert time.monotonic() < deadline, "the run never started writing"
                time.sleep(0.02)
        else:
            while not (lines and "holding at" in lines[-1]):
                line = printed.get(timeout=max(deadline - time.monotonic(), 0.1))
                assert line is not None, "the run ended without reaching " + moment + "\n" + "".join(lines)
                lines.append(line)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        reader.join(timeout=60)  # every writer of the pipe is dead: the reader has read to its end
        proc.stderr.close()
    while (line := printed.get_nowait()) is not None:
        lines.append(line)
    return lines


def test_a_run_killed_while_it_writes_leaves_the_previous_results_whole(world: list[str], tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main(["pipeline", "visibility", *world, "--out", str(out), "--quiet"]) == 0
    before = _visible(out)
    for moment in ("table:rejects", "publish", "while Spark writes"):
        printed = _killed_run(world, out, moment)
        after = _visible(out)
        if moment == "while Spark writes" and after[0] != before[0]:
            continue  # killed after its move: the new run is there, whole (read above)
        assert after == before, moment
        # the JVM's own lines (WARN NativeCodeLoader, log4j's profile, ...) are kept out
        assert [line for line in printed if not re.match(r"\[ *\d+\.\ds\] |privilog: holding at ", line)] == []
        assert any("starting Spark" in line for line in printed)
    # the next run clears what the killed ones left and replaces the run whole
    assert main(["pipeline", "visibility", *world, "--out", str(out), "--quiet"]) == 0
    newer = _visible(out)
    assert newer[0] != before[0] and newer[1] == before[1]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.lock", "out"]


def test_the_heartbeat_says_what_a_running_job_has_done(spark: SparkSession, tmp_path: Path) -> None:
    from privilog.pipeline.console import Heartbeat
    from privilog.pipeline.tables import Progress

    gate = str(tmp_path / "go")

    def held(x: int) -> int:  # a task that waits until the test has seen the heartbeat
        import os as os_
        import time as time_

        give_up = time_.monotonic() + DEADLINE
        while not os_.path.exists(gate) and time_.monotonic() < give_up:
            time_.sleep(0.05)
        return x

    stream = io.StringIO()
    progress = Progress(stream=stream)
    job = threading.Thread(target=lambda: spark.sparkContext.parallelize(range(4), 2).map(held).collect())
    with Heartbeat(spark, progress, every=0.2):
        job.start()
        deadline = time.monotonic() + DEADLINE
        while "tasks done" not in stream.getvalue():
            assert time.monotonic() < deadline, stream.getvalue()
            time.sleep(0.05)
        Path(gate).touch()
        job.join(timeout=DEADLINE)
    assert re.search(
        r"still at it \(\d+s since the last line\): 1 Spark stage running, \d of 2 tasks done", stream.getvalue()
    )


def test_no_heartbeat_when_quiet(spark: SparkSession) -> None:
    from privilog.pipeline.console import Heartbeat
    from privilog.pipeline.tables import Progress

    stream = io.StringIO()
    with Heartbeat(spark, Progress(quiet=True, stream=stream), every=0.01) as beat:
        spark.range(10).count()
    assert stream.getvalue() == "" and not beat._thread.is_alive()
