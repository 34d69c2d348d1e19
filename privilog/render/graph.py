"""Decisions and worlds drawn as graphs: Graphviz DOT text, and SVG or PNG rendered by ``dot``.

``privilog why --format dot|svg|png`` draws a decision: for an allow, each
requirement and the grant that met it, the membership chain from the requester
to the grant's holder, and the chain of entities from the granted one to the
requested one; for a deny, the unmet requirements, the policy's rules that deny it
(each with the facts that make it hold), and what would allow it.
``privilog graph`` draws a world: the entity hierarchy, the grants (of one
principal, directly or through its groups, with ``--principal``) and the
entities they make visible.

The DOT text is built with the ``graphviz`` binding (it quotes every id and
label) and needs no program; SVG and PNG are rendered by Graphviz's ``dot``
(the Debian ``graphviz`` package), through the binding.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import graphviz

from privilog.dsl.errors import OneLineError
from privilog.engine.decision import Decision, Denial, Outcome, Premise, Visible, Witness
from privilog.engine.ids import EntityId
from privilog.engine.world import Grant, World
from privilog.render.explain import premise_sentence, render_fixes

FORMATS = ("dot", "svg", "png")

FONT = "Helvetica"
ALLOW, DENY, MUTED = "#2e7d32", "#c62828", "#757575"
FILL = {
    "allow": "#e8f5e9",
    "deny": "#ffebee",
    "requirement": "#ffffff",
    "grant": "#fff8e1",
    "principal": "#e3f2fd",
    "entity": "#f5f5f5",
    "visible": "#e8f5e9",
    "fix": "#fffde7",
}


class NoGraphviz(OneLineError):
    """Rendering SVG or PNG needs Graphviz's ``dot`` program, which is not installed."""


def render(dot: str, fmt: str) -> bytes:
    """DOT text as ``fmt``: the text itself for ``dot``; SVG or PNG rendered by Graphviz's ``dot``."""
    if fmt == "dot":
        return dot.encode()
    if fmt not in FORMATS:
        raise ValueError(f"unknown picture format {fmt!r}")
    try:
        drawn: bytes = graphviz.pipe("dot", fmt, dot.encode(), quiet=True)
    except graphviz.ExecutableNotFound:
        raise NoGraphviz(
            f"--format {fmt} needs Graphviz's `dot` program: install the graphviz package "
            "(apt-get install graphviz), or use --format dot"
        ) from None
    return drawn


class _Picture:
    """A digraph whose principals and entities are each drawn once, however many edges reach them."""

    def __init__(self, name: str, rankdir: str = "TB"):
        self.graph = graphviz.Digraph(
            name,
            graph_attr={"rankdir": rankdir, "fontname": FONT, "nodesep": "0.35", "ranksep": "0.45"},
            node_attr={"fontname": FONT, "fontsize": "11", "style": "filled,rounded", "shape": "box"},
            edge_attr={"fontname": FONT, "fontsize": "9", "color": "#546e7a", "fontcolor": "#37474f"},
        )
        self.ids: dict[str, str] = {}

    def node(self, key: str, label: str, **attrs: str) -> str:
        """The node for ``key``, made on first use (later attributes are ignored)."""
        if key not in self.ids:
            self.ids[key] = f"n{len(self.ids)}"
            self.graph.node(self.ids[key], label, **attrs)
        return self.ids[key]

    def principal(self, name: str) -> str:
        return self.node(name, name, shape="ellipse", fillcolor=FILL["principal"])

    def entity(self, entity: EntityId, **attrs: str) -> str:
        return self.node(str(entity), str(entity), **{"shape": "folder", "fillcolor": FILL["entity"], **attrs})

    def edge(self, tail: str, head: str, label: str = "", **attrs: str) -> None:
        self.graph.edge(tail, head, label=f" {label} " if label else None, **attrs)

    def source(self) -> str:
        return str(self.graph.source)


# ---- a decision ---------------------------------------------------------------------


def decision_dot(decision: Decision) -> str:
    """A decision as DOT: the request, each requirement, and its proof or what is missing.

    >>> from privilog.engine.decision import Request
    >>> request = Request("user:a", "namespace.get", EntityId.parse("namespace:x"))
    >>> print(decision_dot(Decision(request, True, (), "cdap")).splitlines()[0])
    digraph decision {
    """
    picture = _Picture("decision")
    verdict = "ALLOW" if decision.allowed else "DENY"
    request = picture.node(
        "request",
        f"{verdict}\\n{decision.request}\\npolicy {decision.policy}",
        fillcolor=FILL["allow" if decision.allowed else "deny"],
        color=ALLOW if decision.allowed else DENY,
        penwidth="2",
    )
    if not decision.outcomes:
        picture.edge(request, picture.node("nothing", "the operation requires nothing"))
    for index, outcome in enumerate(decision.outcomes):
        requirement = _requirement(picture, index, outcome, decision.request.principal)
        picture.edge(request, requirement, "requires")
        for witness in outcome.witnesses:
            _proof(picture, requirement, decision.request.principal, witness)
    for index, denial in enumerate(decision.denied_by):
        _denial(picture, request, index, denial)
    if not decision.allowed:
        _fixes(picture, request, decision)
    return picture.source()


def _denial(picture: _Picture, request: str, index: int, denial: Denial) -> None:
    """request → the policy's rule that denies it → each premise of its proof, down to the facts."""
    rule = picture.node(
        f"denial {index}",
        f"the policy's rule\\n{denial.rule}\\n({denial.at})",
        color=DENY,
        fontcolor=DENY,
        fillcolor=FILL["deny"],
        penwidth="2",
    )
    picture.edge(request, rule, "denied by")
    _premises(picture, rule, denial.premises)


def _premises(picture: _Picture, parent: str, premises: Sequence[Premise]) -> None:
    for premise in premises:
        node = picture.node(f"premise {premise.fact}", premise_sentence(premise), fillcolor=FILL["requirement"])
        picture.edge(parent, node, "because")
        _premises(picture, node, premise.premises)


def _requirement(picture: _Picture, index: int, outcome: Outcome, principal: str) -> str:
    label = outcome.text + (f"\\n(if {outcome.condition})" if outcome.condition else "")
    if not outcome.applies:
        return picture.node(
            f"requirement {index}",
            f"{label}\\ndoes not apply",
            fontcolor=MUTED,
            color=MUTED,
            fillcolor=FILL["requirement"],  # filled with `color` otherwise
            style="filled,rounded,dashed",
        )
    if outcome.met:
        return picture.node(f"requirement {index}", f"{label}\\nmet", color=ALLOW, fillcolor=FILL["requirement"])
    details = [f"the request gives no ${a}" for a in outcome.missing_arguments]
    if outcome.lacking:
        details.append(f"{principal} lacks it on {len(outcome.lacking)} of {len(outcome.covered)} entities")
    elif not outcome.missing_arguments:
        details.append(f"no grant to {principal} or its groups meets it")
    return picture.node(
        f"requirement {index}",
        "\\n".join([label, "UNMET", *details]),
        color=DENY,
        fontcolor=DENY,
        fillcolor=FILL["requirement"],
        penwidth="2",
    )


def _proof(picture: _Picture, requirement: str, principal: str, witness: Witness) -> None:
    """requirement → grant → the holder, back along the group chain to the requester; grant → the
    granted entity, up through the entities it is in to the requested one."""
    grant = picture.node(
        f"grant {witness.holder} {witness.action} {witness.entity}",
        f"{witness.action} on {witness.entity}\\nheld by {witness.holder}",
        fillcolor=FILL["grant"],
    )
    picture.edge(requirement, grant, "met by")
    chain = list(witness.groups) or [principal]
    holder = picture.principal(chain[-1])
    picture.edge(grant, holder, "held by")
    for group, member in zip(reversed(chain[1:]), reversed(chain[:-1]), strict=True):
        picture.edge(picture.principal(group), picture.principal(member), "has member")
    inside = list(witness.inside) or [witness.entity]
    picture.edge(grant, picture.entity(inside[0]), "on")
    for child, parent in itertools.pairwise(inside):
        picture.edge(picture.entity(child), picture.entity(parent), "is in")


def _fixes(picture: _Picture, request: str, decision: Decision) -> None:
    """One node listing the fixes, as ``why`` prints them: any one of them would allow the request."""
    lines = render_fixes(decision)
    label = "".join(line.strip() + "\\l" for line in lines)  # \l: a left-justified line
    fixes = picture.node("fixes", label, fillcolor=FILL["fix"], color=MUTED)
    picture.edge(request, fixes, "what would allow it" if decision.fixes else "", style="dashed")


# ---- a world ------------------------------------------------------------------------


def world_dot(
    world: World,
    principal: str | None = None,
    within: EntityId | None = None,
    visible: Sequence[Visible] = (),
) -> str:
    """The entity hierarchy (inside ``within``), the grants (of ``principal`` and its groups) and what they
    make visible.

    >>> world = World(entities={EntityId.parse("dataset:ns.d")}, grants={Grant("user:a", "READ",
    ...     EntityId.parse("namespace:ns"))})
    >>> [line.strip() for line in world_dot(world).splitlines() if "->" in line]
    ['n0 -> n1 [color="#b0bec5"]', 'n1 -> n2 [color="#b0bec5"]', 'n3 -> n1 [label=" READ " color="#f9a825"]']
    """
    picture = _Picture("world", rankdir="LR")
    if principal is not None:
        picture.graph.attr(
            label=f"what {principal} holds (orange), directly or through groups, and sees (green); "
            "dashed: granted but not created",
            labelloc="t",
            fontsize="12",
        )
    shown = {v.entity for v in visible}
    holders = {principal, *world.groups_of(principal)} if principal else None
    grants = [g for g in world.grants if holders is None or g.principal in holders]
    existing = world.existing()
    entities = existing | {g.entity for g in grants}
    if within is not None:
        entities = {e for e in entities if e == within or within in e.ancestors(world.instance)}
        grants = [g for g in grants if g.entity in entities]
    for entity in sorted(entities, key=lambda e: (len(e.ancestors(world.instance)), str(e))):
        attrs = _visible_attrs(entity, shown)
        if entity not in existing:
            attrs["style"] = "filled,dashed"
            attrs["tooltip"] = "granted, but does not exist"
        node = picture.entity(entity, **attrs)
        parent = entity.parent(world.instance)
        if parent is not None and (within is None or entity != within):
            picture.edge(picture.entity(parent, **_visible_attrs(parent, shown)), node, color="#b0bec5")
    for holder, entity, actions in _grouped(grants):
        picture.edge(picture.principal(holder), picture.entity(entity), ", ".join(actions), color="#f9a825")
    if principal is not None:
        _memberships(picture, world, principal, {g.principal for g in grants})
    return picture.source()


def _visible_attrs(entity: EntityId, shown: set[EntityId]) -> dict[str, str]:
    return {"fillcolor": FILL["visible"], "color": ALLOW} if entity in shown else {}


def _grouped(grants: Iterable[Grant]) -> list[tuple[str, EntityId, list[str]]]:
    """Grants of several actions to one holder on one entity, as one edge."""
    actions: dict[tuple[str, EntityId], list[str]] = {}
    for grant in sorted(grants, key=lambda g: (g.principal, str(g.entity), g.action)):
        actions.setdefault((grant.principal, grant.entity), []).append(grant.action)
    return [(holder, entity, names) for (holder, entity), names in actions.items()]


def _memberships(picture: _Picture, world: World, principal: str, holders: set[str]) -> None:
    """The membership edges from ``principal`` up to every group that holds one of the drawn grants."""
    picture.principal(principal)
    for member, group in sorted(world.members):
        if (member == principal or member in world.groups_of(principal)) and (
            group in holders or holders & world.groups_of(group)
        ):
            picture.edge(picture.principal(member), picture.principal(group), "member of", style="dashed")
