"""Decision plans: ``allowed`` compiled top-down, demand-driven, into Python functions.

The request-derived rules are compiled for the one request being decided, in
the spirit of magic sets: each request-derived relation, asked with some of its
columns bound (an *adornment*), becomes a function of those columns that
either answers whether a row exists or returns the rows' other columns. The
request's own facts sit in the (tiny) ``request`` and ``request_arg`` relations
for the call; the static facts (``requires``, ``guard``, ...) and the
world-derived relations are read through their indexes. Nothing is evaluated
that the request cannot reach, and no proof is built.

Where a rule asks only whether some rows of world-derived relations join
(``holds(P, A, D, _), ancestor(D, E)`` for "any privilege on the entity or
inside it"), that join becomes a world-derived relation of its own, over the
columns the request binds, materialized and maintained with the others: the
question costs one lookup however many grants or descendants there are.

Recursive request-derived rules are not compiled: those policies decide
through the generic evaluator (``DecisionPlans.available`` is False).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, Any

from dsl.ir import Atom, Comparison, Const, Literal, Rule, Term, Var
from engine.analysis import Analysis, Component, Kind
from engine.compiled.evaluate import Evaluator
from engine.compiled.plan import EMPTY, OPERATORS
from engine.program import Program

if TYPE_CHECKING:
    from engine.decision import Request

REQUEST_ID = "\x00decide"  # never an id the authorizer gives a request (r0, r1, ...)
SMALL = ("request", "request_arg")


@dataclass(frozen=True)
class Call:
    """A request-derived relation asked with the columns in ``bound`` given."""

    relation: str
    bound: tuple[bool, ...]
    exists: bool  # True: answer whether a row exists; False: return the free columns' values
    fixed: tuple[tuple[int, str], ...] = ()  # bound columns whose value is known when compiling

    @property
    def name(self) -> str:
        fixed = dict(self.fixed)
        mask = "".join("c" if i in fixed else "b" if b else "f" for i, b in enumerate(self.bound))
        return f"{'e' if self.exists else 's'}_{mask}"


class _Source:
    """The text of one module of generated functions, with its constants and relations."""

    def __init__(self) -> None:
        self.constants: list[str] = []
        self.relations: list[str] = []
        self.prologue: list[str] = []
        self.functions: list[list[str]] = []
        self.names: dict[Call, str] = {}
        self.readers: dict[tuple[str, tuple[int, ...]], str] = {}

    def const(self, value: str) -> str:
        self.constants.append(value)
        return f"K[{len(self.constants) - 1}]"

    def reader(self, relation: str, columns: tuple[int, ...], arity: int) -> str:
        """The local name of a relation's index on ``columns`` (its row set when none or all)."""
        whole = not columns or len(columns) == arity
        key = (relation, () if whole else columns)
        if key not in self.readers:
            if relation not in self.relations:
                self.relations.append(relation)
            name = f"x{len(self.readers)}"
            slot = self.relations.index(relation)
            self.prologue.append(f"{name} = S[{slot}].rows" if whole else f"{name} = S[{slot}].index({columns!r})")
            self.readers[key] = name
        return self.readers[key]


class DecisionPlans:
    """One compiled decision function for every operation of a program."""

    def __init__(self, program: Program, analysis: Analysis, evaluator: Evaluator, maintained: list[Component]):
        self.program = program
        self.analysis = analysis
        self.evaluator = evaluator
        self.maintained = maintained
        requested = analysis.of_kind(Kind.REQUEST)
        self.available = not any(c.recursive for c in requested)
        self._generic = [r for c in requested for r in c.rules]
        self._rules: dict[str, list[Rule]] = {}
        self._aux: dict[str, str] = {}
        self._decide: dict[str, Callable[[str], bool]] = {}
        self.available = self.available and any(r.head.predicate == "allowed" for r in self._generic)
        self._request = evaluator.relation("request")
        self._arg = evaluator.relation("request_arg")

    def decide(self, request: Request) -> bool:
        """Allow or deny ``request``; its entity and everything enclosing it exist."""
        decide = self._decide.get(request.operation)
        if decide is None:
            decide = self._decide[request.operation] = self._compile(request.operation)
        row = (REQUEST_ID, request.principal, request.operation, str(request.entity))
        args = [(REQUEST_ID, name, value) for name, value in request.args]
        self._request.add((row,))
        if args:
            self._arg.add(args)
        try:
            return decide(REQUEST_ID)
        finally:
            self._request.remove((row,))
            if args:
                self._arg.remove(args)

    # ---- compiling ---------------------------------------------------------------------

    def _compile(self, operation: str) -> Callable[[str], bool]:
        self._rules = {}
        static = {name for name, kind in self.analysis.kinds.items() if kind is Kind.STATIC}
        for rule in specialize(self._generic, operation, self.static_rows, static):
            self._rules.setdefault(rule.head.predicate, []).append(rule)
        source = _Source()
        todo = [Call("allowed", (True,), True)]
        while todo:
            call = todo.pop()
            if call in source.names:
                continue
            source.names[call] = f"f{len(source.names)}_{call.name}"
            source.functions.append(self._function(call, source, todo))
        text = "\n".join(
            ["def make(S, K, E, chain):"]
            + ["    " + line for line in source.prologue]
            + ["    " + line for function in source.functions for line in function]
            + [f"    return {source.names[Call('allowed', (True,), True)]}"]
        )
        namespace: dict[str, Any] = {}
        exec(compile(text, "<privilog decision plan>", "exec"), namespace)
        relations = [self.evaluator.relation(name) for name in source.relations]
        decide: Callable[[str], bool] = namespace["make"](relations, tuple(source.constants), EMPTY, chain)
        return decide

    def static_rows(self, relation: str) -> set[tuple[str, ...]]:
        return self.evaluator.relation(relation).rows

    def _function(self, call: Call, source: _Source, todo: list[Call]) -> list[str]:
        fixed = dict(call.fixed)
        params = [f"a{i}" for i, b in enumerate(call.bound) if b and i not in fixed]
        lines = [f"def {source.names[call]}({', '.join(params)}):"]
        if not call.exists:
            lines.append("    out = set()")
        for rule in self._rules.get(call.relation, []):
            bound = _fix(rule, fixed)
            if bound is not None:
                lines += _RuleWriter(self, source, todo, bound, call).write()
        lines.append("    return False" if call.exists else "    return out")
        return lines

    def kind(self, relation: str) -> Kind:
        return self.analysis.kinds.get(relation, Kind.STATIC)

    def aux(self, atoms: list[Atom], columns: list[str]) -> Atom:
        """A world-derived relation holding the join of ``atoms`` over ``columns``, kept current."""
        head_vars = tuple(Var(c) for c in columns)
        rule = Rule(Atom("aux", head_vars), tuple(atoms))
        key = _canonical(rule)
        name = self._aux.get(key)
        if name is None:
            name = self._aux[key] = f"_join{len(self._aux)}"
            defined = Rule(Atom(name, head_vars), tuple(atoms))
            self.evaluator.arity[name] = len(columns)
            component = Component(frozenset({name}), (defined,), Kind.WORLD)
            self.evaluator.evaluate(component, self.evaluator.store)
            self.maintained.append(component)
            self.analysis.kinds[name] = Kind.WORLD
        return Atom(name, head_vars)


def _substitute(rule: Rule, values: dict[str, str]) -> Rule:
    def term(t: Term) -> Term:
        return Const(values[t.name]) if isinstance(t, Var) and t.name in values else t

    def literal(b: Literal) -> Literal:
        if isinstance(b, Atom):
            return Atom(b.predicate, tuple(term(t) for t in b.terms), b.negated)
        return Comparison(term(b.left), b.operator, term(b.right))

    return Rule(literal(rule.head), tuple(literal(b) for b in rule.body))  # type: ignore[arg-type]


def _fix(rule: Rule, fixed: dict[int, str]) -> Rule | None:
    """The rule with the head's fixed columns put in, or None when its head cannot have them."""
    values: dict[str, str] = {}
    for i, value in fixed.items():
        term = rule.head.terms[i]
        if isinstance(term, Const):
            if term.value != value:
                return None
        elif values.setdefault(term.name, value) != value:
            return None
    return _substitute(rule, values) if values else rule


def specialize(
    rules: list[Rule], operation: str, static_rows: Callable[[str], set[tuple[str, ...]]], static: set[str]
) -> list[Rule]:
    """The request-derived rules partially evaluated for one operation.

    The request's operation is put into every ``request`` literal (a rule for another
    operation is dropped), and each positive literal over a static relation (``requires``,
    ``guard``, ``operation``, ...) is replaced by the rows it matches, one rule per row;
    negated static literals and comparisons that became ground are decided.
    """
    out: list[Rule] = []
    work = []
    for rule in rules:
        values: dict[str, str] = {}
        keep = True
        for b in rule.body:
            if isinstance(b, Atom) and b.predicate == "request" and not b.negated:
                term = b.terms[2]
                if isinstance(term, Const):
                    keep = keep and term.value == operation
                else:
                    values[term.name] = operation
        if keep:
            work.append(_substitute(rule, values) if values else rule)
    while work:
        rule = work.pop()
        expanded = _expand_static(rule, static_rows, static)
        if expanded is None:
            out.append(rule)
        else:
            work.extend(expanded)
    return out


def _expand_static(
    rule: Rule, static_rows: Callable[[str], set[tuple[str, ...]]], static: set[str]
) -> list[Rule] | None:
    """Replace the first static literal of ``rule``; None when it has none left."""
    for position, b in enumerate(rule.body):
        rest = rule.body[:position] + rule.body[position + 1 :]
        if isinstance(b, Comparison) and isinstance(b.left, Const) and isinstance(b.right, Const):
            holds = _compare(b.left.value, b.operator, b.right.value)
            return [Rule(rule.head, rest)] if holds else []
        if not isinstance(b, Atom) or b.predicate not in static:
            continue
        if b.negated:
            if all(isinstance(t, Const) for t in b.terms):
                present = tuple(t.value for t in b.terms) in static_rows(b.predicate)  # type: ignore[union-attr]
                return [] if present else [Rule(rule.head, rest)]
            continue
        instances = []
        for row in static_rows(b.predicate):
            values: dict[str, str] = {}
            if all(
                (t.value == v) if isinstance(t, Const) else values.setdefault(t.name, v) == v
                for t, v in zip(b.terms, row, strict=True)
            ):
                instances.append(_substitute(Rule(rule.head, rest), values))
        return instances
    return None


def _compare(left: str, operator: str, right: str) -> bool:
    return {
        "==": left == right,
        "!=": left != right,
        "<": left < right,
        "<=": left <= right,
        ">": left > right,
        ">=": left >= right,
    }[operator]


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


class _RuleWriter:
    """Nested loops for one rule of a call: unify the head with the bound columns, then join."""

    def __init__(self, plans: DecisionPlans, source: _Source, todo: list[Call], rule: Rule, call: Call):
        self.plans, self.source, self.todo, self.rule, self.call = plans, source, todo, rule, call
        self.names: dict[str, str] = {}
        self.lines: list[str] = []
        self.depth = 1
        self.counter = 0

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def open(self, text: str) -> None:
        self.line(text)
        self.depth += 1

    def term(self, t: Term) -> str:
        return self.source.const(t.value) if isinstance(t, Const) else self.names[t.name]

    def fresh(self, name: str) -> str:
        self.counter += 1
        self.names[name] = f"v{self.counter}_"
        return self.names[name]

    def write(self) -> list[str]:
        self.open("if True:")  # each rule in its own block, so its names do not leak
        checks = []
        fixed = dict(self.call.fixed)
        for i, (term, given) in enumerate(zip(self.rule.head.terms, self.call.bound, strict=True)):
            if not given or i in fixed:
                continue
            if isinstance(term, Const):
                checks.append(f"a{i} == {self.source.const(term.value)}")
            elif term.name in self.names:
                checks.append(f"a{i} == {self.names[term.name]}")
            else:
                self.names[term.name] = f"a{i}"
        if checks:
            self.open(f"if {' and '.join(checks)}:")
        body = self._factored(list(self.rule.body))
        self._join(body)
        if self.call.exists:
            self.line("return True")
        else:
            free = [t for t, given in zip(self.rule.head.terms, self.call.bound, strict=True) if not given]
            self.line(f"out.add(({''.join(self.term(t) + ', ' for t in free)}))")
        return self.lines

    # which literals the head binds, and which only the world relations join on
    def _factored(self, body: list[Literal]) -> list[Literal]:
        if not self.call.exists:
            return body
        outside = set(self.names)
        for literal in body:
            if not (isinstance(literal, Atom) and not literal.negated and self._joinable(literal)):
                outside |= set(literal.variables)
        world = [b for b in body if isinstance(b, Atom) and not b.negated and self._joinable(b)]
        groups: list[tuple[list[Atom], set[str]]] = []
        for atom in world:
            local = {v for v in atom.variables if v not in outside}
            joined = [g for g in groups if g[1] & local]
            merged_atoms, merged_vars = [atom], set(local)
            for g in joined:
                groups.remove(g)
                merged_atoms = g[0] + merged_atoms
                merged_vars |= g[1]
            groups.append((merged_atoms, merged_vars))
        out = [b for b in body if not any(b in g[0] for g in groups if len(g[0]) > 1 and g[1])]
        for atoms, local in groups:
            if len(atoms) > 1 and local:
                columns = sorted({v for a in atoms for v in a.variables} - local)
                out.append(self.plans.aux(atoms, columns))
        return out

    def _joinable(self, atom: Atom) -> bool:
        return self.plans.kind(atom.predicate) in (Kind.WORLD, Kind.BASE)

    def _rank(self, literal: Atom) -> tuple[int, int]:
        given = sum(1 for t in literal.terms if isinstance(t, Const) or t.name in self.names)
        whole = given == len(literal.terms)
        kind = self.plans.kind(literal.predicate)
        if literal.predicate in SMALL:
            return (6, given)
        if whole and kind is not Kind.REQUEST:
            return (5, given)
        if kind is Kind.STATIC:
            return (4, given)
        if whole:
            return (3, given)
        if kind is not Kind.REQUEST and given:
            return (2, given)
        return (1 if kind is not Kind.REQUEST else 0, given)

    def _join(self, body: list[Literal]) -> None:
        positives = [b for b in body if isinstance(b, Atom) and not b.negated]
        filters = [b for b in body if b not in positives]
        mentioned = {v for b in positives for v in b.variables} | set(self.names)

        def place() -> None:
            for f in list(filters):
                if {v for v in f.variables if v in mentioned} <= set(self.names):
                    filters.remove(f)
                    self._filter(f)

        place()
        while positives:
            best = max(positives, key=self._rank)
            positives.remove(best)
            self._atom(best)
            place()
        if filters:
            raise ValueError("unsafe rule body: a negation or comparison has an unbound variable")

    def _columns(self, atom: Atom) -> list[int]:
        return [i for i, t in enumerate(atom.terms) if isinstance(t, Const) or t.name in self.names]

    def _key(self, atom: Atom, columns: list[int]) -> str:
        parts = [self.term(atom.terms[c]) for c in columns]
        if len(parts) == 1 and len(columns) < len(atom.terms):
            return parts[0]
        return "(" + ", ".join(parts) + ",)"

    def _bind(self, atom: Atom, row: str, positions: list[int], offsets: list[int]) -> None:
        """Name the unbound variables of ``atom`` from ``row`` (``offsets``: where each sits)."""
        seen: dict[str, int] = {}
        checks = []
        for position, offset in zip(positions, offsets, strict=True):
            term = atom.terms[position]
            assert isinstance(term, Var)
            if term.name in seen:
                checks.append(f"{row}[{offset}] == {row}[{seen[term.name]}]")
                continue
            seen[term.name] = offset
            self.line(f"{self.fresh(term.name)} = {row}[{offset}]")
        if checks:
            self.open(f"if {' and '.join(checks)}:")

    def _atom(self, atom: Atom) -> None:
        columns = self._columns(atom)
        free = [i for i in range(len(atom.terms)) if i not in columns]
        if self.plans.kind(atom.predicate) is Kind.REQUEST and atom.predicate not in SMALL:
            bound = tuple(i in columns for i in range(len(atom.terms)))
            fixed, args = self._call_args(atom, columns)
            needed = [i for i in free if atom.terms[i].name in self._later_vars(atom)]  # type: ignore[union-attr]
            if not needed:
                call = Call(atom.predicate, bound, True, fixed)
                self.open(f"if {self._name(call)}({args}):")
                return
            call = Call(atom.predicate, bound, False, fixed)
            row = f"t{self.counter}_"
            self.counter += 1
            self.open(f"for {row} in {self._name(call)}({args}):")
            self._bind(atom, row, free, list(range(len(free))))
            return
        reader = self.source.reader(atom.predicate, tuple(columns), len(atom.terms))
        if len(columns) == len(atom.terms):
            self.open(f"if {self._key(atom, columns)} in {reader}:")
            return
        row = f"t{self.counter}_"
        self.counter += 1
        rows = f"{reader}.get({self._key(atom, columns)}, E)" if columns else reader
        needed = [i for i in free if atom.terms[i].name in self._later_vars(atom)]  # type: ignore[union-attr]
        if not needed and self.call.exists:
            self.open(f"if {rows}:")
            return
        self.open(f"for {row} in {rows}:")
        self._bind(atom, row, free, free)

    def _call_args(self, atom: Atom, columns: list[int]) -> tuple[tuple[tuple[int, str], ...], str]:
        """Constants of a call go into its compiled function; bound variables are passed."""
        fixed = tuple((c, t.value) for c in columns if isinstance(t := atom.terms[c], Const))
        passed = [self.term(atom.terms[c]) for c in columns if not isinstance(atom.terms[c], Const)]
        return fixed, ", ".join(passed)

    def _later_vars(self, atom: Atom) -> set[str]:
        """Variables of ``atom`` used anywhere else in the rule (head included), or repeated in it."""
        others = {t.name for t in self.rule.head.terms if isinstance(t, Var)} if not self.call.exists else set()
        for literal in self.rule.body:
            if literal is not atom:
                others |= set(literal.variables)
        names = [t.name for t in atom.terms if isinstance(t, Var)]
        repeated = {n for n in names if names.count(n) > 1}
        return others | repeated

    def _name(self, call: Call) -> str:
        # functions are named when compiled; a call compiled later is named the same way
        if call not in self.source.names:
            self.source.names[call] = f"f{len(self.source.names)}_{call.name}"
            self.source.functions.append(self.plans._function(call, self.source, self.todo))
        return self.source.names[call]

    def _filter(self, literal: Literal) -> None:
        if isinstance(literal, Comparison):
            op = OPERATORS[literal.operator]
            self.open(f"if {self.term(literal.left)} {op} {self.term(literal.right)}:")
            return
        assert isinstance(literal, Atom)
        columns = self._columns(literal)
        if self.plans.kind(literal.predicate) is Kind.REQUEST and literal.predicate not in SMALL:
            bound = tuple(i in columns for i in range(len(literal.terms)))
            fixed, args = self._call_args(literal, columns)
            call = Call(literal.predicate, bound, True, fixed)
            self.open(f"if not {self._name(call)}({args}):")
            return
        repeated = _repeated_free(literal, columns)
        reader = self.source.reader(literal.predicate, tuple(columns), len(literal.terms))
        if repeated:
            rows = f"{reader}.get({self._key(literal, columns)}, E)" if columns else reader
            self.open(f"if not any({' and '.join(repeated)} for t in {rows}):")
        elif len(columns) == len(literal.terms):
            self.open(f"if {self._key(literal, columns)} not in {reader}:")
        elif columns:
            self.open(f"if not {reader}.get({self._key(literal, columns)}):")
        else:
            self.open(f"if not {reader}:")


def _repeated_free(atom: Atom, columns: list[int]) -> list[str]:
    first: dict[str, int] = {}
    same = []
    for position, term in enumerate(atom.terms):
        if position not in columns and isinstance(term, Var):
            if term.name in first:
                same.append(f"t[{position}] == t[{first[term.name]}]")
            first.setdefault(term.name, position)
    return same


