"""Least privilege: which grants an access log never used, and a set that can all go together.

From the needs of each allowed request (:mod:`engine.justify`: sets of grants, keep one of each):

* **unused** grants serve no need: no allowed request of the log could have used them;
* **sole** grants are a need by themselves: some allowed request would be denied without them;
* the **recommended removals** are every grant outside a *keep set* that meets every need. The
  smallest keep set is a minimum hitting set (the dual of set cover, NP-hard). Sole grants are
  kept first, and a need that contains a smaller one is dropped. The rest splits into parts that
  share no grant (usually one per principal and place). A part with at most ``EXACT_LIMIT``
  candidate grants is solved exactly (branch and bound: branch on the grants of the need with
  fewest, prune with the best keep set so far, starting from greedy's); a larger one by the
  greedy method: keep, one at a time, the grant meeting the most needs still unmet, ties broken
  by the grant's text so a run repeats. Greedy's keep set is at most H(d) = 1 + 1/2 + ... + 1/d
  times the smallest, d being the most needs one grant meets (Chvátal 1979); the report says
  which method ran and, for greedy, that bound.

Denied requests are counted, never used to keep a grant: removing grants never allows what was
denied (the policies are monotonic in grants), so a recommendation cannot hide a refusal.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import combinations
from typing import Protocol

from privilog.engine.authorizer import Authorizer
from privilog.engine.decision import Request
from privilog.engine.justify import Justified, Need
from privilog.engine.world import Grant, World

EXACT_LIMIT = 24  # candidates for the exact search; beyond, greedy
EXAMPLES = 3  # requests shown for a sole grant
SUBSETS = 10  # a need of at most this many grants looks for smaller needs inside it among its subsets


class Holdings(Protocol):
    """What the report reads of a world: its grants and every principal it names (a :class:`World`,
    or the pipeline's tables collected)."""

    @property
    def grants(self) -> Iterable[Grant]: ...

    def principals(self) -> set[str]: ...


@dataclass(frozen=True)
class Held:
    """Grants and principals alone (the pipeline's deployment, without the rest of a world)."""

    grants: frozenset[Grant]
    named: frozenset[str]  # the principals of the memberships and the admins

    def principals(self) -> set[str]:
        return {g.principal for g in self.grants} | set(self.named)


@dataclass(frozen=True)
class Sole:
    """A grant some allowed requests cannot do without: how many, and a few of them."""

    grant: Grant
    requests: int
    examples: tuple[Request, ...]


@dataclass(frozen=True)
class PrincipalUse:
    """What one principal (user, group or role) holds by its own grants, and how much of it the log used."""

    principal: str
    held: int
    used: int
    unused: int
    requests: int  # requests it made (0 for a group or role)


@dataclass
class Report:
    """The least-privilege analysis of a world against an access log."""

    grants: int
    requests: int
    allowed: int
    denied: int
    used: list[Grant]
    unused: list[Grant]
    sole: list[Sole]
    removals: list[Grant]
    method: str  # "exact" or "greedy"
    bound: float | None  # greedy's approximation bound (H(d)); None when exact
    principals: list[PrincipalUse]
    inactive: list[str]  # users the world names that made no request
    rejected: int = 0  # log rows that were not a request (set by whoever read the log)
    window: tuple[str, str] | None = None  # the first and last timestamp of the log

    def summary(self) -> dict[str, object]:
        return {
            "grants": self.grants,
            "used": len(self.used),
            "unused": len(self.unused),
            "sole": len(self.sole),
            "recommended_removals": len(self.removals),
            "method": self.method,
            "bound": self.bound,
            "requests": self.requests,
            "allowed": self.allowed,
            "denied": self.denied,
            "rejected": self.rejected,
        }


@dataclass
class Evidence:
    """What a log says about the grants, gathered in one pass (in memory, or from Spark's aggregates).

    ``needs`` are the distinct needs of the allowed requests; ``used`` every grant of one of them;
    ``sole`` the requests each sole grant is the only way for (their count, and the first few);
    ``made`` the requests of each principal.

    ``needs`` may leave out a need that holds a sole grant (the pipeline does, to gather less): the
    keep set is the same, because :func:`keep_set` keeps every sole grant and then drops every need
    it meets, and a need that holds one left out holds that grant too. ``used`` must still have its grants.
    """

    needs: set[frozenset[Grant]] = field(default_factory=set)
    used: set[Grant] = field(default_factory=set)
    sole: dict[Grant, tuple[int, tuple[Request, ...]]] = field(default_factory=dict)
    made: Counter[str] = field(default_factory=Counter)
    requests: int = 0
    allowed: int = 0

    def add(self, justified: Justified) -> None:
        self.requests += 1
        self.made[justified.request.principal] += 1
        if not justified.allowed:
            return
        self.allowed += 1
        sole_here: set[Grant] = set()
        for need in justified.needs:
            self.needs.add(need.grants)
            self.used |= need.grants
            if len(need.grants) == 1:
                sole_here |= need.grants
        for grant in sole_here:
            count, examples = self.sole.get(grant, (0, ()))
            self.sole[grant] = (count + 1, examples if len(examples) >= EXAMPLES else (*examples, justified.request))


def analyse(world: Holdings, decided: Iterable[Justified], exact_limit: int = EXACT_LIMIT) -> Report:
    """The report for ``world``'s grants over the decided requests of a log."""
    evidence = Evidence()
    for justified in decided:
        evidence.add(justified)
    return report(world, evidence, exact_limit)


def report(world: Holdings, evidence: Evidence, exact_limit: int = EXACT_LIMIT) -> Report:
    """The report for ``world``'s grants from what a log says about them."""
    grants = sorted(world.grants, key=_key)
    used = evidence.used
    keep, method, bound = keep_set(evidence.needs, exact_limit)
    made = evidence.made
    return Report(
        grants=len(grants),
        requests=evidence.requests,
        allowed=evidence.allowed,
        denied=evidence.requests - evidence.allowed,
        used=[g for g in grants if g in used],
        unused=[g for g in grants if g not in used],
        sole=[Sole(g, *evidence.sole[g]) for g in sorted(evidence.sole, key=_key)],
        removals=[g for g in grants if g not in keep],
        method=method,
        bound=bound,
        principals=_principals(world, used, made),
        inactive=sorted(p for p in world.principals() if p.startswith("user:") and not made[p]),
    )


def keep_set(needs: Iterable[frozenset[Grant]], exact_limit: int = EXACT_LIMIT) -> tuple[set[Grant], str, float | None]:
    """A set of grants meeting every need (one grant of each), the method that chose it, greedy's bound.

    Needs that share no grant are independent parts (usually one per principal and place); each
    part is solved exactly when it has at most ``exact_limit`` candidate grants, else greedily.
    The method is ``exact`` when every part was, else ``greedy`` with the bound of its worst part.

    The grants are numbered in the order of their text and the needs sorted, so the search runs
    on small integers and picks the same keep set in every process, whatever the needs' order.
    """
    distinct = set(needs)
    grants = sorted({g for need in distinct for g in need}, key=_key)
    number = {g: i for i, g in enumerate(grants)}
    remaining = _minimal({frozenset(number[g] for g in need) for need in distinct})
    keep = {need[0] for need in remaining if len(need) == 1}  # sole grants: no choice
    remaining = [need for need in remaining if not keep.intersection(need)]
    bound: float | None = None
    for part in _parts(remaining):
        candidates = {g for need in part for g in need}
        if len(candidates) <= exact_limit:
            keep |= _exact(part)
        else:
            keep |= _greedy(part)
            most = max(Counter(g for need in part for g in need).values())
            bound = max(bound or 1.0, round(harmonic(most), 3))
    return {grants[i] for i in keep}, ("exact" if bound is None else "greedy"), bound


Needs = list[tuple[int, ...]]  # needs as sorted tuples of grant numbers, sorted by size then grants


def _parts(needs: Needs) -> list[Needs]:
    """The needs grouped into parts that share no grant (union-find over grants), in order."""
    parent: dict[int, int] = {}

    def root(g: int) -> int:
        while parent.setdefault(g, g) != g:
            parent[g] = parent[parent[g]]
            g = parent[g]
        return g

    for need in needs:
        first = root(need[0])
        for other in need[1:]:
            parent[root(other)] = first
            first = root(first)
    parts: dict[int, Needs] = {}
    for need in needs:
        parts.setdefault(root(need[0]), []).append(need)
    return sorted(parts.values(), key=lambda part: min(g for need in part for g in need))


def _minimal(needs: set[frozenset[int]]) -> Needs:
    """The needs no smaller need is inside: keeping one of a smaller need keeps one of a larger.

    Smallest first; a need of at most ``SUBSETS`` grants looks its proper subsets up among the
    needs kept (most needs have a few grants), a larger one scans the kept needs that share a
    grant with it: near linear in the needs where a pairwise test would be quadratic.
    """
    kept: Needs = []
    found: set[tuple[int, ...]] = set()
    having: dict[int, list[tuple[int, ...]]] = {}  # grant -> the kept needs with it
    for need in sorted((tuple(sorted(n)) for n in needs), key=lambda n: (len(n), n)):
        if len(need) <= SUBSETS:
            inside = any(sub in found for k in range(1, len(need)) for sub in combinations(need, k))
        else:
            mine = set(need)
            inside = any(mine.issuperset(smaller) for g in need for smaller in having.get(g, ()))
        if inside:
            continue
        kept.append(need)
        found.add(need)
        for g in need:
            having.setdefault(g, []).append(need)
    return kept


def _greedy(needs: Needs) -> set[int]:
    """Keep the grant meeting the most needs still unmet, ties to the least by text, until none is.

    A heap of (needs met, grant) with stale entries skipped: each need is met once and each
    grant's count lowered once per need of it, so a part of many needs costs n log n.
    """
    having: dict[int, list[int]] = {}
    for index, need in enumerate(needs):
        for g in need:
            having.setdefault(g, []).append(index)
    meets = {g: len(indexes) for g, indexes in having.items()}
    heap = [(-n, g) for g, n in meets.items()]
    heapq.heapify(heap)
    unmet = [True] * len(needs)
    keep: set[int] = set()
    while heap:
        negative, best = heapq.heappop(heap)
        if best in keep or -negative != meets[best]:
            continue  # kept already, or its count fell since (a fresher entry is in the heap)
        if not meets[best]:
            break  # every need is met
        keep.add(best)
        for index in having[best]:
            if unmet[index]:
                unmet[index] = False
                for g in needs[index]:
                    meets[g] -= 1
                    if g not in keep and meets[g]:
                        heapq.heappush(heap, (-meets[g], g))
    return keep


def _exact(needs: Needs) -> set[int]:
    """The smallest set of candidates meeting every need (branch on the grants of an unmet need)."""
    best: list[set[int]] = [_greedy(needs)]  # an upper bound to prune with

    def search(unmet: Needs, chosen: set[int]) -> None:
        if not unmet:
            if len(chosen) < len(best[0]):
                best[0] = set(chosen)
            return
        if len(chosen) + 1 >= len(best[0]):
            return
        need = min(unmet, key=len)  # the fewest ways to branch (the first such: the needs are sorted)
        for grant in need:
            chosen.add(grant)
            search([n for n in unmet if grant not in n], chosen)
            chosen.discard(grant)

    search(list(needs), set())
    return best[0]


def verify(authorizer: Authorizer, removals: Iterable[Grant], allowed: Iterable[Request]) -> list[Request]:
    """The requests allowed before that a copy of the world without ``removals`` denies (none, if sound).

    Decided by a new authorizer (same policy and backend) over the copy: the whole log re-decided,
    as ``privilog diff --world`` and the pipeline's ``impact`` compare decisions.
    """
    world = authorizer.world
    gone = set(removals)
    copy = World(
        entities=set(world.entities),
        grants={g for g in world.grants if g not in gone},
        members=set(world.members),
        admins=set(world.admins),
        instance=world.instance,
    )
    after = Authorizer(authorizer.policy, copy, backend=authorizer.backend_name)
    return [r for r in dict.fromkeys(allowed) if not after.decide(r)]


def _principals(world: Holdings, used: set[Grant], made: Counter[str]) -> list[PrincipalUse]:
    by_holder: dict[str, list[Grant]] = {}
    for grant in world.grants:
        by_holder.setdefault(grant.principal, []).append(grant)
    out = []
    for principal in sorted(world.principals() | set(made)):
        held = by_holder.get(principal, [])
        in_use = sum(g in used for g in held)
        out.append(PrincipalUse(principal, len(held), in_use, len(held) - in_use, made[principal]))
    return out


def _key(grant: Grant) -> tuple[str, str, str]:
    return (grant.principal, str(grant.entity), grant.action)


def harmonic(d: int) -> float:
    """H(d), greedy's bound for a need-count of ``d``.

    >>> round(harmonic(3), 3)
    1.833
    """
    return math.fsum(1 / k for k in range(1, d + 1))


__all__ = [
    "Evidence", "Held", "Holdings", "Need", "PrincipalUse", "Report", "Sole",
    "analyse", "harmonic", "keep_set", "report", "verify",
]  # fmt: skip
