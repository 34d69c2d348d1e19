"""An independent oracle: a policy's Datalog evaluated by clingo (Potassco's ASP system).

privilog's own code does not feed it: the rules are translated here, from the IR the parser
gives (``Policy.rules``, facts included, before ``engine.program`` normalises anything), into
clingo's language, and clingo grounds and solves them. A stratified program has exactly one
stable model, its perfect model, which is what every backend must derive; the oracle asserts
there is one and returns every relation's rows.

Every constant of the language is text (engine.program: a row is a tuple of strings; `1` and
`"1"` are the same constant, `01` another), so every constant becomes a clingo string, and
clingo compares strings as Python does (lexicographically, by character), which is what the
language documents for `<`, `<=`, `>` and `>=`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import clingo
from privilog.dsl.ir import Atom, Comparison, Const, Rule, Term, Var

Row = tuple[str, ...]

_OPERATORS = {"==": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def _string(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _predicate(name: str) -> str:
    return "p_" + name  # clingo's predicates start lower-case; a policy's names need not


def _term(term: Term) -> str:
    if isinstance(term, Const):
        return _string(term.value)
    assert isinstance(term, Var)
    return "_" if term.name == "_" else "V" + term.name


def _atom(predicate: str, terms: Iterable[str]) -> str:
    terms = list(terms)
    return f"{_predicate(predicate)}({','.join(terms)})" if terms else _predicate(predicate)


def _literal(literal: Atom | Comparison) -> str:
    if isinstance(literal, Comparison):
        return f"{_term(literal.left)} {_OPERATORS[literal.operator]} {_term(literal.right)}"
    text = _atom(literal.predicate, (_term(t) for t in literal.terms))
    return f"not {text}" if literal.negated else text


def translate(rules: Iterable[Rule], facts: Mapping[str, Iterable[Row]]) -> str:
    """The program in clingo's language: each rule (a fact is a rule with no body) and each row."""
    lines = []
    for rule in rules:
        head = _literal(rule.head)
        lines.append(f"{head} :- {', '.join(_literal(b) for b in rule.body)}." if rule.body else f"{head}.")
    for name, rows in facts.items():
        lines.extend(f"{_atom(name, (_string(v) for v in row))}." for row in rows)
    return "\n".join(lines)


def solve(rules: Iterable[Rule], facts: Mapping[str, Iterable[Row]]) -> dict[str, set[Row]]:
    """Every relation's rows in the program's one stable model."""
    control = clingo.Control(["--models=2", "--warn=none"])
    control.add("base", [], translate(rules, facts))
    control.ground([("base", [])])
    models: list[list[clingo.Symbol]] = []
    control.solve(on_model=lambda model: models.append(model.symbols(atoms=True)))
    assert len(models) == 1, f"a stratified program has one stable model; clingo found {len(models)}"
    out: dict[str, set[Row]] = {}
    for symbol in models[0]:
        row = tuple(argument.string for argument in symbol.arguments)
        out.setdefault(symbol.name.removeprefix("p_"), set()).add(row)
    return out
