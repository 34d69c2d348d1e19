"""Mutants of the prelude (rules/prelude/requirements.policy), one at a time, against the tables.

``python tests/mutation/prelude.py [--list] [--tests 'PYTEST-ARGS'] [--slow-tests 'PYTEST-ARGS'] [N ...]``

The prelude is Datalog text, which no Python mutation tool mutates. This script makes its
mutants itself, each a single change to one rule:

* ``drop-rule``: the rule taken out;
* ``drop-literal``: one literal of a body of two or more taken out;
* ``flip-negation``: a negated literal made positive (``not guarded(I)``: ``guarded(I)``);
* ``constant``: a string constant of a body (``"self"``, ``"present"``, ...) replaced by one
  no fact holds (``"mutant"``).

Each mutant is written into a copy of the installed tree (tests/mutation/stage.py assembles it
in build/mutation/, the working tree's own files untouched), and first loaded with the shipped
policy: a mutant the language's checks reject (an unsafe variable, a negation cycle) is
``invalid`` and is not counted. The others run the tests of ``--tests`` (by default: the
conformance tables of cdap-5.1 on the compiled backend, ``-x``); a mutant that survives those
runs ``--slow-tests`` (every table on both backends, the engine's tests of denials, owners, list
arguments, wildcards and the tests in tests/engine/test_mutants.py). It is killed when a test
fails, and survives when none does. Numbers (``N``) select mutants by their index in ``--list``.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stage  # tests/mutation/stage.py, beside this file

ROOT = stage.ROOT
PRELUDE = Path("rules") / "prelude" / "requirements.policy"
FAST = "tests/conformance/test_tables.py -x -k 'compiled and cdap-5.1'"
SLOW = (
    "tests/conformance -x -k 'not pydatalog or cdap-5.1' tests/engine/test_denial.py tests/engine/test_owners.py "
    "tests/engine/test_list_arguments.py tests/engine/test_wildcards.py tests/engine/test_mutants.py tests/engine/test_config.py"
)
LOAD = "import privilog; [privilog.load(p) for p in ('cdap', 'cdap-5.1', 'cdap-4.2', 'cdap-draft', 'cdap-proposed')]"


@dataclass(frozen=True)
class Mutant:
    kind: str
    line: int  # of the rule's first line, 1-based
    what: str
    text: str  # the whole prelude, mutated


def rules(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets of each rule: from a line that starts a statement to the `.` ending it."""
    spans = []
    start = None
    offset = 0
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if start is None and stripped and not stripped.startswith(("#", "relation", "policy")) and ":-" in stripped:
            start = offset
        if start is not None and stripped.endswith("."):
            spans.append((start, offset + len(line.rstrip())))
            start = None
        offset += len(line)
    return spans


def literals(body: str) -> list[tuple[int, int]]:
    """(start, end) offsets of each top-level literal of a rule body."""
    out, depth, begin = [], 0, 0
    for i, ch in enumerate(body):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append((begin, i))
            begin = i + 1
    out.append((begin, len(body)))
    return out


def mutants(text: str) -> list[Mutant]:
    found = []
    for start, end in rules(text):
        rule = text[start:end]
        line = text.count("\n", 0, start) + 1
        head, _, body = rule[:-1].partition(":-")
        body_at = start + len(head) + 2
        short = " ".join(rule.split())
        found.append(Mutant("drop-rule", line, short, text[:start] + text[end:]))
        lits = literals(body)
        for i, (a, b) in enumerate(lits):
            lit = " ".join(body[a:b].split())
            if len(lits) > 1:
                kept = [body[x:y] for j, (x, y) in enumerate(lits) if j != i]
                new_body = ",".join(kept)
                found.append(
                    Mutant(
                        "drop-literal",
                        line,
                        f"{head.strip()} :- ... without `{lit}`",
                        text[:body_at] + new_body + text[body_at + len(body) :],
                    )
                )
            if lit.startswith("not "):
                at = body_at + a + body[a:b].index("not ")
                found.append(
                    Mutant("flip-negation", line, f"{head.strip()}: `{lit}` made positive", text[:at] + text[at + 4 :])
                )
            for m in re.finditer(r'"[^"]*"', body[a:b]):
                at = body_at + a + m.start()
                found.append(
                    Mutant(
                        "constant",
                        line,
                        f'{head.strip()}: {m.group()} in `{lit}` made "mutant"',
                        text[:at] + '"mutant"' + text[at + len(m.group()) :],
                    )
                )
    return found


def run(args: list[str], cwd: Path) -> int:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.call(
        [sys.executable, *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument("--tests", default=FAST, help=f"pytest arguments run first (default: {FAST})")
    parser.add_argument("--slow-tests", default=SLOW, help="pytest arguments run on a survivor of --tests")
    parser.add_argument("numbers", nargs="*", type=int)
    args = parser.parse_args(argv)
    original = (ROOT / PRELUDE).read_text(encoding="utf-8")
    all_mutants = mutants(original)
    chosen = [(n, m) for n, m in enumerate(all_mutants) if not args.numbers or n in args.numbers]
    if args.list:
        for n, m in chosen:
            print(f"{n:3} line {m.line:3} {m.kind:14} {m.what}")
        return 0
    where = stage.STAGE.with_name("mutation-prelude")
    stage.STAGE = where
    stage.stage(None, None)
    targets = [where / PRELUDE, where / "privilog" / PRELUDE]
    counts = {"killed": 0, "survived": 0, "invalid": 0}
    try:
        for n, m in chosen:
            for t in targets:
                t.write_text(m.text, encoding="utf-8")
            if run(["-c", LOAD], where) != 0:
                verdict = "invalid"
            else:
                fails = (
                    run(["-m", "pytest", "-q", "-p", "no:cacheprovider", *shlex.split(t)], where) != 0
                    for t in (args.tests, args.slow_tests)
                )
                verdict = "killed" if any(fails) else "survived"
            counts[verdict] += 1
            print(f"{n:3} line {m.line:3} {m.kind:14} {verdict:8} {m.what}", flush=True)
    finally:
        for t in targets:
            t.write_text(original, encoding="utf-8")
    valid = counts["killed"] + counts["survived"]
    print(f"killed {counts['killed']}/{valid} ({counts['invalid']} invalid, not counted)")
    return 1 if counts["survived"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
