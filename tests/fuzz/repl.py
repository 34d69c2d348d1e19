"""REPL lines: short scripts through a new ``privilog.repl.Session`` (in-process, as ``one_shot`` runs
them), each line with what it must give.

Every reply may be an answer or the session's own error, never an internal error. A
change as someone who is not exactly the admin must be an error, and the probe after
it must still be denied; a ``check`` of a request that cannot be allowed must not say
ALLOW. Lines that write files (``save``) are never generated.
"""

from __future__ import annotations

import random
import shlex
from collections.abc import Iterator
from typing import Any

from tests.fuzz.harness import Case, Verdict, answered, failure
from tests.fuzz.mutate import FRAGMENTS, look_alike, mutate_text
from tests.fuzz.requests import ADMIN, BASE, NON_ADMINS, allowable, break_value

ANY, ERROR, DENY, NO_ALLOW = "any", "error", "deny", "no-allow"
# A change an attacker wants, and the check that shows whether it took.
ATTACKS = [
    ("grant user:eve READ dataset:sales.orders as {actor}", "check user:eve dataset.read dataset:sales.orders"),
    ("grant user:eve ALL namespace:sales as {actor}", "check user:eve namespace.get namespace:sales"),
    ("member add user:eve group:analysts as {actor}", "check user:eve dataset.read dataset:marketing.campaigns"),
    ("member add user:eve role:deployers as {actor}", "check user:eve artifact.get artifact:sales.etl-lib"),
    ("revoke user:bob READ dataset:sales.orders as {actor}", "check user:bob dataset.read dataset:sales.orders"),
    ("entity delete namespace:sales as {actor}", '?- is_a(namespace:sales, "namespace").'),
]
LINES = [
    "check user:bob dataset.read dataset:sales.orders",
    "why user:dave namespace.get namespace:marketing",
    "whynot user:bob dataset.read dataset:marketing.campaigns",
    "list user:dave dataset --in namespace:marketing",
    "who dataset.read dataset:sales.orders",
    '?- descendant(namespace:sales, D), is_a(D, "dataset").',
    '?- grant(P, "READ", E), not member_of(P, _).',
    "?- is_a(A, T), is_a(B, T), is_a(C, T), is_a(D, T), A != B.",
    'rule reader(P, E) :- holds(P, "READ", E, _).',
    "rule wide(A, B, C, D) :- is_a(A, _), is_a(B, _), is_a(C, _), is_a(D, _).",
    "grant user:bob READ dataset:marketing.campaigns as user:root",
    "entity add dataset:sales.new as user:root",
    "member remove user:dave group:analysts as user:root",
    "load policy cdap-4.2",
    "load world /dev/zero",
    "help whynot",
    "diff cdap-4.2",
    "quit",
]


def generate(rng: random.Random, count: int) -> Iterator[Case]:
    for _ in range(count):
        how = rng.randrange(3)
        if how == 0:
            change, probe = rng.choice(ATTACKS)
            actor = rng.choice([look_alike(rng, ADMIN), rng.choice(NON_ADMINS), ADMIN + rng.choice(FRAGMENTS)])
            if actor == ADMIN or not actor.strip() or any(c in actor for c in "\n\r"):
                actor = "User:root"
            yield {
                "lines": [
                    [change.format(actor=shlex.quote(actor)), ERROR],
                    [probe, ANY if "revoke" in change else DENY if probe.startswith("check") else ANY],
                ]
            }
        elif how == 1:
            principal, operation, entity, args = rng.choice(BASE)
            parts: list[Any] = [principal, operation, entity]
            index = rng.randrange(3)
            broken = break_value(rng, parts[index])
            parts[index] = broken if isinstance(broken, str) else str(broken)
            words = " ".join(shlex.quote(w) for w in [*parts, *(f"{k}={v}" for k, v in args.items())])
            yield {"lines": [[f"check {words}", ANY]], "request": [*parts, args]}
        else:
            lines = [
                mutate_text(rng, rng.choice(LINES)) if rng.random() < 0.8 else rng.choice(LINES)
                for _ in range(rng.randint(1, 3))
            ]
            yield {"lines": [[line, ANY] for line in lines if "save" not in line.lower()]}


def run(case: Case, context: Any) -> Verdict:
    from privilog.repl import Session

    session = Session("cdap", context.world_data)
    refusals = 0
    for line, expected in case["lines"]:
        reply = session.run(line)
        shown = f"{line!r} gave {reply.text[:300]!r}"
        if reply.internal:
            return failure(f"internal error: {shown}")
        if expected == ERROR and not reply.error:
            return failure(f"a change as someone not exactly the admin was made: {shown}")
        if expected == DENY and not reply.text.startswith("DENY"):
            return failure(f"must be denied: {shown}")
        if "request" in case and reply.text.startswith("ALLOW"):
            principal, operation, entity, args = case["request"]
            if not allowable(context.policy, session.world, principal, operation, entity, args):
                return failure(f"allowed a request that must be refused or denied: {shown}")
        refusals += reply.error
        if session.finished:
            break
    return answered() if refusals < len(case["lines"]) else Verdict("refused", "every line refused")
