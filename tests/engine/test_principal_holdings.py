"""A principal's report on generated worlds (tests/spark/conftest.py's, with a deployment's settings
and owners) under cdap-5.1, whose rules, bypasses and owners decide beside grants: the accesses it
names are the allowed checks of every operation on every entity, by the decision plans (another path
than the report's evaluation), and each membership chain is a path of the world's memberships."""

from __future__ import annotations

import copy
import importlib.util
import itertools
import sys
from pathlib import Path
from types import ModuleType

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from privilog.engine.authorizer import Authorizer
from privilog.engine.report import entity_report, principal_report, universe

from privilog import dsl
from privilog.api import load_world_for

ROOT = Path(__file__).parents[1]
POLICY = dsl.load_policy("cdap-5.1")


def _spark_strategies() -> ModuleType:
    name = "privilog_tests_spark_conftest"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "spark" / "conftest.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


_generated = _spark_strategies()
NAMES = _generated.Names(0)
SETTINGS = [
    {},
    {"config": {"master_user": "user:u2w0"}},
    {"config": {"superusers": ["user:u3w0"]}},
    {"owners": {"namespace:ns1w0": "kerberosprincipal:u1w0@EXAMPLE.COM"}},
]


@settings(max_examples=8, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_the_report_is_every_allowed_check(data: st.DataObject) -> None:
    world = data.draw(_generated.worlds(NAMES, POLICY.actions))
    world.update(copy.deepcopy(data.draw(st.sampled_from(SETTINGS))))
    world["entities"].append("dataset:system.system.queue.q1")
    authorizer = Authorizer(POLICY, load_world_for(POLICY, world))
    w = authorizer.world
    everything = universe(w)
    for principal in sorted(w.principals()):
        report = principal_report(authorizer, principal)
        checked = {
            (op.qualified, e)
            for op in POLICY.operations
            for e in everything
            if e.type == op.entity_type and authorizer.allows(principal, op.qualified, e)
        }
        assert {(a.operation, a.entity) for a in report.accesses} == checked, principal
        assert {c[-1] for c in report.memberships} == w.groups_of(principal)
        for chain in report.memberships:
            assert all(pair in w.members for pair in itertools.pairwise(chain))
    for entity in everything[:12]:
        found = entity_report(authorizer, entity)
        for access in found.accesses:
            assert authorizer.allows(access.principal, access.operation, entity)
