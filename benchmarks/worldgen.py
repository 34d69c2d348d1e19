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
"""

from __future__ import annotations

import bisect
import itertools
import random
from dataclasses import dataclass, field

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


def _namespace(rng: random.Random, name: str, small: bool) -> list[EntityId]:
    out = [EntityId("namespace", name)]
    if small:
        apps, programs, schedules, datasets, streams, artifacts, extra = 1, (1, 2), (0, 1), 2, 1, 1, 0
    else:
        apps = rng.randint(5, 11)
        programs, schedules = (2, 6), (0, 3)
        datasets, streams, artifacts, extra = rng.randint(50, 100), rng.randint(15, 40), rng.randint(8, 20), 5
    for a in range(apps):
        app = f"{name}.app{a:02d}"
        out.append(EntityId("application", app))
        for p in range(rng.randint(*programs)):
            out.append(EntityId("program", f"{app}.{rng.choice(PROGRAM_KINDS)}.p{p}"))
        for s in range(rng.randint(*schedules)):
            out.append(EntityId("schedule", f"{app}.sch{s}"))
    for d in range(datasets):
        # some dataset names carry dots: the id splits at the first dot only
        out.append(EntityId("dataset", f"{name}.ds{d:03d}" + (f".v{d % 3}" if d % 7 == 0 else "")))
    out += [EntityId("stream", f"{name}.st{s:02d}") for s in range(streams)]
    out += [EntityId("artifact", f"{name}.art{s:02d}") for s in range(artifacts)]
    out += [EntityId("dataset_module", f"{name}.mod{s}") for s in range(extra)]
    out += [EntityId("dataset_type", f"{name}.type{s}") for s in range(extra)]
    out += [EntityId("securekey", f"{name}.key{s}") for s in range(extra)]
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


def generate(n_grants: int, seed: int = 42) -> Generated:
    """A world of ``n_grants`` grants over about as many entities."""
    rng = random.Random(f"privilog-bench-{seed}-{n_grants}")
    world = World()
    gen = Generated(world)

    n_large = max(3, round(n_grants / 200))
    n_small = max(3, round(n_grants / 2000))
    entities: list[EntityId] = []
    for i in range(n_large):
        entities += _namespace(rng, f"ns{i:04d}", small=False)
    small_contents: list[list[EntityId]] = []
    for i in range(n_small):
        small = _namespace(rng, f"tiny{i:03d}", small=True)
        gen.small_namespaces.append(small[0])
        small_contents.append(small)
        entities += small
    # Listing only leaves would be enough (enclosing entities exist by the id);
    # list them all, as an inventory would.
    world.entities.update(entities)
    for e in entities:
        gen.by_type.setdefault(e.type, []).append(e)

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
    for ns, inside in zip(gen.small_namespaces, small_contents, strict=True):
        full, partial = rng.sample(gen.users, 2)
        gen.small_owners.append((ns, full, partial))
        for e in inside:
            world.grants.add(Grant(full, "ADMIN", e))
        world.grants.add(Grant(partial, "ADMIN", ns))
        world.grants.add(Grant(partial, "ADMIN", inside[-1]))

    while len(world.grants) < n_grants:
        principal = zipf.draw()
        if rng.random() < 0.01:  # a pre-grant: the entity does not exist (yet)
            entity = EntityId("dataset", f"ns{rng.randrange(n_large):04d}.future{rng.randrange(10**6)}")
        else:
            entity = rng.choice(entities)
        weights = ACTION_WEIGHTS[entity.type]
        action = rng.choices(ACTIONS, weights)[0]
        world.grants.add(Grant(principal, action, entity))
    return gen
