"""The REPL's questions, which change nothing: check, why, whynot, list, who, and Datalog queries (``?-``).

Each is a handler of the command table (``privilog.repl.commands``): the session and the line in,
the text to print out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from privilog.dsl.check import ancestor_types
from privilog.engine.decision import (
    Change,
    Decision,
    GrantChange,
    MembershipChange,
    RemoveMemberChange,
    Request,
    gathered,
)
from privilog.engine.ids import EntityId
from privilog.engine.query import Budget, QueryLimit, answer, parse_query
from privilog.engine.who import who
from privilog.engine.world import ALL
from privilog.render.explain import render_decision, render_short, render_visible, render_who
from privilog.render.notes import unknown_notes
from privilog.render.query import action_notes, render_answer
from privilog.repl.command import Line
from privilog.repl.state import ReplError, SessionState

# ---- requests ------------------------------------------------------------------------


def arguments(words: Sequence[str]) -> dict[str, str | list[str]]:
    """A request's arguments from NAME=VALUE words (or ``--arg NAME=VALUE``)."""
    args: list[tuple[str, str]] = []
    pending = list(words)
    while pending:
        word = pending.pop(0)
        if word == "--arg":
            if not pending:
                raise ReplError("--arg takes NAME=VALUE, such as --arg artifact=artifact:ns1.etl")
            word = pending.pop(0)
        name, eq, value = word.partition("=")
        if not eq or not name:
            raise ReplError(f"request arguments are NAME=VALUE, such as owner=kerberosprincipal:x; not `{word}`")
        args.append((name, value))
    return gathered(args)  # a name given again: a list argument's values


def _request(session: SessionState, line: Line) -> Request:
    if len(line.words) < 3:
        raise line.misused()
    principal, operation, entity, *rest = line.words
    return session.asked.request(principal, operation, entity, arguments(rest))


def _notes(session: SessionState, principal: str | None, entity: EntityId | None) -> list[str]:
    """Hints for what is probably a typo: a principal or an entity the world does not know."""
    return [*unknown_notes(session.asked.world, principal, entity), *when(session)]


def when(session: SessionState) -> list[str]:
    """The line that says an answer is about the past (after `as of MOMENT`), else nothing."""
    past = session.past
    if past is None:
        return []
    return [f"(as of log entry {past.seq}" + (f", {past.history.at}" if past.history.at else "") + ")"]


def _decide(session: SessionState, line: Line) -> tuple[Decision, list[str]]:
    request = _request(session, line)
    return session.asked.check(request), _notes(session, request.principal, request.entity)


def check(session: SessionState, line: Line) -> str:
    """``check``: the decision in one line."""
    decision, notes = _decide(session, line)
    return "\n".join([render_short(decision), *notes])


def why(session: SessionState, line: Line) -> str:
    """``why``: the decision's proof tree."""
    decision, notes = _decide(session, line)
    return "\n".join([render_decision(decision), *notes])


def whynot(session: SessionState, line: Line) -> str:
    """``whynot``: what is unmet, and the commands that would allow the request."""
    decision, notes = _decide(session, line)
    if decision.allowed:
        lines = [f"{render_short(decision)}: nothing is missing (`why` shows the proof)"]
    else:
        # The same tree as `why`, cut to the requirements that are unmet.
        lines = [render_decision(replace(decision, outcomes=decision.unmet))]
        lines += _follow(session, decision.fixes)
    return "\n".join([*lines, *notes])


def _follow(session: SessionState, fixes: Sequence[Sequence[Change]]) -> list[str]:
    """How to make each suggested change from this session."""
    if not fixes:
        return []
    admins = sorted(session.world.admins, key=lambda p: (not p.startswith("user:"), p))
    actor = admins[0] if admins else "ADMIN"
    lines = ["To follow a suggestion in this session (as an authorization admin):"]
    for index, fix in enumerate(fixes, start=1):
        lines += [f"  {index}. {step}" for step in _steps(fix, actor)]
    if not admins:
        lines.append("  (the world lists no admins, and only admins may grant: add one under `admins:`)")
    return lines


def _steps(fix: Sequence[Change], actor: str) -> list[str]:
    """The session's commands that make a fix: what it takes away first (a denying rule's
    premises), then the grants, one command a principal and action, then the groups to join."""
    grouped: dict[tuple[str, str], list[str]] = {}
    taken, joined = [], []
    for change in fix:
        if isinstance(change, GrantChange):
            grouped.setdefault((change.principal, change.action), []).append(str(change.entity))
        elif isinstance(change, MembershipChange):
            joined.append(f"member add {change.principal} {change.group} as {actor}")
        elif isinstance(change, RemoveMemberChange):
            taken.append(f"member remove {change.principal} {change.group} as {actor}")
        else:
            taken.append(f"revoke {change.principal} {change.action} {change.entity} as {actor}")
    commands = [f"grant {p} {a} {' '.join(es)} as {actor}" for (p, a), es in grouped.items()]
    return [*taken, *commands, *joined]


# ---- who sees and who may ------------------------------------------------------------


def list_visible(session: SessionState, line: Line) -> str:
    """``list``: what a principal may see, of one type or every listable one, optionally in a parent."""
    words, within = line.words, None
    if "--in" in words:
        at = words.index("--in")
        if at + 1 >= len(words):
            raise line.misused()
        within = words[at + 1]
        words = words[:at] + words[at + 2 :]
    if not 1 <= len(words) <= 2:
        raise line.misused()
    principal = words[0]
    entity_type = words[1] if len(words) == 2 else None
    authorizer = session.asked
    parent = authorizer.entity(within) if within is not None else None
    types = [entity_type] if entity_type else authorizer.listable_types()
    if parent is not None and entity_type is None:
        types = [t for t in types if parent.type in ancestor_types(authorizer.policy, t)]
    shown = [v for t in types for v in authorizer.visible(principal, t, parent)]
    lines = [render_visible(principal, shown)] if shown else []
    if not shown:
        where = f" in {parent}" if parent else ""
        lines.append(f"{principal} sees {'no ' + entity_type if entity_type else 'nothing'}{where}")
    return "\n".join([*lines, *_notes(session, principal, parent)])


def who_may(session: SessionState, line: Line) -> str:
    """``who``: the principals of the world that may do an operation on an entity."""
    if len(line.words) < 2:
        raise line.misused()
    operation, entity, *rest = line.words
    allowed = who(session.asked, operation, entity, arguments(rest))
    notes = _notes(session, None, allowed.request.entity) if allowed.checked else when(session)
    return "\n".join([render_who(allowed), *notes])


# ---- queries -------------------------------------------------------------------------


def query(session: SessionState, line: Line) -> str:
    """``?-``: a Datalog query over the policy's relations, answered as a table."""
    body = parse_query(line.text, session.asked.program.relations)
    try:
        found = answer(session.asked.backend.query, body, Budget.from_env())
    except QueryLimit:
        session.interrupted = True  # the backend may have stopped half way: rebuilt before the next line
        raise
    notes = action_notes(found, [*session.policy.actions, ALL])
    return "\n".join([render_answer(found), *notes, *when(session)])


# ---- completion ----------------------------------------------------------------------


def complete_request(session: SessionState, words: list[str], current: str) -> Sequence[str]:
    """After check, why and whynot: PRINCIPAL OPERATION ENTITY [NAME=VALUE]..."""
    if not words:
        return sorted(session.world.principals())
    return _request_candidates(session, words[1:], current)


def complete_who(session: SessionState, words: list[str], current: str) -> Sequence[str]:
    """After who: OPERATION ENTITY [NAME=VALUE]..."""
    return _request_candidates(session, words, current)


def _request_candidates(session: SessionState, words: list[str], current: str) -> Sequence[str]:
    """Candidates after the principal: OPERATION ENTITY [NAME=VALUE]..."""
    if not words:
        return [o.qualified for o in session.policy.operations]
    op = session.policy.operation(words[0])
    if len(words) == 1:
        names = session.entity_names()
        return [n for n in names if op is None or n.startswith(op.entity_type + ":")]
    if op is None:
        return []
    if "=" in current:
        name = current.split("=", 1)[0]
        param = next((p for p in op.params if p.name == name), None)
        if param is None:
            return []
        values = ["true", "false"] if param.type == "bool" else session.entity_names(param.type)
        return [f"{name}={v}" for v in values]
    return [f"{p.name}=" for p in op.params]


def complete_list(session: SessionState, words: list[str], current: str) -> Sequence[str]:
    """After list: PRINCIPAL [TYPE] [--in PARENT]."""
    if not words:
        return sorted(session.world.principals())
    if words[-1] == "--in":
        return session.entity_names()
    return [*session.authorizer.listable_types(), "--in"] if len(words) == 1 else ["--in"]
