"""Conformance: a policy checked against its table, through the public API, and the report.

* checks a row against a policy (:func:`check_row`): the grants the row requires
  allow, each of them is necessary, and nothing else serves; the table's own reading
  (:mod:`privilog.testing.table`) says what should;
* reports, for every policy in a rules folder, how many rows it covers and passes
  (:func:`conformance_report`; ``privilog test --report``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from privilog import dsl
from privilog.api import load
from privilog.dsl.errors import PrivilogError
from privilog.engine.decision import Request
from privilog.engine.ids import EntityId
from privilog.engine.world import Grant, World
from privilog.testing.table import (
    PRINCIPAL,
    Args,
    Granted,
    Row,
    Table,
    TableError,
    TableWorld,
    args_text,
    combinations,
    describe,
    is_table,
    load_table,
    parent,
    to_principal,
    universe,
    vacuous,
    ways_of,
)

# ---- checking a row against a policy, through the public API ----------------------------------


class ConformanceError(PrivilogError):
    """The policy answers in a way no table row can describe (a listing that depends on where)."""


class Bench:
    """One authorizer for a policy over a table's world; each question replaces the grants.

    ``policy`` is a name in rules/ or a path (default: the table's ``policy``). Each answer is
    check()'s, held to the paths the product answers with (:meth:`_agree`): a disagreement is a
    :class:`ConformanceError`, a problem of the row in the report.
    """

    def __init__(self, table: Table, policy: str | None = None, backend: str = "compiled"):
        self.table = table
        self.authz = load(policy if policy is not None else table.policy, {"entities": table.entities}, backend)
        self._ids: dict[str, EntityId] = {}
        self.base = {self._id(e) for e in table.entities}
        # Every answer is also asked of the paths `privilog serve`, its batches and CDAP's enforce
        # answer with (allows, decide: the backend's decision plans), and they must agree with
        # check(). The reference backend has no plans: there decide() is check() again, at its cost.
        self.fast_paths = backend != "pydatalog"

    def _id(self, text: str) -> EntityId:
        if text not in self._ids:
            self._ids[text] = EntityId.parse(text)
        return self._ids[text]

    def _world(self, grants: Iterable[Granted], members: Iterable[tuple[str, str]]) -> None:
        self.authz.world = World(
            entities=set(self.base),
            grants={Grant(p, a, self._id(e)) for p, a, e in grants},
            members=set(members),
        )
        self.authz.refresh()

    def allowed(
        self,
        row: Row,
        args: Args,
        grants: Iterable[Granted],
        members: Iterable[tuple[str, str]] = (),
        principal: str = PRINCIPAL,
    ) -> bool:
        """Whether ``principal`` may do the row's operation on its subject with these grants.

        A listing (`shows`) allows when it shows the subject, asked both within the subject's
        parent and everywhere; the two must agree.
        """
        self._world(grants, members)
        entity = self.table.subject(row)
        if row.verb == "shows":
            seen = entity in self._visible(principal, row.entity_type, parent(entity))
            everywhere = entity in self._visible(principal, row.entity_type, None)
            if seen != everywhere:
                raise ConformanceError(f"{row.operation}: listing {entity} depends on where it is asked")
            if self.fast_paths:
                self._agree(self.authz.request(principal, row.operation, entity), {}, seen, "the listing")
            return seen
        request = self.authz.request(principal, row.operation, entity, dict(args))
        allowed = self.authz.check(request).allowed
        if self.fast_paths:
            self._agree(request, args, allowed, "check()")
        return allowed

    def _agree(self, request: Request, args: Args, allowed: bool, said: str) -> None:
        """The decision plans answer as ``said`` did: decide(), and allows() from the request's
        text (after check() has seen its principal and entity: the path a server's repeated
        questions take), and check() itself for a listing."""
        authz = self.authz
        answers = {
            "decide()": authz.decide(request),
            "allows()": authz.allows(request.principal, request.operation, str(request.entity), dict(args)),
        }
        if said != "check()":
            answers["check()"] = authz.check(request).allowed
        wrong = {k: v for k, v in answers.items() if v != allowed}
        if wrong:
            shown = ", ".join(f"{k} {'allows' if v else 'denies'}" for k, v in wrong.items())
            raise ConformanceError(
                f"{request}: {said} {'allows' if allowed else 'denies'}, but {shown} (the engine disagrees with itself)"
            )

    def _visible(self, principal: str, type_name: str, within: str | None) -> set[str]:
        if within is not None and within.startswith("instance:"):
            within = None
        shown = {str(v.entity) for v in self.authz.visible(principal, type_name, within)}
        if self.fast_paths:  # what serve's listing answers with: the plans alone, without the proofs
            listed = {str(e) for e in self.authz.visible_entities(principal, type_name, within)}
            if listed != shown:
                raise ConformanceError(
                    f"listing {type_name} in {within or 'everything'} for {principal}: visible_entities() shows "
                    f"{sorted(listed)}, visible() {sorted(shown)} (the engine disagrees with itself)"
                )
        return shown


@dataclass(frozen=True)
class RowResult:
    """How a policy fares on one row: whether it has the operation, and what went wrong."""

    operation: str
    covered: bool
    problems: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.covered and not self.problems


def _args_label(args: Args) -> str:
    """>>> _args_label({"owner": "kerberosprincipal:k@X", "new_artifact": "true"})
    '[new_artifact=true,owner=k@X] '
    """
    text = args_text(args)
    return f"[{text}] " if text else ""


def _check_case(bench: Bench, row: Row, args: Args) -> list[str]:
    table = bench.table
    label = _args_label(args)
    ways = ways_of(table, row, args)
    if not all(ways):  # a conjunct nothing can meet (an argument it names is missing)
        if bench.allowed(row, args, to_principal(universe(table))):
            return [f"{label}allowed although nothing can meet the table's requirements"]
        return []
    problems = []
    subject = table.subject(row)
    combos = combinations(table, row, args)
    for combo in combos:
        if not bench.allowed(row, args, to_principal(combo)):
            problems.append(f"{label}denied with {describe(combo)}")
    for need in sorted(combos[0]):
        rest = to_principal(combos[0] - {need})
        expected = TableWorld(table.entities, rest).allowed(table, PRINCIPAL, row.operation, subject, args)
        if bench.allowed(row, args, rest) != expected:
            problems.append(f"{label}{'denied' if expected else 'allowed'} without {describe([need])}")
    if not vacuous(ways) and bench.allowed(row, args, ()):
        problems.append(f"{label}allowed with no grants")
    # Nothing else serves: every other grant the table could name, without what one conjunct
    # needs, is denied (a policy that accepts more than the row says fails here).
    everything = universe(table)
    world = TableWorld(table.entities, names=table.mentioned())  # a grant may count by its id
    for conjunct in world.applicable(row, args):
        for hole in world.breakers(conjunct, subject, args)[:2]:
            if bench.allowed(row, args, to_principal(everything - hole)):
                problems.append(f"{label}allowed without any of {describe(hole)}")
    return problems


def check_row(bench: Bench, row: Row) -> RowResult:
    """Check a row against the bench's policy, for each example argument set:

    * SUFFICE: what the row requires allows (one way per conjunct, each way of each conjunct
      in turn);
    * NECESSARY: without any one of those grants it is denied (unless the table itself still
      allows it: conjuncts that overlap), and with no grants at all it is denied;
    * NOTHING ELSE SERVES: everything else the table could grant, without what one conjunct
      needs, is denied.
    """
    op = bench.authz.policy.operation(row.operation)
    if op is None:
        return RowResult(row.operation, False, ("the policy has no such operation",))
    if op.verb.value != row.verb:
        return RowResult(row.operation, True, (f"the table says `{row.verb}`, the policy `{op.verb.value}`",))
    problems: list[str] = []
    for args in row.args:
        try:
            problems += _check_case(bench, row, args)
        except PrivilogError as error:  # a request the policy refuses as bad input
            problems.append(f"{_args_label(args)}{error}")
    return RowResult(row.operation, True, tuple(problems))


# ---- the report ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PolicyReport:
    """One policy against its conformance table(s)."""

    policy: str
    tables: tuple[str, ...]
    seeds: tuple[str, ...]
    results: tuple[RowResult, ...] = ()
    error: str = ""  # the policy does not load, or it has no table

    @property
    def rows(self) -> int:
        return len(self.results)

    @property
    def covered(self) -> int:
        return sum(r.covered for r in self.results)

    @property
    def passing(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def ok(self) -> bool:
        return not self.error and self.passing == self.rows

    @property
    def status(self) -> str:
        if self.ok:
            return "ok"
        if self.error:
            return "does not load" if self.tables else "no table"
        return "FAIL"


def find_tables(folder: Path) -> dict[str, list[Table]]:
    """The conformance tables in ``folder`` (``*.yaml`` naming a policy), by policy."""
    if not folder.is_dir():
        raise TableError(f"no conformance tables: `{folder}` is not a folder (give one with --tables DIR)")
    found: dict[str, list[Table]] = {}
    for path in sorted(folder.glob("*.yaml")):
        if is_table(path):
            table = load_table(path.resolve())
            found.setdefault(table.policy, []).append(table)
    return found


def report_policy(path: Path, tables: Sequence[Table]) -> PolicyReport:
    """Check every row of ``tables`` against the policy in ``path``."""
    names = tuple(t.path.name if t.path else "<table>" for t in tables)
    seeds = tuple(dict.fromkeys(s for t in tables for s in t.seeds))
    if not tables:
        return PolicyReport(path.stem, names, seeds, error="no conformance table")
    results: list[RowResult] = []
    for table in tables:
        try:
            bench = Bench(table, str(path))
        except PrivilogError as error:
            first = str(error).splitlines()[0]
            return PolicyReport(
                path.stem, names, seeds, tuple(RowResult(r.operation, False) for r in table.rows), first
            )
        results += [check_row(bench, row) for row in table.rows]
    return PolicyReport(path.stem, names, seeds, tuple(results))


def conformance_report(tables: Path, rules: Path | None = None) -> list[PolicyReport]:
    """Every policy in ``rules`` (default: the shipped ones) against its tables in ``tables``."""
    by_policy = find_tables(tables)
    folder = rules if rules is not None else dsl.rules_dir()
    paths = sorted(folder.glob("*.policy"), key=lambda p: p.stem)
    return [report_policy(path, by_policy.get(path.stem, [])) for path in paths]


def render_report(reports: Sequence[PolicyReport], tables: str = "", rules: str = "") -> str:
    """A Markdown table a policy author can paste into a review, the failing rows below it."""
    header = ("policy", "seed(s)", "documented rows", "covered", "passing", "status")
    body = [
        (
            f"`{r.policy}`",
            ", ".join(r.seeds) or "-",
            str(r.rows),
            str(r.covered),
            str(r.passing),
            r.status,
        )
        for r in reports
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    where = f" in {rules}" if rules else ""
    against = f" against their tables in {tables}" if tables else ""
    lines = [f"Conformance of the policies{where}{against}", "", line(header)]
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    lines += [line(cells) for cells in body]
    total = sum(r.rows for r in reports)
    passing = sum(r.passing for r in reports)
    failing = [r for r in reports if not r.ok]
    lines += ["", f"{len(reports)} policies, {total} documented rows, {passing} passing"]
    if failing:
        lines += ["", "Failing:"]
        for r in failing:
            if r.error:
                lines.append(f"  {r.policy}: {r.error}")
                continue
            for result in r.results:
                if not result.passed:
                    problems = result.problems
                    for problem in problems[:3]:
                        lines.append(f"  {r.policy}  {result.operation}: {problem}")
                    if len(problems) > 3:
                        lines.append(f"  {r.policy}  {result.operation}: ... and {len(problems) - 3} more")
    return "\n".join(lines)
