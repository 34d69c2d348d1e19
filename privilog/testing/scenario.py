"""Scenario files: conformance suites a policy author runs with ``privilog test``.

A scenario names a policy, a world and cases; each case is a request and what
it must give (``allow``, ``deny``, or ``{visible: [...]}``). A case may carry
its own ``world:``, or ``grants:``/``members:``/``entities:`` added to the
file's world. Every value is checked where it is read, and errors name the
file, line and column.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dsl
from dsl.errors import PrivilogError
from dsl.files import read_world_text
from dsl.ir import Policy
from engine.authorizer import Authorizer
from engine.world import Located, World, WorldError, WorldReader, compose
from privilog.render.explain import render_short

CASE_KEYS = ("name", "request", "expect", "world", "grants", "members", "entities")
REQUEST_KEYS = ("principal", "operation", "entity", "in", "args")


class ScenarioError(PrivilogError):
    """A scenario file that cannot be run."""

    located = True


@dataclass(frozen=True)
class CaseResult:
    where: str
    name: str
    passed: bool
    detail: str = ""

    def line(self) -> str:
        return f"{self.where}: FAIL {self.name}: {self.detail}"


def _fail(item: Located, message: str) -> ScenarioError:
    return ScenarioError(f"{item.where}: {message}")


def _mapping(item: Located, what: str, keys: tuple[str, ...]) -> dict[str, Located]:
    if not isinstance(item.value, dict):
        raise _fail(item, f"{what} must be a mapping")
    for key, value in item.value.items():
        if key not in keys:
            raise _fail(value, f"unknown key `{key}` in {what}; the keys are {', '.join(keys)}")
    return item.value


def _plain(item: Located) -> object:
    """Strip positions from a located value."""
    if isinstance(item.value, dict):
        return {k: _plain(v) for k, v in item.value.items()}
    if isinstance(item.value, list):
        return [_plain(v) for v in item.value]
    return item.value


class ScenarioRunner:
    """Runs one scenario file; policies are loaded once per name."""

    def __init__(self, policy_override: str | None = None):
        self.policy_override = policy_override
        self._policies: dict[str, Policy] = {}

    def policy(self, name: str, base: Path) -> Policy:
        """A policy named by the scenario: a path relative to it, or a name in rules/."""
        path = str(dsl.resolve_policy_path(name, relative_to=base).resolve())
        if path not in self._policies:
            self._policies[path] = dsl.load_policy(path)
        return self._policies[path]

    def run(self, path: Path) -> Iterator[CaseResult]:
        text = read_world_text(path, "scenario")
        root = compose(text, str(path))
        if root is None:
            raise ScenarioError(f"{path}: the scenario is empty")
        top = _mapping(root, "a scenario", ("policy", "world", "cases", "description"))
        policy_name = self.policy_override or (str(top["policy"].value) if "policy" in top else "cdap")
        policy = self.policy(policy_name, path.parent)
        reader = WorldReader(policy.actions)
        base_world = self._world(top.get("world"), reader, path.parent)
        authorizer = Authorizer(policy, base_world)
        cases = top.get("cases")
        if cases is None or not isinstance(cases.value, list):
            raise ScenarioError(f"{path}: a scenario needs `cases:`, a list of requests and expectations")
        for number, case in enumerate(cases.value, start=1):
            yield self._case(authorizer, base_world, reader, case, number, path.parent)

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
        self, authorizer: Authorizer, base_world: World, reader: WorldReader, case: Located, number: int, base: Path
    ) -> CaseResult:
        fields = _mapping(case, "a case", CASE_KEYS)
        name = str(fields["name"].value) if "name" in fields else f"case {number}"
        if "request" not in fields or "expect" not in fields:
            raise _fail(case, f"{name}: a case needs `request:` and `expect:`")
        world = self._case_world(fields, base_world, reader, base)
        authorizer.world = world
        authorizer.refresh()
        try:
            return self._judge(authorizer, fields["request"], fields["expect"], name, case.where)
        finally:
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
        )

    def _judge(self, authorizer: Authorizer, request: Located, expect: Located, name: str, where: str) -> CaseResult:
        fields = _mapping(request, "a request", REQUEST_KEYS)
        for key in ("principal", "operation"):
            if key not in fields:
                raise _fail(request, f"a request needs `{key}`")
        principal, operation = str(fields["principal"].value), str(fields["operation"].value)
        args = _plain(fields["args"]) if "args" in fields else {}
        if not isinstance(args, dict):
            raise _fail(fields["args"], "`args` is a mapping of argument names to values")
        try:
            if isinstance(expect.value, dict):
                wanted = _mapping(expect, "an expectation", ("visible",))
                return self._judge_visible(authorizer, fields, principal, operation, wanted["visible"], name, where)
            verdict = str(expect.value)
            if verdict not in ("allow", "deny"):
                raise _fail(expect, f"expect is `allow`, `deny` or `{{visible: [...]}}`, not `{verdict}`")
            if "entity" not in fields:
                raise _fail(request, "a request that expects allow or deny needs `entity`")
            req = authorizer.request(principal, operation, str(fields["entity"].value), args)
        except (WorldError, ScenarioError):
            raise
        except PrivilogError as error:
            raise _fail(request, str(error)) from None
        decision = authorizer.check(req)
        got = "allow" if decision.allowed else "deny"
        if got == verdict:
            return CaseResult(where, name, True)
        return CaseResult(where, name, False, f"expected {verdict}, got {render_short(decision)}")

    def _judge_visible(
        self,
        authorizer: Authorizer,
        fields: dict[str, Located],
        principal: str,
        operation: str,
        wanted: Located,
        name: str,
        where: str,
    ) -> CaseResult:
        op = authorizer.operation(operation)
        within = str(fields["in"].value) if "in" in fields else None
        listed = _plain(wanted)
        if not isinstance(listed, list):
            raise _fail(wanted, "`visible` is a list of entity ids")
        expected = {str(authorizer.entity(str(v))) for v in listed}
        shown = {str(v.entity) for v in authorizer.visible(principal, op.entity_type, within)}
        if shown == expected:
            return CaseResult(where, name, True)
        parts = []
        if expected - shown:
            parts.append(f"missing {sorted(expected - shown)}")
        if shown - expected:
            parts.append(f"unexpected {sorted(shown - expected)}")
        return CaseResult(where, name, False, "visible set differs: " + "; ".join(parts))


def run_scenarios(paths: list[Path], policy: str | None = None) -> tuple[list[CaseResult], int, int]:
    """Run scenario files; return every result with the passed and failed counts."""
    runner = ScenarioRunner(policy)
    results = [result for path in paths for result in runner.run(path)]
    passed = sum(r.passed for r in results)
    return results, passed, len(results) - passed
