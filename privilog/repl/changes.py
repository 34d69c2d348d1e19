"""The REPL's changes to the world, each made as an authorization admin (``... as ADMIN``):
grant, revoke, entity add and delete, member add and remove.

In a session over a store, a change goes to the store (durable, checked, audited) and is
replayed; otherwise the authorizer applies it and the session remembers it is unsaved.
"""

from __future__ import annotations

from collections.abc import Sequence

from privilog.engine.ids import EntityId
from privilog.engine.world import ALL, Grant
from privilog.render.notes import closest
from privilog.repl import words as shared
from privilog.repl.command import Line
from privilog.repl.state import ReplError, SessionState, count


def _actor(session: SessionState, line: Line, verb: str, words: list[str], what: str) -> tuple[str, list[str]]:
    """The admin a change is made as (`... as ADMIN`), and the words before `as`. Refused in the past."""
    if session.past is not None:
        raise ReplError(
            f"the session answers as of log entry {session.past.seq}: the past is read, never changed; "
            "`as of now` comes back to the present to make changes"
        )
    session.last_entry = None
    if "as" not in words:
        admins = ", ".join(sorted(session.world.admins)) or "the world lists none"
        raise ReplError(
            f"{verb} needs `as ADMIN`: only an authorization admin may change {what} (admins: {admins}); "
            f"for example: {line.command.example}"
        )
    at = words.index("as")
    if len(words) != at + 2:
        raise line.misused()
    return shared.principal(words[at + 1]), words[:at]


# ---- grants --------------------------------------------------------------------------


def grant(session: SessionState, line: Line) -> str:
    """``grant``: privileges, on one or more entities."""
    return _revision(session, _change_grants(session, line, "grant"))


def revoke(session: SessionState, line: Line) -> str:
    """``revoke``: privileges, on one or more entities."""
    return _revision(session, _change_grants(session, line, "revoke"))


def _revision(session: SessionState, text: str) -> str:
    """A store's change answers with the revision it produced (what a reader asks to be answered at)."""
    entry = session.last_entry
    if entry is None or not entry.revision:
        return text
    return f"{text}\nrevision {entry.revision} (log entry {entry.seq})"


def _change_grants(session: SessionState, line: Line, verb: str) -> str:
    words = line.words
    actor, before = _actor(session, line, verb, words, "grants")
    if len(before) < 3:
        raise line.misused()
    grants = list(shared.grants(session.authorizer, verb, words[0], words[1], before[2:]).items)
    if session.deployment is not None:
        rows = [[g.principal, g.action, str(g.entity)] for g in grants]
        entry = session.store_change(actor, verb, rows)
        changed = [Grant(p, a, session.authorizer.granted_entity(e)) for p, a, e in entry.items]
    else:
        change = session.authorizer.grant if verb == "grant" else session.authorizer.revoke
        changed = change(actor, grants)
    if changed:
        session.changed()
    return _grant_report(session, verb, grants, changed)


def _grant_report(session: SessionState, verb: str, grants: list[Grant], changed: list[Grant]) -> str:
    lines = shared.grant_answer(verb, grants, changed)
    if verb == "grant":
        exists = session.authorizer.inventory.exists
        for entity in sorted({g.entity for g in changed if not exists(g.entity)}):
            lines.append(f"note: {entity} does not exist yet; the grant applies once it is created")
    return "\n".join(lines)


# ---- entities ------------------------------------------------------------------------


def entity(session: SessionState, line: Line) -> str:
    """``entity add`` and ``entity delete``."""
    words = line.words
    if len(words) < 2 or words[0] not in ("add", "delete"):
        raise line.misused()
    actor, before = _actor(session, line, f"entity {words[0]}", words[1:], "entities")
    if not before:
        raise line.misused()
    entities = [session.authorizer.entity(w) for w in before]
    if words[0] == "add":
        return _revision(session, _add_entities(session, actor, entities))
    return _revision(session, _delete_entities(session, actor, entities))


def _add_entities(session: SessionState, actor: str, entities: list[EntityId]) -> str:
    lines = []
    for entity in entities:
        if session.authorizer.inventory.exists(entity):
            lines.append(f"{entity} already exists")
            continue
        if session.deployment is not None:
            session.store_change(actor, "entity.add", [str(entity)])
        else:
            session.authorizer.add_entity(actor, entity)
        held = sum(1 for g in session.world.grants if g.entity == entity)
        verb = "applies" if held == 1 else "apply"
        lines.append(f"added {entity}" + (f"; {count(held, 'grant')} on it {verb} again" if held else ""))
    session.changed()
    return "\n".join(lines)


def _delete_entities(session: SessionState, actor: str, entities: list[EntityId]) -> str:
    exists = session.authorizer.inventory.exists
    for entity in entities:  # all or nothing: check every one before deleting any
        if not exists(entity):
            hint = closest(str(entity), {str(e) for e in session.world.existing()})
            raise ReplError(f"no entity {entity} in the world" + (f"; {hint}" if hint else ""))
    lines = []
    for entity in entities:
        if session.deployment is not None:
            doomed = {entity, *session.authorizer.inventory.within(entity)}
            session.store_change(actor, "entity.delete", [str(entity)])
        else:
            doomed = session.authorizer.delete_entity(actor, entity)
        kept = sum(1 for g in session.world.grants if g.entity in doomed)
        lines.append(f"deleted {count(len(doomed), 'entity', 'entities')}: {', '.join(map(str, sorted(doomed)))}")
        if kept:
            them = "it" if len(doomed) == 1 else "them"
            lines.append(f"  kept {count(kept, 'grant')} on {them}: grants survive a delete and apply again")
    session.changed()
    return "\n".join(lines)


# ---- memberships ---------------------------------------------------------------------


def member(session: SessionState, line: Line) -> str:
    """``member add`` and ``member remove``: a principal in a group or role."""
    words = line.words
    if len(words) < 2 or words[0] not in ("add", "remove"):
        raise line.misused()
    actor, before = _actor(session, line, f"member {words[0]}", words[1:], "memberships")
    if len(before) != 2:
        raise line.misused()
    (pair,) = shared.membership(f"member.{words[0]}", before[0], before[1]).items
    adding = words[0] == "add"
    if session.deployment is not None:
        changed = bool(session.store_change(actor, f"member.{words[0]}", [list(pair)]).items)
    else:
        change = session.authorizer.add_members if adding else session.authorizer.remove_members
        changed = bool(change(actor, [pair]))
        if changed:
            session.changed()
    if adding:
        return _revision(session, f"added {pair[0]} to {pair[1]}" if changed else f"{pair[0]} is already in {pair[1]}")
    return _revision(
        session, f"removed {pair[0]} from {pair[1]}" if changed else f"{pair[0]} is not in {pair[1]}: nothing to remove"
    )


# ---- completion ----------------------------------------------------------------------


def complete_grant(session: SessionState, words: list[str], current: str) -> Sequence[str]:
    """After grant and revoke: PRINCIPAL ACTION ENTITY... as ADMIN."""
    if not words:
        return sorted(session.world.principals())
    if len(words) == 1:
        return [*session.policy.actions, ALL]
    if words[-1] == "as":
        return sorted(session.world.admins)
    return [*session.entity_names(), "as"] if "as" not in words else []


def complete_entity(session: SessionState, words: list[str], current: str) -> Sequence[str]:
    """After entity: add or delete, the entities (those that exist, to delete), as ADMIN."""
    if not words:
        return ["add", "delete"]
    if words[-1] == "as":
        return sorted(session.world.admins)
    if words[0] == "delete":
        return sorted(str(e) for e in session.world.existing())
    return [*session.entity_names(), *(f"{t.name}:" for t in session.policy.entity_types)]
