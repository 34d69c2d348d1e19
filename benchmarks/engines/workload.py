"""The worlds and the requests every engine answers: the same for the same size and seed.

A world is ``benchmarks/worldgen.py``'s, plus a few grants of ADMIN on Kerberos
principals (``kerberosprincipal:svcNNNN@EXAMPLE.COM``, one per thousand
grants, to principals holding ADMIN on an application) so that deploys with an
``owner`` argument can be allowed. Requests come in five kinds, half drawn
from grants (mostly allowed) and half at random (mostly denied); a tenth of
each half is asked by (a member of) one of the three principals holding the
most grants.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from privilog.engine.ids import EntityId
from privilog.engine.world import Grant, World

from benchmarks import worldgen

KINDS = ("dataset.read", "namespace.get", "namespace.delete", "application.deploy", "dataset.list")
HEAVY_SHARE = 0.1
ADMIN_PRINCIPAL = "user:root"  # worldgen makes it the world's authorization admin
NAMESPACE_INSIDE = ("dataset", "program", "stream", "application", "artifact")


@dataclass(frozen=True)
class Req:
    """One request, as strings; ``intent`` says whether it was drawn to be allowed."""

    principal: str
    operation: str
    entity: str
    args: tuple[tuple[str, str], ...] = ()
    intent: str = "deny"
    heavy: bool = False

    def call(self) -> tuple[str, str, str, dict[str, str]]:
        """The arguments of ``allows(principal, operation, entity, args)``."""
        return (self.principal, self.operation, self.entity, dict(self.args))

    def __str__(self) -> str:
        return f"{self.principal} {self.operation} {self.entity}" + "".join(f" {k}={v}" for k, v in self.args)


@dataclass
class Workload:
    """A generated world, as privilog's World and as data in the world file format, and its requests."""

    size: int
    world: World
    data: dict[str, Any]
    stats: dict[str, Any]
    requests: dict[str, list[Req]] = field(default_factory=dict)
    visible: list[tuple[str, str]] = field(default_factory=list)  # (principal, namespace)
    change_candidates: list[tuple[str, str, str]] = field(default_factory=list)  # (principal, action, entity)
    heavy: list[tuple[str, int]] = field(default_factory=list)  # (principal, grants held), the top three


def namespace_of(entity: EntityId) -> EntityId:
    return entity if entity.type == "namespace" else next(a for a in entity.ancestors() if a.type == "namespace")


class _Index:
    """What the request generator draws from."""

    def __init__(self, gen: worldgen.Generated, rng: random.Random):
        self.gen = gen
        self.rng = rng
        self.existing = gen.world.existing()
        grants = sorted(gen.world.grants)
        self.by_action_type: dict[tuple[str, str], list[Grant]] = defaultdict(list)
        self.by_holder: dict[tuple[str, str, str], list[Grant]] = defaultdict(list)
        for g in grants:
            for action in (g.action, "*"):
                self.by_action_type[(action, g.entity.type)].append(g)
                self.by_holder[(g.principal, action, g.entity.type)].append(g)
        self.members_of: dict[str, list[str]] = defaultdict(list)
        for member, group in sorted(gen.world.members):
            self.members_of[group].append(member)
        counts = Counter(g.principal for g in grants)
        self.heavy = [p for p, _ in counts.most_common(3)]
        self.heavy_counts = [(p, counts[p]) for p in self.heavy]
        self.large_namespaces = sorted(
            {namespace_of(e) for e in gen.by_type["dataset"]} - set(gen.small_namespaces)
        )

    def requester(self, holder: str) -> str:
        """A user who holds through ``holder``: itself, or a member (of a member) of the group."""
        current = holder
        for _ in range(4):
            if current.startswith("user:"):
                return current
            members = self.members_of.get(current)
            if not members:
                return current  # a group with no members asks for itself
            current = self.rng.choice(members)
        return current

    def grant(self, action: str, entity_type: str, heavy: bool) -> Grant:
        """A grant of ``action`` (``*``: any) on an entity of a type, of a heavy principal if asked and possible."""
        if heavy:
            choices = [g for p in self.heavy for g in self.by_holder.get((p, action, entity_type), ())]
            if choices:
                return self.rng.choice(choices)
        return self.rng.choice(self.by_action_type[(action, entity_type)])

    def someone(self, heavy: bool) -> str:
        return self.requester(self.rng.choice(self.heavy)) if heavy else self.rng.choice(self.gen.users)


def augment(gen: worldgen.Generated, rng: random.Random) -> dict[str, list[str]]:
    """Grant ADMIN on Kerberos principals to some holders of ADMIN on an application; return them by holder."""
    holders = sorted({g.principal for g in gen.world.grants if g.action == "ADMIN" and g.entity.type == "application"})
    owners: dict[str, list[str]] = defaultdict(list)
    for i in range(max(3, len(gen.world.grants) // 1000)):
        holder = rng.choice(holders)
        owner = EntityId("kerberosprincipal", f"svc{i:04d}@EXAMPLE.COM")
        gen.world.grants.add(Grant(holder, "ADMIN", owner))
        owners[holder].append(str(owner))
    return owners


def _one(ix: _Index, kind: str, allow: bool, heavy: bool, owners: dict[str, list[str]], all_owners: list[str]) -> Req:
    rng = ix.rng
    by_type = ix.gen.by_type
    intent = "allow" if allow else "deny"
    if kind in ("dataset.read", "dataset.list"):
        if allow:
            g = ix.grant("READ" if kind == "dataset.read" else "*", "dataset", heavy)
            return Req(ix.requester(g.principal), kind, str(g.entity), (), intent, heavy)
        return Req(ix.someone(heavy), kind, str(rng.choice(by_type["dataset"])), (), intent, heavy)
    if kind == "namespace.get":
        if allow:
            g = ix.grant("*", rng.choice(NAMESPACE_INSIDE), heavy)
            return Req(ix.requester(g.principal), kind, str(namespace_of(g.entity)), (), intent, heavy)
        return Req(ix.someone(heavy), kind, str(rng.choice(by_type["namespace"])), (), intent, heavy)
    if kind == "namespace.delete":
        ns, full, partial = rng.choice(ix.gen.small_owners)
        who = full if allow else ix.someone(True) if heavy else rng.choice((partial, ix.someone(False)))
        return Req(who, kind, str(ns), (), intent, heavy)
    if kind == "application.deploy":
        new = rng.random() < 0.25
        with_owner = rng.random() < 0.2
        app = ix.grant("ADMIN", "application", heavy) if allow else None
        arts = ix.by_holder.get((app.principal, "*", "artifact")) if app else None
        if app is not None and arts:
            holder = app.principal
            who, application, artifact = ix.requester(holder), app.entity, rng.choice(arts).entity
            owner = rng.choice(owners[holder]) if owners.get(holder) else rng.choice(all_owners)
        else:
            who = ix.someone(heavy)
            application = rng.choice(by_type["application"])
            artifact = rng.choice(by_type["artifact"])
            owner = rng.choice(all_owners)
        args = [("artifact", str(artifact))]
        if new:
            args.append(("new_artifact", "true"))
        if with_owner:
            args.append(("owner", owner))
        return Req(who, kind, str(application), tuple(args), intent, heavy)
    raise AssertionError(kind)


def build(size: int, seed: int = 42, per_kind: int = 400, n_visible: int = 200, n_changes: int = 200) -> Workload:
    """The world of ``size`` grants and its requests."""
    gen = worldgen.generate(size, seed)
    rng = random.Random(f"privilog-engines-{seed}-{size}")
    owners = augment(gen, rng)
    all_owners = sorted(o for found in owners.values() for o in found)
    ix = _Index(gen, rng)
    stats = dict(gen.stats())
    stats["grants_added_on_kerberos_principals"] = len(all_owners)
    stats["heavy_principals"] = [{"principal": p, "grants": n} for p, n in ix.heavy_counts]
    large = set(ix.large_namespaces)
    per_namespace = Counter(namespace_of(d) for d in gen.by_type["dataset"])
    stats["datasets_per_large_namespace_median"] = sorted(per_namespace[n] for n in large)[len(large) // 2]
    work = Workload(size, gen.world, gen.world.to_data(), stats, heavy=ix.heavy_counts)
    for kind in KINDS:
        reqs = []
        for i in range(per_kind):
            reqs.append(_one(ix, kind, i % 2 == 0, rng.random() < HEAVY_SHARE, owners, all_owners))
        work.requests[kind] = reqs
    for i in range(n_visible):
        heavy = rng.random() < HEAVY_SHARE
        if i % 2 == 0:
            g = ix.grant("*", "dataset", heavy)
            while g.entity not in ix.existing:
                g = ix.grant("*", "dataset", heavy)
            work.visible.append((ix.requester(g.principal), str(namespace_of(g.entity))))
        else:
            work.visible.append((ix.someone(heavy), str(rng.choice(ix.large_namespaces))))
    # Grants to add and then revoke: READ on an existing dataset, to users who (mostly) lack it.
    held = {(g.principal, g.action, str(g.entity)) for g in gen.world.grants if g.action == "READ"}
    while len(work.change_candidates) < 3 * n_changes:
        change = (rng.choice(gen.users), "READ", str(rng.choice(gen.by_type["dataset"])))
        if change not in held and change not in work.change_candidates:
            work.change_candidates.append(change)
    return work

