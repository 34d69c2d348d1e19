"""CDAP's authorization ids for entities and principals, parsed and validated.

An entity id is ``type:name`` where the name's dotted parts say where the
entity sits: ``program:ns1.app.service.api`` is program ``api`` (a service)
of application ``app`` in namespace ``ns1``. The hierarchy is derived from the
id alone.

>>> EntityId.parse("program:ns1.app.service.api").parent()
EntityId(type='application', name='ns1.app')
>>> EntityId.parse("dataset:ns1.sales.2024").parts
('ns1', 'sales.2024')
>>> EntityId.parse("namespace:ns1").parent()
EntityId(type='instance', name='cdap')
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dsl.errors import OneLineError, did_you_mean


class IdError(OneLineError):
    """A malformed entity or principal id."""


_PLAIN = r"[A-Za-z0-9_\-]+"
_NAMESPACE = r"[A-Za-z0-9_]+"
_DOTTED = r"[A-Za-z0-9_\-][A-Za-z0-9_.\-]*"
_KERBEROS = r"[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)?(@[A-Za-z0-9_.\-]+)?"

PROGRAM_KINDS = ("mapreduce", "spark", "workflow", "service", "worker", "flow")


@dataclass(frozen=True)
class _Shape:
    parent: str | None  # the parent's type
    pattern: str  # the whole name
    example: str


# Each type's id shape. The name's first part(s) are the parent's name.
_SHAPES: dict[str, _Shape] = {
    "instance": _Shape(None, _PLAIN, "instance:cdap"),
    "namespace": _Shape("instance", _NAMESPACE, "namespace:ns1"),
    "artifact": _Shape("namespace", rf"{_NAMESPACE}\.{_PLAIN}", "artifact:ns1.etl"),
    "application": _Shape("namespace", rf"{_NAMESPACE}\.{_PLAIN}", "application:ns1.app"),
    "program": _Shape(
        "application",
        rf"{_NAMESPACE}\.{_PLAIN}\.({'|'.join(PROGRAM_KINDS)})\.{_PLAIN}",
        "program:ns1.app.service.api",
    ),
    "schedule": _Shape("application", rf"{_NAMESPACE}\.{_PLAIN}\.{_PLAIN}", "schedule:ns1.app.nightly"),
    "dataset": _Shape("namespace", rf"{_NAMESPACE}\.{_DOTTED}", "dataset:ns1.sales"),
    "dataset_module": _Shape("namespace", rf"{_NAMESPACE}\.{_DOTTED}", "dataset_module:ns1.mod"),
    "dataset_type": _Shape("namespace", rf"{_NAMESPACE}\.{_DOTTED}", "dataset_type:ns1.table"),
    "stream": _Shape("namespace", rf"{_NAMESPACE}\.{_PLAIN}", "stream:ns1.events"),
    "securekey": _Shape("namespace", rf"{_NAMESPACE}\.{_PLAIN}", "securekey:ns1.password"),
    "kerberosprincipal": _Shape(None, _KERBEROS, "kerberosprincipal:alice@EXAMPLE.COM"),
}
_COMPILED = {name: re.compile(shape.pattern + r"\Z") for name, shape in _SHAPES.items()}

ENTITY_TYPES: tuple[str, ...] = tuple(_SHAPES)
PRINCIPAL_KINDS = ("user", "group", "role")
_PRINCIPAL_NAME = re.compile(r"[A-Za-z0-9_.@\-]+\Z")

DEFAULT_INSTANCE = "cdap"


def parent_type(type_name: str) -> str | None:
    """The type an entity of ``type_name`` sits in, by CDAP's id scheme."""
    return _SHAPES[type_name].parent


@dataclass(frozen=True, order=True)
class EntityId:
    """An entity in CDAP's authorization id form (no versions)."""

    type: str
    name: str

    def __post_init__(self) -> None:
        """Every EntityId is valid, however it is made: what privilog writes, it reads back."""
        pattern = _COMPILED.get(self.type) if isinstance(self.type, str) else None
        if pattern is None:
            hint = did_you_mean(str(self.type), _SHAPES) or f"entity types are {', '.join(_SHAPES)}"
            raise IdError(f"unknown entity type `{self.type}`: {hint}")
        if not isinstance(self.name, str) or not pattern.match(self.name):
            example = _SHAPES[self.type].example
            raise IdError(f"malformed {self.type} id `{self.type}:{self.name}`: expected the form `{example}`")

    @classmethod
    def parse(cls, text: str) -> EntityId:
        """Parse ``type:name``; raise :class:`IdError` saying what is wrong and what is expected."""
        if not isinstance(text, str):
            raise IdError(f"an entity id is text such as `namespace:ns1`, not {text!r}")
        type_name, colon, name = text.partition(":")
        if not colon:
            raise IdError(f"malformed entity id `{text}`: expected TYPE:NAME, such as `namespace:ns1`")
        if type_name not in _SHAPES:
            hint = did_you_mean(type_name, _SHAPES) or f"entity types are {', '.join(_SHAPES)}"
            raise IdError(f"unknown entity type `{type_name}` in `{text}`: {hint}")
        return cls(type_name, name)  # the name is checked by __post_init__

    @property
    def parts(self) -> tuple[str, ...]:
        """The dotted parts of the name; dataset-like names keep their dots."""
        if self.type in ("dataset", "dataset_module", "dataset_type"):
            namespace, _, rest = self.name.partition(".")
            return (namespace, rest)
        if self.type in ("kerberosprincipal", "instance", "namespace"):
            return (self.name,)
        return tuple(self.name.split("."))

    def parent(self, instance: str = DEFAULT_INSTANCE) -> EntityId | None:
        """The entity this one sits in, or None at the top."""
        parent = _SHAPES[self.type].parent
        if parent is None:
            return None
        if parent == "instance":
            return EntityId("instance", instance)
        if parent == "namespace":
            return EntityId("namespace", self.parts[0])
        return EntityId("application", ".".join(self.parts[:2]))

    def ancestors(self, instance: str = DEFAULT_INSTANCE) -> list[EntityId]:
        """Every enclosing entity, nearest first."""
        chain: list[EntityId] = []
        current = self.parent(instance)
        while current is not None:
            chain.append(current)
            current = current.parent(instance)
        return chain

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"


INSTANCE_NAME = _COMPILED["instance"]


def parse_instance(text: str) -> str:
    """Validate an instance's name (as the name of an ``instance:`` id) and return it."""
    if not isinstance(text, str) or not INSTANCE_NAME.match(text):
        raise IdError(f"malformed instance name {text!r}: a name is letters, digits, `_` and `-`, such as cdap")
    return text


def parse_principal(text: str) -> str:
    """Validate a principal id (``user:alice``, ``group:eng``, ``role:ops``) and return it."""
    if not isinstance(text, str):
        raise IdError(f"a principal is text such as `user:alice`, not {text!r}")
    kind, colon, name = text.partition(":")
    if not colon or kind not in PRINCIPAL_KINDS:
        hint = f"; did you mean `user:{text}`?" if not colon and _PRINCIPAL_NAME.match(text) else ""
        raise IdError(f"malformed principal `{text}`: expected user:NAME, group:NAME or role:NAME{hint}")
    if not _PRINCIPAL_NAME.match(name):
        raise IdError(f"malformed principal `{text}`: a name is letters, digits and `_ . @ -`")
    return text
