"""``privilog test --coverage``: what of a policy the scenarios exercised, and what never decided anything.

For every request a case decides (an ``allow``/``deny`` case one, a ``who`` case one per
principal of the world, a ``visible`` case one per candidate entity of the listing):

* an **operation** is covered when a request was decided on it;
* a **requirement** (each of each operation) is covered when it applied in such a
  decision, met or unmet; one excluded by its condition (``if $arg``) decided nothing;
* a **rule** is covered when its body held for such a request, beside the case's world
  (:func:`engine.coverage.deriving_rules`).

Places are the policy's own: ``file:line:col`` of each uncovered operation, requirement
and rule, with the path shown relative to the working directory when it is below it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from privilog.dsl.format import format_alternatives, format_rule
from privilog.dsl.ir import Operation, Policy, Requirement, Rule, Span
from privilog.engine.authorizer import Authorizer
from privilog.engine.coverage import deriving_rules
from privilog.engine.decision import Request


def place(span: Span) -> str:
    """``file:line:col``, the file relative to the working directory when it is below it."""
    shown = os.path.relpath(span.file) if os.path.isabs(span.file) else span.file
    file = span.file if shown.startswith("..") else shown
    return f"{file}:{span.line}:{span.column}"


def requirement_text(requirement: Requirement) -> str:
    text = format_alternatives(requirement.options)
    return text + (f" if {requirement.condition}" if requirement.condition else "")


def rule_text(rule: Rule) -> str:
    """The rule on one line."""
    return " ".join(line.strip() for line in format_rule(rule).splitlines())


@dataclass
class PolicyCoverage:
    """What the scenarios run against one policy exercised."""

    policy: Policy
    operations: set[str] = field(default_factory=set)
    requirements: set[str] = field(default_factory=set)  # outcome ids, ``OPERATION#N``
    rules: set[int] = field(default_factory=set)  # indexes into policy.rules

    def record(self, authorizer: Authorizer, requests: Iterable[Request]) -> None:
        """Decide ``requests`` in the authorizer's current world and note what took part."""
        asked = list(requests)
        for decision in authorizer.check_many(asked, explain_denials=False):
            self.operations.add(decision.request.operation)
            self.requirements.update(o.id for o in decision.outcomes if o.applies)
        rules = self.policy.rules
        for request in asked:
            remaining = [i for i in range(len(rules)) if i not in self.rules]
            if not remaining:
                break
            found = deriving_rules(authorizer, request, tuple(rules[i] for i in remaining))
            self.rules.update(remaining[i] for i in found)

    def requirement_ids(self, op: Operation) -> list[str]:
        return [f"{op.qualified}#{n}" for n in range(1, len(op.requirements) + 1)]

    def to_json(self) -> dict[str, Any]:
        policy = self.policy
        operations = []
        for op in policy.operations:
            requirements = [
                {
                    "id": iid,
                    "requirement": requirement_text(r),
                    "where": place(r.span),
                    "covered": iid in self.requirements,
                }
                for iid, r in zip(self.requirement_ids(op), op.requirements, strict=True)
            ]
            operations.append(
                {
                    "operation": op.qualified,
                    "where": place(op.span),
                    "covered": op.qualified in self.operations,
                    "requirements": requirements,
                }
            )
        rules = [
            {"rule": rule_text(rule), "where": place(rule.span), "covered": index in self.rules}
            for index, rule in enumerate(policy.rules)
        ]
        return {
            "policy": policy.name,
            "where": place(policy.span),
            "totals": self.totals(),
            "operations": operations,
            "rules": rules,
        }

    def totals(self) -> dict[str, dict[str, int]]:
        policy = self.policy
        requirements = sum(len(op.requirements) for op in policy.operations)
        return {
            "operations": {"covered": len(self.operations), "total": len(policy.operations)},
            "requirements": {"covered": len(self.requirements), "total": requirements},
            "rules": {"covered": len(self.rules), "total": len(policy.rules)},
        }

    def render(self) -> list[str]:
        """The report: counts, then every operation, requirement and rule that decided nothing."""
        totals = self.totals()
        lines = [f"coverage of policy {self.policy.name} ({place(self.policy.span).rsplit(':', 2)[0]}):"]
        for kind in ("operations", "requirements", "rules"):
            covered, total = totals[kind]["covered"], totals[kind]["total"]
            percent = f" ({100 * covered / total:.0f}%)" if total else ""
            lines.append(f"  {kind}: {covered} of {total} covered{percent}")
        never = [op for op in self.policy.operations if op.qualified not in self.operations]
        if never:
            lines.append(f"  operations never decided ({len(never)}):")
            lines += [f"    {place(op.span)}  {op.qualified}{_count(op)}" for op in never]
        unmet = [
            (iid, r)
            for op in self.policy.operations
            if op.qualified in self.operations
            for iid, r in zip(self.requirement_ids(op), op.requirements, strict=True)
            if iid not in self.requirements
        ]
        if unmet:
            lines.append(f"  requirements of decided operations that never applied ({len(unmet)}):")
            lines += [f"    {place(r.span)}  {iid} {requirement_text(r)}" for iid, r in unmet]
        idle = [(i, rule) for i, rule in enumerate(self.policy.rules) if i not in self.rules]
        if idle:
            lines.append(f"  rules that never derived anything ({len(idle)}):")
            lines += [f"    {place(rule.span)}  {rule_text(rule)}" for _, rule in idle]
        return lines


def _count(op: Operation) -> str:
    n = len(op.requirements)
    return f" ({n} requirement{'s' if n != 1 else ''})" if n else ""
