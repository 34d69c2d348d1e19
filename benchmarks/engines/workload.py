"""The worlds and the requests every engine answers: the same for the same size and seed.

A world is ``benchmarks/worldgen.py``'s, plus a few grants of ADMIN on Kerberos
principals (``kerberosprincipal:svcNNNN@EXAMPLE.COM``, one per thousand
grants, to principals holding ADMIN on an application) so that deploys with an
``owner`` argument can be allowed. Requests come in six kinds, half drawn
from grants (mostly allowed) and half at random (mostly denied); a tenth of
each half is asked by (a member of) one of the three principals holding the
most grants. One kind is a create (``dataset.create``): an operation on an
entity that does not exist yet, allowed by a grant made before it exists (a
pre-grant of ADMIN), drawn with a random of its own so that the other kinds'
requests are those drawn before it was added.

Everything is text (``type:name`` ids, grants as tuples of strings), so that a
world of 10^7 grants fits beside the engines: a privilog World is made only
when asked for (``Workload.world``).
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from privilog.engine.world import World

from benchmarks import worldgen

KINDS = ("dataset.read", "namespace.get", "namespace.delete", "application.deploy", "dataset.list", "dataset.create")
CREATE_KINDS = ("dataset.create",)  # on an entity that does not exist yet
HEAVY_SHARE = 0.1
ADMIN_PRINCIPAL = "user:root"  # worldgen makes it the world's authorization admin
NAMESPACE_INSIDE = ("dataset", "program", "stream", "application", "artifact")
ACTIONS = ("READ", "WRITE", "EXECUTE", "ADMIN")
Row = tuple[str, str, str]  # a grant: (principal, action, entity)


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
    """A generated world, as data in the world file format (text), and its requests."""

    size: int
    data: dict[str, Any]
    stats: dict[str, Any]
    requests: dict[str, list[Req]] = field(default_factory=dict)
    visible: list[tuple[str, str]] = field(default_factory=list)  # (principal, namespace)
    change_candidates: list[tuple[str, str, str]] = field(default_factory=list)  # (principal, action, entity)
    heavy: list[tuple[str, int]] = field(default_factory=list)  # (principal, grants held), the top three

    @cached_property
    def world(self) -> World:
        """The world as privilog's World (made on first use: at 10^7 grants, many GiB)."""
        from privilog.engine.world.readers import world_from_data

        return world_from_data(self.data, ACTIONS)


def type_of(entity: str) -> str:
    return entity.partition(":")[0]


def namespace_of(entity: str) -> str:
    kind, _, name = entity.partition(":")
    return entity if kind == "namespace" else "namespace:" + name.partition(".")[0]


class _Index:
    """What the request generator draws from: only the lists it draws from (lists of the sorted grants)."""

    def __init__(self, gen: worldgen.Rows, grants: list[Row], rng: random.Random):
        self.gen = gen
        self.rng = rng
        self.datasets = set(gen.by_type["dataset"])
        counts = Counter(g[0] for g in grants)
        self.heavy = [p for p, _ in counts.most_common(3)]
        self.heavy_counts = [(p, counts[p]) for p in self.heavy]
        heavy = set(self.heavy)
        wanted = {("READ", "dataset"), ("*", "dataset"), ("ADMIN", "application")}
        wanted.update(("*", t) for t in NAMESPACE_INSIDE)
        self.by_action_type: dict[tuple[str, str], list[Row]] = defaultdict(list)
        self.by_holder: dict[tuple[str, str, str], list[Row]] = defaultdict(list)
        self.pre_admin: list[Row] = []  # ADMIN on a dataset that does not exist: creates it allows
        for g in grants:
            principal, action, entity = g
            kind = type_of(entity)
            for a in (action, "*"):
                if (a, kind) in wanted:
                    self.by_action_type[(a, kind)].append(g)
                if principal in heavy or (a == "*" and kind in ("artifact", "dataset_type")):
                    self.by_holder[(principal, a, kind)].append(g)
            if action == "ADMIN" and kind == "dataset" and entity not in self.datasets:
                self.pre_admin.append(g)
        self.members_of: dict[str, list[str]] = defaultdict(list)
        for member, group in sorted(gen.members):
            self.members_of[group].append(member)
        self.large_namespaces = sorted({namespace_of(e) for e in gen.by_type["dataset"]} - set(gen.small_namespaces))

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

    def grant(self, action: str, entity_type: str, heavy: bool) -> Row:
        """A grant of ``action`` (``*``: any) on an entity of a type, of a heavy principal if asked and possible."""
        if heavy:
            choices = [g for p in self.heavy for g in self.by_holder.get((p, action, entity_type), ())]
            if choices:
                return self.rng.choice(choices)
        return self.rng.choice(self.by_action_type[(action, entity_type)])

    def someone(self, heavy: bool) -> str:
        return self.requester(self.rng.choice(self.heavy)) if heavy else self.rng.choice(self.gen.users)


def augment(gen: worldgen.Rows, rng: random.Random) -> dict[str, list[str]]:
    """Grant ADMIN on Kerberos principals to some holders of ADMIN on an application; return them by holder."""
    holders = sorted({p for p, a, e in gen.grants if a == "ADMIN" and e.startswith("application:")})
    owners: dict[str, list[str]] = defaultdict(list)
    for i in range(max(3, len(gen.grants) // 1000)):
        holder = rng.choice(holders)
        owner = f"kerberosprincipal:svc{i:04d}@EXAMPLE.COM"
        gen.grants.add((holder, "ADMIN", owner))
        owners[holder].append(owner)
    return owners


def _one(ix: _Index, kind: str, allow: bool, heavy: bool, owners: dict[str, list[str]], all_owners: list[str]) -> Req:
    rng = ix.rng
    by_type = ix.gen.by_type
    intent = "allow" if allow else "deny"
    if kind in ("dataset.read", "dataset.list"):
        if allow:
            g = ix.grant("READ" if kind == "dataset.read" else "*", "dataset", heavy)
            return Req(ix.requester(g[0]), kind, g[2], (), intent, heavy)
        return Req(ix.someone(heavy), kind, rng.choice(by_type["dataset"]), (), intent, heavy)
    if kind == "namespace.get":
        if allow:
            g = ix.grant("*", rng.choice(NAMESPACE_INSIDE), heavy)
            return Req(ix.requester(g[0]), kind, namespace_of(g[2]), (), intent, heavy)
        return Req(ix.someone(heavy), kind, rng.choice(by_type["namespace"]), (), intent, heavy)
    if kind == "namespace.delete":
        ns, full, partial = rng.choice(ix.gen.small_owners)
        who = full if allow else ix.someone(True) if heavy else rng.choice((partial, ix.someone(False)))
        return Req(who, kind, ns, (), intent, heavy)
    if kind == "application.deploy":
        new = rng.random() < 0.25
        with_owner = rng.random() < 0.2
        app = ix.grant("ADMIN", "application", heavy) if allow else None
        arts = ix.by_holder.get((app[0], "*", "artifact")) if app else None
        if app is not None and arts:
            holder = app[0]
            who, application, artifact = ix.requester(holder), app[2], rng.choice(arts)[2]
            owner = rng.choice(owners[holder]) if owners.get(holder) else rng.choice(all_owners)
        else:
            who = ix.someone(heavy)
            application = rng.choice(by_type["application"])
            artifact = rng.choice(by_type["artifact"])
            owner = rng.choice(all_owners)
        args = [("artifact", artifact)]
        if new:
            args.append(("new_artifact", "true"))
        if with_owner:
            args.append(("owner", owner))
        return Req(who, kind, application, tuple(args), intent, heavy)
    if kind == "dataset.create":
        # allowed: a pre-grant of ADMIN on the new dataset (to the asker, or a group it is in);
        # denied: a new dataset nobody was granted anything on, or another's pre-grant
        pre = rng.choice(ix.pre_admin) if ix.pre_admin else None
        args = []
        if allow and pre is not None:
            holder, dataset = pre[0], pre[2]
            who = ix.requester(holder)
            types = ix.by_holder.get((holder, "*", "dataset_type"))
            if types and rng.random() < 0.2:
                args.append(("dataset_type", rng.choice(types)[2]))
            if owners.get(holder) and rng.random() < 0.2:
                args.append(("owner", rng.choice(owners[holder])))
        else:
            who = ix.someone(heavy)
            if pre is not None and rng.random() < 0.5:
                dataset = pre[2]
            else:
                namespace = rng.choice(ix.large_namespaces).partition(":")[2]
                dataset = f"dataset:{namespace}.new{rng.randrange(10**6)}"
            if rng.random() < 0.2:
                args.append(("dataset_type", rng.choice(by_type["dataset_type"])))
            if rng.random() < 0.2:
                args.append(("owner", rng.choice(all_owners)))
        return Req(who, kind, dataset, tuple(args), intent, heavy)
    raise AssertionError(kind)


def build(size: int, seed: int = 42, per_kind: int = 400, n_visible: int = 200, n_changes: int = 200) -> Workload:
    """The world of ``size`` grants and its requests."""
    gen = worldgen.generate_rows(size, seed)
    rng = random.Random(f"privilog-engines-{seed}-{size}")
    owners = augment(gen, rng)
    all_owners = sorted(o for found in owners.values() for o in found)
    stats = dict(gen.stats())
    grants = sorted(gen.grants)
    gen.grants.clear()  # the sorted list is the world's from here (a set of 10^7 tuples: ~1 GiB)
    ix = _Index(gen, grants, rng)
    stats["grants_added_on_kerberos_principals"] = len(all_owners)
    stats["heavy_principals"] = [{"principal": p, "grants": n} for p, n in ix.heavy_counts]
    large = set(ix.large_namespaces)
    per_namespace = Counter(namespace_of(d) for d in gen.by_type["dataset"])
    stats["datasets_per_large_namespace_median"] = sorted(per_namespace[n] for n in large)[len(large) // 2]
    stats["pre_grants_of_admin_on_datasets"] = len(ix.pre_admin)
    data = {
        "instance": gen.instance,
        "entities": sorted(gen.entities),
        "grants": grants,
        "members": sorted(gen.members),
        "admins": sorted(gen.admins),
    }
    work = Workload(size, data, stats, heavy=ix.heavy_counts)
    for kind in KINDS:
        if kind in CREATE_KINDS:
            continue
        reqs = []
        for i in range(per_kind):
            reqs.append(_one(ix, kind, i % 2 == 0, rng.random() < HEAVY_SHARE, owners, all_owners))
        work.requests[kind] = reqs
    for i in range(n_visible):
        heavy = rng.random() < HEAVY_SHARE
        if i % 2 == 0:
            g = ix.grant("*", "dataset", heavy)
            while g[2] not in ix.datasets:
                g = ix.grant("*", "dataset", heavy)
            work.visible.append((ix.requester(g[0]), namespace_of(g[2])))
        else:
            work.visible.append((ix.someone(heavy), rng.choice(ix.large_namespaces)))
    # Grants to add and then revoke: READ on an existing dataset, to users who (mostly) lack it.
    held = {g for g in grants if g[1] == "READ"}
    chosen: set[tuple[str, str, str]] = set()
    while len(work.change_candidates) < 3 * n_changes:
        change = (rng.choice(gen.users), "READ", rng.choice(gen.by_type["dataset"]))
        if change not in held and change not in chosen:
            chosen.add(change)
            work.change_candidates.append(change)
    # Creates last, with a random of their own: the requests above are those drawn before they were added.
    ix.rng = random.Random(f"privilog-engines-create-{seed}-{size}")
    for kind in CREATE_KINDS:
        work.requests[kind] = [_one(ix, kind, i % 2 == 0, ix.rng.random() < HEAVY_SHARE, owners, all_owners)
                               for i in range(per_kind)]
    return work
