"""Hypothesis strategies for whole policies: the programs a policy author could write.

Two kinds, each as policy text (so the parser, the lowering and the static checks take part):

* **generic** programs, without the prelude: relations of the policy's own, each with facts
  written in the policy *and* rules deriving more of it; linear, non-linear and mutual
  recursion; stratified negation, of recursive relations too; comparisons; constants of
  every kind the language has (ids, quoted strings, numbers, `$arguments`, lower-case names,
  the empty string, values that look alike: `1`, `"1"`, `01`); `_` in positive and negated
  atoms; over world relations (`grant`, `member_of`, `child_of`) that change row by row, and a
  relation the program declares whose rows a world's `facts:` gives (``GIVEN``: read, and
  negated, as the world's are; never changed).
* **policies over the prelude** (`include` of a shipped policy: cdap, cdap-5.1, cdap-4.2): rules of their own over what the prelude
  derives (`holds`, `ancestor`, `member_of`, ...), deny rules (`denied(R) :- ...`), bypasses,
  and an operation met `by NAME`, a rule of the policy's; and a relation the policy declares,
  `tagged(principal, entity)`, whose rows the world's `facts:` give (``prelude_worlds``), some of
  them wildcards (``PATTERNS``) that rules read through `matches`, and negate.

Stratification is by construction: each relation has a level, a rule reads relations of its
own level or below and negates only those strictly below (or the world's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

# Each value, and how the language may spell it: `1` and `"1"` are the same constant.
SPELLINGS: dict[str, tuple[str, ...]] = {
    "user:a": ("user:a",),
    "user:b": ("user:b",),
    "group:g": ("group:g",),
    "dataset:ns1.a": ("dataset:ns1.a",),
    "a": ('"a"', "a"),
    "b": ('"b"',),
    "1": ("1", '"1"'),
    "01": ("01", '"01"'),
    "-1": ("-1",),
    "10": ("10",),
    "9": ('"9"', "9"),
    "READ": ('"READ"',),
    "$owner": ("$owner",),
    "": ('""',),
    'say "hi"': ('"say \\"hi\\""',),
}
VALUES = tuple(SPELLINGS)
VARIABLES = ("X", "Y", "Z", "W")
WORLD = {"member_of": 2, "grant": 3, "child_of": 2}  # base relations a world changes row by row
GIVEN = "tagged"  # a relation the program declares and a world's `facts:` give (no change touches it)
OPERATORS = ("==", "!=", "<", "<=", ">", ">=")


@dataclass
class Relation:
    name: str
    arity: int
    level: int


@dataclass
class Program:
    """A generated policy: its text, its relations, and the world it starts with."""

    text: str
    relations: dict[str, int]
    world: dict[str, set[tuple[str, ...]]] = field(default_factory=dict)
    changes: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)

    def __repr__(self) -> str:  # hypothesis prints the failing program as the author would read it
        return f"Program(\n{self.text}\nworld={self.world!r}\nchanges={self.changes!r})"


def constant(draw: st.DrawFn, values: tuple[str, ...] = VALUES) -> str:
    value = draw(st.sampled_from(values))
    return draw(st.sampled_from(SPELLINGS[value]))


def _body(
    draw: st.DrawFn, head: Relation, readable: list[Relation], negatable: list[Relation]
) -> tuple[list[str], list[str]]:
    """Literals of a rule's body, and the variables its positive atoms bind: up to three
    positive atoms (now and then none), then negations and comparisons of what they bind and
    of constants (a body of those alone, when no atom binds anything)."""
    bound: list[str] = []
    literals: list[str] = []
    for _ in range(draw(st.integers(0, 3)) or draw(st.integers(0, 1))):  # now and then none: tests of constants
        relation = draw(st.sampled_from(readable))
        terms = []
        for _ in range(relation.arity):
            kind = draw(st.sampled_from(["var", "var", "var", "const", "any"]))
            if kind == "var":
                name = draw(st.sampled_from(VARIABLES))
                terms.append(name)
                if name not in bound:
                    bound.append(name)
            elif kind == "const":
                terms.append(constant(draw))
            else:
                terms.append("_")
        literals.append(f"{relation.name}({', '.join(terms)})")
    for _ in range(draw(st.integers(0, 2))):
        if negatable and draw(st.booleans()):
            relation = draw(st.sampled_from(negatable))
            choices = [*bound, "_", "const"] if bound else ["_", "const"]
            terms = []
            for _ in range(relation.arity):
                pick = draw(st.sampled_from(choices))
                terms.append(constant(draw) if pick == "const" else pick)
            literals.append(f"not {relation.name}({', '.join(terms)})")
        else:
            left = draw(st.sampled_from(bound)) if bound and draw(st.integers(0, 3)) else constant(draw)
            right = draw(st.sampled_from(bound)) if bound and draw(st.booleans()) else constant(draw)
            literals.append(f"{left} {draw(st.sampled_from(OPERATORS))} {right}")
    if not literals:
        literals.append(f"{constant(draw)} {draw(st.sampled_from(OPERATORS))} {constant(draw)}")
    return literals, bound


def _rule(draw: st.DrawFn, head: Relation, relations: list[Relation], world: list[Relation]) -> str:
    readable = [*world, *(r for r in relations if r.level <= head.level)]
    negatable = [*world, *(r for r in relations if r.level < head.level)]
    literals, bound = _body(draw, head, readable, negatable)
    terms = []
    for _ in range(head.arity):
        if bound and draw(st.integers(0, 4)):
            terms.append(draw(st.sampled_from(bound)))
        else:
            terms.append(constant(draw))
    return f"{head.name}({', '.join(terms)}) :- {', '.join(literals)}."


def _row(draw: st.DrawFn, arity: int) -> tuple[str, ...]:
    return tuple(draw(st.sampled_from(VALUES)) for _ in range(arity))


@st.composite
def generic_programs(draw: st.DrawFn) -> Program:
    """A program without the prelude, its world, and changes to that world."""
    world = [Relation(name, arity, -1) for name, arity in WORLD.items()]
    given = [Relation(GIVEN, draw(st.integers(1, 2)), -1)]  # its rows: the world's facts
    count = draw(st.integers(1, 4))
    relations = [Relation(f"p{i}", draw(st.integers(0, 3)), draw(st.integers(0, 2))) for i in range(count)]
    lines = [
        "policy generated",
        *(f"relation {r.name}({', '.join(f'c{i}' for i in range(r.arity))})" for r in (*world, *given)),
    ]
    closures = []
    if draw(st.integers(0, 2)) == 0:  # exactly a transitive closure: walked, not materialized, by compiled
        closure = Relation("reach", 2, 0)
        edge = draw(st.sampled_from(["member_of", "child_of"]))
        turned = draw(st.booleans())  # the closure of the edges turned around (as `descendant` is)

        def e(a: str, b: str) -> str:
            return f"{edge}({b}, {a})" if turned else f"{edge}({a}, {b})"

        lines.append(f"reach(X, Y) :- {e('X', 'Y')}.")
        step = ["reach(X, M)", e("M", "Y")] if draw(st.booleans()) else [e("X", "M"), "reach(M, Y)"]
        lines.append(f"reach(X, Y) :- {', '.join(step if draw(st.booleans()) else step[::-1])}.")
        closures.append(closure)
    for relation in relations:
        for _ in range(draw(st.integers(0, 3))):  # facts written in the policy
            lines.append(f"{relation.name}({', '.join(constant(draw) for _ in range(relation.arity))}).")
        for _ in range(draw(st.integers(0 if lines[-1].endswith(").") else 1, 3))):
            lines.append(_rule(draw, relation, [*relations, *closures], [*world, *given]))
    _defined(lines, relations)
    facts = {r.name: {_row(draw, r.arity) for _ in range(draw(st.integers(0, 5)))} for r in (*world, *given)}
    changes = []
    for _ in range(draw(st.integers(0, 6))):
        relation = draw(st.sampled_from(world))
        present = sorted(facts[relation.name] | {row for kind, name, row in changes if name == relation.name})
        if present and draw(st.booleans()):
            changes.append(("remove", relation.name, draw(st.sampled_from(present))))
        else:
            changes.append(("add", relation.name, _row(draw, relation.arity)))
    arities = {r.name: r.arity for r in (*world, *given, *relations, *closures)}
    return Program("\n".join(lines), arities, facts, changes)


def _defined(lines: list[str], relations: list[Relation]) -> None:
    """Give every relation a rule read from somewhere a fact, so none is unknown to the checks."""
    for relation in relations:
        if not any(line.startswith(f"{relation.name}(") for line in lines):
            lines.append(f"{relation.name}({', '.join(['b'] * relation.arity)}).")


# ---- policies over the prelude -------------------------------------------------------------

USERS = ("user:u1", "user:u2", "user:u3")
GROUPS = ("group:g1", "group:g2", "role:r1")
ENTITIES = (
    "namespace:ns1",
    "namespace:ns2",
    "application:ns1.app",
    "program:ns1.app.service.s",
    "dataset:ns1.d1",
    "dataset:ns1.d2",
    "dataset:ns2.d1",
    "stream:ns2.st",
    "artifact:ns1.art",
)
ACTIONS = ("READ", "WRITE", "EXECUTE", "ADMIN")
# wildcards among the world's facts of `tagged`, each with the ENTITIES it matches, written out here
# (not worked out by engine.patterns): the oracle's `matches` rows for them
PATTERNS: dict[str, tuple[str, ...]] = {
    "dataset:ns1.d*": ("dataset:ns1.d1", "dataset:ns1.d2"),
    "dataset:*.d1": ("dataset:ns1.d1", "dataset:ns2.d1"),
    "namespace:ns?": ("namespace:ns1", "namespace:ns2"),
    "program:ns1.app.*.*": ("program:ns1.app.service.s",),
    "stream:ns9.*": (),
}
PRELUDE_VALUES = (*USERS, *GROUPS, *ENTITIES, *ACTIONS, "dataset", "namespace", "a", "1")

# What a rule of the policy's may read, with each column's kind: the world's relations and
# what the prelude derives from them.
PRELUDE_READS: dict[str, tuple[str, ...]] = {
    "grant": ("principal", "action", "entity"),
    "member_of": ("principal", "group"),
    "holds": ("principal", "action", "entity", "principal"),
    "ancestor": ("entity", "entity"),
    "descendant": ("entity", "entity"),
    "child_of": ("entity", "entity"),
    "is_a": ("entity", "type"),
    "in_group": ("principal", "group"),
    GIVEN: ("principal", "entity"),  # the world's facts, read as they are (a pattern matches only itself)
    GIVEN + "~": ("principal", "entity"),  # read through a pattern: given(P, X), matches(E, X)
}
KIND_VALUES = {
    "principal": (*USERS, *GROUPS),
    "group": GROUPS,
    "action": ACTIONS,
    "entity": ENTITIES,
    "type": ("dataset", "namespace", "application"),
}


def _prelude_rule(draw: st.DrawFn, head: str, arity: int, own: list[tuple[str, int]]) -> str:
    """A rule of the policy's over the prelude's relations (and its own lower ones)."""
    bound: dict[str, str] = {}
    literals = []
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(sorted(PRELUDE_READS)))
        terms = []
        for kind in PRELUDE_READS[name]:
            pick = draw(st.sampled_from(["var", "var", "const", "any"]))
            if pick == "var":
                same = [v for v, k in bound.items() if k == kind]
                variable = draw(st.sampled_from(same)) if same and draw(st.booleans()) else f"V{len(bound)}"
                bound.setdefault(variable, kind)
                terms.append(variable)
            elif pick == "const":
                terms.append(_spelled(draw(st.sampled_from(KIND_VALUES[kind]))))
            else:
                terms.append("_")
        if name == GIVEN + "~":  # the entity through a wildcard (or a plain id: it matches only itself)
            pattern = f"X{len(literals)}"
            literals += [f"{GIVEN}({terms[0]}, {pattern})", f"matches({terms[1]}, {pattern})"]
            continue
        literals.append(f"{name}({', '.join(terms)})")
    variables = sorted(bound)
    for relation, columns in [*own, (GIVEN, 2)]:
        if variables and draw(st.booleans()):
            terms = [draw(st.sampled_from([*variables, "_"])) for _ in range(columns)]
            literals.append(f"not {relation}({', '.join(terms)})")
    if variables and draw(st.booleans()):
        literals.append(f"{draw(st.sampled_from(variables))} != {_spelled(draw(st.sampled_from(PRELUDE_VALUES)))}")
    head_terms = [draw(st.sampled_from(variables)) if variables else '"a"' for _ in range(arity)]
    return f"{head}({', '.join(head_terms)}) :- {', '.join(literals)}."


def _spelled(value: str) -> str:
    """A constant as the language writes it: an id as it is, any other text quoted."""
    return value if ":" in value else f'"{value}"'


@st.composite
def prelude_policies(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A policy over the shipped `cdap` policy: text, and the names of its own relations."""
    shipped = draw(st.sampled_from(["cdap", "cdap-5.1", "cdap-4.2"]))
    lines = [
        'policy generated_over_cdap "rules of its own over the prelude"',
        f'include "{shipped}"',
        f"relation {GIVEN}(principal, entity)",  # its rows: the world's facts (prelude_worlds)
    ]
    own: list[tuple[str, int]] = []
    for i in range(draw(st.integers(1, 3))):
        name, arity = f"q{i}", draw(st.integers(1, 2))
        for _ in range(draw(st.integers(0, 2))):
            values = [draw(st.sampled_from(PRELUDE_VALUES)) for _ in range(arity)]
            lines.append(f"{name}({', '.join(_spelled(v) for v in values)}).")
        for _ in range(draw(st.integers(1, 2))):
            lines.append(_prelude_rule(draw, name, arity, list(own)))
        if draw(st.booleans()):  # recursive, through member_of (a blocklist that follows groups)
            rest = "".join(f", A{j}" for j in range(1, arity))
            lines.append(f"{name}(P{rest}) :- member_of(P, G), {name}(G{rest}).")
        own.append((name, arity))
    deny_on = draw(st.sampled_from(own))
    column = draw(st.sampled_from(["P", "E"]))
    terms = [column, *("_" for _ in range(deny_on[1] - 1))]
    lines.append(f"denied(R) :- request(R, P, _, E), {deny_on[0]}({', '.join(terms)}).")
    if draw(st.booleans()):
        bypass_on = draw(st.sampled_from(own))
        terms = ["P", *("_" for _ in range(bypass_on[1] - 1))]
        lines.append(
            f'bypass(R, "generated") :- request(R, P, _, E), {bypass_on[0]}({", ".join(terms)}), is_a(E, "stream").'
        )
    if draw(st.booleans()):
        by_on = draw(st.sampled_from(own))
        terms = ["P", *("_" for _ in range(by_on[1] - 1))]
        lines += [
            "dataset:",
            "  peek requires READ or by peeker",
            f"peeker(R) :- request(R, P, _, _), {by_on[0]}({', '.join(terms)}).",
        ]
    return "\n".join(lines), [name for name, _ in own]


@st.composite
def prelude_worlds(draw: st.DrawFn) -> dict[str, Any]:
    entities = draw(st.lists(st.sampled_from(ENTITIES), min_size=1, max_size=len(ENTITIES), unique=True))
    grants = draw(
        st.lists(
            st.tuples(
                st.sampled_from([*USERS, *GROUPS]), st.sampled_from([*ACTIONS, "ALL"]), st.sampled_from(ENTITIES)
            ),
            max_size=10,
        )
    )
    members = draw(
        st.lists(st.tuples(st.sampled_from([*USERS, *GROUPS]), st.sampled_from(GROUPS)), max_size=5, unique=True)
    )
    given = draw(
        st.lists(
            st.tuples(st.sampled_from([*USERS, *GROUPS]), st.sampled_from([*ENTITIES, *PATTERNS])),
            max_size=5,
            unique=True,
        )
    )
    return {
        "entities": entities,
        "grants": [list(g) for g in grants],
        "members": [list(m) for m in members],
        "facts": {GIVEN: [list(f) for f in given]},
    }


def drawn_programs(count: int) -> list[Program]:
    """``count`` generic programs, the same every run (the Spark test and the benchmark)."""
    from hypothesis import HealthCheck, Phase, given, settings

    found: list[Program] = []

    @settings(
        max_examples=count,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(generic_programs())
    def collect(program: Program) -> None:
        found.append(program)

    collect()
    return found
