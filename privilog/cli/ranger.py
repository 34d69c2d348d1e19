"""``privilog ranger import`` and ``privilog ranger export``: Apache Ranger's CDAP policies in and out.

The command line only: files named, summaries printed, refusals said one a line (exit 2, nothing
written); the translation is the room ``privilog/ranger/`` (docs/ranger.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from privilog.usage import EXIT_BAD_INPUT, EXIT_OK

IMPORT_DESCRIPTION = (
    "Read a Ranger Admin policies export of a CDAP service (or the plugin's ServicePolicies download) and write "
    "a world file: the base world's entities, grants and members (--world), the roles' memberships (--roles), "
    "and a facts: section holding each enabled access policy as ranger_* rows (docs/ranger.md). A policy privilog "
    "cannot decide as Ranger does (masking, row filters, conditions, validity schedules, zones, resource macros, "
    "{OWNER}, unknown resources or accesses, names privilog's ids refuse) is refused with its id and name: every "
    "refusal is printed, nothing is written, exit 2. A summary goes to standard error (--json: to standard output)."
)
EXPORT_DESCRIPTION = (
    "Write a world's Ranger facts back as a Ranger Admin policies export (each policy rebuilt from its rows, and "
    "checked to import back to exactly them), and its grants as one policy per entity or pattern, labelled "
    "privilog-grant (import --grants-back reads those back as grants). --roles writes the memberships in roles as a "
    "Ranger roles export."
)


def _refused(command: str, lines: list[str]) -> int:
    for line in lines:
        print(f"privilog: ranger {command}: {line}", file=sys.stderr)
    print(f"privilog: ranger {command}: {len(lines)} refused; nothing written", file=sys.stderr)
    return EXIT_BAD_INPUT


def cmd_import(args: argparse.Namespace) -> int:
    from privilog.engine.ids import IdError
    from privilog.engine.world import World
    from privilog.ranger.importing import Refused, import_ranger, members_file, read_json
    from privilog.ranger.translate import RELATIONS
    from privilog.ranger.worldfile import read_world, write_world

    export = read_json(args.export, "Ranger export")
    roles = read_json(args.roles, "Ranger roles export") if args.roles else None
    kept: dict[str, set[tuple[str, ...]]] = {}
    if args.world:
        base, facts = read_world(args.world)
        if any(rows for relation, rows in facts.items() if relation in RELATIONS):
            print(f"privilog: ranger import: {args.world}: its ranger_* facts are replaced by the export's",
                  file=sys.stderr)
        kept = {relation: rows for relation, rows in facts.items() if relation not in RELATIONS}
    else:
        base = World()
    if args.instance is not None:
        try:
            from privilog.engine.ids import EntityId

            EntityId("instance", args.instance)
        except IdError as error:
            print(f"privilog: ranger import: --instance: {error}", file=sys.stderr)
            return EXIT_BAD_INPUT
        if args.world and base.instance != args.instance:
            print(f"privilog: ranger import: --instance {args.instance} but {args.world} is instance "
                  f"`{base.instance}`: give one", file=sys.stderr)
            return EXIT_BAD_INPUT
    members = members_file(read_json(args.members, "members file"), args.members) if args.members else None
    try:
        done = import_ranger(export, args.export, roles, args.roles or "", base, members, args.instance,
                             grants_back=args.grants_back)
    except Refused as error:
        return _refused("import", error.lines)
    done.facts.update(kept)  # the base world's other facts stay
    try:
        write_world(done.world, done.facts, args.output)
    except OSError as error:
        print(f"privilog: ranger import: cannot write {args.output}: {error.strerror or error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    summary = done.summary()
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _say_import(summary, args.output)
    return EXIT_OK


def _say_import(summary: dict[str, Any], output: str) -> None:
    out = sys.stderr
    print(
        f"read {summary['policies']} policies: {summary['imported']} imported as Ranger policies, "
        f"{summary['grant_policies']} read back as grants (--grants-back), {summary['disabled']} disabled "
        f"(not imported), {summary['other_instance']} of another instance (not imported)",
        file=out,
    )
    for name in summary["disabled_policies"]:
        print(f"  disabled: {name}", file=out)
    facts = summary["facts"]
    print(
        f"wrote {output}: {facts['ranger_resource']} resource, {facts['ranger_inside']} inside and "
        f"{facts['ranger_exclude']} exclude patterns, {facts['ranger_item']} items, {summary['users']} users, "
        f"{summary['members_added']} memberships added",
        file=out,
    )
    for warning in summary["warnings"]:
        print(f"warning: {warning}", file=out)


def cmd_export(args: argparse.Namespace) -> int:
    from privilog.dsl.files import write_atomically
    from privilog.ranger.exporting import export_ranger
    from privilog.ranger.importing import Refused
    from privilog.ranger.worldfile import read_world

    world, facts = read_world(args.world)
    try:
        doc, roles, summary = export_ranger(world, facts, args.service)
    except Refused as error:
        return _refused("export", error.lines)
    for path, content, what in ((args.output, doc, "Ranger export"), (args.roles, roles, "Ranger roles export")):
        if path is None:
            continue
        try:
            write_atomically(Path(path), json.dumps(content, indent=2) + "\n", what)
        except OSError as error:
            print(f"privilog: ranger export: cannot write {path}: {error.strerror or error}", file=sys.stderr)
            return EXIT_BAD_INPUT
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(
            f"wrote {args.output}: {summary['policies']} Ranger policies and {summary['grant_policies']} made "
            f"from grants" + (f"; {args.roles}: {summary['roles']} roles" if args.roles else ""),
            file=sys.stderr,
        )
        if summary["memberships_not_exported"]:
            print(
                f"note: {summary['memberships_not_exported']} memberships in groups are not exported (Ranger "
                "takes groups from usersync): give the import a --world or --members that holds them",
                file=sys.stderr,
            )
    return EXIT_OK


def register(sub: Any) -> None:
    """Add ``ranger import`` and ``ranger export`` to the command line."""
    text = "Apache Ranger's CDAP policies: import an export into a world's facts, export them back"
    p = sub.add_parser("ranger", help=text, description=text)
    inner = p.add_subparsers(dest="ranger_command", required=True, parser_class=type(p))
    q = inner.add_parser("import", help="a Ranger policies export to a world file with facts",
                         description=IMPORT_DESCRIPTION)
    q.add_argument("export", metavar="EXPORT.json", help="Ranger Admin's policies export (or ServicePolicies)")
    q.add_argument("--roles", metavar="ROLES.json",
                   help="Ranger Admin's roles export: users, groups and roles in roles")
    q.add_argument("--world", metavar="BASE.yaml", help="the world to start from (entities, grants, members)")
    q.add_argument("--members", metavar="FILE",
                   help="more memberships (YAML or JSON: [member, group] pairs), such as users in groups")
    q.add_argument("--instance", metavar="NAME",
                   help="the CDAP instance's name the policies' instance values are matched against (default: "
                        "the base world's, else cdap)")
    q.add_argument("--grants-back", action="store_true",
                   help="read policies labelled privilog-grant (ranger export made them from a world's grants) back "
                        "as those grants: decided as grants then, not as Ranger decides (a deny does not remove them)")
    q.add_argument("-o", "--output", metavar="OUT.yaml", required=True, help="the world file to write")
    q.add_argument("--json", action="store_true", help="print the summary as JSON on standard output")
    q.set_defaults(run=cmd_import)
    e = inner.add_parser("export", help="a world's Ranger facts and grants to a Ranger policies export",
                         description=EXPORT_DESCRIPTION)
    e.add_argument("world", metavar="WORLD.yaml", help="the world file (as `ranger import` writes it)")
    e.add_argument("--service", metavar="NAME", default="cdap", help="the Ranger service's name (default cdap)")
    e.add_argument("--roles", metavar="ROLES.json", help="also write the memberships in roles as a roles export")
    e.add_argument("-o", "--output", metavar="EXPORT.json", required=True, help="the export file to write")
    e.add_argument("--json", action="store_true", help="print the summary as JSON on standard output")
    e.set_defaults(run=cmd_export)
