"""The REPL's logic: a :class:`Session` that answers one line at a time.

``privilog repl`` is a thin terminal loop (privilog.repl.terminal) around a
Session; everything a line can do is here and is tested through
:meth:`Session.one_shot`, which returns the text to print.

One module, though long: its bulk is the one class whose methods are the
commands, sharing the session's policy, world and authorizer; split into
modules, the commands would pass that state around instead of reading it.

>>> session = Session("cdap", {"entities": ["dataset:ns1.ds"], "admins": ["user:root"],
...                            "grants": [["user:bob", "WRITE", "dataset:ns1.ds"]]})
>>> print(session.one_shot("check user:bob dataset.read dataset:ns1.ds"))
DENY user:bob dataset.read dataset:ns1.ds: unmet: READ
>>> print(session.one_shot("grant user:bob READ dataset:ns1.ds as user:root"))
granted READ on dataset:ns1.ds to user:bob
>>> print(session.one_shot("check user:bob dataset.read dataset:ns1.ds"))
ALLOW user:bob dataset.read dataset:ns1.ds
>>> print(session.one_shot("?- child_of(dataset:ns1.ds, P)."))
P
-------------
namespace:ns1
(1 row)
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from privilog import dsl
from privilog.api import load_world_for
from privilog.dsl.check import ancestor_types, prelude_relations
from privilog.dsl.errors import PolicyError, PolicyErrors, PrivilogError, did_you_mean, relocate_all
from privilog.dsl.files import read_policy_text
from privilog.dsl.ir import Policy
from privilog.engine.authorizer import Authorizer
from privilog.engine.decision import (
    Change,
    Decision,
    GrantChange,
    MembershipChange,
    RemoveMemberChange,
    Request,
    gathered,
)
from privilog.engine.ids import EntityId, IdError, parse_principal
from privilog.engine.query import EXAMPLE as QUERY_EXAMPLE
from privilog.engine.query import Budget, QueryLimit, answer, parse_query, time_limit
from privilog.engine.who import who
from privilog.engine.world import ALL, Grant, World, load_world, save_world
from privilog.engine.world.log import WorldFile
from privilog.render.explain import render_decision, render_short, render_visible, render_who
from privilog.render.notes import closest, unknown_notes
from privilog.render.query import action_notes, render_answer
from privilog.store import open_store
from privilog.store.base import Change as LogEntry
from privilog.store.deployment import Deployment

MAX_RULE_LITERALS = 64  # a session's rule is compiled; a wider join is written as several rules


class ReplError(PrivilogError):
    """A line the session cannot run as written; the message says what to type instead."""


@dataclass(frozen=True)
class Reply:
    """What a line produced: the text to print, and whether it is an error (or a bug)."""

    text: str
    error: bool = False
    internal: bool = False


@dataclass(frozen=True)
class Command:
    """One REPL command: how it is written, what it does, and an example."""

    name: str
    usage: str
    summary: str
    example: str
    detail: str = ""


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command(
            "check",
            "check PRINCIPAL OPERATION ENTITY [NAME=VALUE]...",
            "decide a request, in one line",
            "check user:bob dataset.read dataset:sales.orders",
            "Request arguments are NAME=VALUE (or --arg NAME=VALUE), e.g. artifact=artifact:sales.etl-lib.",
        ),
        Command(
            "why",
            "why PRINCIPAL OPERATION ENTITY [NAME=VALUE]...",
            "the proof tree: each requirement and the grant, membership and descendant that met it",
            "why user:dave namespace.get namespace:marketing",
            "For a denied request, the tree shows what is unmet, the policy's deny rules that hold (each\n"
            "with the facts that make it hold) and the smallest changes that would allow it.",
        ),
        Command(
            "whynot",
            "whynot PRINCIPAL OPERATION ENTITY [NAME=VALUE]...",
            "what is missing, the smallest sets of grants that would allow it, and the commands to make them",
            "whynot user:bob dataset.read dataset:marketing.campaigns",
            "When a group or role already holds what is needed, it says adding the principal to it is enough;\n"
            "when a rule of the policy denies it, the membership to remove or the grant to revoke it rests on.",
        ),
        Command(
            "list",
            "list PRINCIPAL [TYPE] [--in PARENT]",
            "what a principal may see, with the grant that shows each entity",
            "list user:dave dataset --in namespace:marketing",
        ),
        Command(
            "who",
            "who OPERATION ENTITY [NAME=VALUE]...",
            "which principals of the world may do an operation on an entity, and why",
            "who dataset.read dataset:sales.orders",
        ),
        Command(
            "?-",
            "?- LITERAL, ... .",
            "a Datalog query over the policy's relations: a table of the bindings of its variables",
            QUERY_EXAMPLE,
            "descendant(E, D) holds when D is inside E. Upper-case names are variables, `_` is any;\n"
            'quote an action to make it a constant: grant(P, "READ", E).\n'
            'Literals may be negated (`not grant(P, "ADMIN", E)`) or compare (`X != Y`).',
        ),
        Command(
            "grant",
            "grant PRINCIPAL ACTION[,ACTION] ENTITY... as ADMIN",
            "grant privileges, as an authorization admin of the world (ALL means every action)",
            "grant user:bob READ dataset:marketing.campaigns as user:root",
            "A grant may name an entity that does not exist yet: it applies once the entity is created.",
        ),
        Command(
            "revoke",
            "revoke PRINCIPAL ACTION[,ACTION] ENTITY... as ADMIN",
            "revoke privileges, as an authorization admin of the world",
            "revoke user:bob READ dataset:sales.orders as user:root",
        ),
        Command(
            "entity",
            "entity add ENTITY... as ADMIN | entity delete ENTITY... as ADMIN",
            "create or delete entities, as an authorization admin; a delete removes what is inside "
            "and keeps every grant",
            "entity delete application:sales.etl as user:root",
        ),
        Command(
            "member",
            "member add PRINCIPAL GROUP_OR_ROLE as ADMIN | member remove PRINCIPAL GROUP_OR_ROLE as ADMIN",
            "put a principal in a group or role, or take it out, as an authorization admin",
            "member add user:bob group:analysts as user:root",
        ),
        Command(
            "load",
            "load policy POLICY | load world WORLD",
            "switch to another policy (a name in rules/ or a path) or world file",
            "load policy cdap-4.2",
        ),
        Command(
            "save",
            "save world [PATH]",
            "write the world, with the session's changes, to PATH (default: the file it was loaded from)",
            "save world my-world.yaml",
            "The file is replaced atomically: a crash leaves the old file or the new one, never half.",
        ),
        Command(
            "rule",
            "rule [RULE]",
            "add a Datalog rule (or fact) to the policy for this session; without a rule, list those added",
            'rule reader(P, E) :- holds(P, "READ", E, _).',
            "A line ending in `:-` or `,` continues on the next until one ends in `.`.\n"
            "The policy's static checks run on it; `load policy` drops the session's rules.",
        ),
        Command(
            "diff",
            "diff POLICY [--world]",
            "how the session's policy and POLICY decide differently, with a witness for each operation",
            "diff cdap-4.2",
            "With --world, every decision in the session's world that changes instead.",
        ),
        Command("help", "help [COMMAND]", "the commands, or one command with an example", "help whynot"),
        Command("quit", "quit", "leave (Ctrl-D too); warns once if the world has unsaved changes", "quit"),
    )
}
ALIASES = {"exit": "quit", "query": "?-", "why-not": "whynot", "why_not": "whynot"}


# ---- one line ------------------------------------------------------------------------


class Session:
    """A policy, a world and an authorizer over them, changed and questioned one line at a time."""

    def __init__(
        self,
        policy: str = "cdap",
        world: str | Path | Mapping[str, Any] | None = None,
        store: str | None = None,
    ):
        self.policy_name = policy
        self.policy_path = dsl.resolve_policy_path(policy)
        self.policy_text = self._read_policy(self.policy_path)
        self.policy: Policy = dsl.load_policy(str(self.policy_path))
        self.world_path: Path | None = Path(world) if isinstance(world, str | Path) else None
        # with a store, every change goes to it (durable, admin-checked, audited) and the
        # session replays the store's log before each line, so it sees others' changes too
        self.deployment: Deployment | None = None
        if store is not None:
            if world is not None:
                raise ReplError("give a world or a store, not both")
            self.deployment = Deployment(open_store(store, self.policy.actions, create=False), self.policy)
            self.authorizer = self.deployment.authorizer
        else:
            loaded = load_world_for(self.policy, dict(world) if isinstance(world, Mapping) else world)
            loaded.journal = []  # the session's changes, kept until `save world` and re-applied on others'
            self.authorizer = Authorizer(self.policy, loaded)
        self.rules: list[str] = []  # the session's own rules, in the order added
        self.finished = False
        self._unsaved = False
        self._warned_unsaved = False
        self._interrupted = False

    @property
    def world(self) -> World:
        """The session's world, as changed by its grants, revokes and entity commands."""
        return self.authorizer.world

    # ---- running a line ------------------------------------------------------------

    def one_shot(self, line: str) -> str:
        """Run one line (or a multi-line rule or query) and return the text to print."""
        return self.run(line).text

    def run(self, line: str) -> Reply:
        """Run one line; never raises (bad input and bugs become a Reply)."""
        try:
            if self._interrupted:
                self._rebuild()  # an interrupted evaluation may have left the backend half way
                self._interrupted = False
            if self.deployment is not None:
                self.deployment.catch_up()  # what others changed in the store meanwhile
                self.authorizer = self.deployment.authorizer
            notes = self._take_in()
            text = self._dispatch(line)
            return Reply("\n".join([*notes, text]) if notes else text)
        except KeyboardInterrupt:
            self._interrupted = True
            return Reply("cancelled", error=True)
        except PrivilogError as error:
            return Reply(str(error), error=True)
        except Exception as error:  # a bug in privilog: say so, and keep the session
            text = f"internal error: {type(error).__name__}: {error} (please report it)"
            if os.environ.get("PRIVILOG_DEBUG"):
                text += "\n" + traceback.format_exc().rstrip()
            return Reply(text, error=True, internal=True)

    def needs_more(self, text: str) -> bool:
        """Whether ``text`` continues on the next line: a line ending in `:-` or `,` starts a
        statement that goes on until a line ends in `.` (an empty line ends it too)."""
        lines = text.split("\n")
        if not lines[-1].strip():
            return False
        if lines[-1].rstrip().endswith("."):
            return False
        return any(line.rstrip().endswith((":-", ",")) for line in lines)

    def _dispatch(self, line: str) -> str:
        text = line.strip()
        if not text or text.startswith("#"):
            return ""
        if text.startswith("?-"):
            return self._query(text[2:])
        word, *others = text.split(None, 1)
        rest = others[0] if others else ""
        name = ALIASES.get(word, word)
        if name == "rule":
            return self._rule(rest)
        if name == "?-":
            return self._query(rest)
        handler = self._handlers().get(name)
        if handler is None:
            hint = did_you_mean(word, COMMANDS) or "type `help` for the commands"
            raise ReplError(f"unknown command `{word}`: {hint}")
        try:
            words = shlex.split(rest)
        except ValueError as error:
            raise ReplError(f"cannot read the line: {error}") from None
        return handler(words)

    def _handlers(self) -> dict[str, Callable[[list[str]], str]]:
        return {
            "check": self._check,
            "why": self._why,
            "whynot": self._whynot,
            "list": self._list,
            "who": self._who,
            "grant": lambda w: self._change_grants("grant", w),
            "revoke": lambda w: self._change_grants("revoke", w),
            "entity": self._entity,
            "member": self._member,
            "load": self._load,
            "save": self._save,
            "diff": self._diff,
            "help": self._help,
            "quit": self._quit,
        }

    # ---- requests ------------------------------------------------------------------

    def _usage(self, name: str) -> ReplError:
        command = COMMANDS[name]
        return ReplError(f"usage: {command.usage}  (for example: {command.example})")

    def _arguments(self, words: Sequence[str]) -> dict[str, str | list[str]]:
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

    def _request(self, name: str, words: Sequence[str]) -> Request:
        if len(words) < 3:
            raise self._usage(name)
        principal, operation, entity, *rest = words
        return self.authorizer.request(principal, operation, entity, self._arguments(rest))

    def _notes(self, principal: str | None, entity: EntityId | None) -> list[str]:
        """Hints for what is probably a typo: a principal or an entity the world does not know."""
        return unknown_notes(self.world, principal, entity)

    def _decide(self, name: str, words: Sequence[str]) -> tuple[Decision, list[str]]:
        request = self._request(name, words)
        return self.authorizer.check(request), self._notes(request.principal, request.entity)

    def _check(self, words: list[str]) -> str:
        decision, notes = self._decide("check", words)
        return "\n".join([render_short(decision), *notes])

    def _why(self, words: list[str]) -> str:
        decision, notes = self._decide("why", words)
        return "\n".join([render_decision(decision), *notes])

    def _whynot(self, words: list[str]) -> str:
        decision, notes = self._decide("whynot", words)
        if decision.allowed:
            lines = [f"{render_short(decision)}: nothing is missing (`why` shows the proof)"]
        else:
            # The same tree as `why`, cut to the requirements that are unmet.
            lines = [render_decision(replace(decision, outcomes=decision.unmet))]
            lines += self._follow(decision.fixes)
        return "\n".join([*lines, *notes])

    def _follow(self, fixes: Sequence[Sequence[Change]]) -> list[str]:
        """How to make each suggested change from this session."""
        if not fixes:
            return []
        admins = sorted(self.world.admins, key=lambda p: (not p.startswith("user:"), p))
        actor = admins[0] if admins else "ADMIN"
        lines = ["To follow a suggestion in this session (as an authorization admin):"]
        for index, fix in enumerate(fixes, start=1):
            lines += [f"  {index}. {step}" for step in self._steps(fix, actor)]
        if not admins:
            lines.append("  (the world lists no admins, and only admins may grant: add one under `admins:`)")
        return lines

    @staticmethod
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

    def _list(self, words: list[str]) -> str:
        within = None
        if "--in" in words:
            at = words.index("--in")
            if at + 1 >= len(words):
                raise self._usage("list")
            within = words[at + 1]
            words = words[:at] + words[at + 2 :]
        if not 1 <= len(words) <= 2:
            raise self._usage("list")
        principal = words[0]
        entity_type = words[1] if len(words) == 2 else None
        parent = self.authorizer.entity(within) if within is not None else None
        types = [entity_type] if entity_type else self.authorizer.listable_types()
        if parent is not None and entity_type is None:
            types = [t for t in types if parent.type in ancestor_types(self.policy, t)]
        shown = [v for t in types for v in self.authorizer.visible(principal, t, parent)]
        lines = [render_visible(principal, shown)] if shown else []
        if not shown:
            where = f" in {parent}" if parent else ""
            lines.append(f"{principal} sees {'no ' + entity_type if entity_type else 'nothing'}{where}")
        return "\n".join([*lines, *self._notes(principal, parent)])

    def _who(self, words: list[str]) -> str:
        if len(words) < 2:
            raise self._usage("who")
        operation, entity, *rest = words
        allowed = who(self.authorizer, operation, entity, self._arguments(rest))
        notes = self._notes(None, allowed.request.entity) if allowed.checked else []
        return "\n".join([render_who(allowed), *notes])

    # ---- changing the world --------------------------------------------------------

    def _actions(self, word: str) -> list[str]:
        actions: list[str] = []
        for name in filter(None, word.split(",")):
            if name == ALL:
                actions.extend(self.policy.actions)
            elif name in self.policy.actions:
                actions.append(name)
            else:
                hint = did_you_mean(name, [*self.policy.actions, ALL])
                hint = hint or f"the actions are {', '.join(self.policy.actions)} and ALL"
                raise ReplError(f"unknown action `{name}`: {hint}")
        if not actions:
            raise ReplError("name an action, such as READ, or ALL")
        return actions

    def _actor(self, verb: str, words: list[str], what: str = "grants") -> tuple[str, list[str]]:
        """The admin a change is made as (`... as ADMIN`), and the words before `as`."""
        if "as" not in words:
            admins = ", ".join(sorted(self.world.admins)) or "the world lists none"
            raise ReplError(
                f"{verb} needs `as ADMIN`: only an authorization admin may change {what} (admins: {admins}); "
                f"for example: {COMMANDS[verb.split()[0]].example}"
            )
        at = words.index("as")
        if len(words) != at + 2:
            raise self._usage(verb.split()[0])
        return self._principal(words[at + 1]), words[:at]

    def _change_grants(self, verb: str, words: list[str]) -> str:
        actor, before = self._actor(verb, words)
        if len(before) < 3:
            raise self._usage(verb)
        at = len(before)
        principal = self._principal(words[0])
        actions = self._actions(words[1])
        entities = [self.authorizer.granted_entity(w) for w in words[2:at]]
        grants = [Grant(principal, a, e) for e in entities for a in actions]
        if self.deployment is not None:
            rows = [[g.principal, g.action, str(g.entity)] for g in grants]
            entry = self._store_change(actor, verb, rows)
            changed = [Grant(p, a, self.authorizer.granted_entity(e)) for p, a, e in entry.items]
        else:
            change = self.authorizer.grant if verb == "grant" else self.authorizer.revoke
            changed = change(actor, grants)
        if changed:
            self._changed()
        return self._grant_report(verb, grants, changed)

    def _grant_report(self, verb: str, grants: list[Grant], changed: list[Grant]) -> str:
        lines = []
        done, to = ("granted", "to") if verb == "grant" else ("revoked", "from")
        for (principal, action), entities in _by_holder(changed).items():
            lines.append(f"{done} {action} on {', '.join(entities)} {to} {principal}")
        unchanged = [g for g in grants if g not in changed]
        for (principal, action), entities in _by_holder(unchanged).items():
            if verb == "grant":
                lines.append(f"{principal} already holds {action} on {', '.join(entities)}")
            else:
                lines.append(f"{principal} holds no {action} on {', '.join(entities)}: nothing to revoke")
        if verb == "grant":
            exists = self.authorizer.inventory.exists
            for entity in sorted({g.entity for g in changed if not exists(g.entity)}):
                lines.append(f"note: {entity} does not exist yet; the grant applies once it is created")
        return "\n".join(lines)

    def _principal(self, text: str) -> str:
        try:
            return parse_principal(text)
        except IdError as error:
            raise ReplError(str(error)) from None

    def _entity(self, words: list[str]) -> str:
        if len(words) < 2 or words[0] not in ("add", "delete"):
            raise self._usage("entity")
        actor, before = self._actor(f"entity {words[0]}", words[1:], "entities")
        if not before:
            raise self._usage("entity")
        entities = [self.authorizer.entity(w) for w in before]
        if words[0] == "add":
            return self._add_entities(actor, entities)
        return self._delete_entities(actor, entities)

    def _member(self, words: list[str]) -> str:
        if len(words) < 2 or words[0] not in ("add", "remove"):
            raise self._usage("member")
        actor, before = self._actor(f"member {words[0]}", words[1:], "memberships")
        if len(before) != 2:
            raise self._usage("member")
        pair = (self._principal(before[0]), self._principal(before[1]))
        if pair[0] == pair[1]:
            raise ReplError(f"{pair[0]} cannot be a member of itself")
        adding = words[0] == "add"
        if self.deployment is not None:
            changed = bool(self._store_change(actor, f"member.{words[0]}", [list(pair)]).items)
        else:
            change = self.authorizer.add_members if adding else self.authorizer.remove_members
            changed = bool(change(actor, [pair]))
            if changed:
                self._changed()
        if adding:
            return f"added {pair[0]} to {pair[1]}" if changed else f"{pair[0]} is already in {pair[1]}"
        return f"removed {pair[0]} from {pair[1]}" if changed else f"{pair[0]} is not in {pair[1]}: nothing to remove"

    def _add_entities(self, actor: str, entities: list[EntityId]) -> str:
        lines = []
        for entity in entities:
            if self.authorizer.inventory.exists(entity):
                lines.append(f"{entity} already exists")
                continue
            if self.deployment is not None:
                self._store_change(actor, "entity.add", [str(entity)])
            else:
                self.authorizer.add_entity(actor, entity)
            held = sum(1 for g in self.world.grants if g.entity == entity)
            verb = "applies" if held == 1 else "apply"
            lines.append(f"added {entity}" + (f"; {_count(held, 'grant')} on it {verb} again" if held else ""))
        self._changed()
        return "\n".join(lines)

    def _delete_entities(self, actor: str, entities: list[EntityId]) -> str:
        exists = self.authorizer.inventory.exists
        for entity in entities:  # all or nothing: check every one before deleting any
            if not exists(entity):
                hint = closest(str(entity), {str(e) for e in self.world.existing()})
                raise ReplError(f"no entity {entity} in the world" + (f"; {hint}" if hint else ""))
        lines = []
        for entity in entities:
            if self.deployment is not None:
                doomed = {entity, *self.authorizer.inventory.within(entity)}
                self._store_change(actor, "entity.delete", [str(entity)])
            else:
                doomed = self.authorizer.delete_entity(actor, entity)
            kept = sum(1 for g in self.world.grants if g.entity in doomed)
            lines.append(f"deleted {_count(len(doomed), 'entity', 'entities')}: {', '.join(map(str, sorted(doomed)))}")
            if kept:
                them = "it" if len(doomed) == 1 else "them"
                lines.append(f"  kept {_count(kept, 'grant')} on {them}: grants survive a delete and apply again")
        self._changed()
        return "\n".join(lines)

    def _store_change(self, actor: str, kind: str, items: list[Any]) -> LogEntry:
        """A change made in the session's store (durable, audited), then replayed here."""
        assert self.deployment is not None
        entry = self.deployment.change(actor, kind, items)
        self.authorizer = self.deployment.authorizer
        return entry

    def _changed(self) -> None:
        """The authorizer applied the change itself (incrementally); remember it is unsaved.
        A change made in a store is saved already."""
        if self.deployment is None:
            self._unsaved = True
            self._warned_unsaved = False

    # ---- policies and worlds -------------------------------------------------------

    @staticmethod
    def _read_policy(path: Path) -> str:
        return read_policy_text(path)

    def _rebuild(self, policy: Policy | None = None, world: World | None = None, evaluate: Iterable[str] = ()) -> None:
        """A fresh authorizer (and backend) for the session's policy and world, with the
        relations of ``evaluate`` evaluated (a backend may otherwise wait until they are asked
        for); the session's own is replaced only when all that is done. On a store, the store's
        world is read anew; a world given leaves the store."""
        if self.deployment is not None and world is None:
            previous = self.deployment.policy
            self.deployment.reload(policy or self.policy)
            try:
                for relation in evaluate:
                    self.deployment.authorizer.backend.query(relation)
            except BaseException:
                self.deployment.reload(previous)
                raise
            authorizer = self.deployment.authorizer
        else:
            authorizer = Authorizer(policy or self.policy, world if world is not None else self.world)
            for relation in evaluate:
                authorizer.backend.query(relation)
            self.deployment = None
        if authorizer is not self.authorizer:
            self.world.observers.discard(self.authorizer)  # the old one no longer follows the world's file
        self.authorizer = authorizer
        self.policy = authorizer.policy

    def _load(self, words: list[str]) -> str:
        if len(words) != 2 or words[0] not in ("policy", "world"):
            raise self._usage("load")
        return self._load_policy(words[1]) if words[0] == "policy" else self._load_world(words[1])

    def _load_policy(self, name: str) -> str:
        path = dsl.resolve_policy_path(name)
        text = self._read_policy(path)
        policy = dsl.load_policy(str(path))
        unknown = sorted({g.action for g in self.world.grants} - set(policy.actions))
        if unknown:
            raise ReplError(
                f"policy {policy.name} has no action {', '.join(unknown)}, which the world grants; "
                f"load a world for it first (its actions are {', '.join(policy.actions)})"
            )
        self._rebuild(policy)
        dropped = len(self.rules)
        self.policy_name, self.policy_path, self.policy_text, self.rules = name, path, text, []
        title = f" ({policy.title})" if policy.title else ""
        lines = [f"loaded policy {policy.name}{title}: {len(policy.operations)} operations"]
        if dropped:
            lines.append(f"dropped the session's {_count(dropped, 'rule')}")
        return "\n".join(lines)

    def _load_world(self, name: str) -> str:
        path = Path(name).expanduser()
        world = load_world(path, self.policy.actions)
        world.journal = []
        left = f"; the session no longer follows the store {self.deployment.store.url}" if self.deployment else ""
        self._rebuild(world=world)
        self.world_path = path
        self._unsaved = False
        return f"loaded world {path}: {_summary(world)}{left}"

    def _save(self, words: list[str]) -> str:
        if not words or words[0] != "world" or len(words) > 2:
            raise self._usage("save")
        path = Path(words[1]).expanduser() if len(words) == 2 else self.world_path
        if path is None:
            raise ReplError("the world was not loaded from a file: name one, as in `save world world.yaml`")
        following = self.world.following
        notes: list[str] = []
        try:
            if following is not None and self.deployment is None and following.file.path == WorldFile(path).path:
                # its own file: others' changes since it was read are taken in first, never overwritten
                before = (following.taken_in, following.rereads, len(following.dropped))
                self.world.save()
                notes = self._news(before)
            else:
                save_world(self.world, path)
        except OSError as error:
            raise ReplError(f"cannot save the world to {path}: {error.strerror or error}") from None
        self.world_path = path
        self._unsaved = False
        return "\n".join([*notes, f"saved the world to {path}: {_summary(self.world)}"])

    def _take_in(self) -> list[str]:
        """Notes on what others changed in the session's world file since it was read, read in
        (the session's unsaved changes stay on top)."""
        following = self.world.following
        if following is None or self.deployment is not None:
            return []
        before = (following.taken_in, following.rereads, len(following.dropped))
        try:
            self.world.take_in()
        except PrivilogError as error:
            return [f"note: cannot read {self.world_path} again, so the session keeps its world: {error}"]
        return self._news(before)

    def _news(self, before: tuple[int, int, int]) -> list[str]:
        following = self.world.following
        assert following is not None
        taken, rereads, dropped = following.taken_in - before[0], following.rereads - before[1], before[2]
        if not taken and following.rereads == before[1] and len(following.dropped) == dropped:
            return []
        path = self.world_path or following.file.path
        what = "read it again" if rereads else f"read in their {_count(taken, 'change')}"
        kept = len(self.world.journal or [])
        on_top = f" (the session's {_count(kept, 'unsaved change')} kept on top)" if kept else ""
        notes = [f"note: {path} was changed by someone else since this session read it; {what}{on_top}"]
        for change in following.dropped[dropped:]:
            notes.append(
                f"note: dropped this session's unsaved {change.kind} as {change.actor}: "
                f"{change.actor} is no longer an authorization admin"
            )
        return notes

    def _diff(self, words: list[str]) -> str:
        from privilog.engine.compare import Comparison
        from privilog.render.report import render_diff, render_world_diff

        against = [w for w in words if w != "--world"]
        if len(against) != 1 or len(words) - len(against) > 1:
            raise self._usage("diff")
        other = dsl.load_policy(against[0])
        left = self.policy.name + (f"+{len(self.rules)} rules" if self.rules else "")
        right = against[0] if against[0] != left else f"{against[0]} (file)"
        comparison = Comparison(self.policy, other, left, right)
        if "--world" in words:
            load_world_for(other, self.world.to_data())  # the world must make sense to both
            return render_world_diff(left, right, comparison.compare_world(self.world))
        return render_diff(left, right, comparison.compare())

    # ---- rules ---------------------------------------------------------------------

    def _rule(self, text: str) -> str:
        text = text.strip()
        if not text:
            if not self.rules:
                return f"no rules added in this session (policy {self.policy.name} as loaded)"
            return "\n".join(f"{n}. {r}" for n, r in enumerate(self.rules, start=1))
        if not text.endswith("."):
            text += "."
        parsed = dsl.parse_unchecked(text, "<rule>")
        others = parsed.actions or parsed.entity_types or parsed.relations or parsed.operations or parsed.includes
        if not parsed.rules or others:
            raise ReplError("`rule` takes Datalog rules and facts, such as " + COMMANDS["rule"].example)
        base = {r.name for r in self.policy.relations}
        _, derived = prelude_relations(self.policy)
        for rule in parsed.rules:
            if len(rule.body) > MAX_RULE_LITERALS:
                raise ReplError(
                    f"a rule in the session has at most {MAX_RULE_LITERALS} literals, not {len(rule.body)}: "
                    "split it into rules for smaller relations"
                )
            if rule.head.predicate in base:
                raise ReplError(
                    f"`{rule.head.predicate}` is a base relation: its facts come from the world "
                    "(use `grant`, `entity add`, or edit the world file); derive a new relation instead"
                )
            if rule.head.predicate in derived:
                raise ReplError(
                    f"`{rule.head.predicate}` is defined by the prelude (rules/prelude/requirements.policy): "
                    "a rule may not add to it (decisions change only by grants of an admin); "
                    "derive a new relation instead"
                )
        policy = self._policy_with([*self.rules, text])
        heads = sorted({r.head.predicate for r in parsed.rules})
        with time_limit(Budget.from_env()):  # evaluating it may take long: a crafted join
            self._rebuild(policy, evaluate=heads)  # on the limit, the session keeps its authorizer as it was
        self.rules.append(text)
        return f"added to the session's policy (rules added: {len(self.rules)}); defines {', '.join(heads)}"

    def _policy_with(self, rules: list[str]) -> Policy:
        """The loaded policy's text and the session's rules, parsed and checked as one policy;
        errors in the rules point into the rules, not past the end of the policy file."""
        base = self.policy_text if self.policy_text.endswith("\n") else self.policy_text + "\n"
        offset = base.count("\n")
        added = "\n".join(rules) + "\n"
        try:
            return dsl.parse_policy(base + added, str(self.policy_path))
        except (PolicyError, PolicyErrors) as error:
            raise relocate_all(error, offset, added, "<session rules>") from None

    # ---- queries -------------------------------------------------------------------

    def _query(self, text: str) -> str:
        body = parse_query(text, self.authorizer.program.relations)
        try:
            found = answer(self.authorizer.backend.query, body, Budget.from_env())
        except QueryLimit:
            self._interrupted = True  # the backend may have stopped half way: rebuilt before the next line
            raise
        return "\n".join([render_answer(found), *action_notes(found, [*self.policy.actions, ALL])])

    # ---- help, quit ----------------------------------------------------------------

    def _help(self, words: list[str]) -> str:
        if not words:
            width = max(len(c.usage) for c in COMMANDS.values())
            lines = ["Commands (`help COMMAND` shows one, with an example):"]
            lines += [f"  {c.usage:{width}}  {c.summary}" for c in COMMANDS.values()]
            lines.append("Tab completes commands, principals, operations and entity ids. A line ending in `:-` or `,`")
            lines.append("continues until a line ends in `.`. Ctrl-C cancels a running query; Ctrl-D leaves.")
            return "\n".join(lines)
        name = ALIASES.get(words[0], words[0])
        command = COMMANDS.get(name)
        if command is None:
            hint = did_you_mean(words[0], COMMANDS) or "type `help` for the commands"
            raise ReplError(f"no command `{words[0]}`: {hint}")
        lines = [command.usage, f"  {command.summary}"]
        lines += [f"  {line}" for line in command.detail.splitlines()]
        lines.append(f"  example: {command.example}")
        return "\n".join(lines)

    def _quit(self, words: list[str]) -> str:
        if self._unsaved and not self._warned_unsaved:
            self._warned_unsaved = True
            return "the world has unsaved changes: `save world [PATH]` keeps them; `quit` again leaves without"
        self.finished = True
        return ""

    # ---- completion ----------------------------------------------------------------

    def fragment(self, text: str) -> str:
        """The end of ``text`` that a completion replaces: the word being typed, or in Datalog
        the name or constant after the last `(`, `,` or space."""
        if _is_datalog(text):
            match = _DATALOG_WORD.search(text)
            return match.group(0) if match else ""
        return "" if not text or text[-1].isspace() else text.split()[-1]

    def completions(self, text: str) -> list[str]:
        """What the word being typed at the end of ``text`` may become (for Tab)."""
        current = self.fragment(text)
        if _is_datalog(text):
            return self._datalog_completions(text[: len(text) - len(current)], current)
        words = text[: len(text) - len(current)].split()
        if not words:
            pool: Sequence[str] = [*COMMANDS, "exit"]
        else:
            pool = self._word_candidates(ALIASES.get(words[0], words[0]), words[1:], current)
        return sorted({c for c in pool if c.startswith(current)})

    def _word_candidates(self, command: str, words: list[str], current: str) -> Sequence[str]:
        at = len(words)
        principals = sorted(self.world.principals())
        operations = [o.qualified for o in self.policy.operations]
        if command in ("check", "why", "whynot"):
            if at == 0:
                return principals
            return self._request_candidates(words[1:], current, operations)
        if command == "who":
            return self._request_candidates(words, current, operations)
        if command == "list":
            if at == 0:
                return principals
            if words[-1] == "--in":
                return self._entity_names()
            return [*self.authorizer.listable_types(), "--in"] if at == 1 else ["--in"]
        if command in ("grant", "revoke"):
            return self._grant_candidates(words, principals)
        if command == "entity":
            if at == 0:
                return ["add", "delete"]
            if words[-1] == "as":
                return sorted(self.world.admins)
            if words[0] == "delete":
                return sorted(str(e) for e in self.world.existing())
            return [*self._entity_names(), *(f"{t.name}:" for t in self.policy.entity_types)]
        if command == "help":
            return list(COMMANDS) if not words else []
        return self._file_candidates(command, words, current)

    def _request_candidates(self, words: list[str], current: str, operations: list[str]) -> Sequence[str]:
        """Candidates after the principal: OPERATION ENTITY [NAME=VALUE]..."""
        if not words:
            return operations
        op = self.policy.operation(words[0])
        if len(words) == 1:
            names = self._entity_names()
            return [n for n in names if op is None or n.startswith(op.entity_type + ":")]
        if op is None:
            return []
        if "=" in current:
            name = current.split("=", 1)[0]
            param = next((p for p in op.params if p.name == name), None)
            if param is None:
                return []
            values = ["true", "false"] if param.type == "bool" else self._entity_names(param.type)
            return [f"{name}={v}" for v in values]
        return [f"{p.name}=" for p in op.params]

    def _grant_candidates(self, words: list[str], principals: list[str]) -> Sequence[str]:
        if not words:
            return principals
        if len(words) == 1:
            return [*self.policy.actions, ALL]
        if words[-1] == "as":
            return sorted(self.world.admins)
        return [*self._entity_names(), "as"] if "as" not in words else []

    def _file_candidates(self, command: str, words: list[str], current: str) -> Sequence[str]:
        """Policies and worlds: the shipped policies by name, and paths."""
        shipped = sorted(p.stem for p in dsl.rules_dir().glob("*.policy"))
        if command == "diff":
            return [*shipped, *_paths(current)] if not words else ["--world"]
        if command == "load":
            if not words:
                return ["policy", "world"]
            if len(words) == 1:
                return [*shipped, *_paths(current)] if words[0] == "policy" else _paths(current)
        if command == "save":
            if not words:
                return ["world"]
            if len(words) == 1:
                return _paths(current)
        return []

    def _datalog_completions(self, before: str, current: str) -> list[str]:
        if before.count("(") > before.count(")"):
            pool = [*self._entity_names(), *sorted(self.world.principals())]
            pool += [f'"{a}"' for a in self.policy.actions]
        else:
            pool = sorted(self.authorizer.program.relations)
        return sorted({c for c in pool if c.startswith(current)})

    def _entity_names(self, entity_type: str | None = None) -> list[str]:
        """Every entity the world knows: those that exist and those that are granted."""
        known = self.world.existing() | {g.entity for g in self.world.grants}
        return sorted(str(e) for e in known if entity_type is None or e.type == entity_type)


# ---- rendering -------------------------------------------------------------------------


def _by_holder(grants: Sequence[Grant]) -> dict[tuple[str, str], list[str]]:
    grouped: dict[tuple[str, str], list[str]] = {}
    for grant in sorted(grants):
        grouped.setdefault((grant.principal, grant.action), []).append(str(grant.entity))
    return grouped


def _count(number: int, word: str, plural: str = "") -> str:
    """``1 grant``, ``2 grants``."""
    return f"{number} {word if number == 1 else plural or word + 's'}"


def _summary(world: World) -> str:
    admins = ", ".join(sorted(world.admins)) or "none"
    return (
        f"{_count(len(world.entities), 'entity', 'entities')}, {_count(len(world.grants), 'grant')}, "
        f"{_count(len(world.members), 'membership')}, admins: {admins}"
    )


_DATALOG_WORD = re.compile(r"[A-Za-z0-9_:.@\-\"]*$")


def _is_datalog(text: str) -> bool:
    return text.lstrip().startswith(("?-", "rule ", "rule\n"))


def _paths(prefix: str) -> list[str]:
    """Files and folders that complete ``prefix``."""
    found = sorted(glob.glob(os.path.expanduser(prefix) + "*"))[:50]
    return [p + "/" if os.path.isdir(p) else p for p in found]
