"""The session's own Datalog rules (``rule``): added to the loaded policy's text, checked with
it, and evaluated once before they are kept; ``load policy`` drops them."""

from __future__ import annotations

from privilog import dsl
from privilog.dsl.check import prelude_relations
from privilog.dsl.errors import PolicyError, PolicyErrors, relocate_all
from privilog.dsl.ir import Policy
from privilog.engine.query import Budget, time_limit
from privilog.repl.command import Line
from privilog.repl.state import ReplError, SessionState

MAX_RULE_LITERALS = 64  # a session's rule is compiled; a wider join is written as several rules


def rule(session: SessionState, line: Line) -> str:
    """``rule RULE``: add a rule (or fact) for this session; ``rule`` alone lists those added."""
    text = line.text.strip()
    if not text:
        if not session.rules:
            return f"no rules added in this session (policy {session.policy.name} as loaded)"
        return "\n".join(f"{n}. {r}" for n, r in enumerate(session.rules, start=1))
    if not text.endswith("."):
        text += "."
    parsed = dsl.parse_unchecked(text, "<rule>")
    others = parsed.actions or parsed.entity_types or parsed.relations or parsed.operations or parsed.includes
    if not parsed.rules or others:
        raise ReplError("`rule` takes Datalog rules and facts, such as " + line.command.example)
    base = {r.name for r in session.policy.relations}
    _, derived = prelude_relations(session.policy)
    for added in parsed.rules:
        if len(added.body) > MAX_RULE_LITERALS:
            raise ReplError(
                f"a rule in the session has at most {MAX_RULE_LITERALS} literals, not {len(added.body)}: "
                "split it into rules for smaller relations"
            )
        if added.head.predicate in base:
            raise ReplError(
                f"`{added.head.predicate}` is a base relation: its facts come from the world "
                "(use `grant`, `entity add`, or edit the world file); derive a new relation instead"
            )
        if added.head.predicate in derived:
            raise ReplError(
                f"`{added.head.predicate}` is defined by the prelude (rules/prelude/requirements.policy): "
                "a rule may not add to it (decisions change only by grants of an admin); "
                "derive a new relation instead"
            )
    policy = policy_with(session, [*session.rules, text])
    heads = sorted({r.head.predicate for r in parsed.rules})
    with time_limit(Budget.from_env()):  # evaluating it may take long: a crafted join
        session.rebuild(policy, evaluate=heads)  # on the limit, the session keeps its authorizer as it was
    session.rules.append(text)
    return f"added to the session's policy (rules added: {len(session.rules)}); defines {', '.join(heads)}"


def policy_with(session: SessionState, rules: list[str]) -> Policy:
    """The loaded policy's text and ``rules``, parsed and checked as one policy; errors in the
    rules point into the rules, not past the end of the policy file."""
    base = session.policy_text if session.policy_text.endswith("\n") else session.policy_text + "\n"
    offset = base.count("\n")
    added = "\n".join(rules) + "\n"
    try:
        return dsl.parse_policy(base + added, str(session.policy_path))
    except (PolicyError, PolicyErrors) as error:
        raise relocate_all(error, offset, added, "<session rules>") from None
