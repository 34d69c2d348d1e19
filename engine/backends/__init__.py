"""Evaluators of a compiled :class:`~engine.program.Program`.

Every backend answers the same three calls; pyDatalog is the reference and
any other backend is held to its answers by a differential test. A backend
that compiles decision plans (the compiled one) says so by also answering
:class:`FastDecisions`, which the authorizer asks with ``isinstance``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar, runtime_checkable

from privilog.dsl.ir import Atom
from privilog.engine.program import Program, Row

Decider = Callable[[str, str, Mapping[str, str]], bool]  # principal, entity, arguments -> allowed
Assumed = TypeVar("Assumed")  # what a backend's assume made, for its retract


class Backend(Protocol):
    """What the authorizer needs of an evaluator."""

    name: str

    def add(self, relation: str, rows: Iterable[Row]) -> None:
        """Assert base facts."""

    def remove(self, relation: str, rows: Iterable[Row]) -> None:
        """Retract base facts."""

    def query(self, relation: str, bound: Mapping[int, str] | None = None) -> set[Row]:
        """Every row of ``relation`` whose columns at the keys of ``bound`` hold those values."""


@runtime_checkable
class FastDecisions(Protocol[Assumed]):
    """What a backend with decision plans adds to :class:`Backend`: allow or deny without the proof.

    Optional: the compiled backend answers it; pyDatalog and Spark do not, and the authorizer
    then evaluates the rules for a bare decision too.
    """

    def decider(self, operation: str) -> Decider | None:
        """The decision plan of ``operation``, for a request whose facts are in place; None when it has none."""

    def assume(self, added: Mapping[str, set[Row]]) -> Assumed:
        """Add base facts for a moment (a create's entity, placed for one decision)."""

    def retract(self, changes: Assumed) -> None:
        """Undo what :meth:`assume` did."""


RowsPlan = Callable[[str, str, Mapping[str, str]], list[tuple[str, ...]]]  # principal, entity, arguments -> rows


@runtime_checkable
class FastRows(Protocol):
    """What a backend with decision plans may add besides: the rows of a request-derived relation
    for one request, without evaluating the rules (``privilog decide``'s unmet requirements and
    the grants that allow). Optional, as :class:`FastDecisions`; the compiled backend answers it."""

    def rows(self, operation: str, goal: Atom) -> RowsPlan | None:
        """A plan of ``goal``'s rows (the values of its variables) for a request of ``operation``
        whose facts are in place, its request the unfolding's (engine.unfold.REQUEST_ID); None
        when it has none."""

    def test(self, operation: str, goal: Atom) -> Decider | None:
        """A plan answering whether ``goal`` holds (its variables existential), stopping at the first
        row; None when it has none."""


def make_backend(name: str, program: Program, preloaded: Any = None) -> Backend:
    """The backend called ``name`` for ``program`` (``preloaded``: a compiled backend's captured state,
    engine.compiled.snapshot.Preloaded, to start from)."""
    if name == "compiled":
        from privilog.engine.compiled import CompiledBackend

        return CompiledBackend(program, preloaded)
    if preloaded is not None:
        raise ValueError("only the compiled backend starts from a captured state")
    if name == "pydatalog":
        from privilog.engine.backends.pydatalog import PyDatalogBackend

        return PyDatalogBackend(program)
    from privilog.dsl.errors import PrivilogError

    raise PrivilogError(
        f"unknown backend `{name}`: the backends are compiled (the default) and pydatalog (the reference)"
    )
