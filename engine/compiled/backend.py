"""The compiled backend: the program's rules as Python plans over indexed relations.

Static and world-derived relations are materialized when the backend starts
and kept current with each change of base facts (engine.compiled.evaluate),
except those no decision uses (``in_group``; ``Analysis.on_demand``): each is
materialized the first time it is asked for, and kept current from then on, so
that a world whose closure of memberships is quadratic (a deep chain of groups)
loads and answers in linear time unless that closure is asked for.
Request-derived relations are evaluated when they are asked for, from the
requests asserted at that moment; and each operation has a decision plan
(engine.compiled.specialize) that answers allow or deny from the materialized
relations without evaluating any of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from privilog.engine.analysis import Analysis, Component, Kind, analyse, written_apart
from privilog.engine.compiled.closure import Closure, closure_edge
from privilog.engine.compiled.evaluate import Changes, Evaluator, Store
from privilog.engine.compiled.relation import Relation
from privilog.engine.program import Program, Row

if TYPE_CHECKING:
    from privilog.dsl.ir import Atom
    from privilog.engine.compiled.snapshot import Preloaded
    from privilog.engine.compiled.specialize import Decider, DecisionPlans, RowsPlan


class CompiledBackend:
    """Evaluates a program bottom-up with compiled plans; the default backend."""

    name = "compiled"

    def __init__(self, program: Program, preloaded: Preloaded | None = None):
        program = written_apart(program)
        self.program = program
        self.analysis: Analysis = analyse(program)
        self.store: Store = {}
        self.evaluator = Evaluator(self.store, program.relations)
        # started from a captured state (engine.compiled.snapshot): its relations as they stood, the
        # changes since held back until the plans have claimed their joins (settle)
        self._deferred: list[tuple[str, set[Row] | None, set[Row] | None]] | None = None
        self._claimable: dict[str, str] = {}
        if preloaded is not None:
            self.store.update(preloaded.relations)
            for name, relation in preloaded.relations.items():
                self.evaluator.arity.setdefault(name, relation.arity)
            self._deferred, self._claimable = [], dict(preloaded.aux)
        self._derived = frozenset(r.head.predicate for r in program.rules)
        for name, rows in program.facts.items():
            self.evaluator.relation(name).add(rows)
        on_demand = self.analysis.on_demand
        self._maintained = [c for c in self.analysis.of_kind(Kind.STATIC, Kind.WORLD) if not c.relations & on_demand]
        for component in self._maintained:  # in order: what a component reads is there before it
            if preloaded is not None and component.relations <= preloaded.relations.keys():
                continue  # its rows are the captured state's, kept current from there
            self._start(component)
        self._on_demand = {name: c for c in self.analysis.components for name in c.relations if name in on_demand}
        self._per_request = self.analysis.of_kind(Kind.REQUEST)
        self._answers: Store | None = None
        self._decisions: DecisionPlans | None = None

    # ---- the Backend protocol -----------------------------------------------------------

    def add(self, relation: str, rows: Iterable[Row]) -> None:
        self._change(relation, added=set(rows))

    def remove(self, relation: str, rows: Iterable[Row]) -> None:
        self._change(relation, removed=set(rows))

    def _change(self, relation: str, added: set[Row] | None = None, removed: set[Row] | None = None) -> None:
        if relation in self._derived:  # its rows are its rules' (the Spark engine refuses them too)
            raise ValueError(f"`{relation}` is derived by rules; only base relations take facts")
        if self._deferred is not None:
            self._deferred.append((relation, added, removed))
            return
        self._answers = None
        if self.analysis.kinds.get(relation) is Kind.REQUEST:
            target = self.evaluator.relation(relation)
            target.add(added or ())
            target.remove(removed or ())
            return
        self.evaluator.update(
            self._maintained, {relation: added} if added else {}, {relation: removed} if removed else {}
        )

    def settle(self) -> None:
        """Started from a captured state: apply the changes held back since (the world given against the
        captured one), now that the decision plans made so far have claimed the joins they keep, which are
        maintained with the rest from here on. The joins no plan claimed are dropped (a plan made later
        makes its own). Nothing to do otherwise."""
        if self._deferred is None:
            return
        deferred, self._deferred = self._deferred, None
        for name in self._claimable.values():
            self.store.pop(name, None)
        self._claimable.clear()
        for relation, added, removed in deferred:
            self._change(relation, added, removed)

    def assume(self, added: Mapping[str, set[Row]]) -> Changes:
        """Add base facts for a moment (a create's entity, placed for one decision).

        Returns every change it made, derived relations included, for :meth:`retract`,
        which puts each relation back as it was row for row: cheaper than deleting the
        facts again, which would rederive what they supported.
        """
        self.settle()
        self._answers = None
        return self.evaluator.update(self._maintained, added, {})

    def retract(self, changes: Changes) -> None:
        """Undo what :meth:`assume` did."""
        self._answers = None
        for name, rows in changes.added.items():
            self.evaluator.relation(name).remove(rows)
        for name, rows in changes.removed.items():
            self.evaluator.relation(name).add(rows)

    def query(self, relation: str, bound: Mapping[int, str] | None = None) -> set[Row]:
        self.settle()
        source = self._relation(relation)
        if not bound:
            return set(source.rows)
        columns = tuple(sorted(bound))
        if len(columns) == source.arity:
            row = tuple(bound[c] for c in columns)
            return {row} if row in source.rows else set()
        key = bound[columns[0]] if len(columns) == 1 else tuple(bound[c] for c in columns)
        return set(source.index(columns).get(key, ()))

    def _relation(self, name: str) -> Relation:
        if self.analysis.kinds.get(name) is Kind.REQUEST and name not in ("request", "request_arg"):
            if self._answers is None:
                answers: Store = {}
                for component in self._per_request:
                    self.evaluator.evaluate(component, answers)
                self._answers = answers
            return self._answers[name]
        if name in self._on_demand:
            self._materialize(name)
        return self.evaluator.relation(name)

    def _materialize(self, name: str) -> None:
        """Materialize an on-demand relation (after the on-demand ones it uses) and keep it
        current from now on. Its component goes last among the maintained ones: nothing
        there uses it, and everything it uses comes before it."""
        component = self._on_demand[name]
        for used in sorted(component.uses - component.relations):
            if used in self._on_demand:
                self._materialize(used)
        for member in component.relations:
            del self._on_demand[member]
        self._start(component)
        self._maintained.append(component)

    def _start(self, component: Component) -> None:
        """Evaluate a maintained component into the store; a transitive closure is walked when
        asked instead, not materialized (engine.compiled.closure)."""
        found = closure_edge(component) if component.kind is Kind.WORLD else None
        if found is None:
            self.evaluator.evaluate(component, self.store)
            return
        (name,) = component.relations
        closure = Closure(name, self.evaluator.relation(found[0]), found[1])
        self.store[name] = closure  # type: ignore[assignment]
        self.evaluator.walked[component.relations] = (found[0], closure)

    # ---- deciding without explaining ------------------------------------------------------

    def _plans(self) -> DecisionPlans:
        if self._decisions is None:
            from privilog.engine.compiled.specialize import DecisionPlans

            self._decisions = DecisionPlans(
                self.program, self.analysis, self.evaluator, self._maintained, self._claimable
            )
        return self._decisions

    def decider(self, operation: str) -> Decider | None:
        """The decision plan of ``operation`` (``decide(principal, entity, args)``), for requests
        whose entity exists (see ``Authorizer.decide``); None when it has none."""
        return self._plans().decider(operation)

    def rows(self, operation: str, goal: Atom) -> RowsPlan | None:
        """A plan listing the rows of a request-derived goal for requests of ``operation``
        (``DecisionPlans.rows``), on the same terms as :meth:`decider`; None when it has none."""
        return self._plans().rows(operation, goal)

    def test(self, operation: str, goal: Atom) -> Decider | None:
        """A plan answering whether a request-derived goal holds (``DecisionPlans.test``); None when it has none."""
        return self._plans().test(operation, goal)
