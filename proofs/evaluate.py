"""Many worlds through one authorizer: who is allowed, and which property relations have rows.

A proof asks the same few questions in thousands of worlds, so one authorizer per
policy serves them all: the world is swapped and ``refresh()``ed (only the facts
that changed reach the backend), the requests are asserted in one batch, and only
``allowed`` and the property relations are read back, through one relation that
unites them (``proof_answer``): pyDatalog then derives ``allowed`` once for all of
them, which halves the cost of a world. A full :class:`Decision`, with its proof
and fixes, is made only for the counterexample a reader will see.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace

from privilog.dsl.errors import PrivilogError
from privilog.dsl.ir import Atom, Const, Policy, Rule, Term, Var
from privilog.engine.authorizer import Authorizer
from privilog.engine.decision import Decision, Request
from privilog.engine.ids import EntityId
from privilog.engine.program import Row
from privilog.engine.world import World


class ProvingAuthorizer(Authorizer):
    """An authorizer that reads back any relations for a batch of requests, not only decisions."""

    def answer(self, requests: Sequence[Request], relations: Sequence[str]) -> tuple[list[str], dict[str, set[Row]]]:
        """Assert the requests, read every row of each relation, retract.

        Returns the request ids, in the order of ``requests``, and the rows. Requests on
        one entity are asserted together; a request places its entity in the hierarchy
        (it may not exist yet), so requests on different entities are asserted apart,
        lest one's entity count as a descendant for another.
        """
        ids = [self.deciding.request_id("q") for _ in requests]
        by_entity: dict[EntityId, list[tuple[str, Request]]] = {}
        for rid, request in zip(ids, requests, strict=True):
            by_entity.setdefault(request.entity, []).append((rid, request))
        rows: dict[str, set[Row]] = {relation: set() for relation in relations}
        for batch in by_entity.values():
            for relation, found in self._answer_batch(batch, relations).items():
                rows[relation] |= found
        return ids, rows

    def _answer_batch(self, batch: list[tuple[str, Request]], relations: Sequence[str]) -> dict[str, set[Row]]:
        added: dict[str, set[Row]] = {}
        for rid, request in batch:
            for relation, rows in self.deciding.request_facts(rid, request).items():
                added.setdefault(relation, set()).update(rows)
        for relation, rows in added.items():
            self.backend.add(relation, rows)
        try:
            return {relation: self.backend.query(relation) for relation in relations}
        finally:
            for relation, rows in added.items():
                self.backend.remove(relation, rows)


@dataclass(frozen=True)
class Violation:
    """A row of a property relation: the request it names (an index into the batch), if any."""

    promise: str
    request: int | None
    row: Row


@dataclass(frozen=True)
class Outcome:
    """What a batch of requests came to in one world."""

    allowed: frozenset[int]  # indices into the batch
    violations: tuple[Violation, ...] = ()


ANSWER = "proof_answer"
_NONE = "-"


def answering(policy: Policy, relations: Sequence[str], arity: dict[str, int]) -> Policy:
    """The policy with one relation more, ``proof_answer(R, NAME, X...)``: a row for each
    allowed request (NAME ``allowed``) and each row of each property relation."""
    if any(r.head.predicate == ANSWER for r in policy.rules):
        raise PrivilogError(f"`{ANSWER}` is a relation of the proofs; a policy cannot define it")
    width = max([1, *(arity[name] for name in relations)])
    rules = []
    for name, size in [("allowed", 1), *((n, arity[n]) for n in relations)]:
        columns: list[Term] = [Var(f"X{i}") for i in range(size)]
        first = columns[0] if columns else Const(_NONE)
        padded = [first, Const(name), *columns[1:]]
        padded += [Const(_NONE)] * (width + 1 - len(padded))
        rules.append(Rule(Atom(ANSWER, tuple(padded)), (Atom(name, tuple(columns)),)))
    return replace(policy, rules=(*policy.rules, *rules))


@dataclass
class Evaluator:
    """One policy's authorizer, its property relations, and a cache of worlds already decided."""

    authorizer: ProvingAuthorizer
    relations: dict[str, int]  # the property relations (each must stay empty), with their arity
    evaluations: int = 0
    _cache: dict[Hashable, Outcome] = field(default_factory=dict)

    @classmethod
    def for_policy(cls, policy: Policy, relations: Sequence[str]) -> Evaluator:
        """An evaluator of ``policy`` that reads ``relations`` in every world."""
        arity = {r.name: r.arity for r in policy.relations}
        for rule in policy.rules:
            arity.setdefault(rule.head.predicate, len(rule.head.terms))
        authorizer = ProvingAuthorizer(answering(policy, relations, arity))
        return cls(authorizer, {name: arity[name] for name in relations})

    def load(self, world: World) -> None:
        """Make ``world`` the one the authorizer decides in."""
        self.authorizer.world = world
        self.authorizer.refresh()

    def outcome(self, world: World, requests: Sequence[Request]) -> Outcome:
        """Decide ``requests`` in ``world`` and read the property relations."""
        self.load(world)
        if not requests:
            return Outcome(frozenset())
        ids, answers = self.authorizer.answer(requests, (ANSWER,))
        self.evaluations += 1
        index = {rid: i for i, rid in enumerate(ids)}
        allowed = frozenset(index[r[0]] for r in answers[ANSWER] if r[1] == "allowed" and r[0] in index)
        violations = tuple(
            Violation(row[1], index.get(row[0]), (row[0], *row[2 : 1 + self.relations[row[1]]]))
            for row in sorted(answers[ANSWER])
            if row[1] != "allowed"
        )
        return Outcome(allowed, violations)

    def cached(self, key: Hashable, world: Callable[[], World], requests: Sequence[Request]) -> Outcome:
        """The outcome for a world identified by ``key`` (built by ``world()`` only when needed)."""
        found = self._cache.get(key)
        if found is None:
            found = self.outcome(world(), requests)
            self._cache[key] = found
        return found

    def forget(self) -> None:
        """Drop the cache (its keys belong to one case of the bounded search)."""
        self._cache.clear()

    def decision(self, world: World, request: Request) -> Decision:
        """The full decision, with its proof or its unmet requirements, for a reader."""
        self.load(world)
        return self.authorizer.check(request)
