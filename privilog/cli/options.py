"""What the commands that ask a policy and a world share: their options and what they load.

``--policy``, ``--world``, ``--store`` and ``--backend`` (:func:`add_common`), the
authorizer they name (:func:`load_authorizer`), and ``--arg NAME=VALUE``
(:func:`request_args`). Used by ``check``, ``why``, ``list``, ``who`` and ``query``.
"""

from __future__ import annotations

import argparse
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


def load_authorizer(args: argparse.Namespace) -> Any:
    """The authorizer over the policy and the world (or the store's world) the options name."""
    from privilog.api import load

    backend = getattr(args, "backend", "compiled")
    url = given_store(args)
    if url is None:
        return load(args.policy, args.world, backend=backend, bind=False)
    from privilog import dsl
    from privilog.store import open_store

    policy = dsl.load_policy(args.policy)
    with open_store(url, policy.actions, create=False) as store:
        world, _ = store.snapshot()
    return load(policy, world, backend=backend)


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
