"""Operations' rules unfolded into conjunctions over world relations: the pass every compiling backend shares.

A decision plan, in memory (:mod:`engine.compiled.specialize`) or on Spark
(:mod:`engine.spark.fused`), starts from the same two steps, in the spirit of magic
sets (nothing is evaluated that the request cannot reach):

1. **Specialize** (:func:`specialize`): the request-derived rules, with the
   operation put in and every positive literal over a static relation
   (``requires``, ``guard``, ``operation``, ...) replaced by the rows it matches.
2. **Unfold** (:class:`Unfolder`): a request-derived goal is rewritten, by
   resolution, into conjunctions over world-derived and base relations only. The
   request becomes values bound on entry (:data:`PRINCIPAL`, :data:`ENTITY`, the
   arguments), so ``request(R, P, O, E)`` disappears and ``request_arg(N, T)``
   loses its request; requirement ids, actions and scopes become constants. A
   negated request-derived literal stays, for the backend to answer by a call (in
   memory) or an anti-join (on Spark) of a goal unfolded the same way.

A negated ``request``, a request-derived literal about another request, or an
unfolding past :data:`MAX_CONJUNCTIONS` raise :class:`NotCompiled`: the backend
then decides the operation by generic evaluation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import count

from privilog.dsl.ir import Atom, Comparison, Const, Literal, Rule, Term, Var

REQUEST_ID = "\x00decide"  # the one request a plan decides; never an id the authorizer gives (r0, r1, ...)
PRINCIPAL = "\x00p"  # variable names no policy can write: the request's principal,
ENTITY = "\x00e"  # and its entity, bound on entry
ARG = "request_arg"
MAX_CONJUNCTIONS = 4096  # an unfolding larger than this is left to the generic evaluator

Conjunction = tuple[Literal, ...]
Head = tuple[Term, ...]  # what a goal's variables became in one way it holds
HEAD = "\x00head"  # a literal no policy can write: a way's head, kept beside its body when ways are told apart


class NotCompiled(Exception):
    """This operation's rules are outside what the plans compile; the generic evaluator decides it."""


# ---- unfolding -------------------------------------------------------------------------


def _walk(term: Term, theta: dict[str, Term]) -> Term:
    while isinstance(term, Var) and term.name in theta:
        term = theta[term.name]
    return term


def _unify(a: Term, b: Term, theta: dict[str, Term], rigid: frozenset[str], checks: list[Literal]) -> bool:
    """Unify two terms under ``theta``. A rigid variable (bound when the plan runs) is never
    bound here: equating it with a constant or another rigid variable adds a runtime check."""
    a, b = _walk(a, theta), _walk(b, theta)
    if a == b:
        return True
    if isinstance(a, Var) and a.name not in rigid:
        theta[a.name] = b
        return True
    if isinstance(b, Var) and b.name not in rigid:
        theta[b.name] = a
        return True
    if isinstance(a, Const) and isinstance(b, Const):
        return False
    checks.append(Comparison(a, "==", b))
    return True


def _resolve(literal: Literal, theta: dict[str, Term]) -> Literal:
    if isinstance(literal, Atom):
        return Atom(literal.predicate, tuple(_walk(t, theta) for t in literal.terms), literal.negated)
    return Comparison(_walk(literal.left, theta), literal.operator, _walk(literal.right, theta))


class Unfolder:
    """Rewrites a request-derived goal into conjunctions over world, base and static relations."""

    def __init__(self, rules: dict[str, list[Rule]], derived: frozenset[str], operation: str):
        self.rules = rules
        self.derived_relations = derived  # request-derived, ``request`` included (some may have no rule left)
        self.operation = operation
        self._fresh = count()

    def _rename(self, rule: Rule) -> Rule:
        names: dict[str, Term] = {}
        for literal in (rule.head, *rule.body):
            for name in literal.variables if isinstance(literal, Comparison) else _all_vars(literal):
                if name not in names:
                    names[name] = Var(f"\x01{next(self._fresh)}")
        return Rule(
            _resolve(rule.head, names),  # type: ignore[arg-type]
            tuple(_resolve(b, names) for b in rule.body),
        )

    def derived(self, literal: Literal) -> bool:
        return isinstance(literal, Atom) and literal.predicate in self.derived_relations

    def conjunctions(self, goal: Atom, rigid: frozenset[str]) -> list[Conjunction]:
        """The ways ``goal`` holds, each a conjunction with no positive request-derived literal."""
        return [conjunction for conjunction, _ in self.ways(goal, rigid)]

    def ways(self, goal: Atom, rigid: frozenset[str], yielding: bool = False) -> list[tuple[Conjunction, Head]]:
        """As :meth:`conjunctions`, each with what the goal's variables (not ``rigid``) became in it,
        in their order: with ``yielding``, the rows a way yields (two ways alike but for what they
        yield are both kept); without, an empty tuple."""
        out: list[tuple[Conjunction, Head]] = []
        seen: set[Conjunction] = set()
        wanted = [t for t in goal.terms if isinstance(t, Var) and t.name not in rigid] if yielding else []
        work: list[tuple[list[Literal], dict[str, Term]]] = [([goal], {})]
        while work:
            body, theta = work.pop()
            position = next(
                (i for i, b in enumerate(body) if self.derived(b) and not b.negated),  # type: ignore[union-attr]
                None,
            )
            if position is None:
                done = self._finish(body, theta)
                if done is not None:
                    head = tuple(_walk(t, theta) for t in wanted)
                    # one per way: the same one can come by several rows
                    key = _renamed((*done, Atom(HEAD, head)) if yielding else done, rigid)
                    if key not in seen:
                        seen.add(key)
                        out.append((done, head))
                    if len(out) > MAX_CONJUNCTIONS:
                        raise NotCompiled
                continue
            atom = body[position]
            assert isinstance(atom, Atom)
            rest = body[:position] + body[position + 1 :]
            if atom.predicate == "request":
                heads: Iterable[tuple[tuple[Term, ...], tuple[Literal, ...]]] = [
                    ((Const(REQUEST_ID), Var(PRINCIPAL), Const(self.operation), Var(ENTITY)), ())
                ]
            else:
                heads = [(r.head.terms, r.body) for r in map(self._rename, self.rules.get(atom.predicate, []))]
            for terms, rule_body in heads:
                unified = dict(theta)
                checks: list[Literal] = []
                if all(_unify(h, t, unified, rigid, checks) for h, t in zip(terms, atom.terms, strict=True)):
                    work.append((rest + list(rule_body) + checks, unified))
        out.reverse()  # in the rules' order
        return out

    def _finish(self, body: list[Literal], theta: dict[str, Term]) -> Conjunction | None:
        """Resolve the body; decide ground comparisons; None when one fails."""
        out: list[Literal] = []
        for literal in body:
            resolved = _resolve(literal, theta)
            if isinstance(resolved, Comparison):
                if isinstance(resolved.left, Const) and isinstance(resolved.right, Const):
                    if not compare(resolved.left.value, resolved.operator, resolved.right.value):
                        return None
                    continue
            elif resolved.predicate == "request":
                raise NotCompiled  # a negated request: left to the generic evaluator
            elif resolved.predicate == ARG:
                if resolved.terms[0] != Const(REQUEST_ID):
                    if isinstance(resolved.terms[0], Const):
                        if resolved.negated:
                            continue
                        return None  # another request's argument: there is only this one
                    raise NotCompiled
                resolved = Atom(ARG, resolved.terms[1:], resolved.negated)
            if resolved not in out:
                out.append(resolved)
        return tuple(out)


def _renamed(conjunction: Conjunction, rigid: frozenset[str]) -> Conjunction:
    """``conjunction`` with its own variables named by their first place: equal when the same."""
    names: dict[str, Term] = {}
    for literal in conjunction:
        for name in literal.variables if isinstance(literal, Comparison) else _all_vars(literal):
            if name not in rigid and name not in names:
                names[name] = Var(f"\x02{len(names)}")
    return tuple(_resolve(literal, names) for literal in conjunction)


def _all_vars(atom: Atom) -> list[str]:
    return [t.name for t in atom.terms if isinstance(t, Var)]


# ---- specializing ---------------------------------------------------------------------


def _substitute(rule: Rule, values: dict[str, str]) -> Rule:
    def term(t: Term) -> Term:
        return Const(values[t.name]) if isinstance(t, Var) and t.name in values else t

    def literal(b: Literal) -> Literal:
        if isinstance(b, Atom):
            return Atom(b.predicate, tuple(term(t) for t in b.terms), b.negated)
        return Comparison(term(b.left), b.operator, term(b.right))

    return Rule(literal(rule.head), tuple(literal(b) for b in rule.body))  # type: ignore[arg-type]


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
            holds = compare(b.left.value, b.operator, b.right.value)
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


def compare(left: str, operator: str, right: str) -> bool:
    return {
        "==": left == right,
        "!=": left != right,
        "<": left < right,
        "<=": left <= right,
        ">": left > right,
        ">=": left >= right,
    }[operator]
