"""Static checks: an ordered list of named passes over the IR.

Nothing reaches an evaluator until these pass: pyDatalog has no safety or
stratification check of its own, and a policy error found at query time would
be found too late. Each pass returns the errors it found; :func:`check` runs
them all and raises them together.

The module is over 600 lines on purpose: the list of passes and the passes themselves are
read together, so that every check a policy goes through is in one file, in its order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from privilog.dsl.errors import PolicyError, PolicyErrors, did_you_mean
from privilog.dsl.ir import Atom, Comparison, Operation, Option, Policy, Requirement, Rule, Scope, Span, Target, Var
from privilog.dsl.limits import OPERATIONS, RULES

if TYPE_CHECKING:
    import networkx as nx

BOOL = "bool"


def _vocabulary(policy: Policy) -> list[PolicyError]:
    errors: list[PolicyError] = []
    seen: dict[str, str] = {}

    def claim(name: str, kind: str, span: Span) -> None:
        if name in seen:
            errors.append(PolicyError(f"`{name}` is declared twice (as {seen[name]} and as {kind})", span))
        else:
            seen[name] = kind

    for action in policy.actions:
        claim(action, "an action", policy.span)
    for action_set in policy.action_sets:
        claim(action_set.name, "an action set", action_set.span)
        for action in action_set.actions:
            if action not in policy.actions:
                errors.append(
                    PolicyError(
                        f"unknown action `{action}` in set `{action_set.name}`",
                        action_set.span,
                        did_you_mean(action, policy.actions) or f"actions are {', '.join(policy.actions)}",
                    )
                )
    types = {t.name for t in policy.entity_types}
    for entity_type in policy.entity_types:
        claim(entity_type.name, "an entity type", entity_type.span)
        if entity_type.parent is not None and entity_type.parent not in types:
            errors.append(
                PolicyError(
                    f"unknown entity type `{entity_type.parent}` as the parent of `{entity_type.name}`",
                    entity_type.span,
                    did_you_mean(entity_type.parent, types) or "declare it with `entity NAME`",
                )
            )
    edges = [(t.name, t.parent) for t in policy.entity_types if t.parent]
    if not _has_cycle(edges):
        return errors
    import networkx as nx  # only to name the cycle, as it always has

    for cycle in nx.simple_cycles(nx.DiGraph(edges)):
        first = policy.entity_type(cycle[0])
        assert first is not None
        errors.append(
            PolicyError(
                "entity types contain each other: " + " in ".join([*cycle, cycle[0]]),
                first.span,
                "the entity hierarchy must be a tree",
            )
        )
        break
    return errors


def ancestor_types(policy: Policy, type_name: str) -> list[str]:
    """The types that enclose ``type_name``, nearest first."""
    chain: list[str] = []
    current = policy.entity_type(type_name)
    while current is not None and current.parent is not None and current.parent not in chain:
        chain.append(current.parent)
        current = policy.entity_type(current.parent)
    return chain


def descendant_types(policy: Policy, type_name: str) -> list[str]:
    """The types that ``type_name`` encloses, at any depth."""
    return [t.name for t in policy.entity_types if type_name in ancestor_types(policy, t.name)]


def _expand_actions(policy: Policy, option: Option, errors: list[PolicyError]) -> tuple[str, ...]:
    expanded: list[str] = []
    for name in option.written:
        if name in policy.actions:
            expanded.append(name)
            continue
        action_set = policy.action_set(name)
        if action_set is not None:
            expanded.extend(action_set.actions)
            continue
        known = [*policy.actions, *(s.name for s in policy.action_sets)]
        errors.append(
            PolicyError(
                f"unknown action `{name}`",
                option.span,
                did_you_mean(name, known) or f"actions are {', '.join(known)}",
            )
        )
    return tuple(dict.fromkeys(expanded))


def _check_target(policy: Policy, op: Operation, target: Target, errors: list[PolicyError]) -> None:
    params = {p.name: p for p in op.params}
    match target.scope:
        case Scope.PARENT:
            if not ancestor_types(policy, op.entity_type):
                errors.append(
                    PolicyError(
                        f"`{op.entity_type}` has no parent", target.span, "declare it with `entity X in PARENT`"
                    )
                )
        case Scope.ANCESTOR:
            ancestors = ancestor_types(policy, op.entity_type)
            if target.param not in ancestors:
                if policy.entity_type(target.param) is None:
                    names = [t.name for t in policy.entity_types] + ["self", "parent"]
                    hint = did_you_mean(target.param, names) or (
                        "a target is self, parent, an enclosing type, $arg, every ..., "
                        "self or descendant or self or within"
                    )
                    errors.append(PolicyError(f"unknown target `{target.param}`", target.span, hint))
                else:
                    errors.append(
                        PolicyError(
                            f"`{target.param}` does not enclose `{op.entity_type}`",
                            target.span,
                            f"the enclosing types are: {', '.join(ancestors) or 'none'}",
                        )
                    )
        case Scope.EVERY:
            if target.param != "*" and target.param not in descendant_types(policy, op.entity_type):
                inside = descendant_types(policy, op.entity_type)
                errors.append(
                    PolicyError(
                        f"`{target.param}` is not a type inside `{op.entity_type}`",
                        target.span,
                        did_you_mean(target.param, inside) or f"types inside are: {', '.join(inside) or 'none'}",
                    )
                )
        case Scope.ARGUMENT | Scope.EVERY_ARGUMENT:
            many = target.scope is Scope.EVERY_ARGUMENT
            param = params.get(target.param)
            problem: tuple[str, str] | None = None
            if param is None:
                declared = "[TYPE]" if many else "TYPE"
                problem = (
                    f"unknown request argument `${target.param}` of `{op.qualified}`",
                    did_you_mean(target.param, params, sigil="$")
                    or f"declare it: `{op.name}(${target.param}: {declared}) requires ...`",
                )
            elif param.type == BOOL and not many:
                name = f"${target.param}"
                problem = (f"`{name}` is a bool, not an entity", f"use it as a condition: `... if {name}`")
            elif param.many and not many:
                name = f"${target.param}"
                problem = (f"`{name}` is a list of entities, not one", f"ask of each with `every {name}`")
            elif many and not param.many:
                problem = (
                    f"`${target.param}` is not a list of entities",
                    f"declare it as one, `${target.param}: [TYPE]`, or ask of it as `${target.param}`",
                )
            if problem is not None:
                errors.append(PolicyError(problem[0], target.span, problem[1]))
        case Scope.SELF | Scope.SELF_OR_DESCENDANT | Scope.SELF_OR_WITHIN | Scope.RULE:
            pass  # a rule's name is checked with the rules (_by_rules)


def _check_requirement(policy: Policy, op: Operation, req: Requirement, errors: list[PolicyError]) -> Requirement:
    options = []
    for option in req.options:
        actions = _expand_actions(policy, option, errors)
        for target in option.targets:
            _check_target(policy, op, target, errors)
        options.append(replace(option, actions=actions))
    if req.condition is not None and req.condition.argument not in {p.name for p in op.params}:
        names = [p.name for p in op.params]
        errors.append(
            PolicyError(
                f"unknown request argument `${req.condition.argument}` of `{op.qualified}`",
                req.condition.span,
                did_you_mean(req.condition.argument, names, sigil="$")
                or f"declare it: `{op.name}(${req.condition.argument}: bool) ...`",
            )
        )
    return replace(req, options=tuple(options))


def _operations(policy: Policy, errors: list[PolicyError]) -> Policy:
    types = {t.name for t in policy.entity_types}
    seen: dict[str, Operation] = {}
    checked: list[Operation] = []
    for op in policy.operations:
        if op.entity_type not in types:
            errors.append(
                PolicyError(
                    f"unknown entity type `{op.entity_type}` for operation `{op.name}`",
                    op.span,
                    did_you_mean(op.entity_type, types) or "declare it with `entity NAME`",
                )
            )
            continue
        if op.qualified in seen:
            errors.append(
                PolicyError(
                    f"operation `{op.qualified}` is defined twice",
                    op.span,
                    f"the first is at {seen[op.qualified].span}; merge their requirements with `,`",
                )
            )
            continue
        seen[op.qualified] = op
        for param in op.params:
            if param.within and not (
                param.within in ancestor_types(policy, op.entity_type)
                and param.within in ancestor_types(policy, param.type)
            ):
                errors.append(
                    PolicyError(
                        f"`{param.within}` does not enclose both `{op.entity_type}` and `{param.type}`",
                        param.span,
                        "`$arg: TYPE in ENCLOSING` needs a type that encloses the operation's entity and the argument",
                    )
                )
            if param.many and param.type == BOOL:
                errors.append(
                    PolicyError(
                        f"`${param.name}` is a list of bools",
                        param.span,
                        "a list argument names entities: `$datasets: [dataset]`",
                    )
                )
            if param.type != BOOL and param.type not in types:
                errors.append(
                    PolicyError(
                        f"unknown type `{param.type}` for argument `${param.name}`",
                        param.span,
                        did_you_mean(param.type, [*types, BOOL]) or "an argument is an entity type or `bool`",
                    )
                )
        reqs = tuple(_check_requirement(policy, op, r, errors) for r in op.requirements)
        checked.append(replace(op, requirements=reqs))
    return replace(policy, operations=tuple(checked))


def _arities(policy: Policy, errors: list[PolicyError]) -> dict[str, int]:
    arity: dict[str, int] = {}
    for relation in policy.relations:
        arity.setdefault(relation.name, relation.arity)
    for rule in policy.rules:
        arity.setdefault(rule.head.predicate, len(rule.head.terms))
    for rule in policy.rules:
        for atom in [rule.head, *(b for b in rule.body if isinstance(b, Atom))]:
            if atom.predicate in arity and len(atom.terms) != arity[atom.predicate]:
                errors.append(
                    PolicyError(
                        f"`{atom.predicate}` takes {arity[atom.predicate]} arguments, not {len(atom.terms)}",
                        atom.span,
                    )
                )
    return arity


def _relations(policy: Policy, errors: list[PolicyError]) -> None:
    arity = _arities(policy, errors)
    base = {r.name for r in policy.relations}
    for rule in policy.rules:
        if rule.head.predicate in base and rule.body:
            errors.append(
                PolicyError(
                    f"`{rule.head.predicate}` is a base relation: its facts come from the world",
                    rule.head.span,
                    "derive a new relation instead",
                )
            )
        for literal in rule.body:
            if isinstance(literal, Atom) and literal.predicate not in arity:
                errors.append(
                    PolicyError(
                        f"unknown relation `{literal.predicate}`",
                        literal.span,
                        did_you_mean(literal.predicate, arity)
                        or "declare it with `relation NAME(COLUMNS)` or define it with a rule",
                    )
                )


def prelude_file() -> Path:
    """The prelude every policy includes (rules/prelude/requirements.policy)."""
    from privilog import rules

    return (Path(rules.__file__).parent / "prelude" / "requirements.policy").resolve()


def _in_prelude(span: Span) -> bool:
    return span.file.endswith("requirements.policy") and Path(span.file).resolve() == prelude_file()


def _shipped_extension(span: Span) -> bool:
    """A file of privilog's own prelude folder other than the prelude itself (rules/prelude/ranger.policy):
    shipped, read by no policy unless it includes the file, and trusted, like the prelude, to add
    to `holds` (Ranger's policies, the world's facts, are what holds there)."""
    return span.file.endswith(".policy") and Path(span.file).resolve().parent == prelude_file().parent


def prelude_relations(policy: Policy) -> tuple[set[str], set[str]]:
    """The base relations the prelude declares and the relations its rules define."""
    base = {r.name for r in policy.relations if _in_prelude(r.span)}
    derived = {r.head.predicate for r in policy.rules if _in_prelude(r.span)}
    return base, derived


# Clauses a policy may add to the prelude's relations: `allowed` negates `denied`, and nothing
# else the prelude defines reads it, so a deny rule can only ever deny more (fail closed); and
# `bypass`, a request let through whatever it lacks, with the reason a decision shows.
DENY_RULES = frozenset({"denied", "bypass"})


def _prelude(policy: Policy, errors: list[PolicyError]) -> None:
    """No policy adds clauses to what the prelude defines: a rule for `holds` or `allowed`, or a
    fact of `grant` or `admin`, would change who is allowed without any grant by an admin."""
    base, derived = prelude_relations(policy)
    for rule in policy.rules:
        name = rule.head.predicate
        if _in_prelude(rule.span) or (name not in base and name not in derived) or name in DENY_RULES:
            continue
        if name == "holds" and _shipped_extension(rule.span):
            continue
        if name in base:
            what = f"`{name}` is a base relation: its facts come from the world, not from a policy"
        else:
            what = f"`{name}` is defined by the prelude (rules/prelude/requirements.policy); a policy may not add to it"
        errors.append(PolicyError(what, rule.head.span, "derive a new relation instead"))


def _properties(policy: Policy, errors: list[PolicyError]) -> None:
    defined = {r.head.predicate for r in policy.rules} | {r.name for r in policy.relations}
    seen: set[str] = set()
    for prop in policy.properties:
        if prop.name in seen:
            errors.append(PolicyError(f"property `{prop.name}` is declared twice", prop.span))
        seen.add(prop.name)
        if not prop.checker and prop.name not in defined:
            errors.append(
                PolicyError(
                    f"property `{prop.name}` names no relation",
                    prop.span,
                    f"define its counterexamples with a rule `{prop.name}(...) :- ...`, or name a checker with `by`",
                )
            )


# A rule body compiles to one nested loop per joined literal, and Python nests at most 20
# loops in one function: a rule joins at most this many positive literals (a wider join is
# written as several rules, each naming what the next one needs).
MAX_JOINED = 16


def _safety(policy: Policy, errors: list[PolicyError]) -> None:
    for rule in policy.rules:
        joined = sum(1 for b in rule.body if isinstance(b, Atom) and not b.negated)
        if joined > MAX_JOINED:
            errors.append(
                PolicyError(
                    f"this rule joins {joined} relations; a rule joins at most {MAX_JOINED}",
                    rule.head.span,
                    "split it: a rule for part of the join, used by another for the rest",
                )
            )
        bound = {v for b in rule.body if isinstance(b, Atom) and not b.negated for v in b.variables}
        for var in rule.head.terms:
            if isinstance(var, Var) and var.name == "_":
                errors.append(PolicyError("`_` cannot stand in a rule's head", var.span, "name the variable"))
            elif isinstance(var, Var) and var.name not in bound:
                errors.append(
                    PolicyError(
                        f"unsafe variable `{var.name}`: it is in the head but in no positive literal of the body",
                        var.span,
                        f"bind `{var.name}` with a relation in the body",
                    )
                )
        for literal in rule.body:
            needs: Iterable[str] = ()
            if (isinstance(literal, Atom) and literal.negated) or isinstance(literal, Comparison):
                needs = literal.variables
            for name in needs:
                if name not in bound:
                    kind = "a negation" if isinstance(literal, Atom) else "a comparison"
                    errors.append(
                        PolicyError(
                            f"unsafe variable `{name}`: it appears in {kind} but in no positive literal",
                            literal.span,
                            f"bind `{name}` with a positive literal, or write `_` for 'any'",
                        )
                    )


def _has_cycle(edges: Iterable[tuple[str, str]]) -> bool:
    """Whether the directed graph of ``edges`` has a cycle (a self-loop counts)."""
    successors: dict[str, list[str]] = {}
    for a, b in edges:
        successors.setdefault(a, []).append(b)
    return any(len(c) > 1 or c[0] in successors.get(c[0], ()) for c in components(successors))


def components(successors: dict[str, list[str]]) -> list[list[str]]:
    """Strongly connected components (Tarjan's algorithm, without recursion), each before those it reaches.

    Nodes are visited in the order of ``successors`` and their lists, so the order is deterministic.

    >>> components({"a": ["b"], "b": ["a", "c"], "c": []})
    [['b', 'a'], ['c']]
    """
    nodes = list(successors)
    for reached in successors.values():
        nodes.extend(reached)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in dict.fromkeys(nodes):
        if root in index:
            continue
        work = [(root, iter(successors.get(root, ())))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(successors.get(target, ()))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    found.append(component)
    found.reverse()  # Tarjan finds a component after every component it reaches
    return found


class _Dependencies:
    """Predicate dependencies: an edge from each body predicate to the head, marked when negated.

    Each edge keeps whether any literal behind it is negated, and the span of
    the last such literal in the rules' order (as :func:`dependency_graph` does).
    """

    def __init__(self, rules: Iterable[Rule]):
        self.successors: dict[str, list[str]] = {}
        self.edges: dict[tuple[str, str], tuple[bool, Span]] = {}
        for rule in rules:
            head = rule.head.predicate
            self.successors.setdefault(head, [])
            for literal in rule.body:
                if isinstance(literal, Atom):
                    key = (literal.predicate, head)
                    earlier = self.edges.get(key)
                    if earlier is None:
                        self.successors.setdefault(literal.predicate, []).append(head)
                    negative = literal.negated or (earlier is not None and earlier[0])
                    self.edges[key] = (negative, literal.span)


def dependency_graph(rules: Iterable[Rule]) -> nx.DiGraph:
    """Predicate dependencies as a networkx graph: edges marked ``negative`` and with a ``span``."""
    import networkx as nx

    graph = nx.DiGraph()
    for rule in rules:
        graph.add_node(rule.head.predicate)
        for literal in rule.body:
            if isinstance(literal, Atom):
                earlier = graph.get_edge_data(literal.predicate, rule.head.predicate, {})
                negative = literal.negated or earlier.get("negative", False)
                graph.add_edge(literal.predicate, rule.head.predicate, negative=negative, span=literal.span)
    return graph


def strata(rules: Iterable[Rule]) -> list[list[str]]:
    """Derived predicates grouped into strata, lowest first.

    A predicate sits above every predicate it negates, so a backend that
    evaluates strata in order sees each negated relation complete.
    """
    rules = list(rules)
    deps = _Dependencies(rules)
    heads = {r.head.predicate for r in rules if r.body}
    found = components(deps.successors)
    component_of = {member: number for number, members in enumerate(found) for member in members}
    # Components come before those they reach: a component's level is final before any successor reads it.
    level = [0] * len(found)
    for number, members in enumerate(found):
        for a in members:
            for b in deps.successors[a]:
                target = component_of[b]
                if target != number:
                    step = 1 if deps.edges[a, b][0] else 0
                    level[target] = max(level[target], level[number] + step)
    result: dict[int, list[str]] = {}
    for number, members in enumerate(found):
        heads_here = sorted(m for m in members if m in heads)
        if heads_here:
            result.setdefault(level[number], []).extend(heads_here)
    return [sorted(result[k]) for k in sorted(result)]


def _stratification(policy: Policy, errors: list[PolicyError]) -> None:
    deps = _Dependencies(policy.rules)
    # A component is a set: take the first offending literal in the source, so
    # the error does not depend on the order of a set of strings (PYTHONHASHSEED).
    cycles = sorted(
        (deps.edges[a, b][1], a, b)
        for component in components(deps.successors)
        for a in component
        for b in component
        if (a, b) in deps.edges and deps.edges[a, b][0]
    )
    if cycles:
        span, a, b = cycles[0]
        errors.append(
            PolicyError(
                f"`{b}` depends on its own negation through `{a}`: the rules cannot be stratified",
                span,
                "a relation may negate only relations that do not depend on it",
            )
        )


def _by_rules(policy: Policy, errors: list[PolicyError]) -> None:
    """`by NAME` names a relation of one column (the request) that the policy's own rules derive."""
    base, prelude = prelude_relations(policy)
    arity = {r.head.predicate: len(r.head.terms) for r in policy.rules}
    for op in policy.operations:
        for req in op.requirements:
            for option in req.options:
                for target in option.targets:
                    if target.scope is not Scope.RULE:
                        continue
                    name = target.param
                    if name in base or name in prelude or name in {r.name for r in policy.relations}:
                        errors.append(
                            PolicyError(
                                f"`by {name}`: `{name}` is not the policy's own rule",
                                target.span,
                                f"derive a relation of the request, `{name}_ok(R) :- request(R, P, _, E), ...`",
                            )
                        )
                    elif name not in arity:
                        errors.append(
                            PolicyError(
                                f"`by {name}`: no rule derives `{name}`",
                                target.span,
                                did_you_mean(name, sorted(arity))
                                or f"write one for the request: `{name}(R) :- request(R, P, _, E), ...`",
                            )
                        )
                    elif arity[name] != 1:
                        errors.append(
                            PolicyError(
                                f"`by {name}`: `{name}` has {arity[name]} columns; it must have one, the request",
                                target.span,
                                f"`{name}(R) :- request(R, P, _, E), ...`",
                            )
                        )


def _vocabulary_pass(policy: Policy, errors: list[PolicyError]) -> None:
    errors.extend(_vocabulary(policy))


Pass = Callable[[Policy, list[PolicyError]], "Policy | None"]

PASSES: tuple[tuple[str, Pass], ...] = (
    ("vocabulary", _vocabulary_pass),
    ("operations", _operations),
    ("relations", _relations),
    ("prelude", _prelude),
    ("by rules", _by_rules),
    ("properties", _properties),
    ("safety", _safety),
    ("stratification", _stratification),
)


def _size(policy: Policy) -> None:
    """A policy over PRIVILOG_MAX_OPERATIONS or PRIVILOG_MAX_RULES is refused before any pass runs:
    the passes, and compiling the policy, cost time and memory in proportion to its size."""
    for limit, count in ((OPERATIONS, len(policy.operations)), (RULES, len(policy.rules))):
        if count > limit.value():
            raise PolicyError(limit.refusal(f"the policy {policy.name or policy.span.file}", count), policy.span)


def check(policy: Policy) -> Policy:
    """Run every pass; return the checked policy (action sets expanded) or raise all errors."""
    _size(policy)
    errors: list[PolicyError] = []
    for _name, run in PASSES:
        result = run(policy, errors)
        if isinstance(result, Policy):
            policy = result
    if errors:
        raise PolicyErrors(errors)
    return policy
