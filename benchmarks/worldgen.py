"""Deterministic CDAP-shaped worlds for the benchmarks.

``generate(grants, seed)`` builds a :class:`engine.world.World` with about as
many entities as grants:

* ``grants / 200`` large namespaces, each with applications (programs and
  schedules inside), datasets (some with dotted names), streams, artifacts,
  dataset modules and types, and secure keys; and ``grants / 2000`` small
  namespaces of a handful of entities, for multi-entity deletes;
* users (``grants / 25``), groups (``grants / 500``) and roles; each user is
  in zero to three groups, and some groups are in roles;
* grants whose principals follow a Zipf law (rank r holds ~1/r of them, so a
  few principals hold thousands), on random entities with type-fitting
  actions, 1 % of them on entities that do not exist (pre-grants);
* in each small namespace, one owner with ADMIN on everything in it and one
  with ADMIN on the namespace and only part of its contents.

The same ``(grants, seed)`` always gives the same world, in the same order.

``generate_rows(grants, seed)`` draws the same world as strings and tuples of
strings (``type:name`` ids, ``(principal, action, entity)`` grants), without a
World or an EntityId: a tenth of the memory and time, for worlds of 10^7 grants
(the engines benchmark's largest).
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from privilog.engine.ids import PROGRAM_KINDS, EntityId
from privilog.engine.world import Grant, World

from privilog.pipeline.generate import ACTION_WEIGHTS, ACTIONS  # the same action mix as `privilog generate`


@dataclass
class Generated:
    """A generated world and the indexes the request generator draws from."""

    world: World
    by_type: dict[str, list[EntityId]] = field(default_factory=dict)
    small_namespaces: list[EntityId] = field(default_factory=list)
    # (namespace, user with ADMIN on all of it, user with ADMIN on part of it)
    small_owners: list[tuple[EntityId, str, str]] = field(default_factory=list)
    users: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)

    def stats(self) -> dict[str, int]:
        existing = self.world.existing()
        counts = {f"entities_{t}": len(v) for t, v in sorted(self.by_type.items())}
        return {
            "grants": len(self.world.grants),
            "entities_listed": len(self.world.entities),
            "entities_existing": len(existing),
            "users": len(self.users),
            "groups_and_roles": len(self.groups),
            "memberships": len(self.world.members),
            "principals_with_grants": len({g.principal for g in self.world.grants}),
            **counts,
        }


def _text_id(type_name: str, name: str) -> str:
    return f"{type_name}:{name}"


def _namespace(rng: random.Random, name: str, small: bool, make: Callable[[str, str], Any] = EntityId) -> list[Any]:
    out = [make("namespace", name)]
    if small:
        apps, programs, schedules, datasets, streams, artifacts, extra = 1, (1, 2), (0, 1), 2, 1, 1, 0
    else:
        apps = rng.randint(5, 11)
        programs, schedules = (2, 6), (0, 3)
        datasets, streams, artifacts, extra = rng.randint(50, 100), rng.randint(15, 40), rng.randint(8, 20), 5
    for a in range(apps):
        app = f"{name}.app{a:02d}"
        out.append(make("application", app))
        for p in range(rng.randint(*programs)):
            out.append(make("program", f"{app}.{rng.choice(PROGRAM_KINDS)}.p{p}"))
        for s in range(rng.randint(*schedules)):
            out.append(make("schedule", f"{app}.sch{s}"))
    for d in range(datasets):
        # some dataset names carry dots: the id splits at the first dot only
        out.append(make("dataset", f"{name}.ds{d:03d}" + (f".v{d % 3}" if d % 7 == 0 else "")))
    out += [make("stream", f"{name}.st{s:02d}") for s in range(streams)]
    out += [make("artifact", f"{name}.art{s:02d}") for s in range(artifacts)]
    out += [make("dataset_module", f"{name}.mod{s}") for s in range(extra)]
    out += [make("dataset_type", f"{name}.type{s}") for s in range(extra)]
    out += [make("securekey", f"{name}.key{s}") for s in range(extra)]
    return out


class Zipf:
    """Draws items with probability proportional to 1 / rank ** s."""

    def __init__(self, items: list[str], s: float, rng: random.Random):
        self.items = items
        self.cumulative = list(itertools.accumulate(1.0 / (r + 1) ** s for r in range(len(items))))
        self.rng = rng

    def draw(self) -> str:
        x = self.rng.random() * self.cumulative[-1]
        return self.items[bisect.bisect_left(self.cumulative, x)]


@dataclass
class Rows:
    """A generated world as text: ids ``type:name``, grants ``(principal, action, entity)`` (for
    :func:`generate`'s own use, the ids are EntityIds)."""

    entities: list[Any]
    grants: set[tuple[str, str, Any]]
    members: set[tuple[str, str]]
    admins: set[str]
    instance: str = "cdap"
    by_type: dict[str, list[Any]] = field(default_factory=dict)
    small_namespaces: list[Any] = field(default_factory=list)
    small_owners: list[tuple[Any, str, str]] = field(default_factory=list)
    users: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)

    def stats(self) -> dict[str, int]:
        """As :meth:`Generated.stats` (every enclosing entity is listed, and the instance exists)."""
        counts = {f"entities_{t}": len(v) for t, v in sorted(self.by_type.items())}
        return {
            "grants": len(self.grants),
            "entities_listed": len(self.entities),
            "entities_existing": len(self.entities) + 1,
            "users": len(self.users),
            "groups_and_roles": len(self.groups),
            "memberships": len(self.members),
            "principals_with_grants": len({g[0] for g in self.grants}),
            **counts,
        }


def generate(n_grants: int, seed: int = 42) -> Generated:
    """A world of ``n_grants`` grants over about as many entities."""
    rows = _generate(n_grants, seed, EntityId)
    world = World(set(rows.entities), {Grant(*g) for g in rows.grants}, rows.members, rows.admins)
    return Generated(world, rows.by_type, rows.small_namespaces, rows.small_owners, rows.users, rows.groups)


def generate_rows(n_grants: int, seed: int = 42) -> Rows:
    """The world :func:`generate` draws, as text."""
    return _generate(n_grants, seed, _text_id)


def _generate(n_grants: int, seed: int, make: Callable[[str, str], Any]) -> Rows:
    rng = random.Random(f"privilog-bench-{seed}-{n_grants}")
    gen = Rows([], set(), set(), set())
    world = gen

    n_large = max(3, round(n_grants / 200))
    n_small = max(3, round(n_grants / 2000))
    entities: list[Any] = []
    for i in range(n_large):
        entities += _namespace(rng, f"ns{i:04d}", False, make)
    small_contents: list[list[Any]] = []
    for i in range(n_small):
        small = _namespace(rng, f"tiny{i:03d}", True, make)
        gen.small_namespaces.append(small[0])
        small_contents.append(small)
        entities += small
    # Listing only leaves would be enough (enclosing entities exist by the id);
    # list them all, as an inventory would.
    gen.entities = entities
    for e in entities:
        gen.by_type.setdefault(_type_of(e), []).append(e)

    gen.users = [f"user:u{i:05d}" for i in range(max(20, n_grants // 25))]
    gen.groups = [f"group:g{i:04d}" for i in range(max(5, n_grants // 500))]
    roles = [f"role:r{i:02d}" for i in range(max(2, n_grants // 10000))]
    gen.groups += roles
    for user in gen.users:
        for group in rng.sample(gen.groups[: -len(roles)], rng.choice((0, 1, 1, 2, 2, 3))):
            world.members.add((user, group))
    for group in gen.groups[: -len(roles)]:
        if rng.random() < 0.3:
            world.members.add((group, rng.choice(roles)))
    world.admins.add("user:root")

    # Skew: a shuffled mix of users and groups, ranked by a Zipf law.
    ranked = gen.users + gen.groups
    rng.shuffle(ranked)
    zipf = Zipf(ranked, 1.0, rng)

    # Fixed grants in the small namespaces: one full owner, one partial.
    grants = world.grants
    for ns, inside in zip(gen.small_namespaces, small_contents, strict=True):
        full, partial = rng.sample(gen.users, 2)
        gen.small_owners.append((ns, full, partial))
        for e in inside:
            grants.add((full, "ADMIN", e))
        grants.add((partial, "ADMIN", ns))
        grants.add((partial, "ADMIN", inside[-1]))

    # rng.choices with the cumulative weights made once: the same draws as with the weights
    cumulative = {t: list(itertools.accumulate(w)) for t, w in ACTION_WEIGHTS.items()}
    choices, random_, choice, randrange = rng.choices, rng.random, rng.choice, rng.randrange
    draw, add = zipf.draw, grants.add
    text = make is _text_id
    while len(grants) < n_grants:
        principal = draw()
        if random_() < 0.01:  # a pre-grant: the entity does not exist (yet)
            entity = make("dataset", f"ns{randrange(n_large):04d}.future{randrange(10**6)}")
        else:
            entity = choice(entities)
        kind = entity.partition(":")[0] if text else entity[0]
        add((principal, choices(ACTIONS, cum_weights=cumulative[kind])[0], entity))
    return gen


def _type_of(entity: Any) -> str:
    """An id's type, whether an EntityId or text."""
    return entity[0] if isinstance(entity, tuple) else entity.partition(":")[0]
