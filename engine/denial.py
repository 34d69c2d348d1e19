"""Why a policy's own rule denies a request: the rule, and the facts that make it hold, as a tree.

A policy may add clauses to `denied` (fail closed: `allowed` negates it; dsl.check lets no
other relation of the prelude grow). When one holds for a request, the decision names it and
proves it: each literal of its body grounded and, for a relation the rules derive, the rule
that derives that fact and its own premises, down to facts of the world, of the request and
of the policy.

The proof is searched top down over the program's rules, asking the backend which rows
hold (``backend.query``), so that it works on every backend and agrees with the decision:

* a goal is a grounded fact the backend holds; each rule whose head matches it is tried,
  its body grounded by the backend's rows (base relations and the most bound literals
  first, negations and comparisons once their variables are bound), and each derived
  fact of a grounding proven in turn; the first complete derivation is kept;
* a fact being proven is not tried again beneath itself, so that recursion ends (a
  derivation that is well founded exists for every fact the backend holds); and a budget
  of backend questions bounds the search: past it, a derived fact is shown untraced.

The request's facts must be in the backend while :func:`denials` runs
(``Authorizer.asserted``).
"""

from __future__ import annotations

import operator
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from privilog.dsl.check import prelude_file, strata
from privilog.dsl.format import format_term
from privilog.dsl.ir import Atom, Comparison, Const, Literal, Rule, Span, Term, Var
from privilog.engine.backends import Backend
from privilog.engine.decision import (
    ABSENT,
    COMPARED,
    DERIVED,
    REQUEST,
    REQUEST_ID_SHOWN,
    TABLE,
    UNTRACED,
    WORLD,
    WRITTEN,
    Change,
    Denial,
    GrantChange,
    MembershipChange,
    Premise,
    RemoveMemberChange,
    RevokeChange,
)
from privilog.engine.ids import EntityId, IdError
from privilog.engine.patterns import parse_pattern
from privilog.engine.program import Program, Row

DENIED = "denied"
# Which of the policy's own `denied` rules hold, for evaluators that decide in bulk (the pipeline):
# `denied@by(R, "FILE:LINE")` per rule. A policy names relations with letters, digits and `_`,
# so no policy can write this one (as engine.analysis's `NAME@written`).
DENIED_BY = "denied@by"
TABLE_RELATIONS = frozenset({"operation", "requires", "guard"})
REQUEST_RELATIONS = frozenset({"request", "request_arg"})
QUESTIONS = 20_000  # backend questions one decision's proofs may ask
DEPTH = 64  # derived facts nested at most this deep in a proof
_ANONYMOUS = "_Anon"  # engine.program's name for each `_` of a rule

Bindings = Mapping[str, str]

_COMPARE: dict[str, Callable[[str, str], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def place(span: Span) -> str:
    """``FILE:LINE`` of a span: a shipped policy's file under ``rules/``, another one relative
    to the working directory when it is below it, else as the policy was read."""
    file = span.file
    if os.path.isabs(file):
        shipped = prelude_file().parent.parent
        try:
            file = "rules/" + Path(file).resolve().relative_to(shipped).as_posix()
        except ValueError:
            shown = os.path.relpath(file)
            file = file if shown.startswith("..") else shown
    return f"{file}:{span.line}"


def _term_text(term: Term) -> str:
    if isinstance(term, Var) and term.name.startswith(_ANONYMOUS):
        return "_"
    return format_term(term)


def rule_text(rule: Rule) -> str:
    """The rule on one line, without its full stop, each `_` as written."""
    head = f"{rule.head.predicate}({', '.join(_term_text(t) for t in rule.head.terms)})"
    body = ", ".join(_literal_text(b) for b in rule.body)
    return f"{head} :- {body}" if body else head


def _literal_text(literal: Literal) -> str:
    if isinstance(literal, Comparison):
        return f"{_term_text(literal.left)} {literal.operator} {_term_text(literal.right)}"
    text = f"{literal.predicate}({', '.join(_term_text(t) for t in literal.terms)})"
    return f"not {text}" if literal.negated else text


def is_prelude(rule: Rule) -> bool:
    """Whether a rule is the prelude's (rules/prelude/requirements.policy)."""
    file = rule.span.file
    return file.endswith("requirements.policy") and Path(file).resolve() == prelude_file()


def deny_rules(program: Program) -> tuple[Rule, ...]:
    """The policy's own rules for `denied`: every one but the prelude's ``denied(R) :- unmet(R, _)``."""
    return tuple(r for r in program.rules if r.head.predicate == DENIED and not is_prelude(r))


def with_denied_by(program: Program) -> Program:
    """The program with, for each of the policy's own `denied` rules, one that names its place
    when it holds: ``denied@by(R, "FILE:LINE") :- <the same body>.`` (FILE:LINE as :func:`place`
    writes it, the place a :class:`Denial` names). The program itself when the policy has none.

    >>> from privilog import dsl
    >>> from privilog.engine.program import compile_policy
    >>> text = 'blocked("user:eve").\\ndenied(R) :- request(R, P, _, _), blocked(P).'
    >>> program = with_denied_by(compile_policy(dsl.parse_policy(text, "blocklist.policy")))
    >>> [rule_text(r) for r in program.rules if r.head.predicate == DENIED_BY]
    ['denied@by(R, "blocklist.policy:2") :- request(R, P, _, _), blocked(P)']
    >>> denial_places(program)
    ['blocklist.policy:2']
    """
    added = tuple(
        Rule(Atom(DENIED_BY, (rule.head.terms[0], Const(place(rule.span)))), rule.body, rule.span)
        for rule in deny_rules(program)
    )
    if not added:
        return program
    rules = (*program.rules, *added)
    return replace(
        program,
        rules=rules,
        relations={**program.relations, DENIED_BY: 2},
        strata=tuple(tuple(s) for s in strata(rules)),
    )


def denial_places(program: Program) -> list[str]:
    """The places (FILE:LINE) the ``denied@by`` rules of a program name, sorted (none: no rules)."""
    return sorted({str(r.head.terms[1]) for r in program.rules if r.head.predicate == DENIED_BY})


@dataclass(frozen=True)
class Rules:
    """What a proof search reads of a program: the rules by head, how each is written, and the
    facts the policy writes with their places. Made once per program."""

    program: Program
    by_head: Mapping[str, tuple[Rule, ...]] = field(default_factory=dict)
    written: Mapping[tuple[str, Row], str] = field(default_factory=dict)  # a fact the policy writes: its place
    texts: Mapping[Span, str] = field(default_factory=dict)  # a rule's place: its text as written

    @classmethod
    def of(cls, program: Program) -> Rules:
        by_head: dict[str, list[Rule]] = {}
        for rule in program.rules:
            by_head.setdefault(rule.head.predicate, []).append(rule)
        written: dict[tuple[str, Row], str] = {}
        texts: dict[Span, str] = {}
        for rule in program.policy.rules:
            if rule.body:
                texts.setdefault(rule.span, rule_text(rule))
            elif all(isinstance(t, Const) for t in rule.head.terms):
                row = tuple(str(t) for t in rule.head.terms)
                written.setdefault((rule.head.predicate, row), place(rule.span))
        return cls(program, {k: tuple(v) for k, v in by_head.items()}, written, texts)

    def text(self, rule: Rule) -> str:
        """The rule as the policy writes it (the program reorders its body and names each `_`)."""
        return self.texts.get(rule.span) or rule_text(rule)


def denials(rules: Rules, backend: Backend, rid: str, denying: Sequence[Rule]) -> tuple[Denial, ...]:
    """Each of ``denying`` (rules for `denied`) that holds for the asserted request ``rid``, with
    the first derivation found of it."""
    search = _Search(rules, backend, rid)
    found = []
    for rule in denying:
        proof = search.rule(rule, (rid,))
        if proof is not None:
            found.append(Denial(rules.text(rule), place(rule.span), proof))
    return tuple(found)


class _Search:
    """One decision's proof search (the backend's state must not change while it runs)."""

    def __init__(self, rules: Rules, backend: Backend, rid: str):
        self.rules = rules
        self.backend = backend
        self.rid = rid
        self.derived = set(rules.by_head)
        self.questions = 0
        self.proving: set[tuple[str, Row]] = set()
        self.proven: dict[tuple[str, Row], Premise] = {}

    # ---- the backend, asked within the budget -------------------------------------------------

    def ask(self, relation: str, bound: dict[int, str]) -> list[Row]:
        self.questions += 1
        if self.exhausted:
            return []
        return sorted(self.backend.query(relation, bound))

    @property
    def exhausted(self) -> bool:
        return self.questions > QUESTIONS

    # ---- proofs ----------------------------------------------------------------------------

    def rule(self, rule: Rule, row: Row, depth: int = 0) -> tuple[Premise, ...] | None:
        """The premises of the first derivation of ``row`` by ``rule``, or None."""
        bindings = _unify(rule.head, row)
        if bindings is None:
            return None
        for ground in self.groundings(list(rule.body), bindings):
            premises = self.premises(rule.body, ground, depth)
            if premises is not None:
                return premises
        return None

    def fact(self, relation: str, row: Row, depth: int) -> Premise | None:
        """A proof of a fact the backend holds, or None (it is being proven beneath, or too deep)."""
        key = (relation, row)
        if key in self.proven:
            return self.proven[key]
        leaf = self.leaf(relation, row)
        if leaf is not None:
            return leaf
        if key in self.proving or depth > DEPTH:
            return None
        self.proving.add(key)
        try:
            for rule in self.rules.by_head.get(relation, ()):
                premises = self.rule(rule, row, depth + 1)
                if premises is not None:
                    proof = Premise(
                        self.shown(relation, row), DERIVED, relation, self.values(row),
                        self.rules.text(rule), place(rule.span), premises,
                    )  # fmt: skip
                    self.proven[key] = proof
                    return proof
            return None
        finally:
            self.proving.discard(key)

    def leaf(self, relation: str, row: Row) -> Premise | None:
        """A fact no rule needs to derive: the world's, the request's, or one the policy writes."""
        at = self.rules.written.get((relation, row))
        if at is not None:
            return Premise(self.shown(relation, row), WRITTEN, relation, self.values(row), at=at)
        if relation in self.derived:
            return None
        if relation in REQUEST_RELATIONS:
            source = REQUEST
        elif relation in TABLE_RELATIONS:
            source = TABLE
        elif row in self.rules.program.facts.get(relation, ()):
            source = WRITTEN
        else:
            source = WORLD
        return Premise(self.shown(relation, row), source, relation, self.values(row))

    def premises(self, body: Sequence[Literal], ground: Bindings, depth: int) -> tuple[Premise, ...] | None:
        """The premises of a grounded body, in the order the policy writes it; None when a derived
        fact of it has no derivation here (it is being proven beneath)."""
        out = []
        for literal in sorted(body, key=lambda b: (b.span.line, b.span.column)):
            if isinstance(literal, Comparison):
                left, right = _value(literal.left, ground), _value(literal.right, ground)
                text = f"{self.term(left)} {literal.operator} {self.term(right)}"
                out.append(Premise(text, COMPARED, values=(str(left), str(right))))
                continue
            if literal.negated:
                text = "not " + self.shown(literal.predicate, tuple(_value(t, ground) for t in literal.terms))
                out.append(Premise(text, ABSENT, literal.predicate))
                continue
            row = tuple(str(_value(t, ground)) for t in literal.terms)
            proof = self.fact(literal.predicate, row, depth)
            if proof is None and (self.exhausted or depth > DEPTH):
                proof = Premise(self.shown(literal.predicate, row), UNTRACED, literal.predicate, self.values(row))
            if proof is None:
                return None
            out.append(proof)
        return tuple(out)

    # ---- groundings ------------------------------------------------------------------------

    def groundings(self, pending: list[Literal], bindings: Bindings) -> Iterator[Bindings]:
        """Every binding of a body's variables under which the backend holds it, lazily."""
        if not pending:
            yield bindings
            return
        literal = _next(pending, bindings, self.derived)
        rest = [p for p in pending if p is not literal]
        if isinstance(literal, Comparison):
            left, right = _value(literal.left, bindings), _value(literal.right, bindings)
            if left is not None and right is not None and _COMPARE[literal.operator](left, right):
                yield from self.groundings(rest, bindings)
            return
        bound = {i: v for i, t in enumerate(literal.terms) if (v := _value(t, bindings)) is not None}
        rows = self.ask(literal.predicate, bound)
        if literal.negated:
            if not any(_bind(literal, row, bindings) is not None for row in rows):
                yield from self.groundings(rest, bindings)
            return
        for row in rows:
            extended = _bind(literal, row, bindings)
            if extended is not None:
                yield from self.groundings(rest, extended)

    # ---- text ------------------------------------------------------------------------------

    def term(self, value: str | None) -> str:
        if value is None:
            return "_"
        return REQUEST_ID_SHOWN if value == self.rid else format_term(Const(value))

    def values(self, row: Row) -> tuple[str, ...]:
        return tuple(REQUEST_ID_SHOWN if v == self.rid else v for v in row)

    def shown(self, relation: str, row: Sequence[str | None]) -> str:
        return f"{relation}({', '.join(self.term(v) for v in row)})"


def _value(term: Term, bindings: Bindings) -> str | None:
    if isinstance(term, Const):
        return term.value
    return bindings.get(term.name)


def _unify(head: Atom, row: Row) -> dict[str, str] | None:
    """The bindings under which ``head`` is ``row``, or None."""
    return _bind(head, row, {})


def _bind(atom: Atom, row: Row, bindings: Bindings) -> dict[str, str] | None:
    """``bindings`` extended so that ``atom`` is ``row``, or None when they disagree."""
    out = dict(bindings)
    for term, value in zip(atom.terms, row, strict=True):
        if isinstance(term, Const):
            if term.value != value:
                return None
        elif out.setdefault(term.name, value) != value:
            return None
    return out


def _ready(literal: Literal, bindings: Bindings) -> bool:
    """Whether a negation or comparison can be decided: its named variables are bound (each `_`
    of a negation is any value)."""
    if isinstance(literal, Comparison):
        return all(name in bindings for name in literal.variables)
    return all(name in bindings or name.startswith(_ANONYMOUS) for name in literal.variables)


def _next(pending: list[Literal], bindings: Bindings, derived: set[str]) -> Literal:
    """The literal to ground next: a negation or comparison that can be decided; else the positive
    literal of a base relation with the most columns bound; else a derived one so."""
    for literal in pending:
        if (isinstance(literal, Comparison) or literal.negated) and _ready(literal, bindings):
            return literal
    positive = [p for p in pending if isinstance(p, Atom) and not p.negated]
    if not positive:
        return pending[0]

    def cost(atom: Atom) -> tuple[bool, int]:
        bound = sum(isinstance(t, Const) or t.name in bindings for t in atom.terms)
        return atom.predicate in derived, -bound

    return min(positive, key=cost)


# ---- what takes a denial away ----------------------------------------------------------------

STEPS = 3  # changes made in turn: a premise taken away, then what that leaves unmet, ...
ATTEMPTS = 48  # tentative decisions one search makes
Changes = frozenset[Change]
Attempt = Callable[[Changes], tuple[bool, list[Changes]]]  # changes -> allowed, the next steps


def premise_changes(denial: Denial) -> list[Change]:
    """The world changes that take a premise of a denial's proof away: each membership removed,
    each grant revoked (the facts the policy writes are the policy's to change)."""
    out: list[Change] = []
    for premise in denial.walk():
        if premise.source != WORLD:
            continue
        if premise.relation == "member_of":
            out.append(RemoveMemberChange(*premise.values))
        elif premise.relation == "grant":
            principal, action, entity = premise.values
            try:
                out.append(RevokeChange(principal, action, EntityId.parse(entity)))
            except IdError:  # a wildcard grant's pattern
                out.append(RevokeChange(principal, action, parse_pattern(entity)))
    return list(dict.fromkeys(out))


def undoes(changes: Changes) -> bool:
    """Whether a set of changes both takes away and adds the same grant or membership."""
    joined = {(c.principal, c.group) for c in changes if isinstance(c, MembershipChange)}
    left = {(c.principal, c.group) for c in changes if isinstance(c, RemoveMemberChange)}
    granted = {(c.principal, c.action, c.entity) for c in changes if isinstance(c, GrantChange)}
    revoked = {(c.principal, c.action, c.entity) for c in changes if isinstance(c, RevokeChange)}
    return bool(joined & left or granted & revoked)


def taking_away(first: list[Changes], attempt: Attempt) -> list[Changes]:
    """The smallest sets of changes found that allow a request, breadth first from ``first`` (the
    steps that take the denials' premises away, or meet what is unmet): each set is tried by
    ``attempt``, which decides the request with those changes made (so every set returned is
    verified) and says which steps could follow."""
    seen: set[Changes] = {frozenset()}
    frontier: list[tuple[Changes, list[Changes]]] = [(frozenset(), first)]
    found: list[Changes] = []
    attempts = 0
    for _ in range(STEPS):
        following: list[tuple[Changes, list[Changes]]] = []
        for changes, steps in frontier:
            for step in steps:
                candidate = changes | step
                if candidate in seen or undoes(candidate) or attempts >= ATTEMPTS:
                    continue
                seen.add(candidate)
                attempts += 1
                allowed, after = attempt(candidate)
                if allowed:
                    found.append(candidate)
                elif after:
                    following.append((candidate, after))
        if found:
            break
        frontier = following
    smallest = min((len(c) for c in found), default=0)
    return [c for c in found if len(c) == smallest]
