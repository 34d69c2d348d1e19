"""Bottom-up evaluation of components, and their upkeep as base facts change.

Every derived relation of a component is evaluated semi-naively: each rule once
over what is there, then, for recursive rules, once per new row of the
component's own relations, until nothing new appears.

World-derived components stay materialized and are maintained, one change of
base facts at a time, in evaluation order:

* **insertions** semi-naively from the new rows of the relations a component uses;
* **deletions** by DRed (delete and rederive, Gupta, Mumick and Subrahmanian 1993):
  first every row with a derivation that used a deleted row, evaluated over the
  state before the change; then each of those rows that still has a derivation
  in the state after it comes back;
* a component that **negates** a relation that changed is evaluated again and
  compared, which is correct whatever the rules, and costs that component only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from privilog.dsl.ir import Atom, Const, Rule, Var
from privilog.engine.analysis import Component
from privilog.engine.compiled.closure import Closure
from privilog.engine.compiled.plan import Maker, Slot, compile_conjunction
from privilog.engine.compiled.relation import Relation, Row, lookup_rows

SMALL = frozenset({"request", "request_arg"})  # a handful of rows: join from them first
Store = dict[str, Relation]


@dataclass
class Changes:
    """Net rows added to and removed from each relation by one update."""

    added: dict[str, set[Row]] = field(default_factory=dict)
    removed: dict[str, set[Row]] = field(default_factory=dict)

    def note(self, relation: str, added: set[Row], removed: set[Row]) -> None:
        both = added & removed
        added, removed = added - both, removed - both
        if added:
            self.added.setdefault(relation, set()).update(added)
        if removed:
            self.removed.setdefault(relation, set()).update(removed)

    def touches(self, relations: Iterable[str]) -> bool:
        return any(r in self.added or r in self.removed for r in relations)


class RulePlans:
    """The plans of one rule: evaluate it, from one delta, over the old state, or test a head row."""

    def __init__(self, rule: Rule):
        self.rule = rule
        self.atoms = [i for i, b in enumerate(rule.body) if isinstance(b, Atom)]
        self.positives = [i for i in self.atoms if not rule.body[i].negated]  # type: ignore[union-attr]
        self._plans: dict[tuple[str, int], Maker] = {}
        head_vars = [t.name for t in rule.head.terms if isinstance(t, Var)]
        self.entry = list(dict.fromkeys(head_vars))

    def predicate(self, i: int) -> str:
        literal = self.rule.body[i]
        assert isinstance(literal, Atom)
        return literal.predicate

    def _slots(self, delta: int, union: bool) -> list[Slot | None]:
        n = len(self.rule.body)
        slots: list[Slot | None] = []
        for i, literal in enumerate(self.rule.body):
            if not isinstance(literal, Atom):
                slots.append(None)
            elif i == delta:
                slots.append(Slot(i, small=True))
            else:
                small = literal.predicate in SMALL
                slots.append(Slot(i, union=n + i if union and not literal.negated else None, small=small))
        return slots

    def plan(self, variant: str, position: int = -1, sources: Sequence[Relation | None] = ()) -> Maker:
        """The plan of a variant, its join order chosen from the sizes of ``sources`` (the
        relations it is first run with: one per literal)."""
        found = self._plans.get((variant, position))
        if found is None:

            def estimate(i: int, columns: tuple[int, ...]) -> float:
                relation = sources[i] if i < len(sources) else None
                if relation is None:
                    return 0.0
                if isinstance(relation, Closure):  # its lookups walk: no index to build
                    if not relation.rows or not columns:
                        return float(len(relation.rows))
                    return len(relation.rows) / max(len(relation.index(columns)), 1)
                return lookup_rows(relation, columns)

            guess = estimate if sources else None
            if variant == "head":
                found = compile_conjunction(self.rule.body, self._slots(-1, False), self.entry, None, guess)
            else:
                found = compile_conjunction(
                    self.rule.body, self._slots(position, variant == "old"), [], self.rule.head.terms, guess
                )
            self._plans[(variant, position)] = found
        return found

    def head_entry(self, row: Row) -> list[str] | None:
        """The entry values of the head-bound plan for ``row``, or None if the head cannot match it."""
        values: dict[str, str] = {}
        for term, value in zip(self.rule.head.terms, row, strict=True):
            if isinstance(term, Const):
                if term.value != value:
                    return None
            elif values.setdefault(term.name, value) != value:
                return None
        return [values[name] for name in self.entry]


class Evaluator:
    """Evaluates and maintains components over a store of relations."""

    def __init__(self, store: Store, arity: Mapping[str, int]):
        self.store = store
        self.arity = dict(arity)
        self._rules: dict[int, RulePlans] = {}
        # components kept as closures walked when asked (engine.compiled.closure): their deltas
        # are worked out from their edges' instead of by their rules
        self.walked: dict[frozenset[str], tuple[str, Closure]] = {}

    def rules(self, component: Component) -> list[RulePlans]:
        out = []
        for rule in component.rules:
            key = id(rule)
            if key not in self._rules:
                self._rules[key] = RulePlans(rule)
            out.append(self._rules[key])
        return out

    def relation(self, name: str) -> Relation:
        found = self.store.get(name)
        if found is None:
            found = self.store[name] = Relation(name, self.arity[name])
        return found

    # ---- evaluation from nothing -------------------------------------------------------

    def evaluate(self, component: Component, target: Store) -> None:
        """Derive every row of ``component`` into ``target`` (fresh relations), reading the rest
        from the store."""
        for name in component.relations:
            target[name] = Relation(name, self.arity[name])

        def source(name: str) -> Relation:
            return target[name] if name in target else self.relation(name)

        plans = self.rules(component)
        found: dict[str, list[Row]] = {}
        for plans_of in plans:
            rows = found.setdefault(plans_of.rule.head.predicate, [])
            sources = [source(b.predicate) if isinstance(b, Atom) else None for b in plans_of.rule.body]
            plans_of.plan("full", -1, sources)(sources)(rows.append)  # type: ignore[arg-type]
        delta = {name: target[name].add(rows) for name, rows in found.items()}
        while component.recursive and any(delta.values()):
            found = {}
            delta_relations = {name: Relation(name, self.arity[name], rows) for name, rows in delta.items() if rows}
            for plans_of in plans:
                rows = found.setdefault(plans_of.rule.head.predicate, [])
                for i in plans_of.positives:
                    name = plans_of.predicate(i)
                    if name not in delta_relations:
                        continue
                    sources = [
                        (delta_relations[name] if j == i else source(b.predicate)) if isinstance(b, Atom) else None
                        for j, b in enumerate(plans_of.rule.body)
                    ]
                    plans_of.plan("delta", i, sources)(sources)(rows.append)  # type: ignore[arg-type]
            delta = {name: target[name].add(rows) for name, rows in found.items()}

    # ---- upkeep ----------------------------------------------------------------------

    def update(
        self, components: Iterable[Component], added: Mapping[str, set[Row]], removed: Mapping[str, set[Row]]
    ) -> Changes:
        """Apply a change of base facts, then bring each component up to date, in order."""
        changes = Changes()
        components = list(components)
        for name, rows in removed.items():
            changes.note(name, set(), self.relation(name).remove(rows))
        for name, rows in added.items():
            changes.note(name, self.relation(name).add(rows), set())
        for component in components:
            if not changes.touches(component.uses):
                continue
            walked = self.walked.get(component.relations)
            if walked is not None:  # its changes worked out only for a component that reads them
                edge, closure = walked
                if any(closure.name in c.uses for c in components if c is not component):
                    gained, lost = closure.delta(changes.added.get(edge, set()), changes.removed.get(edge, set()))
                    changes.note(closure.name, gained, lost)
                continue
            if changes.touches(component.negated):
                self._recompute(component, changes)
                continue
            if changes.touches(n for n in component.uses if n in changes.removed):
                self._delete(component, changes)
            if any(n in changes.added for n in component.uses):
                self._insert(component, changes)
        return changes

    def _recompute(self, component: Component, changes: Changes) -> None:
        fresh: Store = {}
        self.evaluate(component, fresh)
        for name in component.relations:
            current = self.relation(name)
            new, old = fresh[name].rows, set(current.rows)
            changes.note(name, current.add(new - old), current.remove(old - new))

    def _insert(self, component: Component, changes: Changes) -> None:
        plans = self.rules(component)
        frontier = {
            name: Relation(name, self.arity[name], rows)
            for name, rows in changes.added.items()
            if name in component.uses and name not in component.relations
        }
        while frontier:
            found: dict[str, list[Row]] = {}
            for plans_of in plans:
                rows = found.setdefault(plans_of.rule.head.predicate, [])
                for i in plans_of.positives:
                    name = plans_of.predicate(i)
                    if name in frontier:
                        sources = [
                            (frontier[name] if j == i else self.relation(b.predicate)) if isinstance(b, Atom) else None
                            for j, b in enumerate(plans_of.rule.body)
                        ]
                        plans_of.plan("delta", i, sources)(sources)(rows.append)  # type: ignore[arg-type]
            frontier = {}
            for name, rows in found.items():
                new = self.relation(name).add(rows)
                if new:
                    changes.note(name, new, set())
                    frontier[name] = Relation(name, self.arity[name], new)
            if not component.recursive:
                break

    def _delete(self, component: Component, changes: Changes) -> None:
        plans = self.rules(component)
        n_gone = {name: Relation(name, self.arity[name], rows) for name, rows in changes.removed.items()}
        frontier = {
            name: gone for name, gone in n_gone.items() if name in component.uses and name not in component.relations
        }
        doomed: dict[str, set[Row]] = {name: set() for name in component.relations}
        empty: dict[str, Relation] = {}
        while frontier:  # over the state before the change: current rows and the gone ones
            found: dict[str, list[Row]] = {}
            for plans_of in plans:
                rows = found.setdefault(plans_of.rule.head.predicate, [])
                body = plans_of.rule.body
                for i in plans_of.positives:
                    name = plans_of.predicate(i)
                    if name not in frontier:
                        continue
                    sources: list[Relation | None] = [
                        (frontier[name] if j == i else self.relation(b.predicate)) if isinstance(b, Atom) else None
                        for j, b in enumerate(body)
                    ]
                    for b in body:
                        if isinstance(b, Atom):
                            gone = n_gone.get(b.predicate)
                            if gone is None:
                                gone = empty.setdefault(b.predicate, Relation(b.predicate, self.arity[b.predicate]))
                            sources.append(gone)
                        else:
                            sources.append(None)
                    plans_of.plan("old", i, sources)(sources)(rows.append)  # type: ignore[arg-type]
            frontier = {}
            for name, rows in found.items():
                present = self.relation(name).rows
                new = {r for r in rows if r in present and r not in doomed[name]}
                if new:
                    doomed[name] |= new
                    frontier[name] = Relation(name, self.arity[name], new)
            if not component.recursive:
                break
        for name, over in doomed.items():
            self.relation(name).remove(over)
        back = self._rederive(plans, doomed)
        for name, over in doomed.items():
            changes.note(name, set(), over - back.get(name, set()))

    def _rederive(self, plans: list[RulePlans], doomed: dict[str, set[Row]]) -> dict[str, set[Row]]:
        """The doomed rows that still have a derivation, put back (to a fixpoint for recursion)."""
        back: dict[str, set[Row]] = {}
        waiting = {name: set(rows) for name, rows in doomed.items() if rows}
        progress = True
        while progress and waiting:
            progress = False
            for plans_of in plans:
                name = plans_of.rule.head.predicate
                candidates = waiting.get(name)
                if not candidates:
                    continue
                sources = [self.relation(b.predicate) if isinstance(b, Atom) else None for b in plans_of.rule.body]
                derivable = plans_of.plan("head", -1, sources)(sources)  # type: ignore[arg-type]
                back_rows: list[Row] = []
                for row in candidates:
                    entry = plans_of.head_entry(row)
                    if entry is not None and derivable(*entry):
                        back_rows.append(row)
                if back_rows:
                    progress = True
                    candidates.difference_update(back_rows)
                    self.relation(name).add(back_rows)
                    back.setdefault(name, set()).update(back_rows)
        return back
