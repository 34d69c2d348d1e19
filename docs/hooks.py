"""MkDocs hooks (``mkdocs.yml``'s ``hooks``): the reference pages written from the code at build time.

A page holds a marker comment, on a line of its own, where generated text goes, and the hook
replaces it:

* ``<!-- generated: cli -->``: every command and option of ``privilog``, from its argument parser
  (:func:`privilog.cli.commands.build_parser`), so the reference cannot drift from ``--help``;
* ``<!-- generated: http -->``: every route of ``privilog serve``, from its OpenAPI document
  (:func:`privilog.serve.openapi.document`, what ``GET /openapi.json`` serves);
* ``<!-- generated: benchmarks -->``: every results file the benchmarks write
  (``benchmarks/**/results*.json``, ``programs.json``, ...), with its commit, machine and date
  (:mod:`benchmarks.report`).

This file is not a page: ``mkdocs.yml``'s ``exclude_docs`` leaves it out of the site. The same
functions make the pages' text for ``tests/test_docs_site.py``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^<!-- generated: (\w+) -->$", re.M)  # a line of its own: not one quoted in prose


def _cell(text: str) -> str:
    """Text fit for a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ").strip()


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser, str]]:
    """Each subcommand of ``parser``: (name, its parser, its one-line help), in the order they were added."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) in seen:  # an alias
                    continue
                seen.add(id(sub))
                found.append((name, sub, helps.get(name, "")))
    return found


def _options_table(parser: argparse.ArgumentParser) -> list[str]:
    formatter = parser._get_formatter()
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._SubParsersAction, argparse._HelpAction)) or action.help == argparse.SUPPRESS:
            continue
        if action.option_strings:
            metavar = formatter._format_args(action, formatter._get_default_metavar_for_optional(action))
            name = ", ".join(f"`{flag}{' ' + metavar if metavar else ''}`" for flag in action.option_strings)
        else:
            name = f"`{formatter._format_args(action, formatter._get_default_metavar_for_positional(action))}`"
        rows.append(f"| {name} | {_cell(formatter._expand_help(action)) if action.help else ''} |")
    if not rows:
        return []
    return ["| argument | what it does |", "|---|---|", *rows, ""]


def _command(prefix: str, parser: argparse.ArgumentParser, summary: str, depth: int) -> list[str]:
    lines = [f"{'#' * depth} `{prefix}`", ""]
    if summary:
        lines += [summary[0].upper() + summary[1:] + ("" if summary.endswith(".") else "."), ""]
    lines += ["```text", parser.format_usage().strip(), "```", ""]
    if parser.description and parser.description.strip() != summary.strip():
        lines += [parser.description.strip(), ""]
    lines += _options_table(parser)
    for name, sub, text in _subcommands(parser):
        lines += _command(f"{prefix} {name}", sub, text, min(depth + 1, 4))
    return lines


def cli_reference() -> str:
    """Every command of ``privilog``, its usage and each of its arguments, from the argument parser."""
    from privilog.cli.commands import build_parser

    parser = build_parser()
    lines = ["```text", parser.format_usage().strip(), "```", "", *_options_table(parser)]
    for name, sub, text in _subcommands(parser):
        lines += _command(f"privilog {name}", sub, text, 2)
    return "\n".join(lines)


def _schema(schema: dict[str, Any]) -> str:
    return "```json\n" + json.dumps(schema, indent=2) + "\n```"


def http_reference() -> str:
    """Every route of ``privilog serve``: its method, path, parameters, body and answers, from the OpenAPI document."""
    from privilog.serve import cdap, routes
    from privilog.serve.app import VERSION
    from privilog.serve.openapi import document

    doc = document([*routes.ROUTES, *cdap.ROUTES], VERSION)
    lines = [f"OpenAPI {doc['openapi']}, privilog {doc['info']['version']}.", ""]
    for path, methods in doc["paths"].items():
        for method, operation in methods.items():
            lines += [f"## `{method.upper()} {path}`", "", operation.get("summary", "") + ".", ""]
            if operation.get("description"):
                lines += [operation["description"], ""]
            params = operation.get("parameters", [])
            if params:
                lines += ["| parameter | in | required | what it is |", "|---|---|---|---|"]
                lines += [
                    f"| `{p['name']}` | {p['in']} | {'yes' if p.get('required') else 'no'} | "
                    f"{_cell(p.get('description', ''))} |"
                    for p in params
                ]
                lines.append("")
            body = operation.get("requestBody")
            if body:
                required = "required" if body.get("required") else "optional"
                lines += [f"Body ({required}):", "", _schema(body["content"]["application/json"]["schema"]), ""]
            lines += ["| status | meaning |", "|---|---|"]
            lines += [
                f"| {status} | {_cell(answer.get('description', ''))} |"
                for status, answer in operation.get("responses", {}).items()
            ]
            lines.append("")
    return "\n".join(lines)


def benchmarks_reference() -> str:
    if str(ROOT) not in sys.path:  # `mkdocs serve` (its own script) does not put the checkout on the path
        sys.path.insert(0, str(ROOT))
    from benchmarks.report import markdown

    return markdown(ROOT)


GENERATORS: dict[str, Callable[[], str]] = {
    "cli": cli_reference,
    "http": http_reference,
    "benchmarks": benchmarks_reference,
}


def generated(markdown: str) -> str:
    """``markdown`` with each marker replaced by what it names (an unknown marker is an error)."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ValueError(f"unknown generated section {name!r}; known: {', '.join(GENERATORS)}")
        return GENERATORS[name]()

    return MARKER.sub(replace, markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs' hook: a page's Markdown before it is rendered."""
    return generated(markdown) if MARKER.search(markdown) else markdown
