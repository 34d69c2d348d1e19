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
from operator import itemgetter
from typing import TYPE_CHECKING

from privilog.dsl.errors import OneLineError, did_you_mean
from privilog.dsl.limits import ID_LENGTH


class IdError(OneLineError):
    """A malformed entity or principal id."""


# Below this many characters an id is never checked against PRIVILOG_MAX_ID_LENGTH (whose
# least value it is): reading the environment costs more than making the id.
_SHORT = ID_LENGTH.least


def _refuse_long(text: str) -> None:
    """:class:`IdError` when ``text`` is longer than ``PRIVILOG_MAX_ID_LENGTH`` allows."""
    limit = ID_LENGTH.value()
    if len(text) > limit:
        raise IdError(ID_LENGTH.refusal(f"the id `{text[:40]}...`", len(text), limit))


# The name rules of CDAP 5.1's ids (co.cask.cdap.proto.id.EntityId and its subclasses): every id
# CDAP accepts is accepted here, and nothing else.
_PLAIN = r"[A-Za-z0-9_\-]+"  # application, program, schedule, stream (ENTITY_ID_PATTERN)
_NAMESPACE = r"[A-Za-z0-9_]+"  # NamespaceId
_ARTIFACT = r"[A-Za-z0-9_.\-]+"  # ArtifactId: dots too (split from the namespace at the first one)
_DATASET = r"[A-Za-z0-9_.$\-]+"  # DatasetId, DatasetModuleId, DatasetTypeId: `$` for nested Java classes
_SECURE_KEY = r"[a-z0-9_\-]+"  # SecureKeyId: lower case only
# KerberosPrincipalId: not validated by CDAP; here printable ASCII but blank, `:` and the wildcards `*`
# and `?`, so that a kerberos id is a plain id or a pattern (engine/patterns.py) by the same rule as every other
_KERBEROS = r"[!-)+-9;->@-~]+"

PROGRAM_KINDS = ("mapreduce", "spark", "workflow", "service", "worker", "flow")


@dataclass(frozen=True)
class _Shape:
    parent: str | None  # the parent's type
    pattern: str  # the whole name
    example: str


# Each type's id shape. The name's first part(s) are the parent's name.
SHAPES: dict[str, _Shape] = {
    "instance": _Shape(None, _PLAIN, "instance:cdap"),
    "namespace": _Shape("instance", _NAMESPACE, "namespace:ns1"),
    "artifact": _Shape("namespace", rf"{_NAMESPACE}\.{_ARTIFACT}", "artifact:ns1.etl"),
    "application": _Shape("namespace", rf"{_NAMESPACE}\.{_PLAIN}", "application:ns1.app"),
    "program": _Shape(
        "application",
        rf"{_NAMESPACE}\.{_PLAIN}\.({'|'.join(PROGRAM_KINDS)})\.{_PLAIN}",
        "program:ns1.app.service.api",
    ),
    "schedule": _Shape("application", rf"{_NAMESPACE}\.{_PLAIN}\.{_PLAIN}", "schedule:ns1.app.nightly"),
    "dataset": _Shape("namespace", rf"{_NAMESPACE}\.{_DATASET}", "dataset:ns1.sales"),
    "dataset_module": _Shape("namespace", rf"{_NAMESPACE}\.{_DATASET}", "dataset_module:ns1.mod"),
    "dataset_type": _Shape("namespace", rf"{_NAMESPACE}\.{_DATASET}", "dataset_type:ns1.table"),
    "stream": _Shape("namespace", rf"{_NAMESPACE}\.{_PLAIN}", "stream:ns1.events"),
    "securekey": _Shape("namespace", rf"{_NAMESPACE}\.{_SECURE_KEY}", "securekey:ns1.password"),
    "kerberosprincipal": _Shape(None, _KERBEROS, "kerberosprincipal:alice@EXAMPLE.COM"),
}
_COMPILED = {name: re.compile(shape.pattern + r"\Z") for name, shape in SHAPES.items()}

ENTITY_TYPES: tuple[str, ...] = tuple(SHAPES)
PRINCIPAL_KINDS = ("user", "group", "role")
_PRINCIPAL_NAME = re.compile(r"[A-Za-z0-9_.@\-]+\Z")

DEFAULT_INSTANCE = "cdap"


def parent_type(type_name: str) -> str | None:
    """The type an entity of ``type_name`` sits in, by CDAP's id scheme."""
    return SHAPES[type_name].parent


class EntityId(tuple[str, str]):
    """An entity in CDAP's authorization id form (no versions): the pair (type, name).

    A tuple, so that hashing, comparing and ordering ids run in C: loading a world
    of a million entities spends much of its time on exactly that. Every EntityId
    is valid, however it is made: what privilog writes, it reads back.
    """

    __slots__ = ()

    def __new__(cls, type: str, name: str) -> EntityId:
        pattern = _COMPILED.get(type) if isinstance(type, str) else None
        if pattern is None:
            hint = did_you_mean(str(type), SHAPES) or f"entity types are {', '.join(SHAPES)}"
            raise IdError(f"unknown entity type `{type}`: {hint}")
        if isinstance(name, str) and len(name) > _SHORT:
            _refuse_long(f"{type}:{name}")
        if not isinstance(name, str) or not pattern.match(name):
            raise IdError(f"malformed {type} id `{type}:{name}`: expected the form `{SHAPES[type].example}`")
        return tuple.__new__(cls, (type, name))

    @classmethod
    def _enclosing(cls, type_name: str, name: str) -> EntityId:
        """The id of what encloses a valid id: valid by construction (its parts matched)."""
        return tuple.__new__(cls, (type_name, name))

    if TYPE_CHECKING:

        @property
        def type(self) -> str: ...

        @property
        def name(self) -> str: ...

    else:
        type = property(itemgetter(0), doc="The entity type: the id's prefix.")
        name = property(itemgetter(1), doc="The name after the type's colon.")

    def __getnewargs__(self) -> tuple[str, str]:
        return (self[0], self[1])

    def __repr__(self) -> str:
        return f"EntityId(type={self[0]!r}, name={self[1]!r})"

    @classmethod
    def parse(cls, text: str) -> EntityId:
        """Parse ``type:name``; raise :class:`IdError` saying what is wrong and what is expected."""
        if not isinstance(text, str):
            raise IdError(f"an entity id is text such as `namespace:ns1`, not {text!r}")
        if len(text) > _SHORT:
            _refuse_long(text)
        type_name, colon, name = text.partition(":")
        if not colon:
            raise IdError(f"malformed entity id `{text}`: expected TYPE:NAME, such as `namespace:ns1`")
        if type_name not in SHAPES:
            hint = did_you_mean(type_name, SHAPES) or f"entity types are {', '.join(SHAPES)}"
            raise IdError(f"unknown entity type `{type_name}` in `{text}`: {hint}")
        shape = SHAPES[type_name]
        if not _COMPILED[type_name].match(name):
            if "*" in name or "?" in name:
                raise IdError(f"`{text}` is a wildcard: only a grant may name one; here name one {type_name}")
            raise IdError(f"malformed {type_name} id `{text}`: expected the form `{shape.example}`")
        return tuple.__new__(cls, (type_name, name))

    @property
    def parts(self) -> tuple[str, ...]:
        """The dotted parts of the name; dataset-like and artifact names keep their dots."""
        kind, name = self
        if kind in ("dataset", "dataset_module", "dataset_type", "artifact"):
            namespace, _, rest = name.partition(".")
            return (namespace, rest)
        if kind in ("kerberosprincipal", "instance", "namespace"):
            return (name,)
        return tuple(name.split("."))

    def parent(self, instance: str = DEFAULT_INSTANCE) -> EntityId | None:
        """The entity this one sits in, or None at the top."""
        kind, name = self
        parent = SHAPES[kind].parent
        if parent is None:
            return None
        if parent == "instance":
            return EntityId("instance", instance)  # the instance's name is not this id's: check it
        if parent == "namespace":
            return EntityId._enclosing("namespace", name.partition(".")[0])
        return EntityId._enclosing("application", ".".join(name.split(".", 2)[:2]))

    def ancestors(self, instance: str = DEFAULT_INSTANCE) -> list[EntityId]:
        """Every enclosing entity, nearest first."""
        chain: list[EntityId] = []
        current = self.parent(instance)
        while current is not None:
            chain.append(current)
            current = current.parent(instance)
        return chain

    def __str__(self) -> str:
        return f"{self[0]}:{self[1]}"


INSTANCE_NAME = _COMPILED["instance"]


def parse_instance(text: str) -> str:
    """Validate an instance's name (as the name of an ``instance:`` id) and return it."""
    if isinstance(text, str) and len(text) > _SHORT:
        _refuse_long(text)
    if not isinstance(text, str) or not INSTANCE_NAME.match(text):
        raise IdError(f"malformed instance name {text!r}: a name is letters, digits, `_` and `-`, such as cdap")
    return text


def parse_principal(text: str) -> str:
    """Validate a principal id (``user:alice``, ``group:eng``, ``role:ops``) and return it."""
    if not isinstance(text, str):
        raise IdError(f"a principal is text such as `user:alice`, not {text!r}")
    if len(text) > _SHORT:
        _refuse_long(text)
    kind, colon, name = text.partition(":")
    if not colon or kind not in PRINCIPAL_KINDS:
        hint = f"; did you mean `user:{text}`?" if not colon and _PRINCIPAL_NAME.match(text) else ""
        raise IdError(f"malformed principal `{text}`: expected user:NAME, group:NAME or role:NAME{hint}")
    if not _PRINCIPAL_NAME.match(name):
        raise IdError(f"malformed principal `{text}`: a name is letters, digits and `_ . @ -`")
    return text
