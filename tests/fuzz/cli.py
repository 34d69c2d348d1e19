"""Command lines: ``privilog.cli.main([...])`` in-process with arguments broken one or two at a time.

Exit 0 or 1 is an answer; 2 with a ``privilog`` line on stderr (and no traceback) is a
refusal; anything else (3, an internal error, an exception out of ``main``) is a failure.
A ``check`` whose request is broken so that it cannot be allowed (see
:func:`tests.fuzz.requests.allowable`) must not print ALLOW nor exit 0.
"""

from __future__ import annotations

import contextlib
import io
import random
from collections.abc import Iterator
from typing import Any

from tests.fuzz.harness import ROOT, Case, Verdict, answered, failure, refused
from tests.fuzz.mutate import FRAGMENTS, look_alike
from tests.fuzz.requests import BASE, allowable, break_value

WORLD = "@world"  # the sample world, wherever the worker finds it
SCENARIO = "@scenario"
PATHS = {WORLD: ROOT / "privilog" / "samples" / "world.yaml", SCENARIO: ROOT / "privilog" / "samples" / "scenario.yaml"}
TEMPLATES: list[list[str]] = [
    ["why", "user:dave", "namespace.get", "namespace:marketing", "--world", WORLD],
    ["list", "user:dave", "dataset", "--in", "namespace:marketing", "--world", WORLD],
    ["who", "dataset.read", "dataset:sales.orders", "--world", WORLD, "--json"],
    ["query", '?- descendant(namespace:sales, D), is_a(D, "dataset").', "--world", WORLD],
    ["ops", "dataset"],
    ["fmt", "cdap"],
    ["diff", "cdap", "cdap-4.2"],
    ["test", SCENARIO, "-k", "bob"],
    ["check", "user:bob", "dataset.read", "dataset:sales.orders", "--world", WORLD, "--explain"],
]
OPTIONS = [
    "--json",
    "--explain",
    "--backend",
    "pydatalog",
    "--policy",
    "/etc/passwd",
    "--world",
    "/dev/zero",
    "--arg",
    "x=",
    "--in",
    "-",
    "--",
    "-h",
    "--store",
    "/nonexistent/x.db",
    "--policy",
    "cdap-draft",
    "--format",
    "dot",
]


def generate(rng: random.Random, count: int) -> Iterator[Case]:
    for _ in range(count):
        if rng.random() < 0.5:
            principal, operation, entity, args = rng.choice(BASE)
            parts: list[Any] = [principal, operation, entity]
            for index in rng.sample(range(3), rng.randint(1, 2)):
                broken = break_value(rng, parts[index])
                parts[index] = broken if isinstance(broken, str) else str(broken)
            argv = ["check", *parts, "--world", WORLD, *(x for k, v in args.items() for x in ("--arg", f"{k}={v}"))]
            yield {"argv": argv, "request": [*parts, args]}
            continue
        argv = list(rng.choice(TEMPLATES))
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(argv) + 1)
            how = rng.randrange(4)
            if how == 0 and at < len(argv) and argv[at] not in PATHS:
                argv[at] = look_alike(rng, argv[at]) if rng.random() < 0.5 else break_value(rng, argv[at])
                argv[at] = argv[at] if isinstance(argv[at], str) else str(argv[at])
            elif how == 1:
                argv.insert(at, rng.choice(OPTIONS))
            elif how == 2 and at < len(argv):
                del argv[at]
            else:
                argv.insert(at, rng.choice(FRAGMENTS))
        yield {"argv": argv}


def run_main(argv: list[str], must_not_allow: bool = False) -> Verdict:
    """``privilog ARGV`` in-process, classified by its exit code and what it printed."""
    from privilog.cli import main

    argv = [str(PATHS.get(a, a)) for a in argv]
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except SystemExit as exit:  # argparse's --help and its own errors
        code = exit.code if isinstance(exit.code, int) else 2
    printed, said = out.getvalue(), err.getvalue()
    if must_not_allow and (code == 0 or "ALLOW" in printed):
        return failure(f"allowed a request that must be refused or denied: {argv!r}: {printed[:300]}")
    if "Traceback" in said or "internal error" in said or code not in (0, 1, 2):
        return failure(f"exit {code}: {said.strip()[:1500]}")
    if code == 2:
        first = said.split("\n", 1)[0]
        errors = [line for line in printed.splitlines() if ": ERROR " in line]
        if argv[:1] == ["test"] and not said and errors and " error" in printed.splitlines()[-1]:
            return refused(errors[0])  # privilog test: cases or files that could not run, each its line
        if not (first.startswith("privilog") or first.startswith("usage:")):
            return failure(f"exit 2 without privilog's line: {said[:500]!r}")
        return refused(first)
    return answered(f"exit {code}")


def run(case: Case, context: Any) -> Verdict:
    must_not_allow = False
    if "request" in case:
        principal, operation, entity, args = case["request"]
        must_not_allow = not allowable(context.policy, context.authorizer.world, principal, operation, entity, args)
    return run_main(case["argv"], must_not_allow)
