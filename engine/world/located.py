"""The located reader: YAML or JSON text read with a ``file:line:col`` on every value, for messages.

It is slow, and is used when the fast readers (:mod:`engine.world.readers`) give
up on a value, to say what is wrong and where; and by what reads other files
written like a world (a scenario, a config file). Anchors, aliases and keys
written twice are refused here, with their line and column.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from privilog.dsl.errors import did_you_mean
from privilog.engine.ids import EntityId, IdError, parse_instance, parse_principal
from privilog.engine.patterns import is_pattern, parse_pattern
from privilog.engine.world.model import ALL, Grant, World, WorldError, check_fact, check_membership

CONFIG_KEY = re.compile(r"[a-z][a-z0-9_.]{0,99}")
CONFIG_VALUE = re.compile(r"[!-~]{1,1000}")  # printable ASCII without blanks: an id, a name, `*`


@dataclass(frozen=True)
class Located:
    """A value read from YAML or JSON, with ``file:line:col`` of where it was written."""

    value: Any
    where: str


def _where(mark: Any, file: str) -> str:
    return f"{file}:{mark.line + 1}:{mark.column + 1}"


def located(node: yaml.Node, file: str) -> Located:
    """Build plain values from a composed YAML node, keeping each one's position.

    A key written twice in one mapping is an error at the second (YAML would keep the last).
    """
    where = _where(node.start_mark, file)
    if isinstance(node, yaml.MappingNode):
        mapping: dict[str, Located] = {}
        first: dict[str, int] = {}
        for k, v in node.value:
            key = str(k.value)
            if key in first:
                raise WorldError(
                    f"{_where(k.start_mark, file)}: the key `{key}` is written twice in one mapping "
                    f"(first on line {first[key]}); write it once"
                )
            first[key] = k.start_mark.line + 1
            mapping[key] = located(v, file)
        return Located(mapping, where)
    if isinstance(node, yaml.SequenceNode):
        return Located([located(v, file) for v in node.value], where)
    try:
        return Located(yaml.SafeLoader("").construct_object(node, deep=True), where)
    except Exception as error:  # PyYAML's constructors raise what they meet: an unknown tag, a bad !!timestamp
        problem = getattr(error, "problem", None) or f"a value YAML cannot read ({error})"
        raise WorldError(f"{where}: not valid YAML or JSON: {problem}") from None


class _NoAnchors(yaml.SafeLoader):
    """PyYAML's composer refusing anchors and aliases: an alias may stand for a whole
    subtree, so a few hundred bytes could ask for millions of values."""

    file = "<world>"

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            kind = "an alias (*)" if isinstance(event, yaml.AliasEvent) else "an anchor (&)"
            raise WorldError(
                f"{_where(event.start_mark, self.file)}: {kind} `{event.anchor}`: anchors and aliases are not "
                "allowed in a world or scenario file; write each value out"
            )
        return super().compose_node(parent, index)


def compose(text: str, file: str) -> Located | None:
    """Parse YAML or JSON text to located values; None for an empty document.

    Anchors, aliases and keys written twice are errors naming their line and column.
    """
    try:
        loader = _NoAnchors(text)  # reads every character first: a NUL or a control character stops it here
    except yaml.reader.ReaderError as error:
        line = text.count("\n", 0, error.position) + 1
        column = error.position - text.rfind("\n", 0, error.position)
        raise WorldError(f"{file}:{line}:{column}: not valid YAML or JSON: the character "
                         f"U+{int(error.character):04X} is not allowed") from None
    loader.file = file
    try:
        node = loader.get_single_node()
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{file}:{mark.line + 1}:{mark.column + 1}" if mark else file
        problem = getattr(error, "problem", None) or str(error)
        raise WorldError(f"{where}: not valid YAML or JSON: {problem}") from None
    finally:
        loader.dispose()
    return None if node is None else located(node, file)


class WorldReader:
    """Turns located YAML values into a :class:`World`, checking actions against the policy's."""

    KEYS = ("instance", "config", "entities", "owners", "grants", "members", "admins", "facts")

    def __init__(self, actions: Iterable[str]):
        self.actions = tuple(actions)
        self._entities: dict[str, EntityId] = {}

    def fail(self, where: str, message: str) -> WorldError:
        return WorldError(f"{where}: {message}")

    def text(self, item: Located, what: str) -> str:
        if not isinstance(item.value, str):
            raise self.fail(item.where, f"{what} must be text, not {item.value!r}")
        return item.value

    def entity(self, item: Located, granted: bool = False) -> EntityId:
        """An entity id; with ``granted``, what a grant names, which may be a wildcard pattern."""
        text = self.text(item, "an entity id")
        found = self._entities.get(text)
        if found is None or (is_pattern(found) and not granted):
            try:
                found = parse_pattern(text) if granted else EntityId.parse(text)
            except IdError as error:
                raise self.fail(item.where, str(error)) from None
            self._entities[text] = found
        return found

    def principal(self, item: Located) -> str:
        try:
            return parse_principal(self.text(item, "a principal"))
        except IdError as error:
            raise self.fail(item.where, str(error)) from None

    def action_list(self, item: Located) -> list[str]:
        raw = item.value if isinstance(item.value, list) else [item]
        out: list[str] = []
        for entry in raw:
            name = self.text(entry, "an action")
            if name == ALL:
                out.extend(self.actions)
            elif name in self.actions:
                out.append(name)
            else:
                hint = did_you_mean(name, [*self.actions, ALL]) or f"actions are {', '.join(self.actions)} and ALL"
                raise self.fail(entry.where, f"unknown action `{name}`: {hint}")
        return out

    def items(self, item: Located | None, what: str) -> Iterator[Located]:
        if item is None or item.value is None:
            return
        if not isinstance(item.value, list):
            raise self.fail(item.where, f"`{what}` must be a list")
        yield from item.value

    def grants(self, item: Located) -> Iterator[Grant]:
        if isinstance(item.value, list):
            if len(item.value) != 3:
                raise self.fail(item.where, "a grant is [PRINCIPAL, ACTION, ENTITY]")
            principal, actions, entity = item.value
        elif isinstance(item.value, dict):
            fields = item.value
            unknown = set(fields) - {"principal", "action", "actions", "entity"}
            if unknown or "principal" not in fields or "entity" not in fields:
                raise self.fail(item.where, "a grant is {principal: P, actions: [A, ...], entity: E}")
            principal, entity = fields["principal"], fields["entity"]
            actions = fields.get("actions") or fields.get("action")
            if actions is None:
                raise self.fail(item.where, "a grant needs `action` or `actions`")
        else:
            raise self.fail(item.where, "a grant is [PRINCIPAL, ACTION, ENTITY] or a mapping")
        who = self.principal(principal)
        what = self.entity(entity, granted=True)
        for action in self.action_list(actions):
            yield Grant(who, action, what)

    def read(self, root: Located, path: Path | None) -> World:
        if root.value is None:
            return World(path=path)
        if not isinstance(root.value, dict):
            raise self.fail(root.where, "a world is a mapping with entities, grants, members and admins")
        data: dict[str, Located] = root.value
        for key, value in data.items():
            if key not in self.KEYS:
                hint = did_you_mean(key, self.KEYS) or f"the keys are {', '.join(self.KEYS)}"
                raise self.fail(value.where, f"unknown key `{key}`: {hint}")
        world = World(path=path)
        if "instance" in data:
            try:
                world.instance = parse_instance(self.text(data["instance"], "the instance name"))
            except IdError as error:
                raise self.fail(data["instance"].where, str(error)) from None
        for entry in self.items(data.get("entities"), "entities"):
            world.entities.add(self.entity(entry))
        for entry in self.items(data.get("grants"), "grants"):
            world.grants.update(self.grants(entry))
        for entry in self.items(data.get("members"), "members"):
            pair = entry.value
            if isinstance(pair, dict) and set(pair) == {"principal", "group"}:
                pair = [pair["principal"], pair["group"]]
            if not isinstance(pair, list) or len(pair) != 2:
                raise self.fail(entry.where, "a membership is [PRINCIPAL, GROUP_OR_ROLE]")
            try:
                world.members.add(check_membership(self.principal(pair[0]), self.principal(pair[1])))
            except IdError as error:
                raise self.fail(entry.where, str(error)) from None
        for entry in self.items(data.get("admins"), "admins"):
            world.admins.add(self.principal(entry))
        if "config" in data:
            world.config = self.config(data["config"])
        if "owners" in data:
            world.owners = self.owners(data["owners"])
        if "facts" in data:
            world.facts = self.facts(data["facts"])
        return world

    def facts(self, item: Located) -> dict[str, frozenset[tuple[str, ...]]]:
        """``facts``: a mapping of a relation's name to its rows, each a list of text values."""
        if item.value is None:
            return {}
        if not isinstance(item.value, dict):
            raise self.fail(item.where, "`facts` is a mapping of a relation's name to its rows, such as "
                            "`blocked: [[user:eve, \"dataset:ns1.*\"]]`")
        out: dict[str, frozenset[tuple[str, ...]]] = {}
        for relation, rows in item.value.items():
            try:
                check_fact(relation, ())
            except WorldError as error:
                raise self.fail(rows.where, str(error)) from None
            found: list[tuple[str, ...]] = []
            for row in self.items(rows, f"facts.{relation}"):
                if not isinstance(row.value, list):
                    raise self.fail(row.where, f'a `{relation}` fact is a list of values, such as ["policy 12", allow]')
                for value in row.value:
                    try:
                        check_fact(relation, [value.value])
                    except WorldError as error:
                        raise self.fail(value.where, str(error)) from None
                found.append(tuple(v.value for v in row.value))
            out[relation] = frozenset(found)
        return out

    def owners(self, item: Located) -> dict[EntityId, EntityId]:
        """``owners``: a mapping of ENTITY to the id of its owner (`kerberosprincipal:...`)."""
        if not isinstance(item.value, dict):
            raise self.fail(item.where, "`owners` is a mapping of ENTITY to its owner's id, such as "
                            "`namespace:ns1: kerberosprincipal:alice@EXAMPLE.COM`")
        out: dict[EntityId, EntityId] = {}
        for key, value in item.value.items():
            try:
                entity = EntityId.parse(key)
            except IdError as error:
                raise self.fail(value.where, f"an owned entity: {error}") from None
            out[entity] = self.entity(value)
        return out

    def config(self, item: Located) -> dict[str, tuple[str, ...]]:
        """``config``: a mapping of KEY to a value or a list of values, all text."""
        if not isinstance(item.value, dict):
            raise self.fail(item.where, "`config` is a mapping of KEY to a value or a list of values")
        out: dict[str, tuple[str, ...]] = {}
        for key, value in item.value.items():
            if not isinstance(key, str) or not CONFIG_KEY.fullmatch(key):
                raise self.fail(value.where, f"a config key is lower case letters, digits, `_` and `.`, not {key!r}")
            values = value.value if isinstance(value.value, list) else [value]
            out[key] = tuple(dict.fromkeys(_config_value(self.text(v, f"`config.{key}`"), self, v) for v in values))
        return out


def _config_value(text: str, reader: WorldReader, item: Located) -> str:
    if not CONFIG_VALUE.fullmatch(text):
        raise reader.fail(item.where, f"a config value is printable text without blanks (at most 1000), not {text!r}")
    return text


def parse_located(text: str, actions: Iterable[str], file: str = "<world>", path: Path | None = None) -> World:
    """Read a world from YAML or JSON text with a position on every value: slow, for messages."""
    root = compose(text, file)
    world = World(path=path) if root is None else WorldReader(actions).read(root, path)
    world.actions = tuple(actions)
    return world
