"""Policy IR back to canonical text: ``parse(format(p))`` lowers to ``p``."""

from __future__ import annotations

import re

from privilog.dsl.ir import (
    Atom,
    Comparison,
    Literal,
    Operation,
    Option,
    Policy,
    Requirement,
    Rule,
    Scope,
    Term,
    Var,
)

_SYMBOL = re.compile(r"[a-z][A-Za-z0-9_]*$")
_ENTITY = re.compile(r"[a-z_]+:[A-Za-z0-9_@/\-]+(\.[A-Za-z0-9_@/\-]+)*$")
_NUMBER = re.compile(r"-?[0-9]+$")
_KEYWORDS = {"not", "policy", "include", "actions", "set", "entity", "relation", "in", "nothing"}


def format_term(term: Term) -> str:
    if isinstance(term, Var):
        return term.name
    value = term.value
    if (_SYMBOL.match(value) and value not in _KEYWORDS) or _ENTITY.match(value) or _NUMBER.match(value):
        return value
    if value.startswith("$") and re.fullmatch(r"\$[a-z_][a-z0-9_]*", value):
        return value
    return quote(value)


def quote(value: str) -> str:
    """``value`` as a string literal of the language.

    >>> print(quote('say "hi" \\\\ bye'))
    "say \\"hi\\" \\\\ bye"
    """
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def format_atom(atom: Atom) -> str:
    text = f"{atom.predicate}({', '.join(format_term(t) for t in atom.terms)})"
    return f"not {text}" if atom.negated else text


def format_literal(literal: Literal) -> str:
    if isinstance(literal, Comparison):
        return f"{format_term(literal.left)} {literal.operator} {format_term(literal.right)}"
    return format_atom(literal)


def format_rule(rule: Rule) -> str:
    if not rule.body:
        return f"{format_atom(rule.head)}."
    body = ",\n    ".join(format_literal(b) for b in rule.body)
    return f"{format_atom(rule.head)} :-\n    {body}."


def format_option(option: Option) -> str:
    if option.targets and option.targets[0].scope is Scope.RULE:
        return str(option.targets[0])
    actions = " | ".join(option.written or option.actions)
    targets = [str(t) for t in option.targets]
    if targets == ["self"]:
        return actions
    return f"{actions} on {' | '.join(targets)}"


def format_alternatives(options: tuple[Option, ...]) -> str:
    return " or ".join(format_option(o) for o in options)


def format_requirements(requirements: tuple[Requirement, ...]) -> list[str]:
    """Each written requirement; a guarded pair on the same argument folds back into ``if ... else``."""
    parts: list[str] = []
    index = 0
    while index < len(requirements):
        req = requirements[index]
        text = format_alternatives(req.options)
        if req.condition is not None:
            text += f" if {req.condition}"
            following = requirements[index + 1] if index + 1 < len(requirements) else None
            if (
                following is not None
                and following.condition is not None
                and following.condition.argument == req.condition.argument
                and following.condition.present != req.condition.present
            ):
                text += f" else {format_alternatives(following.options)}"
                index += 1
        parts.append(text)
        index += 1
    return parts


def _wrapped(items: list[str], indent: int, width: int) -> str:
    """``(a, b, c)`` over lines of at most ``width`` characters, continued at ``indent``."""
    lines: list[str] = []
    line = ""
    for item in items:
        if line and indent + len(line) + len(item) + 2 > width:
            lines.append(line + ",")
            line = item
        else:
            line = f"{line}, {item}" if line else item
    lines.append(line)
    return "(" + ("\n" + " " * indent).join(lines) + ")"


def format_operation(op: Operation) -> str:
    params = ""
    if op.params:
        params = "(" + ", ".join(map(str, op.params)) + ")"
        if len(op.name) + len(params) > 96:  # a long list of arguments: wrapped, aligned after `(`
            params = _wrapped([str(p) for p in op.params], 2 + len(op.name) + 1, 98)
    reqs = format_requirements(op.requirements)
    head = f"  {op.name}{params} {op.verb.value} "
    if not reqs:
        return head + "nothing"
    indent = len(head) if len(head) <= 40 else 6
    return head + (",\n" + " " * indent).join(reqs)


def format_policy(policy: Policy) -> str:
    """Canonical text of a policy (its own statements, not those it includes)."""
    out: list[str] = []
    title = f" {quote(policy.title)}" if policy.title else ""
    out.append(f"policy {policy.name}{title}")
    for include in policy.includes:
        out.append(f"include {quote(include)}")
    out.append("")
    if policy.actions:
        out.append("actions " + ", ".join(policy.actions))
    for action_set in policy.action_sets:
        out.append(f"set {action_set.name} = {' | '.join(action_set.actions)}")
    if policy.entity_types:
        out.append("")
    for entity_type in policy.entity_types:
        parent = f" in {entity_type.parent}" if entity_type.parent else ""
        out.append(f"entity {entity_type.name}{parent}")
    if policy.relations:
        out.append("")
    for relation in policy.relations:
        out.append(f"relation {relation.name}({', '.join(relation.columns)})")
    for prop in policy.properties:
        sentence = f" {quote(prop.sentence)}" if prop.sentence else ""
        out.append(f"property {prop.name}{sentence}" + (f" by {prop.checker}" if prop.checker else ""))
    block = None
    for op in policy.operations:
        if op.entity_type != block:
            out.append("")
            out.append(f"{op.entity_type}:")
            block = op.entity_type
        out.append(format_operation(op))
    if policy.rules:
        out.append("")
    for rule in policy.rules:
        out.append(format_rule(rule))
    return "\n".join(out).strip() + "\n"


def format_text(text: str, file: str = "<policy>") -> str:
    """Canonical text of a policy source, keeping its statement order and its comments.

    A comment stays with the statement it precedes (or ends); one blank line
    is kept where the source had any.
    """
    from lark import Token, Tree
    from privilog.dsl.errors import PolicyErrors
    from privilog.dsl.lower import _Lowering, lower
    from privilog.dsl.parser import parse_tree

    comments: list[Token] = []
    tree = parse_tree(text, file, comments)
    try:
        lower(tree, file)  # what lowering rejects (an operation outside a block ...) is not formatted
    except PolicyErrors as errors:
        raise errors.with_source(text) from None
    lowering = _Lowering(file)
    out: list[str] = []
    last_line = 0
    block: str | None = None
    pending = sorted(comments, key=lambda c: c.line or 0)

    def emit_comments(before: int) -> None:
        nonlocal last_line
        while pending and (pending[0].line or 0) < before:
            comment = pending.pop(0)
            if (comment.line or 0) > last_line + 1 and out and out[-1] != "":
                out.append("")
            out.append(("  " if block else "") + str(comment).rstrip())
            last_line = comment.line or 0

    for node in tree.children:
        if not isinstance(node, Tree):
            continue
        start, end = node.meta.line, node.meta.end_line
        emit_comments(start)
        if start > last_line + 1 and out and out[-1] != "":
            out.append("")
        trailing = [c for c in pending if start <= (c.line or 0) <= end]
        for c in trailing:
            pending.remove(c)
        counts = (len(lowering.operations), len(lowering.rules))
        lowering.statement(node)
        if node.data == "block_header":
            block = str(node.children[0])
            out.append(f"{block}:")
        elif node.data == "operation" and len(lowering.operations) > counts[0]:
            out.append(format_operation(lowering.operations[-1]))
        elif node.data in ("rule", "fact") and len(lowering.rules) > counts[1]:
            block = None
            out.append(format_rule(lowering.rules[-1]))
        else:
            block = None
            out.append(_format_declaration(lowering, node))
        if trailing:
            out[-1] += "  " + "  ".join(str(c).rstrip() for c in trailing)
        last_line = end
    emit_comments(10**9)
    return "\n".join(out).strip() + "\n"


def _format_declaration(lowering: object, node: object) -> str:
    from lark import Tree
    from privilog.dsl.lower import _Lowering

    assert isinstance(lowering, _Lowering) and isinstance(node, Tree)
    match node.data:
        case "policy_decl":
            title = f" {quote(lowering.title)}" if lowering.title else ""
            return f"policy {lowering.name}{title}"
        case "include_decl":
            return f"include {quote(lowering.includes[-1])}"
        case "actions_decl":
            return "actions " + ", ".join(str(name) for name in node.children)
        case "set_decl":
            s = lowering.action_sets[-1]
            return f"set {s.name} = {' | '.join(s.actions)}"
        case "entity_decl":
            t = lowering.entity_types[-1]
            return f"entity {t.name}" + (f" in {t.parent}" if t.parent else "")
        case "property_decl":
            prop = lowering.properties[-1]
            text = f"property {prop.name}"
            if prop.sentence:
                text += f" {quote(prop.sentence)}"
            return text + (f" by {prop.checker}" if prop.checker else "")
        case "relation_decl":
            r = lowering.relations[-1]
            return f"relation {r.name}({', '.join(r.columns)})"
    raise AssertionError(node.data)
