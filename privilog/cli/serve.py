"""``privilog serve`` and ``privilog token``: the authorization backend over HTTP, and its bearer tokens.

Registered into the ``privilog`` command line by ``register(sub)``. ``token
create`` prints a new token once (the store keeps only its hash); tokens are a
local operator's commands, logged with the operating-system user as actor.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from privilog.cli.store import STORE_HELP, local_actor, store_url
from privilog.usage import EXIT_DENY, EXIT_OK, UsageError, require_extra


def cmd_serve(args: argparse.Namespace) -> int:
    require_extra("serve", "serve")
    from privilog.serve.limits import OPTIONS, Limits
    from privilog.serve.server import ServeOptions
    from privilog.serve.workers import serve

    if not 0 <= args.port <= 65535:
        raise UsageError(f"privilog serve: --port is 0 to 65535, not {args.port}")
    if args.follow_interval is not None and not 0 < args.follow_interval <= 3600:
        raise UsageError(
            f"privilog serve: --follow-interval is seconds above 0 and at most 3600, not {args.follow_interval:g}"
        )
    try:
        limits = Limits(**{name: getattr(args, name) for _, name, _ in OPTIONS})
    except ValueError as error:
        raise UsageError(f"privilog serve: {error}") from None
    options = ServeOptions(
        store=str(store_url(args)),
        policy=args.policy,
        host=args.host,
        port=args.port,
        workers=args.workers,
        decision_log=args.decision_log,
        decision_log_sample=args.decision_log_sample,
        follow_interval=args.follow_interval,
        decision_log_reasons=args.decision_log_reasons == "on",
        snapshot=args.snapshot,
        limits=limits,
    )
    return serve(options)


def _open(args: argparse.Namespace) -> Any:
    from privilog import dsl
    from privilog.store import open_store

    return open_store(str(store_url(args)), dsl.load_policy(args.policy).actions, create=False)


def cmd_token_create(args: argparse.Namespace) -> int:
    with _open(args) as store:
        token_id, token = store.create_token(args.principal, local_actor())
    print(token)
    print(f"token {token_id} for {args.principal}: shown once; the store keeps only its hash", file=sys.stderr)
    return EXIT_OK


def cmd_token_revoke(args: argparse.Namespace) -> int:
    with _open(args) as store:
        live = store.revoke_token(args.token_id, local_actor())
    if not live:
        print(f"privilog: token revoke: no live token {args.token_id}", file=sys.stderr)
        return EXIT_DENY
    print(f"revoked token {args.token_id} (the server stops taking it within a second)")
    return EXIT_OK


def cmd_token_list(args: argparse.Namespace) -> int:
    with _open(args) as store:
        tokens = store.tokens()
    for token in tokens:
        if args.json:
            print(
                json.dumps(
                    {
                        "id": token.token_id,
                        "principal": token.principal,
                        "created": token.created,
                        "revoked": token.revoked,
                    }
                )
            )
        else:
            state = f"revoked {token.revoked}" if token.revoked else "live"
            print(f"{token.token_id}  {token.principal}  created {token.created}  {state}")
    return EXIT_OK


def register(sub: Any) -> None:
    """Add ``serve`` and ``token`` to the command line's subparsers."""
    text = "the authorization backend over HTTP: privilog's questions and CDAP's authorization API"
    p = sub.add_parser(
        "serve",
        help=text,
        description=text + "; every call carries a bearer token (`privilog token create`); SIGHUP reloads the policy.",
    )
    p.add_argument("--store", help=STORE_HELP)
    p.add_argument("--policy", default="cdap", help="a policy in rules/ (default cdap) or a path")
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8181, help="the port (default 8181; 0: any free one, printed)")
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="worker processes, sharing one load, each following the store (default 1)",
    )
    p.add_argument("--decision-log", metavar="FILE", help="append each decision to FILE as a JSON line")
    p.add_argument(
        "--decision-log-sample",
        type=float,
        default=1.0,
        metavar="FRACTION",
        help="log only this fraction of decisions, at random (default 1)",
    )
    p.add_argument(
        "--follow-interval",
        type=float,
        metavar="SECONDS",
        help="how often a store that cannot notify (SQLite) is looked at for others' changes (default 0.1; "
        "PostgreSQL notifies at once)",
    )
    p.add_argument(
        "--decision-log-reasons",
        choices=("on", "off"),
        default="on",
        help="log why each decision was made: the grants (by log entry) or what is unmet (default on)",
    )
    p.add_argument(
        "--snapshot",
        metavar="FILE",
        help="start from the engine's state kept in FILE when it is this store's, policy's and privilog's "
        "(then catch up with the store); written after a load that did not (docs/serve.md)",
    )
    from privilog.serve.limits import OPTIONS, default

    for option, name, what in OPTIONS:  # the budget of a request and a client (privilog/serve/limits.py)
        value = default(name)
        p.add_argument(
            option,
            type=type(value),
            default=value,
            metavar="SECONDS" if isinstance(value, float) else "N",
            help=f"{what} (default {value:g})" if isinstance(value, float) else f"{what} (default {value})",
        )
    p.set_defaults(run=cmd_serve)

    text = "bearer tokens for the server: create (shown once), revoke, list"
    p = sub.add_parser("token", help=text, description=text)
    commands = p.add_subparsers(dest="token_command", required=True, parser_class=type(p))

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("--store", help=STORE_HELP)
        q.add_argument("--policy", default="cdap", help="the policy whose actions the store's grants name")

    q = commands.add_parser("create", help="a new token standing for a principal; printed once")
    q.add_argument("--principal", required=True, metavar="PRINCIPAL", help="who the token stands for: user:NAME")
    common(q)
    q.set_defaults(run=cmd_token_create)
    q = commands.add_parser("revoke", help="revoke a token by its id (the server stops taking it within a second)")
    q.add_argument("token_id", metavar="ID", help="the token's id, as `privilog token create` and `list` print it")
    common(q)
    q.set_defaults(run=cmd_token_revoke)
    q = commands.add_parser("list", help="every token: id, principal, when made, whether revoked (never secrets)")
    common(q)
    q.add_argument("--json", action="store_true", help="one JSON object per line")
    q.set_defaults(run=cmd_token_list)
