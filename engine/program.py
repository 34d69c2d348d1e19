"""A checked policy compiled to what every backend evaluates: rules and facts.

Tables are data: each operation becomes an ``operation`` fact, each option of
each requirement ``requires`` facts, each condition a ``guard`` fact. The
rules are the policy's Datalog (the prelude's generic semantics included),
normalised for evaluators that have no static checks of their own: each `_`
becomes a fresh variable, and positive literals come before negations and
comparisons so every variable is bound when they run.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace

from privilog.dsl.check import strata
from privilog.dsl.ir import (
    Atom,
    Comparison,
    Const,
    Literal,
    Operation,
    Policy,
    Requirement,
    Rule,
    Scope,
    Target,
    Var,
)

Row = tuple[str, ...]


# The relations a policy's tables compile to, as the prelude declares them.
TABLE_ARITY = {"operation": 2, "requires": 5, "guard": 3}


def requirement_id(op: Operation, index: int) -> str:
    """The id of an operation's ``index``-th requirement (1-based), e.g. ``namespace.delete#2``."""
    return f"{op.qualified}#{index}"


@dataclass(frozen=True)
class Program:
    """Rules and the policy's own facts, ready for a backend."""

    policy: Policy
    rules: tuple[Rule, ...]
    facts: dict[str, frozenset[Row]] = field(hash=False)
    relations: dict[str, int] = field(hash=False)  # every relation's arity
    requirements: dict[str, tuple[Operation, Requirement]] = field(hash=False)
    strata: tuple[tuple[str, ...], ...] = ()

    @property
    def base_relations(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.policy.relations)


def _normalise(rule: Rule) -> Rule:
    counter = 0

    def fresh(term: object) -> object:
        nonlocal counter
        if isinstance(term, Var) and term.name == "_":
            counter += 1
            return Var(f"_Anon{counter}", term.span)
        return term

    body: list[Literal] = []
    for literal in rule.body:
        if isinstance(literal, Atom):
            body.append(replace(literal, terms=tuple(fresh(t) for t in literal.terms)))  # type: ignore[misc]
        else:
            body.append(literal)
    positive = [b for b in body if isinstance(b, Atom) and not b.negated]
    rest = [b for b in body if not (isinstance(b, Atom) and not b.negated)]
    rest.sort(key=lambda b: isinstance(b, Comparison))
    return replace(rule, body=tuple(positive + rest))


def table_facts(policy: Policy) -> tuple[dict[str, set[Row]], dict[str, tuple[Operation, Requirement]]]:
    """The ``operation``, ``requires`` and ``guard`` facts of a policy's tables."""
    facts: dict[str, set[Row]] = {"operation": set(), "requires": set(), "guard": set()}
    index: dict[str, tuple[Operation, Requirement]] = {}
    for op in policy.operations:
        facts["operation"].add((op.qualified, op.entity_type))
        for number, req in enumerate(op.requirements, start=1):
            rid = requirement_id(op, number)
            index[rid] = (op, req)
            for option in req.options:
                for target in option.targets:
                    if target.scope is Scope.RULE:  # no action: the requirement applies, the rule meets it
                        facts["requires"].add((op.qualified, rid, "", target.scope.value, target.param))
                for action in option.actions:
                    for target in option.targets:
                        facts["requires"].add((op.qualified, rid, action, target.scope.value, target.param))
            if req.condition is not None:
                polarity = "present" if req.condition.present else "absent"
                facts["guard"].add((rid, req.condition.argument, polarity))
    return facts, index


def _by_options(policy: Policy) -> Iterator[tuple[Operation, int, Target]]:
    """Each `by NAME` option's target, with its operation and requirement number."""
    for op in policy.operations:
        for number, req in enumerate(op.requirements, start=1):
            for option in req.options:
                for target in option.targets:
                    if target.scope is Scope.RULE:
                        yield op, number, target


def by_rule_names(policy: Policy) -> tuple[str, ...]:
    """The relations the policy's `by NAME` options name, sorted (none for most policies)."""
    return tuple(sorted({target.param for _, _, target in _by_options(policy)}))


def by_rules(policy: Policy) -> list[Rule]:
    """For each `by NAME` option, the rule that meets its requirement when NAME holds for the request:
    ``satisfied(R, "OP#N") :- request(R, _, "OP", _), NAME(R).``"""
    out = []
    for op, number, target in _by_options(policy):
        r, anything = Var("R"), Var("_")
        head = Atom("satisfied", (r, Const(requirement_id(op, number))))
        request = Atom("request", (r, anything, Const(op.qualified), anything))
        out.append(Rule(head, (request, Atom(target.param, (r,))), target.span))
    return out


def reads(rules: Iterable[Rule], relation: str, facts: Mapping[str, Iterable[Row]] | None = None) -> bool:
    """Whether a rule's body reads ``relation``; with ``facts`` (a program's own: ``requires``, ...),
    only a rule that can fire: each positive atom of a relation no rule derives matches a fact.
    The prelude's rule for ``self or within`` reads ``within`` only for a policy that asks it."""
    rules = list(rules)
    derived = {r.head.predicate for r in rules}

    def can_fire(rule: Rule) -> bool:
        for atom in rule.body:
            if facts is None or not isinstance(atom, Atom) or atom.negated or atom.predicate in derived:
                continue
            if atom.predicate not in facts:  # a world's relation (or a request's): it may hold anything
                continue
            fixed = [(i, t.value) for i, t in enumerate(atom.terms) if isinstance(t, Const)]
            if not any(all(row[i] == v for i, v in fixed) for row in facts.get(atom.predicate, ())):
                return False
        return True

    return any(any(isinstance(b, Atom) and b.predicate == relation for b in r.body) and can_fire(r) for r in rules)


def compile_policy(policy: Policy) -> Program:
    """Compile a checked policy."""
    rules = tuple(_normalise(r) for r in (*policy.rules, *by_rules(policy)) if r.body)
    facts, index = table_facts(policy)
    for rule in policy.rules:
        if not rule.body:
            facts.setdefault(rule.head.predicate, set()).add(tuple(str(t) for t in rule.head.terms))
    arity = {r.name: r.arity for r in policy.relations}
    for name, columns in TABLE_ARITY.items():  # declared by the prelude; a policy without it has them too
        arity.setdefault(name, columns)
    for rule in policy.rules:
        arity.setdefault(rule.head.predicate, len(rule.head.terms))
    return Program(
        policy=policy,
        rules=rules,
        facts={k: frozenset(v) for k, v in facts.items()},
        relations=arity,
        requirements=index,
        strata=tuple(tuple(s) for s in strata(rules)),
    )
