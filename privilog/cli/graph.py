"""``privilog graph`` and the pictures of ``privilog why --format``: DOT, SVG or PNG, to stdout or --out.

Registered into the ``privilog`` command line by ``register(sub)``. The drawing is
:mod:`privilog.render.graph`; this module reads the arguments and writes the bytes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from privilog.cli.options import add_common, load_authorizer
from privilog.usage import EXIT_OK, UsageError, require_extra

PICTURE_FORMATS = ("dot", "svg", "png")
OUT_HELP = "write the picture to FILE (default: stdout; a PNG goes to stdout only when it is not a terminal)"


def add_picture_options(p: argparse.ArgumentParser, default: str, choices: tuple[str, ...]) -> None:
    """``--format`` and ``--out``, shared by ``why`` and ``graph``."""
    p.add_argument(
        "--format",
        choices=choices,
        default=default,
        help=f"{'text (the tree), ' if 'text' in choices else ''}dot (Graphviz source), or svg or png "
        f"(drawn by Graphviz's dot program); default {default}",
    )
    p.add_argument("--out", metavar="FILE", help=OUT_HELP)


def require_pictures(command: str, fmt: str) -> None:
    """One line naming the pictures extra when the graphviz package is not installed (every picture
    format, DOT included, is written through it)."""
    require_extra("pictures", f"{command} --format {fmt}")


def write_picture(dot: str, fmt: str, out: str | None, command: str) -> None:
    """Render ``dot`` as ``fmt`` and write it to ``out``, or to stdout."""
    from privilog.render.graph import render

    if out is None and fmt == "png" and sys.stdout.isatty():
        raise UsageError(f"privilog {command}: a PNG is not written to a terminal; give --out FILE.png")
    data = render(dot, fmt)
    if out is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    try:
        Path(out).write_bytes(data)
    except OSError as error:
        raise UsageError(f"privilog {command}: cannot write {out}: {error.strerror or error}") from None


def cmd_graph(args: argparse.Namespace) -> int:
    require_pictures("graph", args.format)
    from privilog.dsl.check import ancestor_types
    from privilog.render.graph import world_dot

    authorizer = load_authorizer(args)
    within = authorizer.entity(args.within) if args.within else None
    visible = []
    if args.principal:
        for entity_type in authorizer.listable_types():
            if within is None or within.type in ancestor_types(authorizer.policy, entity_type):
                visible += authorizer.visible(args.principal, entity_type, within)
    dot = world_dot(authorizer.world, args.principal, within, visible)
    write_picture(dot, args.format, args.out, "graph")
    return EXIT_OK


def register(sub: Any) -> None:
    """Add ``privilog graph`` to the command line."""
    text = "draw the entity hierarchy, the grants a principal holds and what they make visible"
    p = sub.add_parser(
        "graph",
        help=text,
        description=text.capitalize() + ": Graphviz DOT, or SVG or PNG drawn by Graphviz's dot program "
        "(the graphviz package).",
    )
    p.add_argument("--principal", metavar="P", help="only the grants P holds, directly or through its groups")
    p.add_argument("--in", dest="within", metavar="ENTITY", help="only what is inside ENTITY")
    add_common(p)
    add_picture_options(p, "dot", PICTURE_FORMATS)
    p.set_defaults(run=cmd_graph)
