"""``privilog whatif``: what a change would do, without making it.

``whatif grant|revoke P A E...``, ``whatif member add|remove M G``, ``whatif entity add|remove E...``
(the words of :mod:`privilog.cli.changes`, and ``--file`` batches) against ``--world`` or
``--store``: the change made on a copy of the world (of anyone: nothing is written, so no admin is
needed), and every (principal, operation, entity) answer that differs, as lost and gained accesses
(:func:`engine.whatif.impact`); with ``--log``, the logged requests it would decide differently
(:func:`engine.whatif.redecide`). Exit 0 when nothing would change, 1 when something would (as
``privilog diff``), 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from privilog.cli.changes import USAGE, add_target, read_changes, simulate, split_as, target
from privilog.usage import EXIT_DENY, EXIT_OK, UsageError

DESCRIPTION = (
    "What a change would do, without making it: the change made on a copy of the world (--world) or "
    "the store's world (--store), and every (principal, operation, entity) answer that differs, as the "
    "accesses lost and gained; with --log, the logged requests it would decide differently. Nothing is "
    "written and no admin is needed. Exit 0 when nothing would change, 1 when something would, 2 on bad input."
)


def cmd_whatif(args: argparse.Namespace) -> int:
    from privilog import dsl
    from privilog.api import load_world_for
    from privilog.engine.authorizer import Authorizer
    from privilog.engine.whatif import impact, redecide
    from privilog.engine.world import World
    from privilog.repl import words as said

    kind = args.kind
    words, said_as = split_as(args.words)
    if said_as is not None:
        raise UsageError("privilog whatif: a what-if changes nothing, so it is made as no one: drop `as ADMIN`")
    world_path, url = target(args, kind)
    policy = dsl.load_policy(args.policy)
    parser = Authorizer(policy, World())  # reads the changes' entities and the log's requests as the policy does
    planned = read_changes(args, parser, kind, words, whatif=True)
    if url is not None:
        from privilog.store import open_store

        with open_store(url, policy.actions, create=False) as store:
            before = store.snapshot()[0]
    else:
        before = load_world_for(policy, world_path)
    after, done = simulate(before, "whatif", planned, trusted=True)
    found = impact(policy, before, after, backend=args.backend)
    redecided: list[Any] | None = None
    if args.log:
        from privilog.engine.accesslog import read_log

        log = read_log(args.log, parser)
        redecided = redecide(policy, before, after, log.requests, backend=args.backend)
    if args.json:
        out: dict[str, Any] = {
            "changes": [
                {
                    "where": plan.where,
                    "change": plan.asked.kind,
                    "asked": plan.asked.rows(),
                    "changed": type(plan.asked)(plan.asked.kind, tuple(d)).rows(),
                }
                for plan, d in zip(planned, done, strict=True)
            ],
            "impact": found.to_json(),
        }
        if redecided is not None:
            from privilog.render.whatif import redecided_json

            out["log"] = redecided_json(redecided, len(log.requests), len(log.rejected))
        print(json.dumps(out))
    else:
        from privilog.render.whatif import render_impact, render_redecided

        for plan, d in zip(planned, done, strict=True):
            for line in said.answer(plan.asked, d, would=True):
                print(plan.label(line))
        print(render_impact(found))
        if redecided is not None:
            print(render_redecided(redecided, len(log.requests), len(log.rejected)))
    return EXIT_DENY if found.changes or redecided else EXIT_OK


def _whatif_parser(sub: Any, name: str, kind: str, text: str, aliases: tuple[str, ...] = ()) -> None:
    prog = f"privilog whatif {kind.replace('.', ' ').replace('delete', 'remove')}"
    usage = (
        f"{prog} {USAGE[kind]} (--store S | --world FILE) [--log LOG] [--json] [--policy P]\n"
        f"       {prog} --file F (--store S | --world FILE) [--log LOG] [--json] [--policy P]"
    )
    p = sub.add_parser(name, help=text, description=DESCRIPTION, usage=usage, aliases=list(aliases))
    p.add_argument("words", nargs="*", metavar="WORD", help=f"the change, in the REPL's words: {USAGE[kind]}")
    add_target(p, "to ask about")
    p.add_argument(
        "--log",
        metavar="LOG",
        help="an access log (CSV with a header, or JSON lines: principal, operation, entity[, args]): "
        "which of its requests would be decided differently",
    )
    p.add_argument(
        "--backend",
        choices=("compiled", "pydatalog"),
        default="compiled",
        help="the engine: compiled (default, fast) or pydatalog (the reference)",
    )
    p.add_argument("--json", action="store_true", help="print the answer as one JSON object")
    p.set_defaults(run=cmd_whatif, kind=kind)


def register(sub: Any) -> None:
    """Add ``whatif`` and its changes to the command line."""
    text = "what a change would do: the accesses it takes away and gives, and logged requests decided differently"
    p = sub.add_parser("whatif", help=text, description=DESCRIPTION)
    changes = p.add_subparsers(dest="whatif_command", required=True, parser_class=type(p))
    _whatif_parser(changes, "grant", "grant", "what granting would do")
    _whatif_parser(changes, "revoke", "revoke", "what revoking would do")
    for name, text, verbs in (
        ("member", "what putting a principal in a group or role, or taking it out, would do", ("add", "remove")),
        ("entity", "what creating or deleting entities would do", ("add", "remove")),
    ):
        q = changes.add_parser(name, help=text, description=text)
        inner = q.add_subparsers(dest=f"whatif_{name}_command", required=True, parser_class=type(q))
        for verb in verbs:
            kind = f"{name}.{verb}" if name == "member" or verb == "add" else "entity.delete"
            aliases = ("delete",) if kind == "entity.delete" else ()
            _whatif_parser(inner, verb, kind, f"what `{name} {verb}` would do", aliases)
