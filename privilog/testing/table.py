"""Conformance tables: a policy's documented rows, read and interpreted in plain Python.

A conformance table (``tests/conformance/POLICY.yaml``; the header of ``cdap.yaml``
describes the format) holds one row per documented (entity type, operation) of a
seed's table: what the operation requires, written from the seed, not from the
policy. This module reads a table and interprets its ``requires``
(:class:`TableWorld`) in plain Python: no Datalog and no engine code, not even the
engine's id hierarchy, so that the property tests can hold the engine to it as an
independent oracle. :mod:`privilog.testing.conformance` checks a policy against it.

The module is over 600 lines on purpose: the oracle is read in one file, beside the
table format it interprets, so that a reader can check it against the seeds alone.

>>> table = table_from_data({
...     "policy": "mine", "seeds": ["000"],
...     "world": {"entities": ["dataset:ns1.ds"]},
...     "subjects": {"dataset": "dataset:ns1.ds"},
...     "rows": [{"operation": "dataset.read", "seed": "000", "source": '"Read | READ"',
...               "requires": [[{"actions": ["READ"], "on": "self"}]]}],
... })
>>> world = TableWorld(["dataset:ns1.ds"], [("group:g", "READ", "dataset:ns1.ds")], [("user:a", "group:g")])
>>> world.allowed(table, "user:a", "dataset.read", "dataset:ns1.ds")
True
>>> world.allowed(table, "user:b", "dataset.read", "dataset:ns1.ds")
False
"""

from __future__ import annotations

import fnmatch
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from privilog.dsl.errors import PrivilogError

ACTIONS = ("READ", "WRITE", "EXECUTE", "ADMIN")
# a row's request arguments: an entity id or a bool's word, or a list argument's entity ids
Args = Mapping[str, "str | list[str]"]
FALSE_WORDS = {"false", "no", "0", "off", ""}
INSTANCE = "cdap"
VERBS = ("requires", "shows")
ROW_KEYS = ("operation", "verb", "seed", "source", "reading", "entity", "args", "requires")

# The principal whose grants the checks vary; other principals only ever hold context.
PRINCIPAL = "user:alice"


class TableError(PrivilogError):
    """A conformance table that cannot be read, with the file and the row."""


# ---- ids (from CDAP's id scheme, independently of engine.ids) ------------------------

IN_NAMESPACE = {"artifact", "application", "dataset", "dataset_module", "dataset_type", "stream", "securekey"}
IN_APPLICATION = {"program", "schedule"}
TYPES = {"instance", "namespace", "kerberosprincipal", *IN_NAMESPACE, *IN_APPLICATION}


def entity_type(entity: str) -> str:
    """>>> entity_type("dataset:ns1.sales.2024")
    'dataset'
    """
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
    """Every enclosing entity, nearest first.

    >>> ancestors("program:ns1.app.service.api")
    ['application:ns1.app', 'namespace:ns1', 'instance:cdap']
    """
    chain = []
    current = parent(entity, instance)
    while current is not None:
        chain.append(current)
        current = parent(current, instance)
    return chain


def _levels(entity: str) -> list[str]:
    kind, _, name = entity.partition(":")
    if kind in ("instance", "namespace", "kerberosprincipal"):
        return [name]
    if kind in ("dataset", "dataset_module", "dataset_type", "artifact"):
        return name.split(".", 1)
    return name.split(".")


def wildcard_matches(pattern: str, entity: str) -> bool:
    """Whether a grant's id with ``*`` and ``?`` matches an entity: the same type, as many levels,
    each level matched by shell rules (Sentry's WildcardAuthorizable, part by part).

    >>> wildcard_matches("dataset:ns*.d.*", "dataset:ns1.d.x")
    True
    >>> wildcard_matches("program:ns1.*", "program:ns1.a.service.p")
    False
    """
    if entity_type(pattern) != entity_type(entity):
        return False
    mine, theirs = _levels(pattern), _levels(entity)
    return len(mine) == len(theirs) and all(fnmatch.fnmatchcase(t, m) for m, t in zip(mine, theirs, strict=True))


# ---- the table ---------------------------------------------------------------------------


# What an alternative may be met by without any grant (`without_grant:`), read from the request:
WITHOUT_GRANT = (
    "the requester is $owner",  # the owner argument's name is the requester's name, exactly
    "in namespace system",  # the entity lies in namespace `system`
    "$dataset_type in namespace system",  # CDAP's own dataset types
    "$artifact in namespace system",  # a system artifact, read with no check
    # a delegate admin of a Ranger policy about the entity (ranger-cdap's grant): a table's world
    # holds no Ranger policies, so never there; tests/ranger holds the rule
    "a delegate admin of a Ranger policy about it",
)


@dataclass(frozen=True)
class Alternative:
    """One way to meet a conjunct: one of ``actions`` on the target ``on`` (with ``own``, only the
    principal's own grants count, not its groups' or roles'); or, with ``without``, a condition
    of the request that meets it with no grant (one of WITHOUT_GRANT)."""

    actions: tuple[str, ...]
    on: str  # self | parent | <type> | $arg | self or descendant | self or within | every <type> | every descendant
    own: bool = False
    without: str = ""

    @property
    def is_every(self) -> bool:
        return self.on.startswith("every ")


@dataclass(frozen=True)
class Conjunct:
    """Alternatives of which any one will do; applies only when its ``condition`` holds."""

    alternatives: tuple[Alternative, ...]
    condition: str | None = None  # "$x" or "not $x"

    def applies(self, args: Args) -> bool:
        if self.condition is None:
            return True
        negated = self.condition.startswith("not ")
        name = self.condition.removeprefix("not ").strip().lstrip("$")
        return given(args, name) != negated

    @property
    def is_every(self) -> bool:
        return any(a.is_every for a in self.alternatives)


@dataclass(frozen=True)
class Row:
    """One documented (entity type, operation): what it requires, and where the seed says so."""

    operation: str
    verb: str
    seed: str
    source: str
    requires: tuple[Conjunct, ...]
    args: tuple[dict[str, str | list[str]], ...] = ({},)
    entity: str | None = None
    reading: str = ""

    @property
    def entity_type(self) -> str:
        return self.operation.split(".", 1)[0]

    @property
    def arg_names(self) -> set[str]:
        names = {a.on.removeprefix("every ")[1:] for c in self.requires for a in c.alternatives if "$" in a.on}
        names |= {c.condition.removeprefix("not ").strip().lstrip("$") for c in self.requires if c.condition}
        return names


@dataclass(frozen=True)
class Table:
    """A policy's conformance table: its rows, the world they are tested in, and its subjects."""

    rows: tuple[Row, ...]
    world: dict[str, list[str]] = field(hash=False)
    subjects: dict[str, str] = field(hash=False)
    policy: str = ""
    seeds: tuple[str, ...] = ()
    path: Path | None = None

    @property
    def entities(self) -> list[str]:
        """The entities of the table's world (their ancestors exist too)."""
        return list(self.world.get("entities", []))

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
        """The entity the checks of ``row`` act on."""
        return row.entity or self.subjects[row.entity_type]

    def mentioned(self) -> set[str]:
        """Every entity the table names (world, subjects, rows, arguments) and what encloses them."""
        found = {*self.entities, *self.subjects.values()}
        for row in self.rows:
            found.add(self.subject(row))
            found.update(v for args in row.args for v in values(args) if ":" in v)
        return found | {a for e in found for a in ancestors(e)}


def _fail(where: str, message: str) -> TableError:
    return TableError(f"{where}: {message}")


def _alternative(data: object, where: str) -> Alternative:
    if isinstance(data, dict) and set(data) == {"without_grant"}:
        if data["without_grant"] not in WITHOUT_GRANT:
            raise _fail(where, f"without_grant is one of {', '.join(WITHOUT_GRANT)}; not {data['without_grant']!r}")
        return Alternative((), "", without=str(data["without_grant"]))
    own = isinstance(data, dict) and data.get("own") is True
    if isinstance(data, dict) and "own" in data:
        data = {k: v for k, v in data.items() if k != "own"}
    if not isinstance(data, dict) or set(data) != {"actions", "on"}:
        raise _fail(where, f'an alternative is {{actions: [...], "on": TARGET[, own: true]}}, not {data!r}')
    actions = data["actions"]
    if not isinstance(actions, list) or not actions or not set(actions) <= set(ACTIONS):
        raise _fail(where, f"actions must be a non-empty list of {', '.join(ACTIONS)}, not {actions!r}")
    on = str(data["on"])
    kind = on.removeprefix("every ")
    plain = ("self", "parent", "self or descendant", "self or within", "every descendant")
    if not (on in plain or on.startswith("$") or kind in TYPES or (on != kind and kind.startswith("$"))):
        raise _fail(where, f"unknown target `{on}`")
    return Alternative(tuple(actions), on, own)


def _conjunct(data: object, where: str) -> Conjunct:
    if isinstance(data, list):
        return Conjunct(tuple(_alternative(a, where) for a in data))
    if not isinstance(data, dict) or set(data) - {"if", "any_of"} or "any_of" not in data:
        raise _fail(where, f"a conjunct is a list of alternatives or {{if: COND, any_of: [...]}}, not {data!r}")
    return Conjunct(tuple(_alternative(a, where) for a in data["any_of"]), data.get("if"))


def _row(raw: object, where: str) -> Row:
    if not isinstance(raw, dict) or "operation" not in raw:
        raise _fail(where, "a row is a mapping with an `operation`")
    where = f"{where} ({raw['operation']})"
    unknown = set(raw) - set(ROW_KEYS)
    if unknown:
        raise _fail(where, f"unknown key(s) {', '.join(sorted(unknown))}; the keys are {', '.join(ROW_KEYS)}")
    verb = raw.get("verb", "requires")
    if verb not in VERBS:
        raise _fail(where, f"verb is `requires` or `shows`, not `{verb}`")
    requires = raw.get("requires")
    if requires == "nothing":
        requires = []
    if not isinstance(requires, list):
        raise _fail(where, "`requires` is a list of conjuncts (or `nothing`)")
    for key in ("seed", "source"):
        if not str(raw.get(key, "")).strip():
            raise _fail(where, f"every row needs a `{key}`")
    return Row(
        operation=str(raw["operation"]),
        verb=verb,
        seed=str(raw["seed"]),
        source=str(raw["source"]),
        requires=tuple(_conjunct(c, where) for c in requires),
        args=tuple(
            {k: [str(x) for x in v] if isinstance(v, list) else str(v) for k, v in a.items()}
            for a in raw.get("args", [{}])
        ),
        entity=raw.get("entity"),
        reading=str(raw.get("reading", "")),
    )


def table_from_data(data: Any, path: Path | None = None) -> Table:
    """A table from its parsed YAML."""
    name = str(path) if path else "<table>"
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise _fail(name, "a conformance table is a mapping with `rows`")
    for key in ("world", "subjects"):
        if not isinstance(data.get(key), dict):
            raise _fail(name, f"a conformance table needs `{key}` (a mapping)")
    rows = tuple(_row(raw, f"{name}: row {i + 1}") for i, raw in enumerate(data["rows"]))
    seeds = data.get("seeds", [])
    return Table(
        rows,
        data["world"],
        data["subjects"],
        policy=str(data.get("policy", "")),
        seeds=tuple(str(s) for s in (seeds if isinstance(seeds, list) else [seeds])),
        path=path,
    )


@cache
def _read(path: Path) -> Any:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader when PyYAML has it: 10x faster
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise TableError(f"{path}: cannot read the conformance table: {error}") from None


@cache
def load_table(path: Path) -> Table:
    """Read a conformance table (YAML). A table with ``rows_from: OTHER.yaml`` (beside it) takes that table's
    world, subjects, seeds and rows, and names its own policy: a policy that asks what another asks (its own
    ``rows``, if any, are added: the operations it has beyond the other's)."""
    data = _read(path)
    if isinstance(data, dict) and "rows_from" in data:
        other = data["rows_from"]
        if not isinstance(other, str) or "/" in other or not other.endswith(".yaml"):
            raise _fail(str(path), "`rows_from` names another table's file beside this one (NAME.yaml)")
        base = _read(path.parent / other)
        if not isinstance(base, dict) or "rows_from" in base:
            raise _fail(str(path), f"`rows_from: {other}` must name a table with rows of its own")
        own = data.get("rows", [])
        data = {**base, **{k: v for k, v in data.items() if k not in ("rows_from", "rows")}}
        data["rows"] = list(base.get("rows", [])) + (own if isinstance(own, list) else [own])
    return table_from_data(data, path)


def is_table(path: Path) -> bool:
    """Whether a YAML file is a conformance table (it names a policy and has rows)."""
    try:
        data = _read(path)
    except TableError:
        return False
    return isinstance(data, dict) and "policy" in data and ("rows" in data or "rows_from" in data)


def given(args: Args, name: str) -> bool:
    """An argument is given when present (and, for a bool, true)."""
    value = args.get(name)
    if isinstance(value, list):
        return bool(value)
    return value is not None and str(value).strip().lower() not in FALSE_WORDS


def values(args: Args) -> list[str]:
    """Every value of the arguments, a list argument's each."""
    return [x for v in args.values() for x in (v if isinstance(v, list) else [v])]


def one(args: Args, name: str) -> str | None:
    """The value of a single argument (None when absent)."""
    value = args.get(name)
    return value if isinstance(value, str) else None


# ---- worlds: the plain-Python reading of `requires` ----------------------------------------

Granted = tuple[str, str, str]  # principal, action, entity
Need = tuple[str, str]  # action, entity


class TableWorld:
    """Entities that exist (listed ones and their ancestors), grants, memberships; and what a
    table's rows allow in them."""

    def __init__(
        self,
        entities: Iterable[str] = (),
        grants: Iterable[Granted] = (),
        members: Iterable[tuple[str, str]] = (),
        instance: str = INSTANCE,
        names: Iterable[str] = (),
    ):
        self.instance = instance
        self.names = frozenset(names)  # ids beyond the world's a grant may name ("self or within")
        self.existing: set[str] = set()
        for entity in entities:
            self.existing.add(entity)
            self.existing.update(ancestors(entity, instance))
        self.grants: set[Granted] = set()
        for principal, action, entity in grants:
            for a in ACTIONS if action == "ALL" else (action,):
                self.grants.add((principal, a, entity))
        self._wildcards = {g for g in self.grants if "*" in g[2] or "?" in g[2]}
        self.members = frozenset(members)
        self._groups: dict[str, list[str]] = {}
        for member, group in self.members:
            self._groups.setdefault(member, []).append(group)

    def principals_of(self, principal: str) -> set[str]:
        """The principal and every group or role it is in, directly or through others
        (one visit a group: linear however deep the nesting, and a cycle ends the walk)."""
        found = {principal}
        frontier = [principal]
        while frontier:
            for group in self._groups.get(frontier.pop(), ()):
                if group not in found:
                    found.add(group)
                    frontier.append(group)
        return found

    def holds(self, principal: str, action: str, entity: str, own: bool = False, wildcards: bool = True) -> bool:
        """Through a grant on the entity, or (with ``wildcards``) a wildcard grant that matches it;
        with ``own``, only through the principal's own grants."""
        mine = {principal} if own else self.principals_of(principal)
        if any((p, action, entity) in self.grants for p in mine):
            return True
        return wildcards and any(
            p in mine and a == action and wildcard_matches(w, entity) for p, a, w in self._wildcards
        )

    def descendants(self, entity: str) -> list[str]:
        """Existing entities inside ``entity`` (none when it does not exist)."""
        return sorted(e for e in self.existing if entity in ancestors(e, self.instance))

    # ---- interpreting a conjunct -------------------------------------------------------

    def targets(self, alt: Alternative, entity: str, args: Args) -> list[str]:
        """The entities a grant on any of which meets a (non-`every`) alternative."""
        on = alt.on
        if on == "self":
            return [entity]
        if on == "parent":
            p = parent(entity, self.instance)
            return [p] if p else []
        if on == "self or descendant":
            return [entity, *self.descendants(entity)]
        if on == "self or within":  # and whatever a grant names whose id lies inside, existing or not
            ids = {g[2] for g in self.grants if g not in self._wildcards} | self.names  # a wildcard: what exists
            named = sorted(i for i in ids if entity in ancestors(i, self.instance))
            return list(dict.fromkeys([entity, *self.descendants(entity), *named]))
        if on.startswith("$"):
            value = one(args, on[1:])
            return [value] if value else []
        return [a for a in ancestors(entity, self.instance) if entity_type(a) == on]  # an enclosing type

    def covered(self, alt: Alternative, entity: str, args: Args) -> list[str]:
        """The entities an `every` alternative needs a grant on, each of them: inside the entity,
        or each a list argument names (`every $datasets`)."""
        kind = alt.on.removeprefix("every ")
        if kind.startswith("$"):
            named = args.get(kind[1:]) or []
            return sorted(set(named if isinstance(named, list) else [named]))
        return [d for d in self.descendants(entity) if kind == "descendant" or entity_type(d) == kind]

    def ways(self, conjunct: Conjunct, entity: str, args: Args, principal: str = PRINCIPAL) -> list[frozenset[Need]]:
        """Each set of (action, entity) grants that meets the conjunct; [] if none can."""
        out = [way for alt in conjunct.alternatives for way in self._alternative_ways(alt, entity, args, principal)]
        return list(dict.fromkeys(out))

    def _alternative_ways(self, alt: Alternative, entity: str, args: Args, principal: str) -> list[frozenset[Need]]:
        if alt.without:
            return [frozenset()] if self.without_grant(alt.without, principal, entity, args) else []
        if alt.is_every:
            covered = self.covered(alt, entity, args)
            choices = itertools.product(alt.actions, repeat=len(covered))
            return [frozenset(zip(c, covered, strict=True)) for c in choices]
        return [frozenset({(a, t)}) for t in self.targets(alt, entity, args) for a in alt.actions]

    @staticmethod
    def without_grant(condition: str, principal: str, entity: str, args: Args) -> bool:
        """Whether a WITHOUT_GRANT condition holds for the request."""
        if condition == "the requester is $owner":
            owner = one(args, "owner")
            return owner is not None and owner.partition(":")[2] == principal.partition(":")[2]
        if condition == "in namespace system":
            return "namespace:system" in (entity, *ancestors(entity))
        if condition == "a delegate admin of a Ranger policy about it":
            return False
        value = one(args, condition.split()[0][1:])  # "$dataset_type ...", "$artifact ...": that argument
        return value is not None and "namespace:system" in ancestors(value)

    def breakers(self, conjunct: Conjunct, entity: str, args: Args) -> list[frozenset[Need]]:
        """Sets of grants whose absence alone leaves the conjunct unmet (everything else held):
        every grant a plain alternative accepts, and for each `every` alternative the grants on
        one of the entities it covers. [] when an `every` over nothing makes it always met."""
        plain: set[Need] = set()
        holes: list[list[frozenset[Need]]] = []
        for alt in conjunct.alternatives:
            if alt.is_every:
                covered = self.covered(alt, entity, args)
                if not covered:
                    return []
                holes.append([frozenset((a, e) for a in alt.actions) for e in covered])
            else:
                plain.update((a, t) for t in self.targets(alt, entity, args) for a in alt.actions)
        if not holes:
            return [frozenset(plain)]
        count = max(len(h) for h in holes)
        return [frozenset(plain).union(*(h[i % len(h)] for h in holes)) for i in range(count)]

    def met(self, principal: str, conjunct: Conjunct, entity: str, args: Args) -> bool:
        # a wildcard holds on what exists and on what the request names (its entity, what would
        # enclose it, its arguments), not on an id only a grant names (`self or within`)
        named = {entity, *ancestors(entity, self.instance), *values(args)}
        return any(
            all(self.holds(principal, a, e, alt.own, e in self.existing or e in named) for a, e in way)
            for alt in conjunct.alternatives
            for way in self._alternative_ways(alt, entity, args, principal)
        )

    def applicable(self, row: Row, args: Args) -> list[Conjunct]:
        return [c for c in row.requires if c.applies(args)]

    def allowed(self, table: Table, principal: str, operation: str, entity: str, args: Args | None = None) -> bool:
        """Whether the table allows the request. Unknown operations and wrong types are denied."""
        args = dict(args or {})
        row = table.row(operation)
        if row is None or entity_type(entity) != row.entity_type:
            return False
        return all(self.met(principal, c, entity, args) for c in self.applicable(row, args))

    def unmet(self, table: Table, principal: str, operation: str, entity: str, args: Args) -> list[int]:
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


# ---- the grants a row's checks try ---------------------------------------------------------


def ways_of(table: Table, row: Row, args: Args) -> list[list[frozenset[Need]]]:
    """For each applicable conjunct, each set of grants that meets it (in the table's world; a
    grant on any entity the table names may count by its id)."""
    world = TableWorld(table.entities, names=table.mentioned())
    subject = table.subject(row)
    return [world.ways(c, subject, args) for c in world.applicable(row, args)]


def _thin(subject: str, ways: list[frozenset[Need]]) -> list[frozenset[Need]]:
    """Every action on the subject and on named entities, but one action per descendant
    (rotating through the actions), to keep "self or descendant" rows affordable."""
    kept: list[frozenset[Need]] = []
    seen: dict[str, int] = {}
    for way in ways:
        if not way:
            kept.append(way)
            continue
        (action, entity), *more = sorted(way)
        if more or entity == subject or subject not in ancestors(entity):
            kept.append(way)
            continue
        k = seen.setdefault(entity, len(seen))
        options = sorted(a for w in ways if len(w) == 1 for a, e in w if e == entity)
        if action == options[k % len(options)]:
            kept.append(way)
    return kept


def combinations(table: Table, row: Row, args: Args) -> list[frozenset[Need]]:
    """One way per conjunct: the first way of each, then each other way of each conjunct in turn."""
    ways = [_thin(table.subject(row), w) for w in ways_of(table, row, args)]
    default = [w[0] for w in ways]
    combos = [frozenset().union(*default)]
    for i, alternatives in enumerate(ways):
        for way in alternatives[1:]:
            chosen = list(default)
            chosen[i] = way
            combos.append(frozenset().union(*chosen))
    return list(dict.fromkeys(combos))


def overlapping(ways: Sequence[Sequence[frozenset[Need]]]) -> bool:
    """Whether a grant that meets one conjunct also serves another (then a grant chosen for one
    conjunct may be redundant: ADMIN on every application is also a privilege in the namespace)."""
    needs = [{n for way in alternatives for n in way} for alternatives in ways]
    return any(a & b for a, b in itertools.combinations(needs, 2))


def vacuous(ways: Sequence[Sequence[frozenset[Need]]]) -> bool:
    """Whether every conjunct is met with no grant at all (an `every` over nothing)."""
    return all(any(not way for way in alternatives) for alternatives in ways)


def universe(table: Table) -> set[Need]:
    """Every action on every entity the table names."""
    return {(a, e) for a in ACTIONS for e in table.mentioned()}


def to_principal(needs: Iterable[Need], who: str = PRINCIPAL) -> set[Granted]:
    return {(who, action, entity) for action, entity in needs}


def describe(needs: Iterable[Need]) -> str:
    """>>> describe([("READ", "namespace:ns1"), ("ADMIN", "dataset:ns1.ds")])
    'ADMIN on dataset:ns1.ds, READ on namespace:ns1'
    """
    return ", ".join(f"{a} on {e}" for a, e in sorted(needs)) or "no grants"


def case_label(row: Row, args: Args) -> str:
    """>>> case_label(Row("dataset.create", "requires", "003", "", ()), {"owner": "kerberosprincipal:k@X"})
    'dataset.create[owner=k@X]'
    """
    text = args_text(args)
    return f"{row.operation}[{text}]" if text else row.operation


def args_text(args: Args) -> str:
    """Arguments in a label, each id by its name, a list's joined by `+`.

    >>> args_text({"owner": "kerberosprincipal:k@X", "datasets": ["dataset:ns1.a", "dataset:ns1.b"]})
    'datasets=ns1.a+ns1.b,owner=k@X'
    """

    def name(value: str) -> str:
        return value.split(":")[-1]

    return ",".join(
        f"{k}={'+'.join(map(name, v)) if isinstance(v, list) else name(v)}" for k, v in sorted(args.items())
    )
