"""``privilog grant``, ``revoke``, ``member add|remove`` and ``entity add|remove``: an administrator's
changes from the command line, to a store (``--store``) or a world file (``--world``).

Each command takes one change on its arguments, in the REPL's words (:mod:`privilog.repl.words`;
``--as ADMIN`` for the REPL's ``as ADMIN``, which may also end the words), or many from ``--file``
(CSV with a header, or JSON lines; ``-`` for standard input; the columns are :data:`COLUMNS`).
Whatever their number, the changes are one batch, all or nothing: on a store, one transaction
(:meth:`privilog.store.base.Store.change_many`: the actor checked as an admin in it, each change
logged as its own audit entry, a refusal logged); on a world file, one append to its log under
its lock (:meth:`engine.world.World.change_many`). ``--dry-run`` makes the changes on a copy,
says what they would change and whose decisions (:func:`engine.whatif.impact`), and writes nothing.

Reading changes (:func:`read_changes`) and making them on a copy (:func:`simulate`) are shared
with ``privilog whatif`` (:mod:`privilog.cli.whatif`).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from privilog.cli.store import STORE_HELP
from privilog.dsl.errors import PrivilogError
from privilog.usage import EXIT_OK, UsageError

AS_VARIABLE = "PRIVILOG_AS"  # the admin a change is made as, when --as is not given
COLUMNS = ("change", "principal", "action", "entity", "member", "group")
NEEDS = {  # a change's kind -> the columns its line fills in
    "grant": ("principal", "action", "entity"),
    "revoke": ("principal", "action", "entity"),
    "member.add": ("member", "group"),
    "member.remove": ("member", "group"),
    "entity.add": ("entity",),
    "entity.delete": ("entity",),
}
FILE_HELP = (
    "read the changes from F (CSV with a header, or JSON lines; - for standard input), one a line, "
    "columns change,principal,action,entity,member,group (a line without a change is this command's)"
)


class ChangeRefused(PrivilogError):
    """A batch of changes that cannot be made: a line that does not read, or a change refused."""


@dataclass(frozen=True)
class Planned:
    """A change asked, and where: ``F:LINE`` of a --file, or None for one on the command line."""

    where: str | None
    asked: Any  # privilog.repl.words.Asked

    def label(self, text: str) -> str:
        return f"{self.where}: {text}" if self.where else text


# ---- reading the changes --------------------------------------------------------------------------


def read_changes(
    args: argparse.Namespace, parser: Any, kind: str, words: Sequence[str], whatif: bool = False
) -> list[Planned]:
    """The changes a command names: its words (``kind`` the command's), or --file's lines; ``parser``
    is an authorizer, to read entities as its policy does (``whatif``: for ``privilog whatif``)."""
    from privilog.repl import words as said

    if getattr(args, "file", None) is not None:
        if words:
            raise UsageError(f"privilog {_name(kind)}: give the change on the command line or in --file, not both")
        return list(_file_changes(args.file, parser, kind))
    command = f"privilog {'whatif ' if whatif else ''}{_name(kind)}"
    example = f"{command} {EXAMPLES[kind]}{'' if whatif else ' --as user:root'} --store authz.db"
    short = (kind in ("grant", "revoke") and len(words) < 3) or (kind.startswith("member.") and len(words) != 2)
    if not words or short:
        raise UsageError(f"{command}: name the change as {USAGE[kind]}, or give --file F (for example: {example})")
    try:
        if kind in ("grant", "revoke"):
            return [Planned(None, said.grants(parser, kind, words[0], words[1], words[2:]))]
        if kind.startswith("member."):
            return [Planned(None, said.membership(kind, words[0], words[1]))]
        return [Planned(None, asked) for asked in said.entities(parser, kind, words)]
    except PrivilogError as error:
        raise ChangeRefused(f"{error} (nothing was applied)") from None


def split_as(words: Sequence[str]) -> tuple[list[str], str | None]:
    """The words before a trailing ``as ADMIN`` (the REPL's spelling of --as), and that admin."""
    words = list(words)
    if len(words) >= 2 and words[-2] == "as":
        return words[:-2], words[-1]
    return words, None


def _name(kind: str) -> str:
    return kind.replace(".", " ").replace("delete", "remove")


EXAMPLES = {
    "grant": "user:bob READ,WRITE dataset:sales.orders",
    "revoke": "user:bob WRITE dataset:sales.orders",
    "member.add": "user:bob group:analysts",
    "member.remove": "user:bob group:analysts",
    "entity.add": "dataset:sales.returns",
    "entity.delete": "dataset:sales.returns",
}
USAGE = {
    "grant": "PRINCIPAL ACTION[,ACTION] ENTITY...",
    "revoke": "PRINCIPAL ACTION[,ACTION] ENTITY...",
    "member.add": "MEMBER GROUP_OR_ROLE",
    "member.remove": "MEMBER GROUP_OR_ROLE",
    "entity.add": "ENTITY...",
    "entity.delete": "ENTITY...",
}


def _file_changes(name: str, parser: Any, default: str) -> Iterator[Planned]:
    from privilog.repl import words as said

    shown = "<stdin>" if name == "-" else name
    text = _read(name)
    rows = list(_json_rows(text, shown) if _is_json(name, text) else _csv_rows(text, shown))
    if not rows:
        raise ChangeRefused(f"{shown}: no changes in it")
    for where, row in rows:
        try:
            kind = said.kind_of(row["change"]) if row.get("change") else default
            extra = [c for c in COLUMNS[1:] if row.get(c) and c not in NEEDS[kind]]
            if extra:
                raise ChangeRefused(f"a `{kind}` line has no `{extra[0]}` (it fills in {', '.join(NEEDS[kind])})")
            missing = [c for c in NEEDS[kind] if not row.get(c)]
            if missing:
                raise ChangeRefused(f"a `{kind}` line needs `{missing[0]}` (it fills in {', '.join(NEEDS[kind])})")
            if kind in ("grant", "revoke"):
                asked = said.grants(parser, kind, row["principal"], row["action"], [row["entity"]])
            elif kind.startswith("member."):
                asked = said.membership(kind, row["member"], row["group"])
            else:
                (asked,) = said.entities(parser, kind, [row["entity"]])
        except PrivilogError as error:
            raise ChangeRefused(f"{where}: {error} (nothing was applied)") from None
        yield Planned(where, asked)


def _read(name: str) -> str:
    from privilog.dsl.files import read_world_text, world_limit

    if name != "-":
        return read_world_text(name, "file of changes")
    cap = world_limit()
    text = sys.stdin.read(cap + 1)
    if len(text) > cap:
        raise ChangeRefused(f"<stdin>: more than {cap} characters of changes (PRIVILOG_MAX_WORLD_BYTES)")
    return text


def _is_json(name: str, text: str) -> bool:
    return name.lower().endswith((".json", ".jsonl", ".ndjson")) or text.lstrip().startswith("{")


def _csv_rows(text: str, shown: str) -> Iterator[tuple[str, dict[str, str]]]:
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader, None)
        if header is None:
            return
        names = [h.strip().lower() for h in header]
        for column in names:
            if column not in COLUMNS:
                raise ChangeRefused(
                    f"{shown}:1: unknown column `{column}`: the columns are {', '.join(COLUMNS)} (nothing was applied)"
                )
        if len(set(names)) != len(names):
            raise ChangeRefused(f"{shown}:1: a column is named twice (nothing was applied)")
        start = reader.line_num + 1
        for record in reader:
            where = f"{shown}:{start}"
            start = reader.line_num + 1
            if not any(field.strip() for field in record):
                continue
            if len(record) != len(names):
                raise ChangeRefused(
                    f"{where}: {len(record)} fields, and the header names {len(names)} (nothing was applied)"
                )
            yield where, {n: v.strip() for n, v in zip(names, record, strict=True)}
    except csv.Error as error:
        raise ChangeRefused(f"{shown}:{reader.line_num}: not CSV: {error} (nothing was applied)") from None


def _json_rows(text: str, shown: str) -> Iterator[tuple[str, dict[str, str]]]:
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{shown}:{number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as error:
            raise ChangeRefused(
                f"{where}: not a JSON object: {error.msg} at column {error.colno} (nothing was applied)"
            ) from None
        if not isinstance(data, dict):
            raise ChangeRefused(f"{where}: a line is a JSON object such as {_EXAMPLE} (nothing was applied)")
        row: dict[str, str] = {}
        for key, value in data.items():
            if key not in COLUMNS:
                raise ChangeRefused(
                    f"{where}: unknown key `{key}`: the keys are {', '.join(COLUMNS)} (nothing was applied)"
                )
            if key == "action" and isinstance(value, list) and all(isinstance(v, str) for v in value):
                value = ",".join(value)
            if not isinstance(value, str):
                raise ChangeRefused(f"{where}: `{key}` is text, not {json.dumps(value)} (nothing was applied)")
            row[key] = value.strip()
        yield where, row


_EXAMPLE = '{"change": "grant", "principal": "user:bob", "action": "READ", "entity": "dataset:ns1.d"}'


# ---- making them on a copy ---------------------------------------------------------------------


def copy_world(world: Any) -> Any:
    """A world of the same facts, bound to no file: what a dry run or a what-if changes."""
    from privilog.engine.world import World

    return World(
        entities=set(world.entities),
        grants=set(world.grants),
        members=set(world.members),
        admins=set(world.admins),
        instance=world.instance,
        config=dict(world.config),
        owners=dict(world.owners),
        facts=dict(world.facts),
        actions=world.actions,
    )


def simulate(before: Any, actor: str, planned: Sequence[Planned], trusted: bool = False) -> tuple[Any, list[Any]]:
    """``before``'s copy with the changes made (all or none), and what each changed; a change
    refused is a :class:`ChangeRefused` naming its line (``trusted``: made whoever asks)."""
    from privilog.engine.world import BatchRefused

    after = copy_world(before)
    try:
        done = after.change_many(actor, [(p.asked.kind, p.asked.items) for p in planned], trusted=trusted)
    except BatchRefused as refused:
        raise located(planned, refused) from None
    return after, done


def located(planned: Sequence[Planned], refused: Any) -> ChangeRefused:
    """The error of a batch a world refused (:class:`engine.world.BatchRefused`), naming the line at
    fault (an actor who is no admin is the whole batch's fault)."""
    from privilog.engine.world import NotAnAdmin

    text = f"{refused.error} (nothing was applied)"
    if isinstance(refused.error, NotAnAdmin) and refused.index == 0:
        return ChangeRefused(text)
    return ChangeRefused(planned[refused.index].label(text))


# ---- the commands -------------------------------------------------------------------------------


def cmd_change(args: argparse.Namespace) -> int:
    from privilog import dsl
    from privilog.engine.authorizer import Authorizer
    from privilog.engine.world import World

    kind = args.kind
    words, said_as = split_as(args.words)
    actor = _actor(args, kind, said_as)
    world_path, url = target(args, kind)
    policy = dsl.load_policy(args.policy)
    planned = read_changes(args, Authorizer(policy, World()), kind, words)
    if url is not None:
        results, where = _on_store(url, policy, actor, planned, args.dry_run)
    else:
        results, where = _on_world(str(world_path), policy, actor, planned, args.dry_run)
    changes, impact = results
    _answer(args, actor, where, planned, changes, impact)
    return EXIT_OK


def target(args: argparse.Namespace, kind: str) -> tuple[str | None, str | None]:
    """The world file or the store a command names (--world, --store, or $PRIVILOG_STORE)."""
    from privilog.cli.options import given_store

    url = given_store(args)
    if url is None and not args.world:
        raise UsageError(
            f"privilog {_name(kind)}: name the world file (--world FILE) or the store "
            "(--store PATH_OR_URL, or set PRIVILOG_STORE)"
        )
    return args.world, url


def _actor(args: argparse.Namespace, kind: str, said_as: str | None) -> str:
    from privilog.repl import words as said

    given = [a for a in (args.actor, said_as) if a]
    if len(given) == 2 and given[0] != given[1]:
        raise UsageError(
            f"privilog {_name(kind)}: the change is made as {given[0]} (--as) or {given[1]} (as), not both"
        )
    actor = given[0] if given else os.environ.get(AS_VARIABLE, "").strip()
    if not actor:
        raise UsageError(
            f"privilog {_name(kind)}: name the authorization admin making the change with --as ADMIN "
            f"(or set {AS_VARIABLE}), such as --as user:root"
        )
    try:
        return said.principal(actor)
    except PrivilogError as error:
        raise UsageError(f"privilog {_name(kind)}: --as: {error}") from None


Done = tuple[list[tuple[Planned, list[Any], Any]], Any]  # (plan, what it changed, its log entry), impact


def _on_store(url: str, policy: Any, actor: str, planned: list[Planned], dry: bool) -> tuple[Done, str]:
    from privilog.store import open_store
    from privilog.store.base import BatchRefused

    with open_store(url, policy.actions, create=False) as store:
        if dry:
            before, _ = store.snapshot()
            return _dry(policy, before, actor, planned), store.url
        try:
            entries = store.change_many(actor, [(p.asked.kind, p.asked.rows()) for p in planned])
        except BatchRefused as refused:
            at = planned[refused.index] if refused.index is not None else None
            text = f"{refused.error} (nothing was applied; the store's audit log records the refusal)"
            raise ChangeRefused(at.label(text) if at else text) from None
    changes = [(p, _changed(p.asked, e.items), e) for p, e in zip(planned, entries, strict=True)]
    return (changes, None), store.url


def _changed(asked: Any, items: Sequence[Any]) -> list[Any]:
    """What a change did, as values, from the items of its log entry (rows of text)."""
    from privilog.engine.ids import EntityId
    from privilog.engine.patterns import parse_pattern
    from privilog.engine.world import Grant

    if asked.kind in ("grant", "revoke"):
        return [Grant(p, a, parse_pattern(e)) for p, a, e in items]
    if asked.kind.startswith("member."):
        return [tuple(pair) for pair in items]
    return [EntityId.parse(e) for e in items]


def _on_world(path: str, policy: Any, actor: str, planned: list[Planned], dry: bool) -> tuple[Done, str]:
    from privilog.api import load_world_for

    if dry:
        return _dry(policy, load_world_for(policy, path), actor, planned), path
    from privilog.engine.world import BatchRefused

    world = load_world_for(policy, path, bind=True)
    try:
        done = world.change_many(actor, [(p.asked.kind, p.asked.items) for p in planned])
    except BatchRefused as refused:
        raise located(planned, refused) from None
    return ([(p, d, None) for p, d in zip(planned, done, strict=True)], None), path


def _dry(policy: Any, before: Any, actor: str, planned: list[Planned]) -> Done:
    from privilog.engine.whatif import impact

    after, done = simulate(before, actor, planned)
    return [(p, d, None) for p, d in zip(planned, done, strict=True)], impact(policy, before, after)


def _answer(
    args: argparse.Namespace,
    actor: str,
    where: str,
    planned: list[Planned],
    changes: list[tuple[Planned, list[Any], Any]],
    impact: Any,
) -> None:
    from privilog.repl import words as said

    dry = args.dry_run
    changed = sum(1 for _, done, _e in changes if done)
    # on a store, the revision the last change produced: a reader handed it is answered at least as fresh
    revision = changes[-1][2].revision if changes and changes[-1][2] is not None else ""
    if args.json:
        out: dict[str, Any] = {
            "target": where,
            "actor": actor,
            "dry_run": dry,
            "changes": [
                {
                    "where": plan.where,
                    "change": plan.asked.kind,
                    "asked": plan.asked.rows(),
                    "changed": type(plan.asked)(plan.asked.kind, tuple(done)).rows(),
                    "answer": said.answer(plan.asked, done, dry),
                }
                | ({"seq": entry.seq} if entry is not None else {})
                for plan, done, entry in changes
            ],
            "counts": {"changes": len(changes), "changed": changed, "unchanged": len(changes) - changed},
        }
        if impact is not None:
            out["impact"] = impact.to_json()
        if revision:
            out["revision"] = revision
        print(json.dumps(out))
        return
    for plan, done, _entry in changes:
        for line in said.answer(plan.asked, done, dry):
            print(plan.label(line))
    if revision:  # as the REPL answers a change on a store: the answer, then the revision it produced
        print(f"revision {revision} (log entry {changes[-1][2].seq})")
    n = len(changes)
    what = f"{n} change{'' if n == 1 else 's'}"
    if dry:
        print(f"dry run: {what} as {actor} on {where}: {changed} would change something; nothing was written")
        from privilog.render.whatif import render_impact

        print("whose decisions would change:")
        print(render_impact(impact))
    else:
        print(f"applied {what} as {actor} to {where}: {changed} changed something, {n - changed} changed nothing")


# ---- the command line ---------------------------------------------------------------------------


def add_target(p: argparse.ArgumentParser, what: str) -> None:
    """--world, --store, --policy and --file: what a change command (or a what-if) reads and changes."""
    p.add_argument("--world", metavar="FILE", help=f"the world file {what} (a YAML or JSON file)")
    p.add_argument("--store", help=f"the store {what}: " + STORE_HELP.removeprefix("a grant store: "))
    p.add_argument("--policy", default="cdap", help="a policy in rules/ (default cdap) or a path")
    p.add_argument("--file", metavar="F", help=FILE_HELP)


def _change_parser(sub: Any, name: str, kind: str, text: str, aliases: Sequence[str] = ()) -> None:
    prog = f"privilog {_name(kind)}"
    usage = (
        f"{prog} {USAGE[kind]} --as ADMIN (--store S | --world FILE) [--dry-run] [--json] [--policy P]\n"
        f"       {prog} --file F --as ADMIN (--store S | --world FILE) [--dry-run] [--json] [--policy P]"
    )
    p = sub.add_parser(name, help=text, description=DESCRIPTION % text, usage=usage, aliases=list(aliases))
    p.add_argument(
        "words",
        nargs="*",
        metavar="WORD",
        help=f"the change, in the REPL's words: {USAGE[kind]} (a trailing `as ADMIN` stands for --as)",
    )
    p.add_argument(
        "--as",
        dest="actor",
        metavar="ADMIN",
        help=f"the authorization admin making the change (default ${AS_VARIABLE})",
    )
    add_target(p, "to change")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="say what would change and whose decisions it would change, and write nothing",
    )
    p.add_argument("--json", action="store_true", help="print the answer as one JSON object")
    p.set_defaults(run=cmd_change, kind=kind)


DESCRIPTION = (
    "%s, as an authorization admin (--as), in a store or a world file. One change on the command line, "
    "or many from --file; all are made in one transaction (a world file: one append to its log, under "
    "its lock), or none is. Exit 0 when made (or, with --dry-run, when they could be), 2 when refused "
    "or on bad input (nothing is made; a store's audit log records a refusal)."
)


def register(sub: Any) -> None:
    """Add ``grant``, ``revoke``, ``member`` and ``entity`` to the command line."""
    _change_parser(sub, "grant", "grant", "grant actions on entities to a principal")
    _change_parser(sub, "revoke", "revoke", "revoke a principal's actions on entities")
    for name, text, kinds in (
        ("member", "put a principal in a group or role, or take it out", ("add", "remove")),
        ("entity", "create or delete entities (a delete takes what is inside; grants are kept)", ("add", "remove")),
    ):
        p = sub.add_parser(name, help=text, description=text)
        commands = p.add_subparsers(dest=f"{name}_command", required=True, parser_class=type(p))
        for verb in kinds:
            kind = f"{name}.{verb}" if name == "member" or verb == "add" else "entity.delete"
            helps = {
                "member.add": "put a principal in a group or role",
                "member.remove": "take a principal out of a group or role",
                "entity.add": "create entities",
                "entity.delete": "delete entities and what is inside them (grants on them are kept)",
            }
            _change_parser(commands, verb, kind, helps[kind], aliases=("delete",) if kind == "entity.delete" else ())
