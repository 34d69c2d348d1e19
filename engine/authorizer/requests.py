"""Requests read and checked: a principal, an operation, an entity and arguments, from text.

A request that names an unknown operation, a wrong entity or a bad argument is a
:class:`RequestError` that says what is wrong and what is expected. Ids parsed once are
kept (bounded), so that a server's repeated questions do not parse them again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from privilog.dsl.errors import PrivilogError, article, did_you_mean
from privilog.dsl.ir import Operation, Policy
from privilog.dsl.limits import LIST_ARGUMENT
from privilog.engine.authorizer.loaded import LoadedWorld
from privilog.engine.decision import Request
from privilog.engine.ids import ENTITY_TYPES, EntityId, IdError, parent_type, parse_principal
from privilog.engine.patterns import is_pattern, parse_pattern

TRUE_WORDS = {"true", "yes", "1", "on"}
FALSE_WORDS = {"false", "no", "0", "off"}  # never "": a missing value is not the permissive reading
ID_CACHE = 1 << 20  # parsed ids kept, at most



# What an operation's verb, mistyped as another system's word for it, most likely means, best first:
# `namespace.read` is `namespace.get` (not `namespace.create`, the closest spelling).
SYNONYMS: dict[str, tuple[str, ...]] = {
    "read": ("get", "read", "list"),
    "view": ("get", "read", "list"),
    "show": ("get", "list"),
    "describe": ("get",),
    "fetch": ("get", "read"),
    "info": ("get",),
    "status": ("get_status", "get"),
    "ls": ("list",),
    "write": ("update", "write"),
    "modify": ("update", "write"),
    "edit": ("update", "write"),
    "change": ("update", "write"),
    "set": ("update", "write"),
    "put": ("update", "write"),
    "alter": ("update",),
    "delete": ("delete", "drop", "remove"),
    "drop": ("drop", "delete"),
    "remove": ("remove", "delete", "drop"),
    "destroy": ("delete", "drop"),
    "create": ("create", "add", "deploy"),
    "add": ("add", "create"),
    "new": ("create", "add"),
    "make": ("create", "add"),
    "upload": ("add", "deploy"),
    "deploy": ("deploy", "create", "add"),
    "run": ("start",),
    "execute": ("start",),
    "launch": ("start",),
    "kill": ("stop",),
    "halt": ("stop",),
    "pause": ("suspend", "stop"),
    "resume": ("resume", "start"),
}


def _meant(name: str, names: list[str]) -> str:
    """A hint naming the operation of the same type whose verb means what ``name``'s does (SYNONYMS).

    >>> _meant("namespace.read", ["namespace.create", "namespace.get", "namespace.list"])
    'did you mean `namespace.get`?'
    >>> _meant("dataset.modify", ["dataset.read", "dataset.update"]), _meant("dataset.frob", ["dataset.read"])
    ('did you mean `dataset.update`?', '')
    """
    kind, _, verb = name.rpartition(".")
    known = set(names)
    for meant in SYNONYMS.get(verb.lower(), ()):
        if f"{kind}.{meant}" in known:
            return f"did you mean `{kind}.{meant}`?"
    return ""


class RequestError(PrivilogError):
    """A request that names an unknown operation, a wrong entity or a bad argument."""


def check_hierarchy(policy: Policy) -> None:
    """The policy's entity types must agree with CDAP's id scheme, which derives the hierarchy."""
    for entity_type in policy.entity_types:
        if entity_type.name not in ENTITY_TYPES:
            raise PrivilogError(
                f"{entity_type.span}: entity type `{entity_type.name}` has no id form in privilog "
                f"(known: {', '.join(ENTITY_TYPES)})"
            )
        expected = parent_type(entity_type.name)
        if entity_type.parent != expected:
            where = f"in {expected}" if expected else "at the top"
            raise PrivilogError(
                f"{entity_type.span}: `{entity_type.name}` ids place it {where}; write `entity {entity_type.name}"
                + (f" in {expected}`" if expected else "`")
            )


class Requests:
    """A policy's requests read from text and checked against it (and, for an argument declared
    `in TYPE`, against the world's hierarchy)."""

    def __init__(self, policy: Policy, loaded: LoadedWorld):
        self.policy = policy
        self.loaded = loaded
        self.operations = {op.qualified: op for op in policy.operations}
        self.entities: dict[str, EntityId] = {}  # ids parsed once (valid ones only)
        self.principals: set[str] = set()

    def operation(self, name: str) -> Operation:
        """The operation called ``name`` (``type.name``), or a RequestError saying what exists."""
        if not isinstance(name, str):
            raise RequestError(f"an operation is text such as `namespace.get`, not {name!r}")
        op = self.operations.get(name)
        if op is not None:
            return op
        if not name.isprintable():
            raise RequestError(f"unknown operation {name!r}: operations are written TYPE.NAME")
        names = [o.qualified for o in self.policy.operations]
        if "." not in name:
            near = [n for n in names if n.endswith(f".{name}")][:4]
            hint = f"; for example {', '.join(near)}" if near else ""
            raise RequestError(f"unknown operation `{name}`: operations are written TYPE.NAME{hint}")
        hint = _meant(name, names) or did_you_mean(name, names)
        if not hint:
            kind = name.split(".")[0]
            same = [n for n in names if n.startswith(kind + ".")]
            hint = f"{kind} operations are {', '.join(same)}" if same else "run `privilog ops` to list them"
        raise RequestError(f"unknown operation `{name}` in policy {self.policy.name}: {hint}")

    def entity(self, text: str | EntityId) -> EntityId:
        """Parse an entity id and check that the policy knows its type."""
        if not isinstance(text, str | EntityId):
            raise RequestError(f"an entity id is text such as `namespace:ns1`, not {text!r}")
        if isinstance(text, str):
            known = self.entities.get(text)
            if known is not None:
                return known
        try:
            entity = text if isinstance(text, EntityId) else EntityId.parse(text)
        except IdError as error:
            raise RequestError(str(error)) from None
        if self.policy.entity_type(entity.type) is None:
            raise RequestError(f"policy {self.policy.name} has no entity type `{entity.type}`")
        if isinstance(text, str):
            if len(self.entities) >= ID_CACHE:  # bounded: a stream of distinct ids cannot grow it
                self.entities.clear()
            self.entities[text] = entity
        return entity

    def granted_entity(self, text: str | EntityId) -> EntityId:
        """What a grant names: an entity id, or a wildcard pattern (engine.patterns) of a type the policy knows."""
        if isinstance(text, EntityId) or not isinstance(text, str) or not is_pattern(text):
            return self.entity(text)
        try:
            pattern = parse_pattern(text)
        except IdError as error:
            raise RequestError(str(error)) from None
        if self.policy.entity_type(pattern.type) is None:
            raise RequestError(f"policy {self.policy.name} has no entity type `{pattern.type}`")
        return pattern

    def request(
        self, principal: str, operation: str, entity: str | EntityId, args: Mapping[str, object] | None = None
    ) -> Request:
        """Validate a request; raise RequestError with what is wrong and what is expected."""
        if not isinstance(principal, str):
            raise RequestError(f"a principal is text such as `user:alice`, not {principal!r}")
        if args is not None and not isinstance(args, Mapping):
            raise RequestError(f"request arguments are a mapping of NAME to VALUE, not {args!r}")
        if principal in self.principals:
            who = principal
        else:
            try:
                who = parse_principal(principal)
            except IdError as error:
                raise RequestError(str(error)) from None
            if len(self.principals) >= ID_CACHE:
                self.principals.clear()
            self.principals.add(who)
        op = self.operation(operation)
        target = self.entity(entity)
        if target.type != op.entity_type:
            raise RequestError(
                f"`{op.qualified}` acts on {article(op.entity_type)}, but `{target}` is {article(target.type)}"
            )
        lists = frozenset(p.name for p in op.params if p.many)
        return Request(who, op.qualified, target, self.arguments(op, args or {}, target), lists)

    def _check_within(self, op: Operation, within: str, name: str, entity: EntityId, target: EntityId) -> None:
        """An argument declared `in TYPE` must sit in the request entity's enclosing TYPE."""
        instance = self.loaded.world.instance
        mine = [a for a in target.ancestors(instance) if a.type == within]
        theirs = [a for a in entity.ancestors(instance) if a.type == within]
        if mine != theirs:
            where = mine[0] if mine else within
            raise RequestError(
                f"`${name}` of `{op.qualified}` must be {article(entity.type)} in {where}, not `{entity}`"
            )

    def arguments(self, op: Operation, args: Mapping[str, object], target: EntityId) -> tuple[tuple[str, str], ...]:
        """A request's arguments checked against the operation's parameters, as sorted pairs of text."""
        params = {p.name: p for p in op.params}
        out: list[tuple[str, str]] = []
        for raw_name, value in args.items():
            if not isinstance(raw_name, str):
                raise RequestError(f"a request argument's name is text such as `artifact`, not {raw_name!r}")
            name = raw_name.lstrip("$")
            param = params.get(name)
            if param is None:
                takes = ", ".join(f"${p}" for p in params) or "no arguments"
                shown = f"`${name}`" if name.isprintable() else repr(name)
                raise RequestError(f"`{op.qualified}` takes {takes}; not {shown}")
            if param.type == "bool":
                if value is not None and not isinstance(value, str | bool | int):
                    raise RequestError(f"`${name}` is true or false, not {value!r}")
                if isinstance(value, int) and value.bit_length() > 64:  # too long for str() past 4300 digits
                    raise RequestError(f"`${name}` is true or false, not a number of {value.bit_length()} bits")
                word = str(value).strip().lower()
                if word in TRUE_WORDS:
                    out.append((name, "true"))
                elif word not in FALSE_WORDS:
                    shown = "an empty value" if not word else f"`{value}`" if str(value).isprintable() else repr(value)
                    raise RequestError(f"`${name}` is true or false, not {shown}")
                continue
            values: Sequence[object] = [value]
            if not param.many and isinstance(value, list | tuple):
                raise RequestError(f"`${name}` of `{op.qualified}` names one {param.type}, not a list")
            if param.many and isinstance(value, list | tuple):
                if len(value) > LIST_ARGUMENT.value():
                    raise RequestError(LIST_ARGUMENT.refusal(f"`${name}` of `{op.qualified}`", len(value)))
                values = value
            for one in values:
                if one is not None and not isinstance(one, str | EntityId):  # None reads `None`, as in the pipeline
                    raise RequestError(f"`${name}` of `{op.qualified}` names {article(param.type)} id, not {one!r}")
                entity = self.entity(str(one))
                if entity.type != param.type:
                    raise RequestError(f"`${name}` of `{op.qualified}` names {article(param.type)}, not `{entity}`")
                if param.within:
                    self._check_within(op, param.within, name, entity, target)
                out.append((name, str(entity)))
        return tuple(sorted(set(out)))
