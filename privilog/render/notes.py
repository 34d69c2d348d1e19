"""Notes on what is probably a typo: a principal or an entity the world does not know.

The REPL prints them under its answer; ``privilog check``, ``why``, ``list`` and
``who`` print them on stderr, so that standard output stays what scripts parse.
"""

from __future__ import annotations

import difflib

from privilog.engine.ids import EntityId
from privilog.engine.world import World


def closest(name: str, known: set[str]) -> str:
    """A did-you-mean among ids of the same kind, compared by what follows the kind.

    >>> closest("user:bob", {"user:root", "user:bobby", "group:bob"})
    'did you mean `user:bobby`?'
    """
    kind, _, rest = name.partition(":")
    same = {k.partition(":")[2]: k for k in known if k.partition(":")[0] == kind}
    close = difflib.get_close_matches(rest, sorted(same), n=1, cutoff=0.6)
    return f"did you mean `{same[close[0]]}`?" if close else ""


def unknown_notes(world: World, principal: str | None, entity: EntityId | None) -> list[str]:
    """A note for a principal the world never names, and one for an entity that does not exist
    when the world has one of a close name.

    >>> world = World(entities={EntityId.parse("dataset:ns1.orders")})
    >>> for note in unknown_notes(world, "user:bob", EntityId.parse("dataset:ns1.order")):
    ...     print(note)
    note: user:bob appears nowhere in the world
    note: dataset:ns1.order does not exist in the world; did you mean `dataset:ns1.orders`?
    """
    notes = []
    if principal is not None and principal not in world.principals():
        hint = closest(principal, world.principals())
        notes.append(f"note: {principal} appears nowhere in the world" + (f"; {hint}" if hint else ""))
    if entity is not None and entity not in world.existing():
        hint = closest(str(entity), {str(e) for e in world.existing()})
        if hint:
            notes.append(f"note: {entity} does not exist in the world; {hint}")
    return notes
