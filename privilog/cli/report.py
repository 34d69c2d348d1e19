"""``privilog report``: a principal's report (a user, a group or a role) or an entity's.

Registered into the ``privilog`` command line by ``register(sub)``. Reads the policy and the
world as ``check`` does (``--policy``, ``--world``, ``--store``, ``--backend``); prints a tree (or
one JSON object with ``--json``, CSV rows of the accesses with ``--csv``) and exits 0 once
answered, an unknown principal or entity included (a note on stderr says so); a malformed id
exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from privilog.cli.options import add_common, load_authorizer, moment_json
from privilog.engine.ids import PRINCIPAL_KINDS, SHAPES, EntityId, IdError, parse_principal
from privilog.usage import EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    """Print what reaches a principal and what it may do, or who may do what on an entity."""
    from privilog.engine.report import entity_report, principal_report
    from privilog.render.holdings import csv_rows, render_entity, render_principal
    from privilog.render.notes import unknown_notes

    subject: str = args.subject
    is_principal = subject.partition(":")[0] in PRINCIPAL_KINDS
    if is_principal:
        principal = parse_principal(subject)  # a malformed id: exit 2 before loading anything
    else:
        try:
            entity = EntityId.parse(subject)
        except IdError as error:
            if subject.partition(":")[0] in SHAPES:
                raise
            if ":" not in subject:
                parse_principal(subject)  # its own message: `alice`, did you mean `user:alice`?
            kinds = ", ".join(f"{k}:NAME" for k in PRINCIPAL_KINDS)
            raise IdError(f"`{subject}` is neither a principal ({kinds}) nor an entity: {error}") from None
    authorizer = load_authorizer(args)
    if is_principal:
        report: Any = principal_report(authorizer, principal)
        notes = unknown_notes(authorizer.world, principal, None)
        text: Any = render_principal
    else:
        report = entity_report(authorizer, entity)
        notes = unknown_notes(authorizer.world, None, entity)
        if not report.exists and not notes:
            notes = [f"note: {entity} does not exist in the world"]
        text = render_entity
    if args.json:
        print(json.dumps(report.to_json() | moment_json(args)))
    elif args.csv:
        sys.stdout.write(csv_rows(report.accesses))
    else:
        print(text(report))
    for line in notes:
        print(line, file=sys.stderr)
    return EXIT_OK


def register(sub: Any) -> None:
    """Add ``report`` to the command line's subparsers."""
    text = (
        "a principal's report (every grant that reaches it, through which groups and roles, what each "
        "allows, what it sees), or an entity's (every principal with any access, and why)"
    )
    p = sub.add_parser(
        "report",
        help=text,
        description=text + ". For example: privilog report user:dave --world world.yaml. "
        "Exit 0 once answered, 2 on bad input.",
    )
    p.add_argument("subject", metavar="ID", help="user:NAME, group:NAME, role:NAME, or an entity such as dataset:ns1.d")
    add_common(p)
    shape = p.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="print the report as one JSON object")
    shape.add_argument("--csv", action="store_true", help="print the accesses as CSV, a row for each grant behind one")
    p.set_defaults(run=cmd_report)
