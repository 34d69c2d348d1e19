"""Decision plans: ``allowed`` unfolded for one operation and compiled to Python functions.

A decision plan answers allow or deny for one operation from the request's
principal, entity and arguments, reading only the materialized relations. It
is built in three steps, in the spirit of magic sets (nothing is evaluated that
the request cannot reach):

Steps 1 and 2 are the shared pass of :mod:`engine.unfold`:

1. **Specialize** (:func:`specialize`): the request-derived rules, with the
   operation put in and every positive literal over a static relation
   (``requires``, ``guard``, ``operation``, ...) replaced by the rows it matches.
2. **Unfold** (:class:`Unfolder`): ``allowed`` is rewritten, by resolution, into
   conjunctions over world-derived and base relations only. The request becomes
   three values bound on entry (the principal, the entity, the arguments), so
   ``request(R, P, O, E)`` disappears, ``request_arg`` is a dict lookup, and the
   requirement ids, actions and scopes are constants. A negated request-derived
   literal (``not denied(R)``) becomes a call of a function unfolded the same way.
3. **Compile** (:class:`_Writer`): each conjunction becomes nested loops over hash
   indexes, joined in the order the relations' sizes suggest, with ``return True``
   at the innermost point. Where a conjunction only asks whether some rows of
   world relations join (``holds(P, A, D, _), ancestor(D, E)`` for "any privilege on
   the entity or inside it"), the join becomes a world-derived relation of its own
   over the columns the request binds, materialized and maintained with the others:
   one lookup however many grants or descendants there are.

No text from a policy becomes Python source: variables get generated names,
constants are read from a tuple, relations from a tuple of sources.

Recursive request-derived rules, a negated ``request``, or an unfolding that grows
past :data:`MAX_CONJUNCTIONS` are not compiled: those operations are decided by the
generic evaluator (:meth:`DecisionPlans.decider` answers None).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Mapping
from typing import Any

from privilog.dsl.ir import Atom, Comparison, Const, Literal, Rule, Term, Var
from privilog.engine.analysis import Analysis, Component, Kind
from privilog.engine.compiled.evaluate import Evaluator
from privilog.engine.compiled.plan import EMPTY, OPERATORS, repeated_free
from privilog.engine.compiled.relation import lookup_rows
from privilog.engine.program import Program
from privilog.engine.unfold import (
    ARG,
    ENTITY,
    PRINCIPAL,
    REQUEST_ID,
    Conjunction,
    NotCompiled,
    Unfolder,
    specialize,
)

INLINE = 600  # characters of a function's expression its callers may test in place

Decider = Callable[[str, str, Mapping[str, str]], bool]
RowsPlan = Callable[[str, str, Mapping[str, str]], list[tuple[str, ...]]]  # principal, entity, arguments -> rows


class DecisionPlans:
    """One compiled decision function for every operation of a program."""

    def __init__(
        self,
        program: Program,
        analysis: Analysis,
        evaluator: Evaluator,
        maintained: list[Component],
        claimable: dict[str, str] | None = None,
    ):
        self.program = program
        self.analysis = analysis
        self.evaluator = evaluator
        self.maintained = maintained
        requested = analysis.of_kind(Kind.REQUEST)
        generic = [r for c in requested for r in c.rules]
        self._recursive = any(c.recursive for c in requested) or not any(r.head.predicate == "allowed" for r in generic)
        self._generic = generic
        self._aux: dict[str, str] = {}
        # joins already in the evaluator's store (a captured state: engine.compiled.snapshot), by key;
        # the backend empties it once the changes since the capture are applied
        self._claimable = claimable if claimable is not None else {}
        self._deciders: dict[str, Decider | None] = {}
        self._rows: dict[tuple[str, Atom], RowsPlan | None] = {}
        self._tests: dict[tuple[str, Atom], Decider | None] = {}
        self._specialized: dict[str, dict[str, list[Rule]]] = {}  # an operation's rules, specialized

    def decider(self, operation: str) -> Decider | None:
        """The plan of ``operation``: ``decide(principal, entity, args)``; None when it has none.

        The entity and everything enclosing it must exist when the plan runs (a create
        places the new entity first: ``Authorizer.decide``).
        """
        if operation in self._deciders:
            return self._deciders[operation]
        found: Decider | None = None
        if not self._recursive:
            try:
                found = self._compile(operation)
            except NotCompiled:
                found = None
        self._deciders[operation] = found
        return found

    # ---- compiling ---------------------------------------------------------------------

    def kind(self, relation: str) -> Kind:
        return self.analysis.kinds.get(relation, Kind.STATIC)

    def rows(self, operation: str, goal: Atom) -> RowsPlan | None:
        """A plan listing the rows of a request-derived ``goal`` for one request of ``operation``:
        ``rows(principal, entity, args)``, a list of the values of the goal's variables, in their
        order, once or more each (None when it has no plan, as :meth:`decider`). The goal's request
        is :data:`engine.unfold.REQUEST_ID`; its other terms are constants or variables
        (``met(REQUEST_ID, "dataset.read#1", A, E, V)``: each grant meeting that requirement)."""
        key = (operation, goal)
        if key in self._rows:
            return self._rows[key]
        found: RowsPlan | None = None
        if not self._recursive:
            try:
                found = self._compile(operation, goal)
            except NotCompiled:
                found = None
        self._rows[key] = found
        return found

    def test(self, operation: str, goal: Atom) -> Decider | None:
        """A plan answering whether a request-derived ``goal`` holds for one request of ``operation``
        (its variables existential): as :meth:`rows`, but it stops at the first row."""
        key = (operation, goal)
        if key in self._tests:
            return self._tests[key]
        found: Decider | None = None
        if not self._recursive:
            try:
                found = self._compile(operation, goal, first=True)
            except NotCompiled:
                found = None
        self._tests[key] = found
        return found

    def _compile(self, operation: str, rows: Atom | None = None, first: bool = False) -> Any:
        op = next((o for o in self.program.policy.operations if o.qualified == operation), None)
        if op is not None and any(p.many for p in op.params):
            raise NotCompiled  # a list argument has several values; a plan reads one a name (``g``)
        rules = self._specialized.get(operation)
        if rules is None:  # static relations do not change: once an operation, for all its plans
            static = {name for name, kind in self.analysis.kinds.items() if kind is Kind.STATIC}
            rules = self._specialized[operation] = {}
            for rule in specialize(self._generic, operation, self.static_rows, static):
                rules.setdefault(rule.head.predicate, []).append(rule)
        derived = frozenset(n for n, k in self.analysis.kinds.items() if k is Kind.REQUEST and n != ARG)
        unfolder = Unfolder(rules, derived | {"request"}, operation)
        module = _Module(self, unfolder)
        allowed = Atom("allowed", (Const(REQUEST_ID),))
        top = module.function(rows or allowed, ()) if rows is None or first else module.rows_function(rows)
        text = "\n".join(
            ["def make(S, K, E):"]
            + ["    " + line for line in module.prologue]
            + ["    " + line for function in module.functions for line in function]
            + [f"    return {top}"]
        )
        namespace: dict[str, Any] = {}
        try:
            code = compile(text, "<privilog decision plan>", "exec")
        except (SyntaxError, RecursionError):  # nested too deep for Python (an unfolding of many rules)
            raise NotCompiled from None
        exec(code, namespace)
        relations = [self.evaluator.relation(name) for name in module.relations]
        return namespace["make"](relations, tuple(module.constants), EMPTY)

    def static_rows(self, relation: str) -> set[tuple[str, ...]]:
        return self.evaluator.relation(relation).rows

    def estimate(self, relation: str, columns: tuple[int, ...]) -> float:
        """Rows of ``relation`` expected for one lookup with ``columns`` bound, as it is now.

        From the index on ``columns`` when there is one; else from a sample of rows, so
        that weighing a join order builds no index that the plan will not use.
        """
        source = self.evaluator.relation(relation)
        if not source.rows:
            return 0.5  # empty now; it may not stay so
        return lookup_rows(source, columns)

    def aux_keys(self) -> dict[str, str]:
        """The joins kept so far: each one's canonical rule (its key) and its relation's name."""
        return dict(self._aux)

    def aux(self, atoms: list[Atom], columns: list[str]) -> Atom:
        """A world-derived relation holding the join of ``atoms`` over ``columns``, kept current."""
        head_vars = tuple(Var(c) for c in columns)
        key = _canonical(Rule(Atom("aux", head_vars), tuple(atoms)))
        name = self._aux.get(key)
        if name is None:
            claimed = self._claimable.pop(key, None)
            held = self.evaluator.store.get(claimed) if claimed is not None else None
            if claimed is not None and held is not None and held.arity == len(columns):
                name = claimed  # the captured state's rows of this very join: kept, not evaluated
            else:
                held, number = None, len(self._aux)
                while f"_join{number}" in self.evaluator.store or f"_join{number}" in self._claimable.values():
                    number += 1  # (a name a captured join holds, until the backend drops those unclaimed)
                name = f"_join{number}"
            self._aux[key] = name
            defined = Rule(Atom(name, head_vars), tuple(atoms))
            self.evaluator.arity[name] = len(columns)
            component = Component(frozenset({name}), (defined,), Kind.WORLD)
            if held is None:
                enabled = gc.isenabled()
                gc.disable()  # as loading a world: many new rows, no cycles
                try:
                    self.evaluator.evaluate(component, self.evaluator.store)
                finally:
                    if enabled:
                        gc.enable()
            self.maintained.append(component)
            self.analysis.kinds[name] = Kind.WORLD
        return Atom(name, head_vars)


# ---- code ------------------------------------------------------------------------------


class _Module:
    """The generated functions of one operation's plan, with their constants and relations."""

    def __init__(self, plans: DecisionPlans, unfolder: Unfolder):
        self.plans = plans
        self.unfolder = unfolder
        self.constants: list[str] = []
        self._constant_names: dict[str, str] = {}
        self.relations: list[str] = []
        self.prologue: list[str] = []
        self.functions: list[list[str]] = []
        self._readers: dict[tuple[str, tuple[int, ...]], str] = {}
        self._names: dict[tuple[object, ...], str] = {}
        # a function of the principal, entity and arguments alone whose conjunctions are only
        # tests, as one expression: its callers test it in place (no call)
        self.expressions: dict[str, str] = {}

    def const(self, value: str) -> str:
        name = self._constant_names.get(value)
        if name is None:
            name = self._constant_names[value] = f"c{len(self.constants)}"
            self.prologue.append(f"{name} = K[{len(self.constants)}]")
            self.constants.append(value)
        return name

    def reader(self, relation: str, columns: tuple[int, ...], arity: int) -> str:
        """The local name of a relation's index on ``columns`` (its row set when none or all)."""
        whole = not columns or len(columns) == arity
        key = (relation, () if whole else columns)
        if key not in self._readers:
            if relation not in self.relations:
                self.relations.append(relation)
            name = f"x{len(self._readers)}"
            slot = self.relations.index(relation)
            self.prologue.append(f"{name} = S[{slot}].rows" if whole else f"{name} = S[{slot}].index({columns!r})")
            self._readers[key] = name
        return self._readers[key]

    def function(self, goal: Atom, params: tuple[str, ...]) -> str:
        """The name of the function answering whether ``goal`` holds; ``params`` are the
        variables of ``goal`` the caller passes (after the principal, entity and arguments)."""
        pattern = tuple(
            ("p", params.index(t.name)) if isinstance(t, Var) and t.name in params else t for t in goal.terms
        )
        key = (goal.predicate, pattern)
        name = self._names.get(key)
        if name is not None:
            return name
        name = self._names[key] = f"f{len(self._names)}"
        rigid = frozenset((PRINCIPAL, ENTITY, *params))
        lines = [f"def {name}({', '.join(['p', 'e', 'g', *(f'a{i}' for i in range(len(params)))])}):"]
        simple = not params
        tests: list[str] = []
        for conjunction in self.unfolder.conjunctions(Atom(goal.predicate, goal.terms), rigid):
            names = {PRINCIPAL: "p", ENTITY: "e", **{v: f"a{i}" for i, v in enumerate(params)}}
            writer = _Writer(self, names)
            lines += writer.conjunction(conjunction)
            simple = simple and writer.simple
            tests.append(" and ".join(f"({t})" for t in writer.tests) or "True")
        lines.append("    return False")
        self.functions.append(lines)
        expression = " or ".join(f"({t})" for t in tests) or "False"
        if simple and len(expression) <= INLINE:
            self.expressions[name] = expression
        return name


    def rows_function(self, goal: Atom) -> str:
        """The name of the function listing the rows of ``goal`` (the values of its variables)."""
        name = self._names[("rows", goal)] = f"f{len(self._names)}"
        lines = [f"def {name}(p, e, g):", "    out = []"]
        for conjunction, head in self.unfolder.ways(goal, frozenset((PRINCIPAL, ENTITY)), yielding=True):
            writer = _Writer(self, {PRINCIPAL: "p", ENTITY: "e"}, head)
            lines += writer.conjunction(conjunction)
        lines.append("    return out")
        self.functions.append(lines)
        return name


class _Writer:
    """Nested loops for one conjunction, at the top of a function: ``return True`` when it holds
    (or, given a ``head``, its values appended to ``out``: a row of a rows plan)."""

    def __init__(self, module: _Module, names: dict[str, str], head: tuple[Term, ...] | None = None):
        self.module = module
        self.head = head
        # the variables the head yields: bound by the loops, kept out of any join made apart
        self.outputs = {t.name for t in head or () if isinstance(t, Var)}
        self.plans = module.plans
        self.names = dict(names)  # variable -> Python name, for the variables bound so far
        self.lines: list[str] = []
        self.depth = 1
        self.counter = 0
        self.tests: list[str] = []  # the conditions of the ifs, in order
        self.simple = True  # only ifs: no loop, no name bound (then it is one expression)

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def open(self, text: str) -> None:
        self.line(text)
        self.depth += 1
        self.simple = False

    def test(self, condition: str) -> None:
        """``if condition:`` around the rest of the conjunction."""
        self.line(f"if {condition}:")
        self.depth += 1
        self.tests.append(condition)

    def term(self, t: Term) -> str:
        return self.module.const(t.value) if isinstance(t, Const) else self.names[t.name]

    def fresh(self, variable: str) -> str:
        self.counter += 1
        self.names[variable] = f"v{self.counter}"
        return self.names[variable]

    def bound(self, t: Term) -> bool:
        return isinstance(t, Const) or t.name in self.names

    def conjunction(self, conjunction: Conjunction) -> list[str]:
        body = self._factored(list(conjunction))
        positives = [b for b in body if isinstance(b, Atom) and not b.negated]
        filters = [b for b in body if b not in positives]
        mentioned = set(self.names) | {v for b in positives for v in b.variables}
        for f in filters:
            if isinstance(f, Comparison) and not set(f.variables) <= mentioned:
                raise NotCompiled  # dsl.check's safety pass rules this out
        calls = self.module.unfolder.derived_relations

        def place(with_calls: bool) -> None:
            for f in list(filters):
                is_call = isinstance(f, Atom) and f.predicate in calls
                if (with_calls or not is_call) and all(v in self.names for v in f.variables if v in mentioned):
                    filters.remove(f)
                    self._filter(f)

        while True:
            place(with_calls=False)  # tests first, then lookups that bind nothing, then calls
            if positives:
                best = min(positives, key=self._cost)
                if self._cost(best) == 0.0:
                    positives.remove(best)
                    self._atom(best, body)
                    continue
            place(with_calls=True)
            if not positives:
                break
            best = min(positives, key=self._cost)
            positives.remove(best)
            self._atom(best, body)
        if filters:
            raise NotCompiled  # a negation or comparison with a variable nothing binds
        if self.head is None:
            self.line("return True")
        else:
            if not all(self.bound(t) for t in self.head):
                raise NotCompiled  # a variable of the goal that no literal binds
            self.line(f"out.append(({''.join(self.term(t) + ', ' for t in self.head)}))")
        return self.lines

    # which literals the request binds, and which only world relations join on
    def _factored(self, body: list[Literal]) -> list[Literal]:
        world = [b for b in body if isinstance(b, Atom) and not b.negated and self._joinable(b)]
        outside = set(self.names) | self.outputs
        for literal in body:
            if literal not in world:
                outside |= set(literal.variables)
        groups: list[tuple[list[Atom], set[str]]] = []
        for atom in world:
            local = {v for v in atom.variables if v not in outside}
            joined = [g for g in groups if g[1] & local]
            atoms, variables = [atom], set(local)
            for g in joined:
                groups.remove(g)
                atoms = g[0] + atoms
                variables |= g[1]
            groups.append((atoms, variables))
        out = list(body)
        for atoms, local in groups:
            columns = sorted({v for a in atoms for v in a.variables} - local)
            if len(atoms) > 1 and local and columns:
                out = [b for b in out if b not in atoms]
                out.append(self.plans.aux(atoms, columns))
        return out

    def _joinable(self, atom: Atom) -> bool:
        return self.plans.kind(atom.predicate) in (Kind.WORLD, Kind.BASE)

    def _columns(self, atom: Atom) -> tuple[int, ...]:
        return tuple(i for i, t in enumerate(atom.terms) if self.bound(t))

    def _cost(self, atom: Atom) -> float:
        columns = self._columns(atom)
        if atom.predicate == ARG:
            return 0.0 if columns else 2.0
        return self.plans.estimate(atom.predicate, columns)

    def _needed(self, atom: Atom, body: list[Literal]) -> set[str]:
        """The variables of ``atom`` used by another literal, or twice in it."""
        others: set[str] = set(self.outputs)
        for literal in body:
            if literal is not atom:
                others |= set(literal.variables)
        names = [t.name for t in atom.terms if isinstance(t, Var)]
        return others | {n for n in names if names.count(n) > 1}

    def _bind(self, atom: Atom, row: str, positions: list[int], needed: set[str]) -> None:
        """Name the unbound variables of ``atom`` from ``row`` at ``positions``."""
        seen: dict[str, int] = {}
        checks = []
        for position in positions:
            term = atom.terms[position]
            assert isinstance(term, Var)
            if term.name in seen:
                checks.append(f"{row}[{position}] == {row}[{seen[term.name]}]")
                continue
            seen[term.name] = position
            if term.name in needed:
                self.line(f"{self.fresh(term.name)} = {row}[{position}]")
            self.simple = False
        if checks:
            self.test(f"{' and '.join(checks)}")

    def _atom(self, atom: Atom, body: list[Literal]) -> None:
        if atom.predicate == ARG:
            self._argument(atom, body)
            return
        columns = self._columns(atom)
        arity = len(atom.terms)
        reader = self.module.reader(atom.predicate, columns, arity)
        key = self._key(atom, columns)
        if len(columns) == arity:
            self.test(f"{key} in {reader}")
            return
        free = [i for i in range(arity) if i not in columns]
        needed = self._needed(atom, body)
        rows = f"{reader}.get({key}, E)" if columns else reader
        if not any(atom.terms[i].name in needed for i in free):  # type: ignore[union-attr]
            self.test(f"{rows}")
            return
        self.counter += 1
        row = f"t{self.counter}"
        self.open(f"for {row} in {rows}:")
        self._bind(atom, row, free, needed)

    def _argument(self, atom: Atom, body: list[Literal]) -> None:
        """``request_arg(N, T)``: the request's argument N is T (a dict lookup)."""
        name, value = atom.terms
        self.counter += 1
        found = f"v{self.counter}"
        if not self.bound(name):
            self.open(f"for n{self.counter}, {found} in g.items():")
            self.names[name.name] = f"n{self.counter}"  # type: ignore[union-attr]
        else:
            self.line(f"{found} = g.get({self.term(name)})")
            self.simple = False
            self.test(f"{found} is not None")
        if self.bound(value):
            self.test(f"{found} == {self.term(value)}")
        elif isinstance(value, Var):
            self.names[value.name] = found

    def _key(self, atom: Atom, columns: tuple[int, ...]) -> str:
        parts = [self.term(atom.terms[c]) for c in columns]
        if len(parts) == 1 and len(columns) < len(atom.terms):
            return parts[0]
        return "(" + ", ".join(parts) + ",)"

    def _filter(self, literal: Literal) -> None:
        if isinstance(literal, Comparison):
            op = OPERATORS[literal.operator]
            self.test(f"{self.term(literal.left)} {op} {self.term(literal.right)}")
            return
        if literal.predicate == ARG:
            name, value = literal.terms
            if not self.bound(name):
                raise NotCompiled
            test = "is None" if not self.bound(value) else f"!= {self.term(value)}"
            self.test(f"g.get({self.term(name)}) {test}")
            return
        if literal.predicate in self.module.unfolder.derived_relations:
            # variables bound here are passed; any other is existential inside the call
            params = tuple(
                dict.fromkeys(v for v in literal.variables if v in self.names and v not in (PRINCIPAL, ENTITY))
            )
            function = self.module.function(literal, params)
            inline = self.module.expressions.get(function)
            if inline is not None:
                self.test(f"not ({inline})")
                return
            passed = ", ".join(["p", "e", "g", *(self.names[v] for v in params)])
            self.test(f"not {function}({passed})")
            return
        columns = self._columns(literal)
        arity = len(literal.terms)
        reader = self.module.reader(literal.predicate, columns, arity)
        repeated = repeated_free(literal, columns)
        key = self._key(literal, columns)
        if repeated:
            rows = f"{reader}.get({key}, E)" if columns else reader
            self.test(f"not any({' and '.join(repeated)} for t in {rows})")
        elif len(columns) == arity:
            self.test(f"{key} not in {reader}")
        elif columns:
            self.test(f"not {reader}.get({key})")
        else:
            self.test(f"not {reader}")


def _canonical(rule: Rule) -> str:
    names: dict[str, str] = {}

    def term(t: Term) -> str:
        if isinstance(t, Const):
            return repr(t.value)
        return names.setdefault(t.name, f"V{len(names)}")

    head = ",".join(term(t) for t in rule.head.terms)
    body = ";".join(
        f"{'~' if b.negated else ''}{b.predicate}({','.join(term(t) for t in b.terms)})"
        for b in rule.body
        if isinstance(b, Atom)
    )
    return f"{head}<-{body}"
