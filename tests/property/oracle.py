"""An independent oracle for rules/cdap.policy, read straight from tests/conformance/cdap.yaml.

Plain Python: no pyDatalog, no engine internals. Entity ids are parsed here too, from
DESIGN.md's id scheme, so the hierarchy is not borrowed from the engine either.

>>> table = load_table()
>>> world = OracleWorld(
...     entities=["dataset:ns1.ds"],
...     grants=[("user:a", "ADMIN", "namespace:ns1"), ("group:g", "READ", "dataset:ns1.ds")],
...     members=[("user:a", "group:g")],
... )
>>> world.allowed(table, "user:a", "dataset.read", "dataset:ns1.ds")
True
>>> world.allowed(table, "user:a", "namespace.delete", "namespace:ns1")
False
>>> sorted(world.visible(table, "user:a", "namespace"))
['namespace:ns1']
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import yaml

ACTIONS = ("READ", "WRITE", "EXECUTE", "ADMIN")
TABLE_PATH = Path(__file__).resolve().parents[1] / "conformance" / "cdap.yaml"
FALSE_WORDS = {"false", "no", "0", "off", ""}
INSTANCE = "cdap"

# ---- ids ---------------------------------------------------------------------------------

IN_NAMESPACE = {"artifact", "application", "dataset", "dataset_module", "dataset_type", "stream", "securekey"}
IN_APPLICATION = {"program", "schedule"}


def entity_type(entity: str) -> str:
    return entity.partition(":")[0]


def parent(entity: str, instance: str = INSTANCE) -> str | None:
    """The entity ``entity`` sits in (derived from its id), or None at the top."""
    kind, _, name = entity.partition(":")
    if kind in ("instance", "kerberosprincipal"):
        return None
    if kind == "namespace":
        return f"instance:{instance}"
    if kind in IN_NAMESPACE:
        return "namespace:" + name.split(".", 1)[0]
    if kind in IN_APPLICATION:
        namespace, app = name.split(".")[:2]
        return f"application:{namespace}.{app}"
    raise ValueError(f"unknown entity type in {entity!r}")


def ancestors(entity: str, instance: str = INSTANCE) -> list[str]:
    """Every enclosing entity, nearest first."""
    chain = []
    current = parent(entity, instance)
    while current is not None:
        chain.append(current)
        current = parent(current, instance)
    return chain


# ---- the table ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Alternative:
    actions: tuple[str, ...]
    on: str  # self | parent | <type> | $arg | self or descendant | every <type> | every descendant


@dataclass(frozen=True)
class Conjunct:
    alternatives: tuple[Alternative, ...]
    condition: str | None = None  # "$x" or "not $x"

    def applies(self, args: Mapping[str, str]) -> bool:
        if self.condition is None:
            return True
        negated = self.condition.startswith("not ")
        name = self.condition.removeprefix("not ").strip().lstrip("$")
        return given(args, name) != negated

    @property
    def is_every(self) -> bool:
        return any(a.on.startswith("every ") for a in self.alternatives)


@dataclass(frozen=True)
class Row:
    operation: str
    verb: str
    seed: str
    source: str
    requires: tuple[Conjunct, ...]
    args: tuple[dict[str, str], ...] = ({},)
    entity: str | None = None
    reading: str = ""

    @property
    def entity_type(self) -> str:
        return self.operation.split(".", 1)[0]

    @property
    def arg_names(self) -> set[str]:
        names = {a.on[1:] for c in self.requires for a in c.alternatives if a.on.startswith("$")}
        names |= {c.condition.removeprefix("not ").strip().lstrip("$") for c in self.requires if c.condition}
        return names


@dataclass(frozen=True)
class Table:
    rows: tuple[Row, ...]
    world: dict[str, list[str]] = field(hash=False)
    subjects: dict[str, str] = field(hash=False)

    def row(self, operation: str) -> Row | None:
        for row in self.rows:
            if row.operation == operation:
                return row
        return None

    def list_row(self, type_name: str) -> Row | None:
        for row in self.rows:
            if row.entity_type == type_name and row.verb == "shows":
                return row
        return None

    def subject(self, row: Row) -> str:
        return row.entity or self.subjects[row.entity_type]


def _alternative(data: Mapping[str, object]) -> Alternative:
    actions = data["actions"]
    assert isinstance(actions, list) and actions and set(actions) <= set(ACTIONS), data
    on = str(data["on"])
    return Alternative(tuple(actions), on)


def _conjunct(data: object) -> Conjunct:
    if isinstance(data, list):
        return Conjunct(tuple(_alternative(a) for a in data))
    assert isinstance(data, dict) and set(data) <= {"if", "any_of"}, data
    return Conjunct(tuple(_alternative(a) for a in data["any_of"]), data.get("if"))


@cache
def load_table(path: Path = TABLE_PATH) -> Table:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    rows = []
    for raw in data["rows"]:
        rows.append(
            Row(
                operation=raw["operation"],
                verb=raw.get("verb", "requires"),
                seed=str(raw["seed"]),
                source=raw["source"],
                requires=tuple(_conjunct(c) for c in raw["requires"]),
                args=tuple({k: str(v) for k, v in a.items()} for a in raw.get("args", [{}])),
                entity=raw.get("entity"),
                reading=raw.get("reading", ""),
            )
        )
    return Table(tuple(rows), data["world"], data["subjects"])


def given(args: Mapping[str, str], name: str) -> bool:
    """An argument is given when present (and, for a bool, true)."""
    value = args.get(name)
    return value is not None and str(value).strip().lower() not in FALSE_WORDS


# ---- worlds ------------------------------------------------------------------------------

Grant = tuple[str, str, str]  # principal, action, entity
Need = tuple[str, str]  # action, entity


class OracleWorld:
    """Entities that exist (listed ones and their ancestors), grants, memberships."""

    def __init__(
        self,
        entities: Iterable[str] = (),
        grants: Iterable[Grant] = (),
        members: Iterable[tuple[str, str]] = (),
        instance: str = INSTANCE,
    ):
        self.instance = instance
        self.existing: set[str] = set()
        for entity in entities:
            self.existing.add(entity)
            self.existing.update(ancestors(entity, instance))
        self.grants: set[Grant] = set()
        for principal, action, entity in grants:
            for a in ACTIONS if action == "ALL" else (action,):
                self.grants.add((principal, a, entity))
        self.members = set(members)

    def principals_of(self, principal: str) -> set[str]:
        """The principal and every group or role it is in, directly or through others."""
        found = {principal}
        frontier = [principal]
        while frontier:
            current = frontier.pop()
            for member, group in self.members:
                if member == current and group not in found:
                    found.add(group)
                    frontier.append(group)
        return found

    def holds(self, principal: str, action: str, entity: str) -> bool:
        return any((p, action, entity) in self.grants for p in self.principals_of(principal))

    def descendants(self, entity: str) -> list[str]:
        """Existing entities inside ``entity`` (none when it does not exist)."""
        return sorted(e for e in self.existing if entity in ancestors(e, self.instance))

    # ---- interpreting a conjunct -------------------------------------------------------

    def ways(self, conjunct: Conjunct, entity: str, args: Mapping[str, str]) -> list[frozenset[Need]]:
        """Each set of (action, entity) grants that meets the conjunct; [] if none can."""
        out: list[frozenset[Need]] = []
        for alt in conjunct.alternatives:
            on = alt.on
            if on.startswith("every "):
                kind = on.removeprefix("every ")
                covered = [d for d in self.descendants(entity) if kind == "descendant" or entity_type(d) == kind]
                for choice in itertools.product(alt.actions, repeat=len(covered)):
                    out.append(frozenset(zip(choice, covered, strict=True)))
                continue
            if on == "self":
                targets = [entity]
            elif on == "parent":
                p = parent(entity, self.instance)
                targets = [p] if p else []
            elif on == "self or descendant":
                targets = [entity, *self.descendants(entity)]
            elif on.startswith("$"):
                value = args.get(on[1:])
                targets = [value] if value else []
            else:  # an enclosing type
                targets = [a for a in ancestors(entity, self.instance) if entity_type(a) == on]
            out.extend(frozenset({(action, t)}) for t in targets for action in alt.actions)
        return list(dict.fromkeys(out))

    def met(self, principal: str, conjunct: Conjunct, entity: str, args: Mapping[str, str]) -> bool:
        return any(all(self.holds(principal, a, e) for a, e in way) for way in self.ways(conjunct, entity, args))

    def applicable(self, row: Row, args: Mapping[str, str]) -> list[Conjunct]:
        return [c for c in row.requires if c.applies(args)]

    def allowed(
        self, table: Table, principal: str, operation: str, entity: str, args: Mapping[str, str] | None = None
    ) -> bool:
        """Whether the table allows the request. Unknown operations and wrong types are denied."""
        args = dict(args or {})
        row = table.row(operation)
        if row is None or entity_type(entity) != row.entity_type:
            return False
        return all(self.met(principal, c, entity, args) for c in self.applicable(row, args))

    def unmet(self, table: Table, principal: str, operation: str, entity: str, args: Mapping[str, str]) -> list[int]:
        """Indexes (in the row's `requires`) of the applicable conjuncts that are not met."""
        row = table.row(operation)
        assert row is not None
        return [i for i, c in enumerate(row.requires) if c.applies(args) and not self.met(principal, c, entity, args)]

    def visible(self, table: Table, principal: str, type_name: str, within: str | None = None) -> set[str]:
        """The existing entities of a type (inside ``within``) the table's listing shows."""
        row = table.list_row(type_name)
        assert row is not None, type_name
        return {
            e
            for e in self.existing
            if entity_type(e) == type_name
            and (within is None or within in ancestors(e, self.instance))
            and self.allowed(table, principal, row.operation, e)
        }
