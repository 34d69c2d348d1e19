"""Lark tree to policy IR.

The grammar accepts a little more than the language; this step rejects the
rest with a targeted message (an operation outside an entity block, a
variable in a fact, a second ``policy`` line ...). Names are resolved later,
by :mod:`dsl.check`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lark import Token, Tree
from privilog.dsl.errors import PolicyError, PolicyErrors
from privilog.dsl.ir import (
    ActionSet,
    Atom,
    Comparison,
    Condition,
    Const,
    EntityType,
    Literal,
    Operation,
    Option,
    Param,
    Policy,
    Property,
    Relation,
    Requirement,
    Rule,
    Scope,
    Span,
    Target,
    Term,
    Var,
    Verb,
)


def is_variable(name: str) -> bool:
    """Datalog's convention: a name that starts upper-case or with ``_`` is a variable.

    >>> is_variable("P"), is_variable("_"), is_variable("ns1")
    (True, True, False)
    """
    return name[:1].isupper() or name.startswith("_")


@dataclass
class _Lowering:
    file: str
    title: str = ""
    name: str = ""
    actions: list[str] = field(default_factory=list)
    action_sets: list[ActionSet] = field(default_factory=list)
    entity_types: list[EntityType] = field(default_factory=list)
    relations: list[Relation] = field(default_factory=list)
    operations: list[Operation] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    includes: list[str] = field(default_factory=list)
    properties: list[Property] = field(default_factory=list)
    errors: list[PolicyError] = field(default_factory=list)
    block: str | None = None
    policy_span: Span | None = None

    def span(self, node: Tree[Token] | Token) -> Span:
        if isinstance(node, Token):
            return Span(self.file, node.line or 0, node.column or 0, node.end_line or 0, node.end_column or 0)
        meta = node.meta
        if getattr(meta, "empty", True):
            return Span(self.file)
        return Span(self.file, meta.line, meta.column, meta.end_line, meta.end_column)

    def statement(self, node: Tree[Token]) -> None:
        handler = getattr(self, f"_{node.data}")
        handler(node)

    def _policy_decl(self, node: Tree[Token]) -> None:
        if self.policy_span is not None:
            self.errors.append(
                PolicyError(
                    "a policy has one `policy` line",
                    self.span(node),
                    f"the first is at {self.policy_span}",
                )
            )
            return
        self.policy_span = self.span(node)
        self.name = str(node.children[0])
        if len(node.children) > 1:
            self.title = _unquote(str(node.children[1]))

    def _include_decl(self, node: Tree[Token]) -> None:
        self.includes.append(_unquote(str(node.children[0])))

    def _actions_decl(self, node: Tree[Token]) -> None:
        self.actions.extend(str(t) for t in node.children)

    def _set_decl(self, node: Tree[Token]) -> None:
        name, alts = node.children
        assert isinstance(name, Token) and isinstance(alts, Tree)
        self.action_sets.append(ActionSet(str(name), _names(alts), self.span(node)))

    def _entity_decl(self, node: Tree[Token]) -> None:
        name = str(node.children[0])
        parent = str(node.children[1]) if len(node.children) > 1 else None
        self.entity_types.append(EntityType(name, parent, self.span(node)))

    def _relation_decl(self, node: Tree[Token]) -> None:
        name, *columns = (str(t) for t in node.children)
        self.relations.append(Relation(name, tuple(columns), self.span(node)))

    def _property_decl(self, node: Tree[Token]) -> None:
        name = str(node.children[0])
        sentence, checker = "", ""
        for child in node.children[1:]:
            if isinstance(child, Token) and child.type == "STRING":
                sentence = _unquote(str(child))
            elif isinstance(child, Token):
                checker = str(child)
        self.properties.append(Property(name, sentence, checker, self.span(node)))

    def _block_header(self, node: Tree[Token]) -> None:
        self.block = str(node.children[0])

    def _operation(self, node: Tree[Token]) -> None:
        name = node.children[0]
        assert isinstance(name, Token)
        if self.block is None:
            self.errors.append(
                PolicyError(
                    f"operation `{name}` is not inside an entity block",
                    self.span(name),
                    "start the block with its entity type, e.g. `namespace:` on a line of its own",
                )
            )
            return
        params: tuple[Param, ...] = ()
        rest = list(node.children[1:])
        first = rest[0]
        if isinstance(first, Tree) and first.data == "params":
            rest.pop(0)
            params = tuple(self._param(p) for p in first.children if isinstance(p, Tree))
        verb_token, requirements = rest
        verb = Verb(str(verb_token))
        assert isinstance(requirements, Tree)
        reqs = tuple(half for r in requirements.children if isinstance(r, Tree) for half in self._requirement(r))
        self.operations.append(Operation(self.block, str(name), verb, reqs, params, self.span(node)))

    def _param(self, node: Tree[Token]) -> Param:
        arg, type_name, *within = node.children
        within_name = str(within[0]) if within else ""
        return Param(str(arg)[1:], str(type_name), within_name, self.span(node), many=node.data == "list_param")

    def _requirement(self, node: Tree[Token]) -> tuple[Requirement, ...]:
        """One written requirement; ``X if c else Y`` gives two, X when c holds and Y when not."""
        children = [c for c in node.children if not (isinstance(c, Token) and c.type in ("IF", "ELSE"))]
        options = self._alternatives(children[0])
        condition = None
        if len(children) > 1:
            cond = children[1]
            assert isinstance(cond, Tree)
            negated = len(cond.children) == 2
            arg = cond.children[-1]
            condition = Condition(str(arg)[1:], not negated, self.span(cond))
        this = Requirement(options, condition, self.span(node))
        if len(children) > 2:
            assert condition is not None
            otherwise = Requirement(
                self._alternatives(children[2]),
                Condition(condition.argument, not condition.present, condition.span),
                self.span(children[2]),
            )
            return (this, otherwise)
        return (this,)

    def _alternatives(self, node: Tree[Token] | Token) -> tuple[Option, ...]:
        assert isinstance(node, Tree)
        options: list[Option] = []
        for child in node.children:
            if isinstance(child, Tree):
                options.extend(self._option(child))
        return tuple(options)

    def _option(self, node: Tree[Token]) -> tuple[Option, ...]:
        if node.data == "by_rule":
            name = node.children[-1]
            return (Option((), (Target(Scope.RULE, str(name), self.span(node)),), (), self.span(node)),)
        first = node.children[0]
        assert isinstance(first, Tree)
        if first.data == "alternatives":
            return self._alternatives(first)
        written = _names(first)
        targets: tuple[Target, ...] = (Target(Scope.SELF, "", self.span(first)),)
        if len(node.children) > 1:
            target_tree = node.children[-1]
            assert isinstance(target_tree, Tree)
            targets = tuple(self._target(t) for t in target_tree.children if isinstance(t, Tree))
        return (Option(written, targets, written, self.span(node)),)

    def _target(self, node: Tree[Token]) -> Target:
        span = self.span(node)
        token = node.children[-1]
        match node.data:
            case "self":
                return Target(Scope.SELF, "", span)
            case "parent":
                return Target(Scope.PARENT, "", span)
            case "self_or_descendant":
                return Target(Scope.SELF_OR_DESCENDANT, "", span)
            case "self_or_within":
                return Target(Scope.SELF_OR_WITHIN, "", span)
            case "every_descendant":
                return Target(Scope.EVERY, "*", span)
            case "every_type":
                return Target(Scope.EVERY, str(token), span)
            case "argument":
                return Target(Scope.ARGUMENT, str(token)[1:], span)
            case "every_argument":
                return Target(Scope.EVERY_ARGUMENT, str(token)[1:], span)
            case "ancestor":
                return Target(Scope.ANCESTOR, str(token), span)
        raise AssertionError(node.data)

    def _rule(self, node: Tree[Token]) -> None:
        head_tree, body_tree = (c for c in node.children if isinstance(c, Tree))
        head = self._atom(head_tree)
        body = tuple(self._literal(b) for b in body_tree.children if isinstance(b, Tree))
        self.rules.append(Rule(head, body, self.span(node)))

    def _fact(self, node: Tree[Token]) -> None:
        head_tree = node.children[0]
        assert isinstance(head_tree, Tree)
        head = self._atom(head_tree)
        for term in head.terms:
            if isinstance(term, Var):
                self.errors.append(
                    PolicyError(
                        f"a fact cannot hold the variable `{term.name}`",
                        term.span,
                        "quote it to make it a constant, or write a rule with a body",
                    )
                )
        self.rules.append(Rule(head, (), self.span(node)))

    def _literal(self, node: Tree[Token]) -> Literal:
        if node.data == "negation":
            atom_tree = node.children[-1]
            assert isinstance(atom_tree, Tree)
            atom = self._atom(atom_tree)
            return Atom(atom.predicate, atom.terms, True, self.span(node))
        if node.data == "comparison":
            left, op, right = node.children
            return Comparison(self._term(left), str(op), self._term(right), self.span(node))
        return self._atom(node)

    def _atom(self, node: Tree[Token]) -> Atom:
        name, *terms = node.children
        return Atom(str(name), tuple(self._term(t) for t in terms if t is not None), False, self.span(node))

    def _term(self, node: Tree[Token] | Token) -> Term:
        assert isinstance(node, Tree)
        token = node.children[0]
        assert isinstance(token, Token)
        span = self.span(token)
        text = str(token)
        match node.data:
            case "name_term":
                return Var(text, span) if is_variable(text) else Const(text, span)
            case "string_constant":
                return Const(_unquote(text), span)
            case "arg_constant":
                return Const(text, span)
            case _:
                return Const(text, span)


def _names(node: Tree[Token]) -> tuple[str, ...]:
    return tuple(str(t) for t in node.children if isinstance(t, Token) and t.type == "NAME")


def _unquote(text: str) -> str:
    body = text[1:-1]
    return body.replace('\\"', '"').replace("\\\\", "\\")


def lower(tree: Tree[Token], file: str = "<policy>", default_name: str = "policy") -> Policy:
    """Turn a parse tree into an (unchecked) :class:`Policy`."""
    state = _Lowering(file)
    for node in tree.children:
        if not isinstance(node, Tree):
            continue
        state.statement(node)
    if state.errors:
        raise PolicyErrors(state.errors)
    return Policy(
        name=state.name or default_name,
        title=state.title,
        actions=tuple(state.actions),
        action_sets=tuple(state.action_sets),
        entity_types=tuple(state.entity_types),
        relations=tuple(state.relations),
        operations=tuple(state.operations),
        rules=tuple(state.rules),
        includes=tuple(state.includes),
        properties=tuple(state.properties),
        span=Span(file, 1, 1),
    )
