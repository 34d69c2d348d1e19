"""The words of a change and of its answer, shared by the REPL's ``grant``, ``revoke``, ``member`` and
``entity`` lines and the command line's ``privilog grant``, ``revoke``, ``member``, ``entity`` and
``whatif`` (which speak the same words, with ``--as ADMIN`` for the REPL's ``as ADMIN``).

A change read is an :class:`Asked`: its kind, as the store names it (``grant``, ``revoke``,
``member.add``, ``member.remove``, ``entity.add``, ``entity.delete``), and its items as values
(Grants, (member, group) pairs, EntityIds); :meth:`Asked.rows` are the items as the store takes
them. Entities are read by an authorizer's ``entity`` and ``granted_entity``, so that a change is
checked against the policy as a request is. :func:`answer` says what a change did, as the REPL says it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from privilog.dsl.errors import did_you_mean
from privilog.engine.authorizer import Authorizer
from privilog.engine.ids import EntityId, IdError, parse_principal
from privilog.engine.world import ALL, Grant
from privilog.repl.state import ReplError

# a change's spellings (the REPL's and the command line's words, the store's kinds) -> the store's kind
KINDS: dict[str, str] = {
    "grant": "grant",
    "revoke": "revoke",
    "member.add": "member.add",
    "member add": "member.add",
    "member.remove": "member.remove",
    "member remove": "member.remove",
    "entity.add": "entity.add",
    "entity add": "entity.add",
    "entity.delete": "entity.delete",
    "entity delete": "entity.delete",
    "entity.remove": "entity.delete",
    "entity remove": "entity.delete",
}
CHANGES = ("grant", "revoke", "member.add", "member.remove", "entity.add", "entity.delete")


def kind_of(word: str) -> str:
    """The store's kind a change's name stands for (``member add``, ``member.add``, ``entity remove``, ...)."""
    kind = KINDS.get(" ".join(word.split()).lower())
    if kind is None:
        hint = did_you_mean(word, CHANGES) or f"the changes are {', '.join(CHANGES)} (entity.remove for entity.delete)"
        raise ReplError(f"unknown change `{word}`: {hint}")
    return kind


def principal(text: str) -> str:
    """A principal's id, checked (``user:bob``, ``group:eng``, ``role:ops``)."""
    try:
        return parse_principal(text)
    except IdError as error:
        raise ReplError(str(error)) from None


def actions(known: Sequence[str], word: str) -> list[str]:
    """The actions of ``READ,WRITE`` or ``ALL``, each one the policy knows (``known``)."""
    out: list[str] = []
    for name in filter(None, word.split(",")):
        if name == ALL:
            out.extend(known)
        elif name in known:
            out.append(name)
        else:
            hint = did_you_mean(name, [*known, ALL])
            hint = hint or f"the actions are {', '.join(known)} and ALL"
            raise ReplError(f"unknown action `{name}`: {hint}")
    if not out:
        raise ReplError("name an action, such as READ, or ALL")
    return out


@dataclass(frozen=True)
class Asked:
    """One change asked: its kind (the store's) and its items as values."""

    kind: str
    items: tuple[Any, ...]

    def rows(self) -> list[Any]:
        """The items as the store takes them: grants as [principal, action, entity], pairs as
        [member, group], entities as their text."""
        return [_row(item) for item in self.items]


def _row(item: Any) -> Any:
    if isinstance(item, Grant):
        return [item.principal, item.action, str(item.entity)]
    if isinstance(item, tuple) and not isinstance(item, EntityId):  # an EntityId is a tuple too
        return list(item)
    return str(item)


def grants(authorizer: Authorizer, kind: str, who: str, action_word: str, entity_words: Sequence[str]) -> Asked:
    """``grant`` or ``revoke`` of ``ACTION[,ACTION]`` on entities (or wildcard patterns) to ``who``."""
    holder = principal(who)
    named = actions(authorizer.policy.actions, action_word)
    entities = [authorizer.granted_entity(w) for w in entity_words]
    return Asked(kind, tuple(Grant(holder, a, e) for e in entities for a in named))


def membership(kind: str, member: str, group: str) -> Asked:
    """``member.add`` or ``member.remove`` of ``member`` in ``group`` (a group or a role)."""
    pair = (principal(member), principal(group))
    if pair[0] == pair[1]:
        raise ReplError(f"{pair[0]} cannot be a member of itself")
    return Asked(kind, (pair,))


def entities(authorizer: Authorizer, kind: str, words: Sequence[str]) -> list[Asked]:
    """``entity.add`` or ``entity.delete`` of each entity: one change an entity, as the REPL makes them."""
    return [Asked(kind, (authorizer.entity(w),)) for w in words]


def answer(asked: Asked, changed: Sequence[Any], would: bool = False) -> list[str]:
    """What a change did, a line for each part (``would``: what it would do). ``changed``: what it
    changed (grants, pairs or entities; for ``entity.delete``, every entity deleted)."""
    kind = asked.kind
    if kind in ("grant", "revoke"):
        return grant_answer(kind, list(asked.items), list(changed), would)
    if kind.startswith("member."):
        member, group = asked.items[0]
        if kind == "member.add":
            done = f"{'would add' if would else 'added'} {member} to {group}"
            return [done if changed else f"{member} is already in {group}"]
        done = f"{'would remove' if would else 'removed'} {member} from {group}"
        return [done if changed else f"{member} is not in {group}: nothing to remove"]
    entity = asked.items[0]
    if kind == "entity.add":
        return [f"{'would add' if would else 'added'} {entity}" if changed else f"{entity} already exists"]
    inside = sorted(set(changed) - {entity})
    done = f"{'would delete' if would else 'deleted'} {entity}"
    if inside:
        done += f" and {len(inside)} inside it: {', '.join(map(str, inside))}"
    return [done]


def grant_answer(verb: str, asked: list[Grant], changed: list[Grant], would: bool = False) -> list[str]:
    """What a grant or revoke did: the grants changed, by holder and action, then those already so."""
    lines = []
    done, to = ("granted", "to") if verb == "grant" else ("revoked", "from")
    if would:
        done = "would " + verb
    for (holder, action), names in _by_holder(changed).items():
        lines.append(f"{done} {action} on {', '.join(names)} {to} {holder}")
    unchanged = [g for g in asked if g not in changed]
    for (holder, action), names in _by_holder(unchanged).items():
        if verb == "grant":
            lines.append(f"{holder} already holds {action} on {', '.join(names)}")
        else:
            lines.append(f"{holder} holds no {action} on {', '.join(names)}: nothing to revoke")
    return lines


def _by_holder(grants: Sequence[Grant]) -> dict[tuple[str, str], list[str]]:
    grouped: dict[tuple[str, str], list[str]] = {}
    for grant in sorted(grants):
        grouped.setdefault((grant.principal, grant.action), []).append(str(grant.entity))
    return grouped
