"""The ``privilog`` command line (a stable contract: scripts depend on its options, output and exit codes).

Exit codes: ``check`` and ``why`` exit 0 when allowed and 1 when denied;
``test`` exits 1 when a case fails (2 when one could not run); every command exits 2 on bad input with a
message on stderr and no traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from privilog.cli.options import (
    WORLD_HELP,
    add_arg,
    add_common,
    given_store,
    load_authorizer,
    moment_json,
    request_args,
)
from privilog.cli.store import STORE_HELP
from privilog.usage import EXIT_BAD_INPUT, EXIT_DENY, EXIT_INTERNAL, EXIT_OK, CommandParser, UsageError


def _print_json(value: Any) -> None:
    print(json.dumps(value, sort_keys=False))


def cmd_check(args: argparse.Namespace) -> int:
    from privilog.render.explain import render_decision, render_short

    picture = getattr(args, "format", "text") != "text"
    if picture:
        from privilog.cli.graph import require_pictures

        if args.json:
            raise UsageError("privilog why: give --json or --format, not both")
        require_pictures("why", args.format)  # before any work: the one line naming the extra
    authorizer = load_authorizer(args)
    request = authorizer.request(args.principal, args.operation, args.entity, request_args(args.arg))
    decision = authorizer.check(request)
    if picture:
        from privilog.cli.graph import write_picture
        from privilog.render.graph import decision_dot

        write_picture(decision_dot(decision), args.format, args.out, "why")
    elif args.json:
        _print_json(decision.to_json() | moment_json(args, revision=True))
    elif args.command == "why" or args.explain:
        print(render_decision(decision))
        from privilog.ranger.explain import ranger_reasons  # under ranger-cdap: the Ranger policy that denied it

        for line in ranger_reasons(authorizer, decision):
            print(line)
    else:
        print(render_short(decision))
    _notes(authorizer, request.principal, request.entity)
    return EXIT_OK if decision.allowed else EXIT_DENY


def _notes(authorizer: Any, principal: str, entity: Any) -> None:
    """The REPL's notes on a principal or an entity the world does not know, on stderr."""
    from privilog.render.notes import unknown_notes

    for note in unknown_notes(authorizer.world, principal, entity):
        print(note, file=sys.stderr)


def cmd_list(args: argparse.Namespace) -> int:
    from privilog.render.explain import render_visible

    authorizer = load_authorizer(args)
    types = [args.type] if args.type else authorizer.listable_types()
    result = {t: authorizer.visible(args.principal, t, args.within) for t in types if _fits(authorizer, t, args.within)}
    _notes(authorizer, args.principal, authorizer.entity(args.within) if args.within else None)
    if args.json:
        _print_json(
            {
                "principal": args.principal,
                "in": args.within,
                "visible": [v.to_json() for shown in result.values() for v in shown],
            }
            | moment_json(args)
        )
        return EXIT_OK
    shown_any = False
    for shown in result.values():
        if shown:
            shown_any = True
            print(render_visible(args.principal, shown))
    if not shown_any:
        where = f" in {args.within}" if args.within else ""
        what = f"no {args.type} " if args.type else "nothing "
        print(f"{args.principal} sees {what}{where}".rstrip())
    return EXIT_OK


def _fits(authorizer: Any, entity_type: str, within: str | None) -> bool:
    if within is None:
        return True
    from privilog.dsl.check import ancestor_types

    parent = authorizer.entity(within)
    return parent.type in ancestor_types(authorizer.policy, entity_type)


def cmd_fmt(args: argparse.Namespace) -> int:
    from privilog import dsl

    status = EXIT_OK
    from privilog.dsl.files import read_policy_text, write_atomically

    for name in args.files:
        path = dsl.resolve_policy_path(name)
        if args.write and not (Path(name).is_file() and path == Path(name)):
            # only a file the user named: never the shipped policies inside the package
            raise UsageError(
                f"privilog fmt --write: `{name}` is not a path but the policy {path}; "
                f"give the path of the file to rewrite (such as ./{path.name})"
            )
        text = read_policy_text(path)
        try:
            formatted = dsl.format_text(text, str(path))
        except (dsl.PolicyError, dsl.PolicyErrors):
            if not dsl.starts_like_a_policy(text):
                raise dsl.not_a_policy(path) from None
            raise
        if args.check:
            if formatted != text:
                print(f"{path}: not in canonical form (run `privilog fmt --write {name}`)")
                status = EXIT_DENY
        elif args.diff:
            if formatted != text:
                sys.stdout.writelines(_unified(text, formatted, str(path)))
                status = EXIT_DENY
        elif args.write:
            if formatted != text:
                write_atomically(path, formatted, "policy", read=text)
                print(f"formatted {path}")
        else:
            sys.stdout.write(formatted)
    return status


def _unified(text: str, formatted: str, path: str) -> list[str]:
    """What `fmt --write` would change, as a unified diff (`patch -p0` applies it)."""
    import difflib

    lines = difflib.unified_diff(
        text.splitlines(keepends=True), formatted.splitlines(keepends=True), path, path + " (formatted)"
    )
    return [line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines]


def cmd_diff(args: argparse.Namespace) -> int:
    from privilog import dsl
    from privilog.api import load_world_for
    from privilog.engine.compare import Comparison
    from privilog.render.report import render_diff, render_world_diff, world_diff_json

    left, right = dsl.load_policy(args.left), dsl.load_policy(args.right)
    comparison = Comparison(left, right, args.left, args.right)
    url = given_store(args, environment=False)  # a plain `diff A B` compares the policies, whatever the environment
    if args.world or url:
        if url:
            from privilog.store import open_store

            with open_store(url, left.actions, create=False) as store:
                world = store.snapshot()[0]
        else:
            world = load_world_for(left, args.world)
        load_world_for(right, world.to_data())  # the world must make sense to both policies
        from privilog.cli.reading import read_by

        left_world, right_world = read_by(left, args.left, world), read_by(right, args.right, world)
        changed = comparison.compare_world(left_world, right_world)
        if args.json:
            _print_json(world_diff_json(args.left, args.right, changed))
        else:
            print(render_world_diff(args.left, args.right, changed))
        return EXIT_DENY if changed else EXIT_OK
    diffs = comparison.compare(args.witnesses)
    if args.json:
        _print_json(
            {
                "left": args.left,
                "right": args.right,
                "operations": [d.to_json() for d in diffs if d.differs],
            }
        )
    else:
        print(render_diff(args.left, args.right, diffs))
    return EXIT_DENY if any(d.differs for d in diffs) else EXIT_OK


def cmd_ops(args: argparse.Namespace) -> int:
    from privilog import dsl
    from privilog.dsl.format import format_requirements

    policy = dsl.load_policy(args.policy)
    if args.json:
        _print_json({"policy": policy.name, "operations": [_operation_json(op) for op in policy.operations]})
        return EXIT_OK
    for op in policy.operations:
        params = " ".join(f"${p.name}:[{p.type}]" if p.many else f"${p.name}:{p.type}" for p in op.params)
        reqs = ", ".join(format_requirements(op.requirements)) or "nothing"
        print(f"{op.qualified:36} {op.verb.value} {reqs}" + (f"   [{params}]" if params else ""))
    return EXIT_OK


def _operation_json(op: Any) -> dict[str, Any]:
    """One operation as `ops --json` prints it: its name, verb, written requirements and arguments."""
    from privilog.dsl.format import format_requirements

    return {
        "operation": op.qualified,
        "entity_type": op.entity_type,
        "verb": op.verb.value,
        "requirements": format_requirements(op.requirements),
        "args": [{"name": p.name, "type": p.type, "in": p.within or None, "list": p.many} for p in op.params],
    }


def cmd_repl(args: argparse.Namespace) -> int:
    """Run ``privilog repl``: a session on the terminal, or over piped lines."""
    from privilog.repl.session import Session
    from privilog.repl.terminal import run

    return run(Session(args.policy, args.world, store=given_store(args)))


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="privilog",
        description="CDAP authorization policies as Datalog: check, list, explain and test them.",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show program's version number and exit")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)

    for name, text in (
        ("check", "decide a request: exit 0 allowed, 1 denied"),
        ("why", "explain a decision: the proof, or what is unmet and what would allow it"),
    ):
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument("principal", help="who acts, e.g. user:alice")
        p.add_argument("operation", help="TYPE.OPERATION, e.g. namespace.create (see `privilog ops`)")
        p.add_argument("entity", help="the entity, e.g. namespace:ns1")
        add_arg(p)
        add_common(p)
        p.add_argument("--json", action="store_true", help="print the decision as one JSON object")
        if name == "check":
            p.add_argument("--explain", action="store_true", help="print the proof tree, as `why` does")
        else:
            from privilog.cli.graph import PICTURE_FORMATS, add_picture_options

            add_picture_options(p, "text", ("text", *PICTURE_FORMATS))
        p.set_defaults(run=cmd_check)

    p = sub.add_parser("list", help="what a principal may see", description="what a principal may see")
    p.add_argument("principal", help="who looks, e.g. user:alice")
    p.add_argument("type", nargs="?", help="an entity type; default: every listable type")
    p.add_argument("--in", dest="within", metavar="PARENT", help="only entities inside PARENT")
    add_common(p)
    p.add_argument("--json", action="store_true", help="print what is visible as one JSON object")
    p.set_defaults(run=cmd_list)

    from privilog.cli import test  # `privilog test` lives in its own module, as prove, store and serve do

    test.register(sub)

    p = sub.add_parser("fmt", help="print policies in canonical form", description="print policies in canonical form")
    p.add_argument("files", nargs="+", metavar="POLICY", help="a policy file (or a policy in rules/ to print)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if a file is not in canonical form")
    mode.add_argument("--write", action="store_true", help="rewrite files in place")
    mode.add_argument(
        "--diff", action="store_true", help="print what --write would change as a unified diff; exit 1 if any"
    )
    p.set_defaults(run=cmd_fmt)

    p = sub.add_parser(
        "diff",
        help="what changes between two policies, with a checked witness for each difference",
        description="Compare two policies: for each operation, the requirements side by side where they differ "
        "and a witness (a world and a request one allows and the other denies), or with --world every "
        "decision in that world that changes. Exit 0 when they agree, 1 when they differ.",
    )
    p.add_argument("left", metavar="POLICY_A", help="a policy in rules/ or a path: the one compared from")
    p.add_argument("right", metavar="POLICY_B", help="a policy in rules/ or a path: the one compared to")
    p.add_argument("--world", help="compare every decision in this world instead")
    p.add_argument("--store", help="compare every decision in this store's world instead")
    p.add_argument("--witnesses", type=int, default=1, metavar="N", help="witnesses per direction (default 1)")
    p.add_argument("--json", action="store_true", help="print the differences as one JSON object")
    p.set_defaults(run=cmd_diff)

    p = sub.add_parser("ops", help="list a policy's operations", description="list a policy's operations")
    add_common(p, world=False)
    p.add_argument("--json", action="store_true", help="print the operations as one JSON object")
    p.set_defaults(run=cmd_ops)

    # Commands that live in their own modules register themselves here; each module's
    # `register(sub)` adds its parsers with `set_defaults(run=...)`.
    from privilog.cli import ask, changes, decide, prove, unused, whatif

    changes.register(sub)  # grant, revoke, member, entity
    whatif.register(sub)
    ask.register(sub)
    decide.register(sub)
    prove.register(sub)
    unused.register(sub)
    from privilog.cli import report

    report.register(sub)
    text = "an interactive session: check, why, whynot, list, who, Datalog queries, grants, rules"
    p = sub.add_parser("repl", help=text, description=text + " (type `help` inside)")
    p.add_argument("--policy", default="cdap", help="a policy in rules/ (default cdap) or a path")
    p.add_argument("--world", help=WORLD_HELP)
    p.add_argument("--store", help=STORE_HELP + "; grants and entity changes are made there, durably")
    p.set_defaults(run=cmd_repl)
    from privilog.cli import completion, graph, serve, store

    store.register(sub)
    completion.register(sub)
    serve.register(sub)
    graph.register(sub)
    from privilog.cli import verifylog

    verifylog.register(sub)
    from privilog.cli import ranger

    ranger.register(sub)  # ranger import, ranger export
    from privilog.cli.reading import read_by
    from privilog.pipeline import commands as pipeline  # pyspark is imported only when a pipeline command runs

    pipeline.register(sub, read_by)  # --world: each policy reads an imported Ranger world as diff does
    return parser


class _Version(argparse.Action):
    """``--version``: the version is looked up (importlib.metadata, slow to import) only when asked for."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(f"privilog {_version()}")
        parser.exit()


def _version() -> str:
    """privilog's version, as installed (pyproject.toml's)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("privilog")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def _signed(message: str) -> str:
    """An error as the command line prints it: starting `privilog:`, so that it is told apart from
    what other programs in a pipeline print (a located one keeps its place right after).

    >>> _signed("privilog check: the following arguments are required: entity")
    'privilog: check: the following arguments are required: entity'
    >>> _signed("privilog store audit: --since takes an ISO 8601 time")
    'privilog: store audit: --since takes an ISO 8601 time'
    >>> _signed("w.yaml:3:18: unknown action `ADMN`")
    'privilog: w.yaml:3:18: unknown action `ADMN`'
    """
    if message.startswith("privilog: "):
        return message
    command = re.match(r"privilog((?: [a-z][a-z-]*)+): ", message)  # argparse's `privilog store audit: ...`
    if command:
        return f"privilog:{command.group(1)}: {message[command.end() :]}"
    return f"privilog: {message}"


def main(argv: Sequence[str] | None = None) -> int:
    from privilog.cli import completion
    from privilog.dsl.errors import PrivilogError

    try:
        parser = build_parser()
        completion.complete(parser)  # answers the shell's tab and exits, when the shell is asking
        args = parser.parse_args(argv)
        return int(args.run(args))
    except (UsageError, PrivilogError) as error:
        print(_signed(str(error)), file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("privilog: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as error:  # a bug in privilog, not bad input: never an allow, never a bare traceback
        if os.environ.get("PRIVILOG_DEBUG"):
            raise
        print(
            f"privilog: internal error ({type(error).__name__}: {error}); "
            "rerun with PRIVILOG_DEBUG=1 for the traceback and report it",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
