"""Which grants justify a decision: every grant that can meet each requirement, not one witness.

A proof (``privilog why``) shows one grant per requirement. Least-privilege questions (which grants
could be taken away) need all of them. From the same evaluation as a decision, an allowed request's
**needs** are read: each need is a set of grants of which the request must keep at least one.

* A requirement whose options are on one target each (``self``, ``parent``, an ancestor, an
  argument's entity, or "self or descendant") is one need: every grant behind a ``met`` row,
  directly or through a group (the group's grant).
* A requirement on every entity inside (``ADMIN on every descendant``) is one need per entity it
  covers: the grants behind that entity's ``held`` rows; covering nothing, it needs nothing.
* A requirement with both kinds (``ADMIN or ADMIN on every stream``) is met by a ``met`` grant or
  by every covered entity held: for each covered entity, one need of the ``met`` grants and that
  entity's ``held`` ones (OR distributed over AND, so the needs say exactly what the prelude says).

The policies are monotonic in grants (``privilog prove`` checks it), so a request keeps every
need met, it stays allowed: removing grants never allows what was denied.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from privilog.engine.authorizer import Authorizer
from privilog.engine.decision import Request
from privilog.engine.ids import EntityId
from privilog.engine.program import Row
from privilog.engine.world import Grant

RELATIONS = ("allowed", "applies", "met", "covered", "held")
BATCH = 512  # requests evaluated together


@dataclass(frozen=True)
class Need:
    """One requirement (on one covered entity, for "every") of an allowed request: keep one of ``grants``."""

    requirement: str  # OPERATION#N
    grants: frozenset[Grant]
    covered: EntityId | None = None  # the entity inside, for a requirement on every entity


@dataclass(frozen=True)
class Justified:
    """A request decided, and for an allowed one the needs that keep it allowed."""

    request: Request
    allowed: bool
    needs: tuple[Need, ...] = ()

    def grants(self) -> frozenset[Grant]:
        """Every grant that can serve this request."""
        return frozenset(g for need in self.needs for g in need.grants)


def justify(authorizer: Authorizer, requests: Iterable[Request], batch: int = BATCH) -> Iterator[Justified]:
    """Each request decided, in order, with its needs when allowed.

    Requests on existing entities are evaluated ``batch`` at a time; one that creates an entity is
    placed in the hierarchy for its own evaluation, alone (as ``Authorizer.check_many`` does).
    """
    pending: list[Request] = []
    for request in requests:
        if authorizer.inventory.exists(request.entity):
            pending.append(request)
            if len(pending) >= batch:
                yield from _evaluate(authorizer, pending)
                pending = []
        else:
            yield from _evaluate(authorizer, pending)
            pending = []
            yield from _evaluate(authorizer, [request])
    yield from _evaluate(authorizer, pending)


def _evaluate(authorizer: Authorizer, requests: list[Request]) -> Iterator[Justified]:
    if not requests:
        return
    ids, answers = authorizer.deciding.evaluate(requests, RELATIONS)
    by_request: dict[str, dict[str, list[Row]]] = {rid: {} for rid in ids}
    for relation, rows in answers.items():
        for row in rows:
            by_request[row[0]].setdefault(relation, []).append(row)
    for rid, request in ids.items():
        found = by_request[rid]
        if not found.get("allowed"):
            yield Justified(request, False)
        else:
            yield Justified(request, True, _needs(found, _every(authorizer, request.operation), authorizer))


def _every(authorizer: Authorizer, operation: str) -> frozenset[str]:
    """The requirements of ``operation`` (``OPERATION#N``) with an option on every entity inside."""
    op = authorizer.operation(operation)
    return frozenset(
        f"{op.qualified}#{number}"
        for number, requirement in enumerate(op.requirements, start=1)
        if any(t.every for o in requirement.options for t in o.targets)
    )


def _grants(authorizer: Authorizer, via: str, action: str, entity: str) -> list[Grant]:
    """The grants behind a principal's holding an action on an entity: its grant on the entity,
    and its wildcard grants that match it."""
    held = EntityId.parse(entity)
    if not authorizer.loaded.patterns:
        return [Grant(via, action, held)]
    return [Grant(via, action, named) for named in authorizer.granted_as(via, action, held)]


def _needs(found: Mapping[str, list[Row]], every: frozenset[str], authorizer: Authorizer) -> tuple[Need, ...]:
    applies = {row[1] for row in found.get("applies", ())}
    met: dict[str, set[Grant]] = {}
    for _, iid, action, entity, via in found.get("met", ()):
        met.setdefault(iid, set()).update(_grants(authorizer, via, action, entity))
    held: dict[tuple[str, str], set[Grant]] = {}
    for _, iid, covered, action, via in found.get("held", ()):
        held.setdefault((iid, covered), set()).update(_grants(authorizer, via, action, covered))
    covered_by: dict[str, list[str]] = {}
    for _, iid, covered in found.get("covered", ()):
        covered_by.setdefault(iid, []).append(covered)
    needs: list[Need] = []
    for iid in sorted(applies):
        direct = met.get(iid, set())
        if iid not in every:
            if direct:  # always, for an allowed request: its requirement is met
                needs.append(Need(iid, frozenset(direct)))
            continue
        for covered in sorted(covered_by.get(iid, ())):
            needs.append(Need(iid, frozenset(direct | held.get((iid, covered), set())), EntityId.parse(covered)))
    return tuple(needs)
