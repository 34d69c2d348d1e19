"""Requests through the Python API (``privilog.load(...).request(...)`` and ``check``), and changes
through ``World.grant`` and its kin, as a program using privilog would make them.

The oracle for "no allow" is written here, apart from privilog's own parsing: an
allow is possible only for a request whose principal is one the world knows, spelled
exactly (plain ASCII, ``user:``/``group:``/``role:``), whose operation the policy has,
whose entity is plain ASCII ``type:name`` of a policy type, and whose arguments are
the operation's own with plain values. A change (grant, revoke, members, entities)
must be refused unless its actor is exactly an admin of the world.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Mapping
from typing import Any

from tests.fuzz.harness import Case, Verdict, answered, failure, refused
from tests.fuzz.mutate import FRAGMENTS, look_alike, mutate_text

# Requests on the sample world; the first ones are allowed, so that breaking them tests the oracle.
BASE = [
    ("user:bob", "dataset.read", "dataset:sales.orders", {}),
    ("user:alice", "application.update", "application:sales.etl", {}),
    ("user:dave", "namespace.get", "namespace:marketing", {}),
    ("user:carol", "application.deploy", "application:sales.reports", {"artifact": "artifact:sales.etl-lib"}),
    ("user:bob", "program.execute", "program:sales.etl.workflow.nightly", {}),
    ("user:root", "namespace.delete", "namespace:sales", {}),
    ("user:eve", "dataset.write", "dataset:sales.orders", {"new_artifact": "true"}),
]
ODD: list[Any] = [None, 0, 1, True, 1.5, [], {}, ["user:bob"], {"principal": "user:bob"}, b"user:bob".hex()]
ADMIN = "user:root"
NON_ADMINS = [
    "user:bob",
    "user:alice",
    "group:analysts",
    "role:deployers",
    "user:eve",
    "group:admins",
    "user:admin",
    "root",
    "user:",
    "",
    "user:root,user:bob",
    "user:*",
    "user:%",
    "user:.*",
]
CHANGES = ("grant", "revoke", "add_members", "remove_members", "add_entity", "delete_entity")
_PRINCIPAL = re.compile(r"(user|group|role):[A-Za-z0-9_.@\-]+\Z")
_ENTITY = re.compile(r"([a-z_]+):[A-Za-z0-9_.@/\-]+\Z")
_PLAIN = re.compile(r"[A-Za-z0-9_.@:/\-]*\Z")


def break_value(rng: random.Random, value: Any) -> Any:
    """``value`` as an attacker or a careless client would send it instead."""
    how = rng.randrange(5)
    if how == 0 or not isinstance(value, str):
        return rng.choice(ODD)
    if how == 1:
        return look_alike(rng, value)
    if how == 2:
        return mutate_text(rng, value, 1)
    if how == 3:
        return rng.choice(FRAGMENTS)
    return value + rng.choice(["\n", "\x00", " ", "\u200b"]) + rng.choice(FRAGMENTS)


def generate(rng: random.Random, count: int) -> Iterator[Case]:
    for _ in range(count):
        if rng.random() < 0.25:
            yield change_case(rng)
            continue
        principal, operation, entity, args = rng.choice(BASE)
        parts: list[Any] = [principal, operation, entity, dict(args)]
        for index in rng.sample(range(4), rng.randint(1, 2)):
            if index == 3:
                parts[3] = _break_args(rng, parts[3])
            else:
                parts[index] = break_value(rng, parts[index])
        yield {"request": parts}


def _break_args(rng: random.Random, args: dict[str, Any]) -> Any:
    if rng.random() < 0.2:
        return rng.choice(ODD)
    out = dict(args)
    name = rng.choice([*out, "artifact", "new_artifact", "owner", "$artifact", "$$owner", "Artifact", ""])
    out[name] = break_value(rng, out.get(name, "artifact:sales.etl-lib"))
    return out


def change_case(rng: random.Random) -> Case:
    """A change made by someone who is not exactly the admin (or, now and then, by the admin: the control)."""
    control = rng.random() < 0.1
    actor = ADMIN if control else rng.choice([look_alike(rng, ADMIN), rng.choice(NON_ADMINS), break_value(rng, ADMIN)])
    return {"change": rng.choice(CHANGES), "actor": actor}


def allowable(policy: Any, world: Any, principal: Any, operation: Any, entity: Any, args: Any) -> bool:
    """Whether an allow is possible at all for this request (see the module's docstring)."""
    known = {g.principal for g in world.grants} | {p for m in world.members for p in m} | set(world.admins)
    if not (isinstance(principal, str) and _PRINCIPAL.match(principal) and principal in known):
        return False
    operations = {op.qualified: op for op in policy.operations}
    if not isinstance(operation, str) or operation not in operations:
        return False
    types = {t.name for t in policy.entity_types}
    match = _ENTITY.match(entity) if isinstance(entity, str) else None
    if match is None or match.group(1) not in types:
        return False
    if args is None:
        return True
    if not isinstance(args, Mapping):
        return False
    params = {p.name for p in operations[operation].params}
    return all(
        isinstance(k, str)
        and k.lstrip("$") in params
        and (isinstance(v, bool | None) or (isinstance(v, str | int) and _PLAIN.match(str(v))))
        for k, v in args.items()
    )


def run(case: Case, context: Any) -> Verdict:
    if "change" in case:
        return run_change(case, context)
    from privilog.dsl.errors import PrivilogError

    authorizer = context.authorizer
    world = authorizer.world
    principal, operation, entity, args = case["request"]
    try:
        decision = authorizer.check(authorizer.request(principal, operation, entity, args))
    except PrivilogError as error:
        return refused(str(error))
    if decision.allowed and not allowable(context.policy, world, principal, operation, entity, args):
        return failure(f"allowed a request that must be refused or denied: {case['request']!r}")
    return answered("allow" if decision.allowed else "deny")


def run_change(case: Case, context: Any) -> Verdict:
    """A change as ``actor``: refused unless the actor is exactly the admin; the world unchanged when refused."""
    from privilog.dsl.errors import PrivilogError
    from privilog.engine.ids import EntityId
    from privilog.engine.world import Grant

    from privilog.api import load_world_for

    world = load_world_for(context.policy, context.world_data)
    before = world.to_data()
    actor, change = case["actor"], case["change"]
    target = EntityId.parse("dataset:sales.orders")
    calls = {
        "grant": lambda: world.grant(actor, [Grant("user:eve", "ADMIN", target)]),
        "revoke": lambda: world.revoke(actor, [Grant("user:bob", "READ", target)]),
        "add_members": lambda: world.add_members(actor, [("user:eve", "group:analysts")]),
        "remove_members": lambda: world.remove_members(actor, [("user:dave", "group:analysts")]),
        "add_entity": lambda: world.add_entity(actor, EntityId.parse("dataset:sales.new")),
        "delete_entity": lambda: world.delete_entity(actor, target),
    }
    try:
        calls[change]()
    except PrivilogError as error:
        if world.to_data() != before:
            return failure(f"{change} as {actor!r} was refused but changed the world: {error}")
        return refused(str(error))
    if actor != ADMIN:
        return failure(f"{change} as {actor!r}, not an admin, was made")
    return answered(f"{change} as the admin")
