"""The policy IR: frozen values that every backend, the explainer and the proofs consume.

Every node carries a :class:`Span` that says where in the source it came from.
Spans are excluded from equality, so a policy parsed from its canonical
formatting equals the policy it was formatted from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


@dataclass(frozen=True, order=True)
class Span:
    """A position in a policy source: file, 1-based line and column."""

    file: str = "<policy>"
    line: int = 0
    column: int = 0
    end_line: int = 0
    end_column: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


NO_SPAN = Span()


class Scope(StrEnum):
    """Which entity an option of a requirement is about, relative to the request."""

    SELF = "self"
    PARENT = "parent"
    ANCESTOR = "ancestor"  # the enclosing entity of a named type
    ARGUMENT = "arg"  # the entity named by a request argument
    SELF_OR_DESCENDANT = "self_or_descendant"  # at least one of them
    SELF_OR_WITHIN = "self_or_within"  # the entity, or an id a grant names inside it, existing or not
    EVERY = "every"  # every descendant (of a type, or "*" for all)
    EVERY_ARGUMENT = "every_arg"  # every entity a list argument names
    RULE = "rule"  # no entity: the policy's relation ``param`` holds for the request (`by NAME`)


@dataclass(frozen=True)
class Target:
    """The entity (or entities) an option is about.

    ``param`` is the ancestor type for ANCESTOR, the argument name (without
    ``$``) for ARGUMENT and EVERY_ARGUMENT, the descendant type or ``*`` for EVERY,
    and empty otherwise.
    """

    scope: Scope
    param: str = ""
    span: Span = field(default=NO_SPAN, compare=False, repr=False)

    @property
    def every(self) -> bool:
        """Met only when each of several entities is held (EVERY, EVERY_ARGUMENT), not by one grant."""
        return self.scope in (Scope.EVERY, Scope.EVERY_ARGUMENT)

    def __str__(self) -> str:
        match self.scope:
            case Scope.SELF:
                return "self"
            case Scope.PARENT:
                return "parent"
            case Scope.ANCESTOR:
                return self.param
            case Scope.ARGUMENT:
                return f"${self.param}"
            case Scope.SELF_OR_DESCENDANT:
                return "self or descendant"
            case Scope.SELF_OR_WITHIN:
                return "self or within"
            case Scope.EVERY:
                return "every descendant" if self.param == "*" else f"every {self.param}"
            case Scope.EVERY_ARGUMENT:
                return f"every ${self.param}"
            case Scope.RULE:
                return f"by {self.param}"
        raise AssertionError(self.scope)


@dataclass(frozen=True)
class Option:
    """One way to meet a requirement: any of ``actions`` on any of ``targets``; or, with no actions
    and one target of scope RULE, the policy's relation it names holding for the request.

    ``written`` keeps the action names as the author wrote them (a set name
    such as ``any``), for formatting; ``actions`` is the expansion.
    """

    actions: tuple[str, ...]
    targets: tuple[Target, ...]
    written: tuple[str, ...] = field(default=(), compare=False)
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


@dataclass(frozen=True)
class Condition:
    """A guard on a requirement: the request argument is given (or, negated, is not)."""

    argument: str
    present: bool = True
    span: Span = field(default=NO_SPAN, compare=False, repr=False)

    def __str__(self) -> str:
        return f"${self.argument}" if self.present else f"not ${self.argument}"


@dataclass(frozen=True)
class Requirement:
    """A conjunct of an operation: met when any of its options is met.

    When ``condition`` is set the requirement applies only to requests for
    which the condition holds.
    """

    options: tuple[Option, ...]
    condition: Condition | None = None
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


@dataclass(frozen=True)
class Param:
    """A request argument an operation accepts: an entity of ``type`` or a ``bool``; with
    ``many``, a list of entities of ``type`` (`$datasets: [dataset]`), each a row of
    ``request_arg``, that a requirement asks of with `every $datasets`.

    With ``within``, the argument (each of a list) must sit in the same enclosing entity of
    that type as the request's entity (a schedule's program is a program of the schedule's
    application).
    """

    name: str
    type: str
    within: str = ""
    span: Span = field(default=NO_SPAN, compare=False, repr=False)
    many: bool = False

    def __str__(self) -> str:
        kind = f"[{self.type}]" if self.many else self.type
        return f"${self.name}: {kind}" + (f" in {self.within}" if self.within else "")


class Verb(StrEnum):
    REQUIRES = "requires"
    SHOWS = "shows"  # a listing: the requirement says which candidates are shown


@dataclass(frozen=True)
class Operation:
    """An operation on an entity type and everything it requires."""

    entity_type: str
    name: str
    verb: Verb
    requirements: tuple[Requirement, ...]
    params: tuple[Param, ...] = ()
    span: Span = field(default=NO_SPAN, compare=False, repr=False)

    @property
    def qualified(self) -> str:
        """The operation's name as requests spell it, e.g. ``namespace.create``."""
        return f"{self.entity_type}.{self.name}"


@dataclass(frozen=True)
class EntityType:
    name: str
    parent: str | None = None
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


@dataclass(frozen=True)
class ActionSet:
    name: str
    actions: tuple[str, ...]
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


@dataclass(frozen=True)
class Relation:
    """A base relation whose facts come from the world (or the policy's tables)."""

    name: str
    columns: tuple[str, ...]
    span: Span = field(default=NO_SPAN, compare=False, repr=False)

    @property
    def arity(self) -> int:
        return len(self.columns)


@dataclass(frozen=True)
class Property:
    """An invariant the policy promises: the relation ``name`` is empty in every world, or,
    with ``checker``, what the named checker of proofs/ verifies (e.g. monotonic in grants)."""

    name: str
    sentence: str
    checker: str = ""
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


@dataclass(frozen=True)
class Var:
    name: str
    span: Span = field(default=NO_SPAN, compare=False, repr=False)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Const:
    value: str
    span: Span = field(default=NO_SPAN, compare=False, repr=False)

    def __str__(self) -> str:
        return self.value


Term = Var | Const


@dataclass(frozen=True)
class Atom:
    predicate: str
    terms: tuple[Term, ...]
    negated: bool = False
    span: Span = field(default=NO_SPAN, compare=False, repr=False)

    @property
    def variables(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.terms if isinstance(t, Var) and t.name != "_")


@dataclass(frozen=True)
class Comparison:
    left: Term
    operator: str
    right: Term
    span: Span = field(default=NO_SPAN, compare=False, repr=False)

    @property
    def variables(self) -> tuple[str, ...]:
        return tuple(t.name for t in (self.left, self.right) if isinstance(t, Var))


Literal = Atom | Comparison


@dataclass(frozen=True)
class Rule:
    """``head :- body.``; a fact is a rule with an empty body."""

    head: Atom
    body: tuple[Literal, ...] = ()
    span: Span = field(default=NO_SPAN, compare=False, repr=False)


@dataclass(frozen=True)
class Policy:
    """A whole policy: its vocabulary, its tables and its Datalog rules."""

    name: str
    title: str
    actions: tuple[str, ...]
    action_sets: tuple[ActionSet, ...]
    entity_types: tuple[EntityType, ...]
    relations: tuple[Relation, ...]
    operations: tuple[Operation, ...]
    rules: tuple[Rule, ...]
    includes: tuple[str, ...] = ()
    properties: tuple[Property, ...] = ()
    span: Span = field(default=NO_SPAN, compare=False, repr=False)

    def operation(self, qualified: str) -> Operation | None:
        """The operation named ``type.name``, or None."""
        for op in self.operations:
            if op.qualified == qualified:
                return op
        return None

    def entity_type(self, name: str) -> EntityType | None:
        for et in self.entity_types:
            if et.name == name:
                return et
        return None

    def action_set(self, name: str) -> ActionSet | None:
        for s in self.action_sets:
            if s.name == name:
                return s
        return None
