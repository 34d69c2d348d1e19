"""Scenario files: conformance suites a policy author runs with ``privilog test``.

A scenario names a policy, a world and cases; each case is a request and what
it must give (see :mod:`privilog.testing.expect`). A case may carry its own
``world:``, or ``grants:``/``members:``/``entities:`` added to the file's world.
Every value is checked where it is read, and errors name the file, line and
column. Cases may be selected by name (``-k``, :mod:`privilog.testing.select`),
are timed, and may record what of the policy they exercised
(:mod:`privilog.testing.coverage`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from privilog import dsl
from privilog.dsl.errors import PrivilogError
from privilog.dsl.files import read_text, read_world_text
from privilog.dsl.ir import Policy
from privilog.dsl.limits import CASES, SCENARIO_BYTES
from privilog.engine.authorizer import Authorizer
from privilog.engine.world import Located, World, WorldReader, compose
from privilog.testing.coverage import PolicyCoverage
from privilog.testing.expect import Judge, mapping
from privilog.testing.select import Selection

CASE_KEYS = ("name", "request", "expect", "world", "grants", "members", "entities")
PASSED, FAILED, ERROR = "passed", "failed", "error"


class ScenarioError(PrivilogError):
    """A scenario file that cannot be run."""

    located = True


@dataclass(frozen=True)
class CaseResult:
    """One case run: where it is written (``file:line:col``), its name, passed or failed and why, its time.

    A case that could not be run (its request, world or expectation is bad input) is an ``error``:
    ``detail`` is privilog's message for it, and the other cases still run.
    """

    where: str
    name: str
    passed: bool
    detail: str = ""
    seconds: float = 0.0
    error: bool = False

    @property
    def status(self) -> str:
        return ERROR if self.error else PASSED if self.passed else FAILED

    @property
    def file(self) -> str:
        return self.where.rsplit(":", 2)[0]

    @property
    def line_number(self) -> int:
        return int(self.where.rsplit(":", 2)[1])

    def line(self, timed: bool = False) -> str:
        """``FILE:LINE:COL: FAIL NAME: WHY`` (or ``PASS NAME``), with the time when ``timed``."""
        took = f" ({self.seconds * 1000:.1f} ms)" if timed else ""
        if self.passed:
            return f"{self.where}: PASS {self.name}{took}"
        return f"{self.where}: {'ERROR' if self.error else 'FAIL'} {self.name}{took}: {self.detail}"


@dataclass
class Run:
    """Every case run, the number left out by ``-k``, and the coverage of each policy (``--coverage``)."""

    results: list[CaseResult] = field(default_factory=list)
    deselected: int = 0
    coverage: dict[str, PolicyCoverage] | None = None

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def failed(self) -> int:
        return sum(not r.passed and not r.error for r in self.results)

    @property
    def errors(self) -> int:
        return sum(r.error for r in self.results)

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.results)

    def summary(self) -> str:
        """``N passed, M failed``, ``K errors`` when some could not run, and how many ``-k`` left out."""
        text = f"{self.passed} passed, {self.failed} failed"
        if self.errors:
            text += f", {self.errors} error" + ("s" if self.errors != 1 else "")
        return text + (f", {self.deselected} deselected" if self.deselected else "")


def _one_line(error: Exception) -> str:
    """An error as one line of the run's report (a policy's error keeps its place, not its caret)."""
    return (str(error).splitlines() or [type(error).__name__])[0]


def _fail(item: Located, message: str) -> ScenarioError:
    return ScenarioError(f"{item.where}: {message}")


class ScenarioRunner:
    """Runs scenario files; policies are loaded once per name."""

    def __init__(self, policy_override: str | None = None, select: Selection | None = None, coverage: bool = False):
        self.policy_override = policy_override
        self.select = select
        self.run_state = Run(coverage={} if coverage else None)
        self._policies: dict[str, Policy] = {}

    def policy(self, name: str, base: Path) -> Policy:
        """A policy named by the scenario: a path relative to it, or a name in rules/."""
        path = str(dsl.resolve_policy_path(name, relative_to=base).resolve())
        if path not in self._policies:
            self._policies[path] = dsl.load_policy(path)
        return self._policies[path]

    def run(self, path: Path) -> Iterator[CaseResult]:
        """Each case's result; a file that cannot be run at all is one error, and the next file runs."""
        try:
            yield from self._run(path)
        except PrivilogError as error:
            result = CaseResult(f"{path}:1:1", path.name, False, _one_line(error), error=True)
            self.run_state.results.append(result)
            yield result

    def _run(self, path: Path) -> Iterator[CaseResult]:
        text = read_text(path, "scenario", SCENARIO_BYTES.variable, SCENARIO_BYTES.value())
        root = compose(text, str(path))
        if root is None:
            raise ScenarioError(f"{path}: the scenario is empty")
        top = mapping(root, "a scenario", ("policy", "world", "cases", "description"))
        policy_name = self.policy_override or (str(top["policy"].value) if "policy" in top else "cdap")
        policy = self.policy(policy_name, path.parent)
        reader = WorldReader(policy.actions)
        base_world = self._world(top.get("world"), reader, path.parent)
        authorizer = Authorizer(policy, base_world)
        coverage = None
        if self.run_state.coverage is not None:
            coverage = self.run_state.coverage.setdefault(policy.span.file, PolicyCoverage(policy))
        cases = top.get("cases")
        if cases is None or not isinstance(cases.value, list):
            raise ScenarioError(f"{path}: a scenario needs `cases:`, a list of requests and expectations")
        if len(cases.value) > CASES.value():
            raise ScenarioError(f"{cases.where}: " + CASES.refusal("the scenario", len(cases.value)))
        for number, case in enumerate(cases.value, start=1):
            result = self._case(authorizer, base_world, reader, case, number, path.parent, coverage)
            if result is None:
                self.run_state.deselected += 1
            else:
                self.run_state.results.append(result)
                yield result

    def _world(self, item: Located | None, reader: WorldReader, base: Path) -> World:
        if item is None:
            return World()
        if isinstance(item.value, str):
            world_path = base / item.value
            if not world_path.exists():
                raise _fail(item, f"no such world file `{item.value}` (paths are relative to the scenario)")
            text = read_world_text(world_path)
            root = compose(text, str(world_path))
            return reader.read(root, None) if root is not None else World()
        return reader.read(item, None)

    def _case(
        self,
        authorizer: Authorizer,
        base_world: World,
        reader: WorldReader,
        case: Located,
        number: int,
        base: Path,
        coverage: PolicyCoverage | None,
    ) -> CaseResult | None:
        name = f"case {number}"
        if isinstance(case.value, dict) and isinstance(case.value.get("name"), Located):
            name = str(case.value["name"].value)
        if self.select is not None and not self.select(name):
            return None
        started = time.perf_counter()
        try:
            fields = mapping(case, "a case", CASE_KEYS)
            if "request" not in fields or "expect" not in fields:
                raise _fail(case, f"{name}: a case needs `request:` and `expect:`")
            world = self._case_world(fields, base_world, reader, base)
            authorizer.world = world
            authorizer.refresh()
            verdict = Judge(authorizer).judge(fields["request"], fields["expect"])
            took = time.perf_counter() - started
            if coverage is not None:
                coverage.record(authorizer, verdict.requests)
            return CaseResult(case.where, name, verdict.passed, verdict.message, took)
        except PrivilogError as error:  # this case is bad input: said as its error, and the next case runs
            return CaseResult(case.where, name, False, _one_line(error), time.perf_counter() - started, error=True)
        finally:
            if authorizer.world is not base_world:
                authorizer.world = base_world
                authorizer.refresh()

    def _case_world(self, fields: dict[str, Located], base_world: World, reader: WorldReader, base: Path) -> World:
        world = self._world(fields["world"], reader, base) if "world" in fields else base_world
        extra = {k: fields[k] for k in ("grants", "members", "entities") if k in fields}
        if not extra:
            return world
        added = reader.read(Located(extra, fields[next(iter(extra))].where), None)
        return World(
            entities=world.entities | added.entities,
            grants=world.grants | added.grants,
            members=world.members | added.members,
            admins=set(world.admins),
            instance=world.instance,
            config=dict(world.config),  # the file's settings and owners stay: a case adds grants, not a deployment
            owners=dict(world.owners),
            facts=dict(world.facts),
        )


def run_scenarios(
    paths: list[Path], policy: str | None = None, select: Selection | None = None, coverage: bool = False
) -> Run:
    """Run scenario files: every selected case's result, the deselected count, and (``coverage``)
    what of each policy the cases exercised."""
    runner = ScenarioRunner(policy, select, coverage)
    for path in paths:
        for _ in runner.run(path):
            pass
    return runner.run_state
