"""``privilog test``: run scenario files, or report how each policy conforms to its table.

Registered into the ``privilog`` command line by ``register(sub)``. Exit 0 when every
case (and every row, with ``--report``) passes, 1 when any fails, 2 when a case or a
scenario file could not be run (each is reported as an error and the rest still run);
a bad command line (a bad ``-k``) raises, and the command line turns it into exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from privilog.usage import EXIT_BAD_INPUT, EXIT_DENY, EXIT_OK, UsageError

DESCRIPTION = (
    "Run scenario files (docs/scenarios.md): print each failing case as FILE:LINE:COL: FAIL NAME: WHY, "
    "then `N passed, M failed` (and `K errors`: cases that could not be run, such as a malformed id, each "
    "reported as FILE:LINE:COL: ERROR NAME: WHY while the other cases still run). With --report, check "
    "every policy in rules/ against its conformance table and print covered and passing rows. "
    "Exit 0 when everything passes, 1 when a case or a row fails, 2 when a case could not be run or on bad input."
)
SCENARIO_ONLY = ("verbose", "select", "json", "junit_xml", "coverage")


def register(sub: Any) -> None:
    """Add ``test`` to the command line's subparsers."""
    p = sub.add_parser(
        "test",
        help="run scenario files, or report how each policy conforms to its table",
        description=DESCRIPTION,
    )
    p.add_argument("scenarios", nargs="*", metavar="SCENARIO.yaml", help="scenario files to run")
    p.add_argument("--policy", default=None, help="run every scenario against this policy instead")
    p.add_argument("-v", "--verbose", action="store_true", help="print every case, PASS or FAIL, with its time")
    p.add_argument(
        "-k",
        dest="select",
        metavar="EXPR",
        help="run only the cases whose name matches: words (a substring, ignoring case) "
        "joined by and, or, not, with parentheses, such as -k 'delete and not ns2'",
    )
    p.add_argument("--json", action="store_true", help="print the run as one JSON object (cases, totals, coverage)")
    p.add_argument("--junit-xml", metavar="FILE", help="also write the run as JUnit XML to FILE, for CI systems")
    p.add_argument(
        "--coverage",
        action="store_true",
        help="report the operations, requirements and rules of each policy the cases exercised, "
        "and those that never decided anything",
    )
    p.add_argument("--report", action="store_true", help="the conformance report of every policy in rules/")
    p.add_argument(
        "--tables",
        default="tests/conformance",
        metavar="DIR",
        help="where the conformance tables are (default: tests/conformance)",
    )
    p.set_defaults(run=cmd_test)


def cmd_test(args: argparse.Namespace) -> int:
    """Run ``privilog test``."""
    if not args.scenarios and not args.report:
        raise UsageError("privilog test: give SCENARIO.yaml files, or --report (see `privilog test --help`)")
    given = [name for name in SCENARIO_ONLY if getattr(args, name)]
    if given and not args.scenarios:
        option = {"verbose": "-v", "select": "-k", "junit_xml": "--junit-xml"}.get(given[0], f"--{given[0]}")
        raise UsageError(f"privilog test: {option} applies to scenario files; give SCENARIO.yaml files")
    if args.json and args.report:
        raise UsageError("privilog test: --json prints a scenario run; run --report without it")
    status = EXIT_OK
    if args.scenarios:
        status = _scenarios(args)
    if args.report:
        status = max(status, _report(Path(args.tables)))
    return status


def _scenarios(args: argparse.Namespace) -> int:
    from privilog.dsl.files import write_atomically
    from privilog.testing.results import junit_xml, render_text, run_json
    from privilog.testing.scenario import run_scenarios
    from privilog.testing.select import parse_selection

    select = parse_selection(args.select) if args.select is not None else None
    run = run_scenarios([Path(p) for p in args.scenarios], args.policy, select, args.coverage)
    if select is not None and not run.results and run.deselected:
        # a -k that matches nothing is a typo more often than a choice; CI should not pass on it
        raise UsageError(f"privilog test: -k `{args.select}` selects none of the {run.deselected} cases")
    if args.junit_xml:
        try:
            write_atomically(Path(args.junit_xml), junit_xml(run), "JUnit XML report")
        except OSError as error:
            raise UsageError(f"privilog test: cannot write {args.junit_xml}: {error.strerror or error}") from None
    if args.json:
        print(json.dumps(run_json(run)))
    else:
        print("\n".join(render_text(run, args.verbose)))
    if run.errors:
        return EXIT_BAD_INPUT  # some cases could not be run: bad input, after running every other case
    return EXIT_OK if run.failed == 0 else EXIT_DENY


def _report(tables: Path) -> int:
    from privilog import dsl
    from privilog.testing.conformance import conformance_report, render_report

    reports = conformance_report(tables)
    rules = os.path.relpath(dsl.rules_dir())  # rules/ as the user sees it, when it is below here
    shown = str(dsl.rules_dir()) if rules.startswith("..") else rules
    print(render_report(reports, tables=str(tables), rules=shown))
    return EXIT_OK if all(r.ok for r in reports) else EXIT_DENY
