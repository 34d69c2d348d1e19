"""Evaluators of a compiled :class:`~engine.program.Program`.

Every backend answers the same three calls; pyDatalog is the reference and
any other backend is held to its answers by a differential test.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from privilog.engine.program import Program, Row


class Backend(Protocol):
    """What the authorizer needs of an evaluator."""

    name: str

    def add(self, relation: str, rows: Iterable[Row]) -> None:
        """Assert base facts."""

    def remove(self, relation: str, rows: Iterable[Row]) -> None:
        """Retract base facts."""

    def query(self, relation: str, bound: Mapping[int, str] | None = None) -> set[Row]:
        """Every row of ``relation`` whose columns at the keys of ``bound`` hold those values."""


def make_backend(name: str, program: Program) -> Backend:
    """The backend called ``name`` for ``program``."""
    if name == "compiled":
        from privilog.engine.compiled import CompiledBackend

        return CompiledBackend(program)
    if name == "pydatalog":
        from privilog.engine.backends.pydatalog import PyDatalogBackend

        return PyDatalogBackend(program)
    from privilog.dsl.errors import PrivilogError

    raise PrivilogError(
        f"unknown backend `{name}`: the backends are compiled (the default) and pydatalog (the reference)"
    )
