"""A Datalog query's answer as a table, and the note for an action written as a variable.

Backs the REPL's ``?-`` and ``privilog query``.
"""

from __future__ import annotations

from collections.abc import Iterable

from privilog.dsl.limits import ANSWER_ROWS
from privilog.engine.query import Answer

MAX_ROWS_SHOWN = 100


def render_answer(answer: Answer) -> str:
    """Bindings as a table; a query without variables answers yes or no.

    >>> print(render_answer(Answer(("P",), (("namespace:ns1",),))))
    P
    -------------
    namespace:ns1
    (1 row)
    """
    names, rows = answer.variables, answer.rows
    if not names:
        return "yes" if rows else "no"
    if not rows:
        return "no rows"
    shown = rows[:MAX_ROWS_SHOWN]
    widths = [max(len(n), *(len(r[i]) for r in shown)) for i, n in enumerate(names)]
    lines = ["  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in shown]
    count = f"{len(rows)} row" + ("s" if len(rows) != 1 else "")
    if not answer.complete:
        count = f"stopped after {count}"
    if len(rows) > len(shown):
        count += f", the first {len(shown)} shown"
    if not answer.complete:
        count += f"; set {ANSWER_ROWS.variable} for more"
    lines.append(f"({count})")
    return "\n".join(lines)


def action_notes(answer: Answer, actions: Iterable[str]) -> list[str]:
    """A note when a variable is named like an action: `READ` is a variable, `"READ"` the action.

    >>> action_notes(Answer(("P", "READ"), ()), ["READ", "WRITE"])
    ['note: READ is a variable here (upper-case names are); write "READ" for the action']
    """
    named = sorted(set(answer.variables) & set(actions))
    if not named:
        return []
    return [f'note: {", ".join(named)} is a variable here (upper-case names are); write "{named[0]}" for the action']
