"""``privilog unused``: which grants an access log never used, and which can all be removed together.

Registered into the ``privilog`` command line by ``register(sub)``. Reads the policy and the world
as ``check`` does and an access log (:mod:`engine.accesslog`), justifies every request
(:mod:`engine.justify`) and analyses the grants (:mod:`engine.leastprivilege`). Exit 0 once
answered; with ``--verify``, 1 if an allowed request would be denied after the removals (a bug:
it is reported, never hidden); 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from privilog.cli.options import add_common, load_authorizer
from privilog.engine.leastprivilege import EXACT_LIMIT
from privilog.usage import EXIT_DENY, EXIT_OK, add_least_privilege_options

DESCRIPTION = (
    "Least privilege over an access log: the grants no allowed request of the log could have used "
    "(unused), those some allowed request cannot do without (sole), and a set of grants that can all be "
    "removed together while every request the log allowed stays allowed (recommended removals; exact, "
    "or greedy with its bound on large parts). Denied requests are counted, never used to keep a grant. "
    "The log is CSV with a header or JSON lines, with principal, operation, entity, and optionally args "
    "(a JSON object) and timestamp; a bad row is rejected and counted. Exit 0 once answered, 1 when "
    "--verify finds a request the removals would deny, 2 on bad input."
)


def cmd_unused(args: argparse.Namespace) -> int:
    from privilog.engine.accesslog import read_log
    from privilog.engine.justify import justify
    from privilog.engine.leastprivilege import analyse, verify
    from privilog.render.unused import render_unused, unused_json

    authorizer = load_authorizer(args)
    log = read_log(args.log, authorizer)
    decided = list(justify(authorizer, log.requests))
    report = analyse(authorizer.world, decided, exact_limit=args.exact_limit)
    report.rejected, report.window = len(log.rejected), log.window
    verified = None
    if args.verify:
        verified = verify(authorizer, report.removals, (j.request for j in decided if j.allowed))
    if args.json:
        print(json.dumps(unused_json(report, log.rejected, verified)))
    else:
        print(render_unused(report, log.rejected, verified))
    if verified:
        print(f"privilog: unused: {len(verified)} allowed requests would be denied: please report it", file=sys.stderr)
        return EXIT_DENY
    return EXIT_OK


def register(sub: Any) -> None:
    """Add ``unused`` to the command line's subparsers."""
    p = sub.add_parser(
        "unused",
        help="least privilege: grants an access log never used, and which can all be removed together",
        description=DESCRIPTION,
    )
    p.add_argument("--log", required=True, help="the access log: CSV with a header, or JSON lines")
    add_common(p)
    add_least_privilege_options(
        p, "apply the recommended removals to a copy of the world and decide the whole log again", EXACT_LIMIT
    )
    p.set_defaults(run=cmd_unused)
