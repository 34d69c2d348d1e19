"""What a pipeline run prints while it works: the JVM's own lines kept out, and a line while Spark is busy.

The JVM that PySpark starts writes to the process's stderr: the JDK's notes, log4j's
start-up lines, Spark's warnings (``WARN NativeCodeLoader ...``) and its log records
with their stack traces. :func:`quiet_jvm` starts the JVM with its stderr going
through a filter that drops those and passes on everything else; with
``PRIVILOG_DEBUG`` set, nothing is dropped.

A Spark job may run for minutes with nothing to say, and planning a large job on the
driver for tens of seconds. :class:`Heartbeat` prints a line after every ``every``
seconds without one: how many of the running stages' tasks are done (from Spark's
status tracker), or that no stage runs while the driver plans.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, BinaryIO

from privilog.pipeline.tables import Progress

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# A line the JVM writes on its own: JDK notes, log4j's start-up lines, log records.
NOISE = re.compile(
    r"WARNING: Using incubator modules"
    r"|Using Spark's default log4j profile"
    r"|Setting default log level to"
    r"|To adjust logging level use sc\.setLogLevel"
    r"|\d\d/\d\d/\d\d \d\d:\d\d:\d\d (?:TRACE|DEBUG|INFO|WARN|ERROR|FATAL) "
)
# What follows a log record: its exception and stack trace.
FOLLOWS = re.compile(
    r"\s+at |\s*\.\.\. \d+ more|Caused by: |Suppressed: |[\w$.]+(?:Exception|Error)\b|Driver stacktrace:|\s*$"
)


def drop_noise(lines: Iterator[bytes], out: BinaryIO) -> None:
    """Copy lines to ``out``, without the JVM's own (a log record with its stack trace is dropped whole).

    >>> import io
    >>> out = io.BytesIO()
    >>> drop_noise(iter([b"26/11/25 18:29:45 WARN NativeCodeLoader: Unable to load\\n",
    ...                  b"26/11/25 18:29:46 ERROR Executor: failed\\n", b"java.lang.OutOfMemoryError: heap\\n",
    ...                  b"\\tat org.apache.spark.Foo(Foo.java:1)\\n", b"\\n", b"Driver stacktrace:\\n",
    ...                  b"\\tat org.apache.spark.Bar(Bar.java:2)\\n", b"a line of ours\\n"]), out)
    >>> out.getvalue()
    b'a line of ours\\n'
    """
    in_record = False
    for line in lines:
        text = line.decode("utf-8", "replace")
        if NOISE.match(text):
            in_record = True
            continue
        if in_record and FOLLOWS.match(text):
            continue
        in_record = False
        out.write(line)
        out.flush()


def _pump(source: BinaryIO, target: BinaryIO) -> None:
    """Filter until every writer of the pipe (the JVM and what it started) has closed it."""
    with source, target:
        drop_noise(iter(source), target)


@contextlib.contextmanager
def quiet_jvm() -> Iterator[None]:
    """Start the JVM inside this block with its stderr filtered by :func:`drop_noise`.

    The JVM inherits the process's file descriptor 2 when PySpark launches it: for the
    block, descriptor 2 is a pipe that a thread reads and filters onto the real stderr.
    The JVM keeps the pipe for its life; this process gets its stderr back after the block.
    """
    if os.environ.get("PRIVILOG_DEBUG"):
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    read, write = os.pipe()
    os.dup2(write, 2)
    os.close(write)
    target = os.fdopen(os.dup(saved), "wb", buffering=0)
    source = os.fdopen(read, "rb")
    threading.Thread(target=_pump, args=(source, target), name="privilog-jvm-stderr", daemon=True).start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


class Heartbeat:
    """A progress line every ``every`` seconds of silence while a Spark job runs (a daemon thread).

    What the stages have done comes from the SparkContext's status tracker, or, over Spark
    Connect (no SparkContext here), from the progress the server streams with each
    operation's results (a handler registered with the session).
    """

    def __init__(self, spark: SparkSession, progress: Progress, every: float = 10.0):
        from privilog.engine.spark.session import is_connect

        self.spark = spark
        self.progress = progress
        self.every = every
        self.connect = is_connect(spark)
        self._streamed: list[tuple[int, int]] = []  # over Connect: (tasks done, tasks) of each running stage
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="privilog-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        if not self.progress.quiet:
            if self.connect:
                self.spark.registerProgressHandler(self._progressed)  # type: ignore[arg-type]  # its __call__'s shape
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
            if self.connect:
                self.spark.removeProgressHandler(self._progressed)  # type: ignore[arg-type]

    def _progressed(self, stages: Any, inflight_tasks: int, operation_id: str | None, done: bool) -> None:
        """Spark Connect's progress of the operation under way (pyspark's ProgressHandler)."""
        running = [] if done else [s for s in stages or () if not s.done]
        self._streamed = [(s.num_completed_tasks, s.num_tasks) for s in running]

    def status(self) -> str:
        """What the running Spark stages have done, or that the driver works alone."""
        if self.connect:
            stages = list(self._streamed)
        else:
            tracker = self.spark.sparkContext.statusTracker()
            infos = [s for s in (tracker.getStageInfo(i) for i in tracker.getActiveStageIds()) if s is not None]
            stages = [(s.numCompletedTasks, s.numTasks) for s in infos]
        if not stages:
            return "no Spark stage running (the driver is planning)"
        done = sum(d for d, _ in stages)
        total = sum(t for _, t in stages)
        running = f"{len(stages)} Spark stage{'s' if len(stages) != 1 else ''}"
        return f"{running} running, {done:,} of {total:,} tasks done"

    def _run(self) -> None:
        tick = min(self.every, 1.0)
        while not self._stop.wait(tick):
            silent = time.monotonic() - self.progress.last
            if silent < self.every:
                continue
            try:
                status = self.status()
            except Exception:  # the session stopping under us: nothing to report
                return
            if not self._stop.is_set():
                self.progress(f"still at it ({silent:.0f}s since the last line): {status}")
