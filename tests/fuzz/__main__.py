"""``python -m tests.fuzz --inputs 100000 [--seed S] [--kinds K ...] [--jobs N]``: the big campaign.

Prints a progress line, then counts per input kind and outcome; every failing input
is written to ``tests/fuzz/corpus/<kind>/<hash>`` (replayed by the tests from then
on). Exit 0 when nothing failed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from tests.fuzz.harness import CORPUS, DEADLINE, KINDS, Report, generate, run_cases, write_to_corpus


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=1000, help="inputs in all, shared among the kinds")
    parser.add_argument("--seed", type=int, default=int(time.time()), help="the random seed (default: the time)")
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS), help="the input kinds to fuzz")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--deadline", type=float, default=DEADLINE, help=f"seconds per input (default {DEADLINE:g})")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="where failing inputs are kept")
    args = parser.parse_args(argv)

    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="privilog-fuzz-")))
        env: dict[str, str] = {}
        if "http" in args.kinds:
            from tests.fuzz.http import running_server

            env = stack.enter_context(running_server(folder))
        log = Path(tempfile.gettempdir()) / f"privilog-fuzz-{args.seed}.log"
        print(
            f"fuzzing {', '.join(args.kinds)}: {args.inputs} inputs, seed {args.seed}, worker log {log}",
            file=sys.stderr,
        )
        last = [0.0]

        def progress(report: Report) -> None:
            now = time.monotonic()
            if now - last[0] >= 2 or report.total == args.inputs:
                last[0] = now
                rate = report.total / report.seconds if report.seconds else 0.0
                print(
                    f"\r{report.total}/{args.inputs} inputs, {len(report.failures)} failures, {rate:.0f}/s",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )

        report = run_cases(
            generate(args.kinds, args.inputs, args.seed), jobs=args.jobs, env=env, deadline=args.deadline,
            keep=lambda kind, case, verdict: write_to_corpus(kind, case, verdict, args.corpus),
            progress=progress, log=log,
        )  # fmt: skip
        print(file=sys.stderr)
        print(f"seed {args.seed}")
        print(report.table())
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
