"""Every command of the REPL, in one table: its name and other spellings, how it is written,
its help, the handler that runs it and the completer of its next word (as ``dsl/check.py``
lists its passes).

``help`` prints from the table, the session dispatches by it, and Tab completes from it.
The handlers live by subject: ``questions`` (check, why, whynot, list, who, ?-), ``past``
(as of), ``changes`` (grant, revoke, entity, member), ``files`` (load, save, diff) and ``rules``
(rule); ``help``
and ``quit``, about the session itself, are here.
"""

from __future__ import annotations

from collections.abc import Sequence

from privilog.dsl.errors import did_you_mean
from privilog.engine.query import EXAMPLE as QUERY_EXAMPLE
from privilog.repl import changes, files, past, questions, rules
from privilog.repl.command import Command, Line
from privilog.repl.state import ReplError, SessionState


def command_named(word: str) -> Command | None:
    """The command a line's first word names (by its name or another spelling), if any."""
    return COMMANDS.get(ALIASES.get(word, word))


def show_help(session: SessionState, line: Line) -> str:
    """``help``: every command in a line each, or one command with its detail and an example."""
    words = line.words
    if not words:
        width = max(len(c.usage) for c in COMMANDS.values())
        lines = ["Commands (`help COMMAND` shows one, with an example):"]
        lines += [f"  {c.usage:{width}}  {c.summary}" for c in COMMANDS.values()]
        lines.append("Tab completes commands, principals, operations and entity ids. A line ending in `:-` or `,`")
        lines.append("continues until a line ends in `.`. Ctrl-C cancels a running query; Ctrl-D leaves.")
        return "\n".join(lines)
    command = command_named(words[0])
    if command is None:
        hint = did_you_mean(words[0], COMMANDS) or "type `help` for the commands"
        raise ReplError(f"no command `{words[0]}`: {hint}")
    lines = [command.usage, f"  {command.summary}"]
    lines += [f"  {detail}" for detail in command.detail.splitlines()]
    lines.append(f"  example: {command.example}")
    return "\n".join(lines)


def complete_help(session: SessionState, words: list[str], current: str) -> Sequence[str]:
    """After help: a command's name."""
    return list(COMMANDS) if not words else []


def leave(session: SessionState, line: Line) -> str:
    """``quit``: the session is finished, unless the world has unsaved changes and this is the first try."""
    if session.unsaved and not session.warned_unsaved:
        session.warned_unsaved = True
        return "the world has unsaved changes: `save world [PATH]` keeps them; `quit` again leaves without"
    session.finished = True
    return ""


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command(
            "check",
            "check PRINCIPAL OPERATION ENTITY [NAME=VALUE]...",
            "decide a request, in one line",
            "check user:bob dataset.read dataset:sales.orders",
            "Request arguments are NAME=VALUE (or --arg NAME=VALUE), e.g. artifact=artifact:sales.etl-lib.",
            run=questions.check,
            complete=questions.complete_request,
        ),
        Command(
            "why",
            "why PRINCIPAL OPERATION ENTITY [NAME=VALUE]...",
            "the proof tree: each requirement and the grant, membership and descendant that met it",
            "why user:dave namespace.get namespace:marketing",
            "For a denied request, the tree shows what is unmet, the policy's deny rules that hold (each\n"
            "with the facts that make it hold) and the smallest changes that would allow it.",
            run=questions.why,
            complete=questions.complete_request,
        ),
        Command(
            "whynot",
            "whynot PRINCIPAL OPERATION ENTITY [NAME=VALUE]...",
            "what is missing, the smallest sets of grants that would allow it, and the commands to make them",
            "whynot user:bob dataset.read dataset:marketing.campaigns",
            "When a group or role already holds what is needed, it says adding the principal to it is enough;\n"
            "when a rule of the policy denies it, the membership to remove or the grant to revoke it rests on.",
            run=questions.whynot,
            complete=questions.complete_request,
            aliases=("why-not", "why_not"),
        ),
        Command(
            "list",
            "list PRINCIPAL [TYPE] [--in PARENT]",
            "what a principal may see, with the grant that shows each entity",
            "list user:dave dataset --in namespace:marketing",
            run=questions.list_visible,
            complete=questions.complete_list,
        ),
        Command(
            "who",
            "who OPERATION ENTITY [NAME=VALUE]...",
            "which principals of the world may do an operation on an entity, and why",
            "who dataset.read dataset:sales.orders",
            run=questions.who_may,
            complete=questions.complete_who,
        ),
        Command(
            "?-",
            "?- LITERAL, ... .",
            "a Datalog query over the policy's relations: a table of the bindings of its variables",
            QUERY_EXAMPLE,
            "descendant(E, D) holds when D is inside E. Upper-case names are variables, `_` is any;\n"
            'quote an action to make it a constant: grant(P, "READ", E).\n'
            'Literals may be negated (`not grant(P, "ADMIN", E)`) or compare (`X != Y`).',
            run=questions.query,
            aliases=("query",),
            takes_text=True,  # its Datalog is completed by privilog.repl.completion, as a rule's is
        ),
        Command(
            "as",
            "as of TIME|ENTRY|REVISION | as of now",
            "on a store: answer the questions as the store stood at a moment; `as of now` comes back",
            "as of 2026-10-01T09:30Z",
            "A moment is a time (UTC unless it says), a log entry's number (`privilog store audit`) or a\n"
            "revision token. Answers say the moment in their last line; changes wait for `as of now`.",
            run=past.as_of,
            complete=past.complete_as_of,
        ),
        Command(
            "grant",
            "grant PRINCIPAL ACTION[,ACTION] ENTITY... as ADMIN",
            "grant privileges, as an authorization admin of the world (ALL means every action)",
            "grant user:bob READ dataset:marketing.campaigns as user:root",
            "A grant may name an entity that does not exist yet: it applies once the entity is created.",
            run=changes.grant,
            complete=changes.complete_grant,
        ),
        Command(
            "revoke",
            "revoke PRINCIPAL ACTION[,ACTION] ENTITY... as ADMIN",
            "revoke privileges, as an authorization admin of the world",
            "revoke user:bob READ dataset:sales.orders as user:root",
            run=changes.revoke,
            complete=changes.complete_grant,
        ),
        Command(
            "entity",
            "entity add ENTITY... as ADMIN | entity delete ENTITY... as ADMIN",
            "create or delete entities, as an authorization admin; a delete removes what is inside "
            "and keeps every grant",
            "entity delete application:sales.etl as user:root",
            run=changes.entity,
            complete=changes.complete_entity,
        ),
        Command(
            "member",
            "member add PRINCIPAL GROUP_OR_ROLE as ADMIN | member remove PRINCIPAL GROUP_OR_ROLE as ADMIN",
            "put a principal in a group or role, or take it out, as an authorization admin",
            "member add user:bob group:analysts as user:root",
            run=changes.member,
        ),
        Command(
            "load",
            "load policy POLICY | load world WORLD",
            "switch to another policy (a name in rules/ or a path) or world file",
            "load policy cdap-4.2",
            run=files.load,
            complete=files.complete_load,
        ),
        Command(
            "save",
            "save world [PATH]",
            "write the world, with the session's changes, to PATH (default: the file it was loaded from)",
            "save world my-world.yaml",
            "The file is replaced atomically: a crash leaves the old file or the new one, never half.",
            run=files.save,
            complete=files.complete_save,
        ),
        Command(
            "rule",
            "rule [RULE]",
            "add a Datalog rule (or fact) to the policy for this session; without a rule, list those added",
            'rule reader(P, E) :- holds(P, "READ", E, _).',
            "A line ending in `:-` or `,` continues on the next until one ends in `.`.\n"
            "The policy's static checks run on it; `load policy` drops the session's rules.",
            run=rules.rule,
            takes_text=True,
        ),
        Command(
            "diff",
            "diff POLICY [--world]",
            "how the session's policy and POLICY decide differently, with a witness for each operation",
            "diff cdap-4.2",
            "With --world, every decision in the session's world that changes instead.",
            run=files.diff,
            complete=files.complete_diff,
        ),
        Command(
            "help",
            "help [COMMAND]",
            "the commands, or one command with an example",
            "help whynot",
            run=show_help,
            complete=complete_help,
        ),
        Command(
            "quit",
            "quit",
            "leave (Ctrl-D too); warns once if the world has unsaved changes",
            "quit",
            run=leave,
            aliases=("exit",),
            tab_offers_aliases=True,
        ),
    )
}
ALIASES = {alias: c.name for c in COMMANDS.values() for alias in c.aliases}
