"""``as of MOMENT``: the REPL's questions about the past, on a session over a store.

``as of TIME|ENTRY|REVISION`` makes check, why, whynot, list, who and ``?-`` answer as the store
stood at that moment, under the policy then in force (:func:`privilog.store.history.as_of`), each
answer saying so in its last line; changes are refused meanwhile (the past is read, never
changed). ``as of now`` comes back. A session over a world file has no log to ask.
"""

from __future__ import annotations

from privilog.repl.command import Line
from privilog.repl.state import ReplError, SessionState


def as_of(session: SessionState, line: Line) -> str:
    """``as of MOMENT``, ``as of now``."""
    words = line.words
    if len(words) < 2 or words[0] != "of":
        raise line.misused()
    moment = " ".join(words[1:])
    if session.deployment is None:
        raise ReplError(
            "`as of` asks a store's log, and this session's world is a file: start the session on a store "
            "(privilog repl --store PATH_OR_URL) to ask about the past"
        )
    if moment.strip().lower() == "now":
        session.past = None
        return f"back to now (log entry {session.deployment.seq}): questions answer the present; changes may be made"
    from privilog.store.history import as_of as past_at

    session.past = past_at(session.deployment.store, moment, session.policy)
    return (
        f"{session.past.note()}\n"
        "questions (check, why, whynot, list, who, ?-) answer as of then; changes wait for `as of now`"
    )


def complete_as_of(session: SessionState, words: list[str], current: str) -> list[str]:
    """After as: of; after as of: now."""
    return ["of"] if not words else ["now"] if words == ["of"] else []
