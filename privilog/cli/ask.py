"""``privilog who`` and ``privilog query``: the REPL's ``who`` and ``?-`` on the command line.

Registered into the ``privilog`` command line by ``register(sub)``. Both read the
policy and the world as ``check`` does (``--policy``, ``--world``, ``--store``,
``--backend``), print what the REPL prints (or one JSON object with ``--json``),
and exit 0 once answered; bad input exits 2. Notes on probable typos go to
stderr, so that standard output stays what scripts parse.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from privilog.cli.options import add_arg, add_common, load_authorizer, moment_json, request_args
from privilog.usage import EXIT_OK


def _note(lines: list[str]) -> None:
    for line in lines:
        print(line, file=sys.stderr)


def cmd_who(args: argparse.Namespace) -> int:
    """Print the principals of the world that may do the operation on the entity, and why."""
    from privilog.engine.who import who
    from privilog.render.explain import render_who
    from privilog.render.notes import unknown_notes

    authorizer = load_authorizer(args)
    allowed = who(authorizer, args.operation, args.entity, request_args(args.arg))
    if args.json:
        print(json.dumps(allowed.to_json() | moment_json(args)))
    else:
        print(render_who(allowed))
    if allowed.checked:
        _note(unknown_notes(authorizer.world, None, allowed.request.entity))
    return EXIT_OK


def cmd_query(args: argparse.Namespace) -> int:
    """Print the bindings of a Datalog query's variables, as the REPL's ``?-`` does."""
    from privilog.engine.query import Budget, answer, parse_query
    from privilog.engine.world import ALL
    from privilog.render.query import action_notes, render_answer

    authorizer = load_authorizer(args)
    body = parse_query(args.body, authorizer.program.relations)
    found = answer(authorizer.backend.query, body, Budget.from_env())
    if args.json:
        print(json.dumps(found.to_json() | moment_json(args)))
    else:
        print(render_answer(found))
    _note(action_notes(found, [*authorizer.policy.actions, ALL]))
    return EXIT_OK


def register(sub: Any) -> None:
    """Add ``who`` and ``query`` to the command line's subparsers."""
    text = "who may do an operation on an entity: every principal of the world that is allowed, and why"
    p = sub.add_parser("who", help=text, description=text + ". Exit 0 once answered, 2 on bad input.")
    p.add_argument("operation", help="TYPE.OPERATION, e.g. dataset.read (see `privilog ops`)")
    p.add_argument("entity", help="the entity, e.g. dataset:sales.orders")
    add_arg(p)
    add_common(p)
    p.add_argument("--json", action="store_true", help="print the answer as one JSON object")
    p.set_defaults(run=cmd_who)

    text = "a Datalog query over the policy's relations, as `?-` in the REPL: a table of the bindings"
    p = sub.add_parser(
        "query",
        help=text,
        description=text + ". For example: privilog query 'descendant(namespace:sales, D), is_a(D, \"dataset\")' "
        "--world world.yaml. Upper-case names are variables, `_` is any; quote an action to make it a constant. "
        "A query without variables answers yes or no. Exit 0 once answered, 2 on bad input.",
    )
    p.add_argument(
        "body", metavar="BODY", help="the literals, separated by `,` (the `?-` and the final `.` are optional)"
    )
    add_common(p)
    p.add_argument("--json", action="store_true", help="print the answer as one JSON object")
    p.set_defaults(run=cmd_query)
