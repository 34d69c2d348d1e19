"""What the commands that ask a policy and a world share: their options and what they load.

``--policy``, ``--world``, ``--store``, ``--backend`` and ``--as-of`` (:func:`add_common`), the
authorizer they name (:func:`load_authorizer`), and ``--arg NAME=VALUE``
(:func:`request_args`). Used by ``check``, ``why``, ``list``, ``who``, ``query`` and ``report``.

``--as-of TIME|ENTRY|REVISION`` answers as the store stood then, under the policy then in force
(:func:`privilog.store.history.as_of`); the moment answered at is one line on stderr (or the
``as_of`` object of ``--json``, :func:`moment_json`). A world file has no past: a usage error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from privilog.cli.store import STORE_HELP, store_url
from privilog.engine.decision import gathered
from privilog.usage import UsageError

WORLD_HELP = "a world: a YAML or JSON file, or a folder of CSV, JSON-lines or Parquet tables"


def add_common(p: argparse.ArgumentParser, world: bool = True) -> None:
    """Add --policy, and (``world``) --world, --store and --backend."""
    p.add_argument("--policy", default="cdap", help="a policy in rules/ (default cdap) or a path")
    if world:
        p.add_argument("--world", help=WORLD_HELP)
        p.add_argument("--store", help=STORE_HELP)
        p.add_argument(
            "--backend",
            choices=("compiled", "pydatalog"),
            default="compiled",
            help="the engine: compiled (default, fast) or pydatalog (the reference)",
        )
        p.add_argument(
            "--as-of",
            metavar="MOMENT",
            help="answer as the store stood at MOMENT, under the policy then in force: a time (2026-10-01, "
            "2026-10-01T09:30Z), a log entry's number (as `privilog store audit` shows it) or a revision token",
        )


def load_authorizer(args: argparse.Namespace) -> Any:
    """The authorizer over the policy and the world (or the store's world) the options name; with
    ``--as-of``, the store's as it stood then (the note saying when goes to stderr, unless --json).
    What the answer was decided at is left on ``args`` for :func:`moment_json`."""
    from privilog.api import load

    backend = getattr(args, "backend", "compiled")
    moment = getattr(args, "as_of", None)
    url = given_store(args)
    args.decided_at = None
    if url is None:
        if moment is not None:
            raise UsageError(
                f"privilog {args.command}: --as-of reads a store's log, and a world file has none: name the "
                "store with --store PATH_OR_URL (or set PRIVILOG_STORE)"
            )
        return load(args.policy, args.world, backend=backend, bind=False)
    from privilog import dsl
    from privilog.store import open_store

    policy = dsl.load_policy(args.policy)
    with open_store(url, policy.actions, create=False) as store:
        if moment is not None:
            from privilog.store.history import as_of

            past = as_of(store, moment, policy, backend)
            args.decided_at = past
            if not getattr(args, "json", False):
                print(past.note(), file=sys.stderr)
            return past.authorizer
        history = store.history(None, granted=False)
    from privilog.store.revision import Revision, policy_version

    version = policy_version(policy)
    record = history.policy
    args.decided_at = Revision(history.seq, record.seq if record and record.version == version else 0, version)
    return load(policy, history.world, backend=backend)


def moment_json(args: argparse.Namespace, revision: bool = False) -> dict[str, Any]:
    """What an answer in --json says of when it was decided: ``as_of`` (the moment asked, the log entry
    and time answered at, its revision, the policy used), or with ``revision`` the store's revision it
    was decided at; nothing for a world file."""
    from privilog.store.history import Past
    from privilog.store.revision import policy_version

    decided = getattr(args, "decided_at", None)
    if isinstance(decided, Past):
        return {
            "as_of": {
                "asked": args.as_of,
                "seq": decided.seq,
                "at": decided.history.at,
                "revision": decided.revision.token,
                "policy": {
                    "name": decided.policy.name,
                    "version": policy_version(decided.policy),
                    "recorded": decided.recorded,
                },
                "note": decided.note(),
            }
        }
    if decided is not None and revision:
        return {"revision": decided.token}
    return {}


def given_store(args: argparse.Namespace, environment: bool = True) -> str | None:
    """The store a command reads instead of a world: --store, or (``environment``) $PRIVILOG_STORE
    when no --world is given."""
    given = getattr(args, "store", None)
    url = store_url(args, required=False) if environment and not getattr(args, "world", None) else given
    if url and getattr(args, "world", None):
        raise UsageError(f"privilog {args.command}: give --world or --store, not both")
    return url


def request_args(pairs: Sequence[str]) -> dict[str, str | list[str]]:
    """``--arg NAME=VALUE`` options as a mapping; a name given again makes a list (the values
    of a list argument such as ``--arg datasets=dataset:ns1.a --arg datasets=dataset:ns1.b``)."""
    out: list[tuple[str, str]] = []
    for pair in pairs:
        name, eq, value = pair.partition("=")
        if not eq or not name:
            raise UsageError(f"--arg takes NAME=VALUE, such as --arg artifact=artifact:ns1.etl; not `{pair}`")
        out.append((name, value))
    return gathered(out)


def add_arg(p: argparse.ArgumentParser) -> None:
    """Add the repeatable ``--arg NAME=VALUE``."""
    p.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a request argument, such as artifact=artifact:ns1.etl (repeatable)",
    )
