"""Saving a world into the YAML text it was read from, changing only what changed.

A world file lives in git: a save must leave its comments, order, quoting, ``ALL``
and mapping-form grants as they were, so that the diff shows the change and
nothing else. The text is edited where it stands: the document is composed with
PyYAML, whose nodes know the span of text they came from, and only the spans of
entries that changed are rewritten. A revoked grant's entry is removed (its line,
with its end-of-line comment); a revoke of one action out of ``ALL`` or a list
rewrites just that entry's actions; new entries are appended to their list in the
style of its last entry. Every byte outside those spans is kept.

A round-tripping YAML library (ruamel.yaml) was tried first and dropped: it loses
a whole-line comment that follows a flow-style entry of a block list, which is
how world files are written (``- [user:a, READ, ns]`` and a comment under it).

The caller checks that the edited text reads back to the world it saved, and
writes the world afresh when it does not (:func:`engine.world.writing.world_text`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Set
from dataclasses import dataclass
from typing import Any

import yaml
from privilog.engine.ids import DEFAULT_INSTANCE, EntityId, IdError, parse_principal
from privilog.engine.patterns import parse_pattern

ALL = "ALL"

GrantFact = tuple[str, str, EntityId]

# libyaml's composer when it is there: three times as fast, and its marks count characters too
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class Facts:
    """What a world holds after its changes: the state the saved text must describe."""

    instance: str
    entities: Set[EntityId]
    grants: Set[GrantFact]
    members: Set[tuple[str, str]]
    admins: Set[str]
    actions: tuple[str, ...]


class _Unsure(Exception):
    """Something the editor does not handle in place; the world is written afresh instead."""


@dataclass(frozen=True)
class _Edit:
    start: int
    end: int
    text: str


def edited(text: str, facts: Facts) -> str | None:
    """``text`` (a world's YAML) edited to describe ``facts``; None when it cannot be edited in place.

    >>> facts = Facts("cdap", set(), {("user:a", "READ", EntityId.parse("namespace:x"))}, set(), set(), ("READ",))
    >>> print(edited("grants:  # who holds what\\n  - [user:b, READ, namespace:x]  # old\\n", facts), end="")
    grants:  # who holds what
      - [user:a, READ, namespace:x]
    """
    try:
        root = yaml.compose(text, Loader=_LOADER)
        if not isinstance(root, yaml.MappingNode):
            raise _Unsure
        return _Editor(text, root, facts).run()
    except (_Unsure, IdError, yaml.YAMLError):
        return None


class _Editor:
    """The edits that take one document to the facts, applied from the end of the text backwards."""

    def __init__(self, text: str, root: yaml.MappingNode, facts: Facts):
        self.text = text
        self.root = root
        self.facts = facts
        self.newline = "\r\n" if "\r\n" in text else "\n"
        self.edits: list[_Edit] = []
        self.nodes: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for key, value in root.value:
            self.nodes[str(key.value)] = (key, value)

    def run(self) -> str:
        self.instance()
        kept_entities = self.section("entities", self.entity_entry)
        self.append("entities", sorted(set(self.facts.entities) - kept_entities, key=str), str)
        kept_grants = self.section("grants", self.grant_entry)
        self.append("grants", sorted(set(self.facts.grants) - kept_grants, key=_grant_key), _grant_item)
        kept_members = self.section("members", self.member_entry)
        self.append("members", sorted(set(self.facts.members) - kept_members), list)
        kept_admins = self.section("admins", self.admin_entry)
        self.append("admins", sorted(set(self.facts.admins) - kept_admins), str)
        out = self.text
        for edit in sorted(self.edits, key=lambda e: (e.start, e.end), reverse=True):
            out = out[: edit.start] + edit.text + out[edit.end :]
        return out

    # ---- what an entry says, and whether it stays -----------------------------------

    def instance(self) -> None:
        found = self.nodes.get("instance")
        written = found[1].value if found else None
        if written != self.facts.instance and not (found is None and self.facts.instance == DEFAULT_INSTANCE):
            if found is None or not isinstance(found[1], yaml.ScalarNode) or found[1].style:
                raise _Unsure
            self.replace(found[1], _flow(self.facts.instance))

    def section(self, key: str, entry: Any) -> set[Any]:
        """Walk one list, removing or rewriting entries; return the facts of those that stay."""
        found = self.nodes.get(key)
        if found is None or _is_null(found[1]):
            return set()
        node = found[1]
        if not isinstance(node, yaml.SequenceNode):
            raise _Unsure
        kept: set[Any] = set()
        for index, item in enumerate(node.value):
            kept.update(entry(node, index, item))
        return kept

    def entity_entry(self, seq: yaml.SequenceNode, index: int, item: yaml.Node) -> set[EntityId]:
        entity = EntityId.parse(_scalar(item))
        return self.keep_or_remove(seq, index, {entity} & set(self.facts.entities))

    def admin_entry(self, seq: yaml.SequenceNode, index: int, item: yaml.Node) -> set[str]:
        admin = parse_principal(_scalar(item))
        return self.keep_or_remove(seq, index, {admin} & set(self.facts.admins))

    def member_entry(self, seq: yaml.SequenceNode, index: int, item: yaml.Node) -> set[tuple[str, str]]:
        if isinstance(item, yaml.MappingNode):
            fields = {str(k.value): v for k, v in item.value}
            if set(fields) != {"principal", "group"}:
                raise _Unsure
            pair_nodes = [fields["principal"], fields["group"]]
        elif isinstance(item, yaml.SequenceNode) and len(item.value) == 2:
            pair_nodes = item.value
        else:
            raise _Unsure
        pair = (parse_principal(_scalar(pair_nodes[0])), parse_principal(_scalar(pair_nodes[1])))
        return self.keep_or_remove(seq, index, {pair} & set(self.facts.members))

    def grant_entry(self, seq: yaml.SequenceNode, index: int, item: yaml.Node) -> set[GrantFact]:
        if isinstance(item, yaml.MappingNode):
            fields = {str(k.value): v for k, v in item.value}
            if not set(fields) <= {"principal", "action", "actions", "entity"}:
                raise _Unsure
            who, actions, what = fields["principal"], fields.get("actions") or fields.get("action"), fields["entity"]
        elif isinstance(item, yaml.SequenceNode) and len(item.value) == 3:
            who, actions, what = item.value
        else:
            raise _Unsure
        if actions is None:
            raise _Unsure
        principal, entity = parse_principal(_scalar(who)), parse_pattern(_scalar(what))  # a wildcard may stand
        names = self.action_names(actions)
        held = [a for a in names if (principal, a, entity) in self.facts.grants]
        if held and len(held) < len(names):  # some revoked: rewrite just this entry's actions
            remaining = list(dict.fromkeys(held))
            one = len(remaining) == 1 and not isinstance(actions, yaml.SequenceNode)
            self.replace(actions, _flow(remaining[0] if one else remaining))
        return self.keep_or_remove(seq, index, {(principal, a, entity) for a in held})

    def action_names(self, node: yaml.Node) -> list[str]:
        written = [_scalar(n) for n in node.value] if isinstance(node, yaml.SequenceNode) else [_scalar(node)]
        out: list[str] = []
        for name in written:
            out.extend(self.facts.actions if name == ALL else [name])
        return out

    def keep_or_remove(self, seq: yaml.SequenceNode, index: int, kept: set[Any]) -> set[Any]:
        if not kept:
            self.remove(seq, index)
        return kept

    # ---- edits of the text ------------------------------------------------------------

    def replace(self, node: yaml.Node, text: str) -> None:
        self.edits.append(_Edit(node.start_mark.index, node.end_mark.index, text))

    def remove(self, seq: yaml.SequenceNode, index: int) -> None:
        item = seq.value[index]
        if seq.flow_style:
            if index > 0:  # from the end of the entry before, to take its comma
                start, end = seq.value[index - 1].end_mark.index, item.end_mark.index
            elif len(seq.value) > 1:
                start, end = item.start_mark.index, seq.value[1].start_mark.index
            else:
                start, end = item.start_mark.index, item.end_mark.index
            self.edits.append(_Edit(start, end, ""))
            return
        start = self.line_start(item.start_mark.index)
        if self.text[start : item.start_mark.index].strip() != "-":
            raise _Unsure  # an entry that does not start its own line
        self.edits.append(_Edit(start, self.line_end(item.end_mark.index), ""))

    def append(self, key: str, new: Iterable[Any], item: Any) -> None:
        """Add entries at the end of one list, written as its last entry is."""
        items = [_flow(item(one)) for one in new]
        if not items:
            return
        found = self.nodes.get(key)
        nl = self.newline
        if found is None:
            at = len(self.text)
            head = "" if not self.text or self.text.endswith("\n") else nl
            lines = "".join(f"  - {i}{nl}" for i in items)
            self.edits.append(_Edit(at, at, f"{head}{key}:{nl}{lines}"))
            return
        keynode, node = found
        indent = " " * (keynode.start_mark.column + 2)
        if _is_null(node):
            if node.end_mark.index != node.start_mark.index:
                raise _Unsure  # `~` or `null` written out
            at = self.line_end(keynode.end_mark.index)
            lines = "".join(f"{indent}- {i}{nl}" for i in items)
            self.edits.append(_Edit(at, at, lines if self.text[at - 1 : at] == "\n" else nl + lines))
            return
        if not isinstance(node, yaml.SequenceNode):
            raise _Unsure
        if node.flow_style:
            if node.value:
                at = node.value[-1].end_mark.index
                self.edits.append(_Edit(at, at, "".join(f", {i}" for i in items)))
            else:
                after_colon = self.text.index(":", keynode.end_mark.index) + 1
                lines = "".join(f"{nl}{indent}- {i}" for i in items)
                self.edits.append(_Edit(after_colon, node.end_mark.index, lines))
            return
        last = node.value[-1]
        start = self.line_start(last.start_mark.index)
        prefix = self.text[start : last.start_mark.index]
        at = self.line_end(last.end_mark.index)
        lines = "".join(f"{prefix}{i}{nl}" for i in items)
        self.edits.append(_Edit(at, at, lines if self.text[at - 1 : at] == "\n" else nl + lines))

    def line_start(self, index: int) -> int:
        return self.text.rfind("\n", 0, index) + 1

    def line_end(self, index: int) -> int:
        """Just past the newline that ends the line holding ``index`` (its comment too)."""
        end = self.text.find("\n", index)
        return len(self.text) if end < 0 else end + 1


def _is_null(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"


def _scalar(node: yaml.Node) -> str:
    if not isinstance(node, yaml.ScalarNode) or not isinstance(node.value, str):
        raise _Unsure
    return node.value


_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@-]*\Z")


def _flow(value: Any) -> str:
    """A value as YAML flow text, each id unquoted as the world files write them, quoted where YAML needs it.

    >>> _flow(["user:a", "ALL", "namespace:x"]), _flow("null"), _flow("a: b")
    ('[user:a, ALL, namespace:x]', "'null'", "'a: b'")
    """
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if _PLAIN.match(value) and yaml.safe_load(value) == value:
        return str(value)
    return yaml.safe_dump(value, default_style="'", width=1 << 30).strip().removesuffix("...").strip()


def _grant_item(grant: GrantFact) -> list[str]:
    return [grant[0], grant[1], str(grant[2])]


def _grant_key(grant: GrantFact) -> tuple[str, str, str]:
    return grant[0], str(grant[2]), grant[1]
