"""One analysis of a compiled program, shared by every backend that compiles it.

Relations are sorted by what they depend on:

* **base**: the world's facts (``grant``, ``member_of``, ``child_of``, ``is_a``, ``admin``), and
  the relations a world's ``facts:`` may give (:func:`world_fact_relations`: declared by the
  policy, derived by no rule, written nowhere in it);
* **static**: the policy's own facts (``operation``, ``requires``, ``guard``, facts a
  policy writes) and what is derived from them alone;
* **world**: derived from base and static facts only (``in_group``, ``holds``,
  ``ancestor``, ``descendant``, a user rule of that kind): materialized once and
  kept current as the world changes;
* **request**: depends on ``request`` or ``request_arg``: evaluated per request.

A world-derived relation that no request-derived one uses, directly or through
others, is **on demand**: no decision needs it, so a backend may derive it only
when it is asked for. ``in_group``, the closure of memberships, is one: a chain of
N nested groups has N²/2 rows of it, while ``holds``, which decisions read, is
derived down ``member_of`` without it.

Derived relations are also grouped into components (mutually recursive
relations), in an order where every relation a component uses, positively or
negated, comes before it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import IntEnum
from functools import cached_property

from privilog.dsl.check import components, strata
from privilog.dsl.ir import Atom, Rule, Var
from privilog.engine.program import Program

WORLD_BASE = frozenset(
    {"grant", "member_of", "child_of", "is_a", "admin", "matches", "config", "name_of", "last_name_of", "within"}
)
REQUEST_BASE = frozenset({"request", "request_arg"})
# What the prelude declares and the world's own sections, a request or the policy's tables give:
# a world's `facts:` gives none of them
PRELUDE_GIVEN = WORLD_BASE | REQUEST_BASE | frozenset({"owned_by", "operation", "requires", "guard"})


def world_fact_relations(program: Program) -> frozenset[str]:
    """The relations a world's ``facts:`` may give rows of: those the policy declares with
    ``relation NAME(...)``, that no rule derives and the policy writes no fact of, other than the
    prelude's (``PRELUDE_GIVEN``). Base relations, as the world's own are.

    >>> from privilog import dsl
    >>> from privilog.engine.program import compile_policy
    >>> text = 'relation blocked(p)\\nseen(P) :- blocked(P).\\nrelation vip(p)\\nvip("user:a").'
    >>> sorted(world_fact_relations(compile_policy(dsl.parse_policy(text))))
    ['blocked']
    """
    derived = {r.head.predicate for r in program.rules}
    written = {name for name, rows in program.facts.items() if rows}
    return frozenset(program.base_relations) - PRELUDE_GIVEN - derived - written


class Kind(IntEnum):
    """What a relation depends on; a derived relation is of the highest kind it uses."""

    STATIC = 0
    BASE = 1
    WORLD = 2
    REQUEST = 3


@dataclass(frozen=True)
class Component:
    """Relations defined together (recursively), with their rules."""

    relations: frozenset[str]
    rules: tuple[Rule, ...]
    kind: Kind

    @cached_property
    def recursive(self) -> bool:
        return bool(self.uses & self.relations)

    @cached_property
    def uses(self) -> frozenset[str]:
        """Every relation a body of the component names."""
        return frozenset(b.predicate for rule in self.rules for b in rule.body if isinstance(b, Atom))

    @cached_property
    def negated(self) -> frozenset[str]:
        """The relations the component negates."""
        return frozenset(b.predicate for r in self.rules for b in r.body if isinstance(b, Atom) and b.negated)


@dataclass(frozen=True)
class Analysis:
    """Kinds of relations and the components of derived ones, in evaluation order."""

    kinds: dict[str, Kind]
    components: tuple[Component, ...]

    def of_kind(self, *kinds: Kind) -> tuple[Component, ...]:
        return tuple(c for c in self.components if c.kind in kinds)

    @cached_property
    def on_demand(self) -> frozenset[str]:
        """The world-derived relations no request-derived relation uses, even indirectly.

        >>> from privilog import dsl
        >>> from privilog.engine.program import compile_policy
        >>> sorted(analyse(compile_policy(dsl.load_policy("cdap"))).on_demand)
        ['in_group']
        """
        wanted: set[str] = set()
        for component in reversed(self.components):  # each before what it uses
            if component.kind is Kind.REQUEST or component.relations & wanted:
                wanted |= component.uses
        return frozenset(
            name for c in self.components if c.kind is Kind.WORLD for name in c.relations if name not in wanted
        )


# A policy names relations with letters, digits and `_`: a relation named so cannot be written.
WRITTEN = "@written"


def written_apart(program: Program) -> Program:
    """The program with the facts a policy writes of a relation its rules also derive moved to a
    base relation of their own, ``NAME@written``, and one rule ``NAME(X1, ...) :- NAME@written(X1, ...)``.

    A bottom-up evaluator derives a relation's rows from its rules, into a fresh relation, and
    maintains them by deleting and rederiving: the facts written beside those rules would be
    lost, or deleted with nothing to rederive them (``blocked(user:mallory).`` beside
    ``blocked(P) :- member_of(P, G), blocked(G).``). Apart, they are base facts like the world's,
    and every backend that evaluates bottom-up (compiled, Spark) sees one program where each
    relation is either given or derived, never both.

    >>> from privilog import dsl
    >>> from privilog.engine.program import compile_policy
    >>> policy = dsl.parse_policy('orbits("earth", "sun").\\norbits(X, Y) :- orbits(X, Z), orbits(Z, Y).')
    >>> apart = written_apart(compile_policy(policy))
    >>> sorted(apart.facts["orbits@written"]), "orbits" in apart.facts
    ([('earth', 'sun')], False)
    >>> [str(r.head.predicate) for r in apart.rules if r.head.predicate == "orbits"]
    ['orbits', 'orbits']
    """
    derived = {r.head.predicate for r in program.rules}
    both = sorted(name for name, rows in program.facts.items() if name in derived and rows)
    if not both:
        return program
    facts = {name: rows for name, rows in program.facts.items() if name not in both}
    relations = dict(program.relations)
    rules = list(program.rules)
    for name in both:
        given = name + WRITTEN
        facts[given] = program.facts[name]
        relations[given] = arity = program.relations[name]
        columns = tuple(Var(f"X{i}") for i in range(arity))
        rules.append(Rule(Atom(name, columns), (Atom(given, columns),)))
    return replace(
        program, rules=tuple(rules), facts=facts, relations=relations, strata=tuple(tuple(s) for s in strata(rules))
    )


def analyse(program: Program) -> Analysis:
    """Sort the program's relations by dependence and order its components.

    >>> from privilog import dsl
    >>> from privilog.engine.program import compile_policy
    >>> result = analyse(compile_policy(dsl.load_policy("cdap")))
    >>> [result.kinds[r].name for r in ("grant", "requires", "holds", "descendant", "met", "allowed")]
    ['BASE', 'STATIC', 'WORLD', 'WORLD', 'REQUEST', 'REQUEST']
    """
    heads = {r.head.predicate for r in program.rules}
    given = world_fact_relations(program)
    kinds: dict[str, Kind] = {}
    for name in program.relations:
        if name in heads:
            continue
        if name in REQUEST_BASE:
            kinds[name] = Kind.REQUEST
        elif name in WORLD_BASE or name in given:
            kinds[name] = Kind.BASE
        else:
            kinds[name] = Kind.STATIC
    by_head: dict[str, list[tuple[int, Rule]]] = {}  # grouped once: many rules cost linear time, not quadratic
    for position, rule in enumerate(program.rules):
        by_head.setdefault(rule.head.predicate, []).append((position, rule))
    components = []
    for members in _components(program.rules):
        rules = tuple(r for _, r in sorted(p for m in members for p in by_head.get(m, ())))
        used = {b.predicate for r in rules for b in r.body if isinstance(b, Atom)} - members
        kind = max((kinds.get(u, Kind.STATIC) for u in used), default=Kind.STATIC)
        kind = Kind.WORLD if kind is Kind.BASE else kind
        for name in members:
            kinds[name] = kind
        components.append(Component(frozenset(members), rules, kind))
    return Analysis(kinds, tuple(components))


def _components(rules: Iterable[Rule]) -> list[set[str]]:
    """Strongly connected components of the predicate graph, dependencies first."""
    edges: dict[str, set[str]] = {}
    for rule in rules:
        uses = edges.setdefault(rule.head.predicate, set())
        uses.update(b.predicate for b in rule.body if isinstance(b, Atom))
    heads = set(edges)
    # each head before what it uses, visited in sorted order; reversed: what is used comes first
    successors = {head: sorted(edges[head] & heads) for head in sorted(heads)}
    return [set(members) for members in reversed(components(successors))]
