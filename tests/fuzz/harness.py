"""The campaign: inputs generated per kind, run in worker processes under a deadline, classified,
counted, and every failure written to the corpus.

A worker is ``python -m tests.fuzz.worker``: it reads one JSON case a line on its
standard input and answers one JSON verdict a line. The parent waits for each
answer at most ``deadline`` seconds; a worker that does not answer is killed
(its whole process group) and started again, and the input counts as a hang.
A worker that dies (a crash, the memory limit) makes the input a failure too.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import random
import selectors
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "corpus"
# Pipeline input rows are not among them: privilog/pipeline/inputs.py checks rows only as Spark column
# expressions (check_requests needs a SparkSession); tests/spark holds the pipeline's rejects to the engine.
KINDS = ("policies", "worlds", "imports", "requests", "cli", "repl", "scenarios", "http")
ANSWERED, REFUSED, FAILURE, SKIPPED = "answered", "refused", "failure", "skipped"
OUTCOMES = (ANSWERED, REFUSED, FAILURE, SKIPPED)
DEADLINE = 20.0  # seconds one input may take (the query limits inside are set far below it)
START_DEADLINE = 120.0  # a worker's start: imports, the policy, a first authorizer
# What a worker's evaluations may cost, set below the deadline so that a query that runs
# too long is privilog's own refusal, not a hang.
WORKER_ENV = {"PRIVILOG_QUERY_SECONDS": "3", "PRIVILOG_QUERY_MEGABYTES": "512", "PYTHONHASHSEED": "0"}

Case = dict[str, Any]


@dataclass(frozen=True)
class Verdict:
    """What one input gave: an outcome and, for a failure or a refusal, one line saying what."""

    outcome: str
    detail: str = ""

    def to_json(self) -> dict[str, str]:
        return {"outcome": self.outcome, "detail": self.detail}


def answered(detail: str = "") -> Verdict:
    return Verdict(ANSWERED, detail)


def refused(detail: str = "") -> Verdict:
    return Verdict(REFUSED, detail[:200])


def failure(detail: str) -> Verdict:
    return Verdict(FAILURE, detail[:2000])


def kind_module(name: str) -> Any:
    """The module of an input kind: ``generate(rng, count)`` and ``run(case, context)``."""
    return importlib.import_module(f"tests.fuzz.{name}")


def case_hash(case: Case) -> str:
    """The name of a case in the corpus: a hash of its canonical JSON."""
    return hashlib.sha256(json.dumps(case, sort_keys=True).encode()).hexdigest()[:16]


def write_to_corpus(kind: str, case: Case, verdict: Verdict, corpus: Path = CORPUS) -> Path:
    """Keep a failing case, with what it gave, so that the tests replay it from now on."""
    folder = corpus / kind
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / case_hash(case)
    path.write_text(json.dumps({"case": case, "found": verdict.detail}, indent=1, sort_keys=True) + "\n")
    return path


def read_corpus(corpus: Path = CORPUS) -> Iterator[tuple[str, Path, Case]]:
    """Every kept case: its kind, its file and the case."""
    if not corpus.is_dir():
        return
    for folder in sorted(p for p in corpus.iterdir() if p.is_dir()):
        for path in sorted(folder.iterdir()):
            if path.is_file() and not path.name.startswith("."):
                yield folder.name, path, json.loads(path.read_text())["case"]


class Worker:
    """One ``python -m tests.fuzz.worker`` process, in its own process group."""

    def __init__(self, env: Mapping[str, str], log: Path):
        self.log = log.open("a")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.fuzz.worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, cwd=ROOT,
            env={**os.environ, **WORKER_ENV, "PYTHONPATH": str(ROOT), **env}, start_new_session=True,
        )  # fmt: skip
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin: TextIO = self.process.stdin
        self.stdout: TextIO = self.process.stdout
        self.started = False  # the worker says `ready` once it has warmed up

    def send(self, kind: str, case: Case) -> None:
        self.stdin.write(json.dumps({"kind": kind, "case": case}) + "\n")
        self.stdin.flush()

    def receive(self, timeout: float) -> Verdict | None:
        """The next verdict, or None when none came within ``timeout`` or the worker died."""
        with selectors.DefaultSelector() as selector:
            selector.register(self.stdout, selectors.EVENT_READ)
            if not selector.select(timeout):
                return None
        line = self.stdout.readline()
        if not line:
            return None
        message = json.loads(line)
        return Verdict(message["outcome"], message["detail"])

    def start(self) -> bool:
        """Wait for the worker's `ready`; False when it did not come."""
        ready = self.receive(START_DEADLINE)
        self.started = ready is not None
        return self.started

    def why_gone(self) -> str:
        code = self.process.poll()
        if code is None:
            return "hang: no answer within the deadline"
        if code < 0:
            return f"the worker died of signal {signal.Signals(-code).name}"
        return f"the worker exited with code {code}"

    def stop(self) -> None:
        if self.process.poll() is None:
            with suppress(OSError, ValueError):
                os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=60)
        for stream in (self.stdin, self.stdout):
            with suppress(OSError, ValueError):
                stream.close()
        self.log.close()


@dataclass
class Report:
    """Counts per kind and outcome, and the failures found (kind, case, verdict, corpus file)."""

    counts: dict[str, Counter[str]] = field(default_factory=dict)
    failures: list[tuple[str, Case, Verdict, Path | None]] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, kind: str, case: Case, verdict: Verdict, kept: Path | None) -> None:
        self.counts.setdefault(kind, Counter())[verdict.outcome] += 1
        if verdict.outcome == FAILURE:
            self.failures.append((kind, case, verdict, kept))

    @property
    def total(self) -> int:
        return sum(sum(c.values()) for c in self.counts.values())

    def table(self) -> str:
        """Counts per kind and outcome, as a table."""
        width = max([len("kind"), *map(len, self.counts)])
        lines = [f"{'kind':{width}}  " + "  ".join(f"{o:>9}" for o in OUTCOMES) + f"  {'total':>9}"]
        totals: Counter[str] = Counter()
        for kind, counts in self.counts.items():
            totals.update(counts)
            lines.append(
                f"{kind:{width}}  " + "  ".join(f"{counts[o]:>9}" for o in OUTCOMES) + f"  {sum(counts.values()):>9}"
            )
        lines.append(f"{'all':{width}}  " + "  ".join(f"{totals[o]:>9}" for o in OUTCOMES) + f"  {self.total:>9}")
        lines.append(f"{self.total} inputs in {self.seconds:.0f} s; {len(self.failures)} failures")
        for kind, _case, verdict, kept in self.failures:
            lines.append(
                f"FAILURE {kind}: {verdict.detail.splitlines()[0] if verdict.detail else ''}"
                + (f" (kept in {kept.relative_to(ROOT) if kept.is_relative_to(ROOT) else kept})" if kept else "")
            )
        return "\n".join(lines)


def generate(kinds: Iterable[str], inputs: int, seed: int) -> Iterator[tuple[str, Case]]:
    """``inputs`` cases shared among ``kinds``, each kind from its own random stream, interleaved."""
    kinds = list(kinds)
    share, extra = divmod(inputs, len(kinds))
    streams = []
    for number, kind in enumerate(kinds):
        rng = random.Random(f"{seed}:{kind}")
        streams.append((kind, iter(kind_module(kind).generate(rng, share + (number < extra)))))
    while streams:
        for stream in list(streams):
            kind, cases = stream
            case = next(cases, None)
            if case is None:
                streams.remove(stream)
            else:
                yield kind, case


def run_cases(
    cases: Iterable[tuple[str, Case]],
    jobs: int = 1,
    env: Mapping[str, str] | None = None,
    deadline: float = DEADLINE,
    keep: Callable[[str, Case, Verdict], Path | None] | None = None,
    progress: Callable[[Report], None] | None = None,
    log: Path | None = None,
) -> Report:
    """Run every case in ``jobs`` workers, each under ``deadline`` seconds; count and keep the failures."""
    report = Report()
    started = time.monotonic()
    log = log or Path(os.devnull)
    workers: list[Worker] = []
    busy: dict[int, tuple[str, Case, float]] = {}  # worker index -> its case and when it was sent
    pending = iter(cases)

    def fresh(index: int) -> Worker:
        worker = Worker(env or {}, log)
        if not worker.start():
            raise RuntimeError(f"a fuzz worker did not start ({worker.why_gone()}); its log: {log}")
        if index < len(workers):
            workers[index] = worker
        else:
            workers.append(worker)
        return worker

    def record(kind: str, case: Case, verdict: Verdict) -> None:
        kept = keep(kind, case, verdict) if keep is not None and verdict.outcome == FAILURE else None
        report.add(kind, case, verdict, kept)
        if progress is not None:
            report.seconds = time.monotonic() - started
            progress(report)

    try:
        for index in range(jobs):
            fresh(index)
        while True:
            for index, worker in enumerate(workers):
                if index not in busy:
                    item = next(pending, None)
                    if item is not None:
                        worker.send(*item)
                        busy[index] = (*item, time.monotonic())
            if not busy:
                break
            _wait_any(workers, busy, deadline)
            for index in list(busy):
                kind, case, sent = busy[index]
                worker = workers[index]
                verdict = worker.receive(0) if _readable(worker) else None
                if verdict is not None:
                    del busy[index]
                    record(kind, case, verdict)
                elif worker.process.poll() is not None or time.monotonic() - sent > deadline:
                    del busy[index]
                    reason = worker.why_gone()
                    worker.stop()
                    record(kind, case, failure(reason))
                    fresh(index)
    finally:
        for worker in workers:
            worker.stop()
    report.seconds = time.monotonic() - started
    return report


def _readable(worker: Worker) -> bool:
    with selectors.DefaultSelector() as selector:
        selector.register(worker.stdout, selectors.EVENT_READ)
        return bool(selector.select(0))


def _wait_any(workers: list[Worker], busy: Mapping[int, tuple[str, Case, float]], deadline: float) -> None:
    """Until a busy worker answers (or dies), or the earliest deadline passes."""
    now = time.monotonic()
    left = min(sent + deadline for _, _, sent in busy.values()) - now
    with selectors.DefaultSelector() as selector:
        for index in busy:
            selector.register(workers[index].stdout, selectors.EVENT_READ)
        selector.select(max(left, 0.0) + 0.05)


def decide_samples(authorizer: Any, requests: Any) -> Verdict:
    """Ask a loaded world or policy a few requests (each refused or decided): the answer a load gives."""
    from privilog.dsl.errors import PrivilogError

    decided = 0
    for principal, operation, entity in requests:
        try:
            authorizer.check(authorizer.request(principal, operation, entity))
            decided += 1
        except PrivilogError:
            pass
    return answered(f"loaded; {decided} requests decided")
