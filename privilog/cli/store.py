"""``privilog store``: make, fill, read and audit a grant store (``--store``).

Registered into the ``privilog`` command line by ``register(sub)``. The store is
named by ``--store`` or the ``PRIVILOG_STORE`` environment variable: a SQLite
path (``authz.db``, ``sqlite:authz.db``) or a PostgreSQL URL.

``init`` and ``import`` are a local operator's commands: whoever can write the
store's file (or connect to its database as its owner) may make the first
admins, as whoever can run ``initdb`` may make the first database user. They
are logged with the operating-system user as their actor. Every other change
goes through an authorization admin: ``privilog grant`` (revoke, member, entity)
``--as ADMIN``, the REPL on ``--store``, or the server.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from typing import Any

from privilog.dsl.errors import PrivilogError
from privilog.usage import EXIT_OK, UsageError

TABLE_FORMATS = ("csv", "jsonl", "parquet")  # store export --format: a folder of tables (engine.world.tables)
STORE_HELP = "a grant store: a SQLite file (authz.db, sqlite:PATH) or postgresql://...; default $PRIVILOG_STORE"


def store_url(args: argparse.Namespace, required: bool = True) -> str | None:
    """The store a command names, by --store or $PRIVILOG_STORE."""
    url = getattr(args, "store", None) or os.environ.get("PRIVILOG_STORE") or None
    if url is None and required:
        raise UsageError(f"privilog {args.command}: name a store with --store PATH_OR_URL (or set PRIVILOG_STORE)")
    return url


def local_actor() -> str:
    """Who runs a local operator's command, as the audit log names them."""
    try:
        return f"local:{getpass.getuser()}"
    except (KeyError, OSError):  # no name for this uid (a container)
        return f"local:uid{os.getuid()}"


def _open(args: argparse.Namespace, create: bool = False) -> Any:
    from privilog import dsl
    from privilog.store import open_store

    policy = dsl.load_policy(args.policy)
    return open_store(str(store_url(args)), policy.actions, create=create)


def cmd_init(args: argparse.Namespace) -> int:
    with _open(args, create=True) as store:
        actor = local_actor()
        if args.admin:
            store.change(actor, "admin.add", args.admin, trusted=True)
        world, _ = store.snapshot()
        admins = ", ".join(sorted(world.admins)) or "none yet: add one with --admin user:NAME"
        print(f"store {store.url}: schema version ready; admins: {admins}")
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    from privilog import dsl
    from privilog.api import load_world_for
    from privilog.store.base import facts_refusal

    policy = dsl.load_policy(args.policy)
    world = load_world_for(policy, args.world)
    if world.config:  # refused, not dropped: the store keeps no settings
        keys = ", ".join(sorted(world.config))
        raise PrivilogError(
            f"{args.world}: the store keeps grants, memberships, admins and entities, not `config:` ({keys}); "
            "settings are read from world files and the pipeline's --config; remove `config:` to import the rest"
        )
    if world.owners:  # refused, not dropped, as settings are
        raise PrivilogError(
            f"{args.world}: the store keeps grants, memberships, admins and entities, not `owners:` "
            f"({len(world.owners)} owned entities); owners are read from world files; "
            "remove `owners:` to import the rest"
        )
    if world.facts:  # refused, not dropped, as settings are
        raise PrivilogError(facts_refusal(world, str(args.world)))
    with _open(args, create=True) as store:
        counts = store.import_world(world, local_actor())
    added = ", ".join(f"{n} {table}" for table, n in counts.items())
    print(f"imported {args.world} into {store.url}: added {added}")
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    import yaml

    with _open(args) as store:
        world, seq = store.snapshot()
    if args.format in TABLE_FORMATS:
        from pathlib import Path

        from privilog.engine.world import write_tables

        if not args.out:
            raise UsageError(
                f"privilog store: export --format {args.format} writes a folder of tables; name it with --out DIR"
            )
        written = ", ".join(p.name for p in write_tables(world, Path(args.out), args.format))
        print(f"exported {store.url} (change {seq}) to {args.out}: {written}", file=sys.stderr)
        return EXIT_OK
    data = world.to_data()
    text = (
        json.dumps(data, indent=1) + "\n"
        if args.format == "json"
        else yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)
    )
    if args.out:
        from pathlib import Path

        from privilog.dsl.files import write_atomically

        write_atomically(Path(args.out), text, "world")
        print(f"exported {store.url} (change {seq}) to {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def cmd_audit(args: argparse.Namespace) -> int:
    from privilog.engine.ids import EntityId, parse_principal

    principal = parse_principal(args.principal) if args.principal else None
    since = _since(args.since) if args.since else None
    entity = str(EntityId.parse(args.entity)) if args.entity else None
    with _open(args) as store:
        entries = store.audit(principal, entity, since, args.limit)
    for entry in entries:
        if args.json:
            print(json.dumps(entry.to_json()))
        else:
            print(render_entry(entry))
    if not args.json and not entries:
        print("no changes match", file=sys.stderr)
    return EXIT_OK


def _since(text: str) -> str:
    """A time as the log writes it (UTC, to the microsecond), so that times compare as text."""
    from datetime import UTC, datetime

    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"privilog store audit: --since takes an ISO 8601 time such as 2026-11-25T10:00, not `{text}`"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def render_entry(entry: Any) -> str:
    """One log entry as a line: seq, time, actor, what, outcome."""
    items = entry.items if entry.applied else entry.asked
    shown = "; ".join(
        " ".join(map(str, i)) if isinstance(i, tuple) else json.dumps(i) if isinstance(i, dict) else str(i)
        for i in items[:5]
    )
    more = f" (+{len(items) - 5} more)" if len(items) > 5 else ""
    if entry.kind == "import" and entry.asked:
        shown = "added " + ", ".join(f"{n} {table}" for table, n in entry.asked[0].items())
    elif entry.applied and not entry.items and entry.asked:
        shown = "nothing changed (already so)"
    request = f" [request {entry.request_id}]" if entry.request_id else ""
    outcome = "" if entry.applied else f"  ** {entry.outcome}"
    return f"#{entry.seq} {entry.at} {entry.actor} {entry.kind}: {shown}{more}{request}{outcome}"


def cmd_diff(args: argparse.Namespace) -> int:
    """The accesses gained and lost between two moments of the store, each with the change that did it."""
    import time

    from privilog import dsl
    from privilog.engine.ids import EntityId, parse_principal
    from privilog.render.whatif import render_store_diff
    from privilog.store.diff import diff

    principal = parse_principal(args.principal) if args.principal else None
    if principal is not None and not principal.startswith("user:"):
        raise UsageError(f"privilog store diff: --principal: accesses are users', not {principal}'s; give user:NAME")
    entity = EntityId.parse(args.entity) if args.entity else None
    policy = dsl.load_policy(args.policy)

    def keep(access: Any) -> bool:
        if principal is not None and access.principal != principal:
            return False
        return entity is None or access.entity == entity or entity in access.entity.ancestors()

    shown = [time.monotonic(), 0.0]

    def progress(done: int, through: int) -> None:  # a line every few seconds on a long window
        now = time.monotonic()
        if now - shown[0] > 2.0:
            shown[0] = now
            print(f"store diff: {done} changes stepped through, entry {start + through} of {end}", file=sys.stderr)

    with _open(args) as store:
        start, end = _moment(store, "--from", args.since), _moment(store, "--to", args.until)
        head = store.last_seq()
        for seq in (start, end):
            if seq > head:
                raise UsageError(
                    f"privilog store diff: log entry {seq} is not in the store's log (its last entry is {head})"
                )
        if start > end:
            raise UsageError(
                f"privilog store diff: --from (log entry {start}) is after --to (log entry {end}); swap them"
            )
        found = diff(store, policy, start, end, keep=keep, progress=progress, principal=principal)
    if args.json:
        print(json.dumps(found.to_json()))
    else:
        print(render_store_diff(found))
    return EXIT_OK


def _moment(store: Any, option: str, text: str) -> int:
    """The log entry a moment of store diff names (as --as-of reads one); a usage error naming the option."""
    from privilog.store.base import StoreError
    from privilog.store.history import resolve

    try:
        return resolve(store, text)
    except StoreError as error:
        said = str(error).replace("--as-of takes", "a moment is")
        raise UsageError(f"privilog store diff: {option}: {said}") from None


def register(sub: Any) -> None:
    """Add ``store`` and its subcommands to the command line."""
    text = "the durable grant store: init, import a world, export it, read the audit log, diff two moments"
    p = sub.add_parser("store", help=text, description=text + ". " + __doc__.split("\n\n")[2].replace("\n", " "))
    commands = p.add_subparsers(dest="store_command", required=True, parser_class=type(p))

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("--store", help=STORE_HELP)
        q.add_argument("--policy", default="cdap", help="the policy whose actions grants may name (default cdap)")

    q = commands.add_parser("init", help="create a store (or bring its schema up to date)")
    common(q)
    q.add_argument(
        "--admin",
        action="append",
        default=[],
        metavar="PRINCIPAL",
        help="make PRINCIPAL an authorization admin (repeatable); how the first admin is made",
    )
    q.set_defaults(run=cmd_init)

    q = commands.add_parser("import", help="add everything in a world file to the store, in one transaction")
    q.add_argument(
        "world", metavar="WORLD", help="a world file (YAML, JSON) or a folder of tables (CSV, JSON lines, Parquet)"
    )
    common(q)
    q.set_defaults(run=cmd_import)

    q = commands.add_parser("export", help="the store's world, as a world file")
    common(q)
    q.add_argument(
        "--format",
        choices=("yaml", "json", *TABLE_FORMATS),
        default="yaml",
        help="a world file (yaml, the default, or json), or a folder of tables (csv, jsonl, parquet) at --out DIR",
    )
    q.add_argument(
        "--out", metavar="PATH", help="write to PATH (atomically) instead of standard output; a folder for tables"
    )
    q.set_defaults(run=cmd_export)

    q = commands.add_parser("audit", help="the audit log: every change asked of the store, applied or refused")
    common(q)
    q.add_argument("--principal", metavar="P", help="changes made by P or naming P")
    q.add_argument("--entity", metavar="E", help="changes naming the entity E")
    q.add_argument("--since", metavar="TIME", help="changes at or after TIME (ISO 8601, UTC: 2026-11-25T10:00)")
    q.add_argument("--limit", type=int, default=1000, metavar="N", help="the newest N (default 1000)")
    q.add_argument("--json", action="store_true", help="one JSON object per line")
    q.set_defaults(run=cmd_audit)

    q = commands.add_parser(
        "diff",
        help="the accesses gained and lost between two moments, each with the change that did it",
        description="The accesses (principal, operation, entity) gained and lost between two moments of the "
        "store, each with the log entry (seq, time, actor, change) that last flipped it. A moment is a time "
        "(2026-10-01, 2026-10-01T09:30Z), a log entry's number or a revision token; decided under --policy.",
    )
    common(q)
    q.add_argument("--from", dest="since", required=True, metavar="MOMENT", help="the moment compared from")
    q.add_argument("--to", dest="until", default="now", metavar="MOMENT", help="the moment compared to (default now)")
    q.add_argument("--principal", metavar="USER", help="only the accesses of USER")
    q.add_argument("--entity", metavar="E", help="only the accesses on E and inside it")
    q.add_argument("--json", action="store_true", help="print the differences as one JSON object")
    q.set_defaults(run=cmd_diff)
