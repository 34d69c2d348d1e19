"""Generic Datalog throughput: the compiled backend beside pyDatalog and clingo, on generated programs.

    python -m benchmarks.programs [--programs 500] [--scale 1] [--out benchmarks/programs.json]

The programs are those the differential tests draw (tests/property/programs.py: facts and
rules of one relation, recursion of every shape, stratified negation, comparisons), drawn
the same every run. ``--scale N`` gives each world N times as many rows (the values are
suffixed ``#1 .. #N``, so joins grow with them). For each program and engine, in a forked
child (pyDatalog does not end on a few programs): build the backend from the compiled
program, load the world, and read every relation. The child times that and counts the rows;
an engine that gives no answer in ``--deadline`` seconds is counted as timed out. Every
answer is checked against clingo's: a benchmark of wrong answers measures nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from privilog.dsl.ir import Policy
from privilog.engine.backends import make_backend
from privilog.engine.program import compile_policy

from benchmarks.engines.common import machine_info
from privilog import dsl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "property"))

import clingo_oracle  # noqa: E402
from deadline import Overdue, in_child  # noqa: E402
from programs import Program, drawn_programs  # noqa: E402

Row = tuple[str, ...]
ENGINES = ("compiled", "pydatalog", "clingo")


def scaled(world: dict[str, set[Row]], scale: int) -> dict[str, set[Row]]:
    if scale == 1:
        return world
    return {
        name: {tuple(f"{v}#{k}" for v in row) for row in rows for k in range(scale)} for name, rows in world.items()
    }


def run(engine: str, policy: Policy, program: Program, scale: int) -> Callable[[], tuple[float, dict[str, set[Row]]]]:
    """The child's work: from the parsed policy to every relation's rows, timed."""
    world = scaled(program.world, scale)

    def timed() -> tuple[float, dict[str, set[Row]]]:
        start = time.perf_counter()
        if engine == "clingo":
            found = clingo_oracle.solve(policy.rules, world)
            rows = {name: found.get(name, set()) for name in program.relations}
        else:
            backend = make_backend(engine, compile_policy(policy))
            for name, facts in world.items():
                if facts:
                    backend.add(name, facts)
            rows = {name: backend.query(name) for name in program.relations}
        return time.perf_counter() - start, rows

    return timed


def warm() -> None:
    """Import every engine in this process before any child forks from it: a child times its
    engine's work, not its first import."""
    policy = dsl.parse_policy('p("a").\nq(X) :- p(X), not r(X).\nr("b").', include_prelude=False)
    for engine in ENGINES:
        if engine == "clingo":
            clingo_oracle.solve(policy.rules, {})
        else:
            make_backend(engine, compile_policy(policy)).query("q")


def measure(programs: list[Program], scale: int, deadline: float) -> dict[str, Any]:
    warm()
    times: dict[str, list[float]] = {e: [] for e in ENGINES}
    rows: dict[str, int] = dict.fromkeys(ENGINES, 0)
    overdue: dict[str, int] = dict.fromkeys(ENGINES, 0)
    wrong: dict[str, int] = dict.fromkeys(ENGINES, 0)
    both = 0  # programs every engine answered: the figures compare these
    for number, program in enumerate(programs, start=1):
        answers: dict[str, tuple[float, dict[str, set[Row]]]] = {}
        policy = dsl.parse_policy(program.text, include_prelude=False)  # parsing is not what is measured
        for engine in ENGINES:
            try:
                answers[engine] = in_child(run(engine, policy, program, scale), deadline)
            except Overdue:
                overdue[engine] += 1
        if "clingo" not in answers:
            continue
        truth = answers["clingo"][1]
        for engine, (_, got) in answers.items():
            if got != truth:
                wrong[engine] += 1
        if len(answers) == len(ENGINES):
            both += 1
            for engine, (elapsed, got) in answers.items():
                times[engine].append(elapsed)
                rows[engine] += sum(len(r) for r in got.values())
        if number % 50 == 0:
            print(f"  {number}/{len(programs)} programs", file=sys.stderr, flush=True)
    out: dict[str, Any] = {"programs": len(programs), "answered_by_all": both, "engines": {}}
    for engine in ENGINES:
        spent = sum(times[engine])
        out["engines"][engine] = {
            "total_s": round(spent, 3),
            "median_ms": round(statistics.median(times[engine]) * 1000, 3) if times[engine] else None,
            "p90_ms": round(statistics.quantiles(times[engine], n=10)[-1] * 1000, 3)
            if len(times[engine]) > 1
            else None,
            "programs_per_s": round(len(times[engine]) / spent, 1) if spent else None,
            "rows_per_s": round(rows[engine] / spent) if spent else None,
            "timed_out": overdue[engine],
            "wrong": wrong[engine],
        }
    return out


def render(result: dict[str, Any]) -> str:
    lines = [
        f"{result['programs']} programs, scale {result['scale']}; figures over the "
        f"{result['answered_by_all']} every engine answered",
        "",
        "| engine | total | median | p90 | programs/s | rows/s | timed out | wrong |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for engine, f in result["engines"].items():
        lines.append(
            f"| {engine} | {f['total_s']} s | {f['median_ms']} ms | {f['p90_ms']} ms | {f['programs_per_s']} "
            f"| {f['rows_per_s']} | {f['timed_out']} | {f['wrong']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=500)
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--deadline", type=float, default=10.0)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "programs.json"))
    args = parser.parse_args()
    print(f"drawing {args.programs} programs", file=sys.stderr)
    programs = drawn_programs(args.programs)
    result = measure(programs, args.scale, args.deadline)
    result.update(scale=args.scale, date=time.strftime("%Y-%m-%d"), machine=machine_info())
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(render(result))


if __name__ == "__main__":
    main()
