"""privilog ranger export: import after export is the identity on generated worlds; export after import
gives the sample's policies back, up to what the import normalizes (docs/ranger.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from privilog.engine.ids import EntityId
from privilog.engine.patterns import parse_pattern
from privilog.engine.world import Grant, World

from privilog.ranger.exporting import export_ranger
from privilog.ranger.importing import Imported, Refused, import_ranger
from privilog.ranger.servicedef import path_to
from privilog.ranger.worldfile import read_world

HERE = Path(__file__).parent
EXPORT = json.loads((HERE / "cdap-service-export.json").read_text())
ROLES = json.loads((HERE / "cdap-roles-export.json").read_text())

VALUES = {
    "instance": ["cdap", "*", "c?ap"],
    "namespace": ["finance", "hr", "fin*", "*", "?*", "sandbox_?"],
    "application": ["etl", "legacy_?", "*", "app*"],
    "program": ["*", "?*", "w*", "*flow*", "service.api", "workflow.?*", "spark.ml_*", "*.api", "se*"],
    "artifact": ["cdap-data-pipeline", "etl*", "*", "core?plugins", "x.1"],
    "dataset": ["sales_*", "ledger", "*", "*_pii", "a.b"],
    "dataset_module": ["io.cdap.*", "mod", "*"],
    "dataset_type": ["table", "*", "t?pe"],
    "secure_key": ["db_password", "*", "key_?"],
    "stream": ["clicks*", "*", "raw"],
    "principal": ["etl/*@EXAMPLE.COM", "*", "hdfs*"],
}
DEEPEST = ["instance", "namespace", "application", "program", "artifact", "dataset", "dataset_module",
           "dataset_type", "secure_key", "stream", "principal"]
ACCESS = ["read", "write", "execute", "admin"]


@st.composite
def items(draw: Any) -> list[dict[str, Any]]:
    out = []
    for _ in range(draw(st.integers(0, 2))):
        out.append({
            "accesses": [{"type": a, "isAllowed": draw(st.booleans())}
                         for a in draw(st.lists(st.sampled_from(ACCESS), max_size=3, unique=True))],
            "users": draw(st.lists(st.sampled_from(["alice", "bob", "{USER}"]), max_size=2, unique=True)),
            "groups": draw(st.lists(st.sampled_from(["analysts", "public"]), max_size=2, unique=True)),
            "roles": draw(st.lists(st.sampled_from(["ops", "etl-writers"]), max_size=1, unique=True)),
            "conditions": [],
            "delegateAdmin": draw(st.booleans()),
        })
    return out


@st.composite
def policies(draw: Any, pid: int) -> dict[str, Any]:
    path = path_to(draw(st.sampled_from(DEEPEST)))
    resources = {}
    for level in path:
        values = draw(st.lists(st.sampled_from(VALUES[level]), min_size=1, max_size=2, unique=True))
        excludes = level != "instance" and draw(st.integers(0, 3)) == 0
        resources[level] = {"values": values, "isExcludes": excludes, "isRecursive": False}
    return {
        "id": pid, "name": f"policy number {pid}", "isEnabled": True, "policyType": 0,
        "policyPriority": draw(st.sampled_from([0, 0, 1])), "isDenyAllElse": draw(st.booleans()),
        "resources": resources,
        "policyItems": draw(items()), "denyPolicyItems": draw(items()),
        "allowExceptions": draw(items()), "denyExceptions": draw(items()),
    }


@st.composite
def exports(draw: Any) -> dict[str, Any]:
    ids = draw(st.lists(st.integers(1, 60), max_size=4, unique=True))
    return {"policies": [draw(policies(pid)) for pid in ids]}


GRANTED = ["namespace:finance", "namespace:fin*", "dataset:finance.sales", "dataset:f?n.sales_*", "dataset:hr.a.b",
           "application:finance.etl", "program:finance.etl.workflow.nightly", "program:*.etl.*.api",
           "program:finance.*.s*.*", "artifact:finance.etl-lib", "artifact:finance.etl-lib.1.0", "stream:hr.clicks*",
           "securekey:finance.db-password", "dataset_type:finance.table", "dataset_module:finance.io.*",
           "kerberosprincipal:etl/host@EXAMPLE.COM", "kerberosprincipal:etl/*@EXAMPLE.COM", "instance:cdap"]
PRINCIPALS = ["user:alice", "user:carol", "group:analysts", "role:ops", "role:deployers"]


@st.composite
def bases(draw: Any) -> World:
    world = World()
    world.entities = {EntityId.parse(e) for e in ("namespace:finance", "dataset:finance.sales")}
    for _ in range(draw(st.integers(0, 5))):
        world.grants.add(Grant(draw(st.sampled_from(PRINCIPALS)), draw(st.sampled_from(["READ", "WRITE", "ADMIN"])),
                               parse_pattern(draw(st.sampled_from(GRANTED)))))
    memberships = [("user:alice", "group:analysts"), ("user:carol", "role:ops"), ("group:analysts", "role:ops"),
                   ("role:ops", "role:deployers"), ("user:dave", "group:eng"), ("group:eng", "group:all")]
    world.members = set(draw(st.lists(st.sampled_from(memberships), max_size=4, unique=True)))
    world.admins = {"user:root"}
    return world


def _round_trip(done: Imported) -> Imported:
    """Export the world, then import the export and its roles into the world without what they carry."""
    export, roles, _ = export_ranger(done.world, done.facts, "cdap_test")
    rest = World(entities=set(done.world.entities), admins=set(done.world.admins), instance=done.world.instance)
    rest.members = {m for m in done.world.members if not m[1].startswith("role:")}
    return import_ranger(json.loads(json.dumps(export)), roles=json.loads(json.dumps(roles)), base=rest,
                         grants_back=True)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(exports(), bases())
def test_import_after_export_is_the_identity(export: dict[str, Any], base: World) -> None:
    done = import_ranger(export, base=base)
    again = _round_trip(done)
    assert again.world.to_data() == done.world.to_data()
    assert again.facts == done.facts
    assert again.imported == done.imported and again.grants == len({g.entity for g in done.world.grants})


def test_the_sample_round_trips_through_its_world() -> None:
    done = import_ranger(EXPORT, roles=ROLES)
    again = _round_trip(done)
    assert again.facts == done.facts and again.world.members == done.world.members


def _normal(policy: dict[str, Any], instance: str = "cdap") -> dict[str, Any]:
    """What the import keeps of a policy: everything but its guid, version, description, audit flag, labels,
    service and item grouping; the instance level as the world's instance; {USER} as the group public."""
    flat = set()
    delegates = set()
    for key, kind in (("policyItems", "allow"), ("allowExceptions", "allow_except"),
                      ("denyPolicyItems", "deny"), ("denyExceptions", "deny_except")):
        for item in policy.get(key) or []:
            who = [f"user:{u}" if u != "{USER}" else "public" for u in item["users"]]
            who += [f"group:{g}" if g != "public" else "public" for g in item["groups"]]
            who += [f"role:{r}" for r in item["roles"]]
            flat |= {(kind, p, a["type"]) for p in who for a in item["accesses"] if a.get("isAllowed", True)}
            if item.get("delegateAdmin"):
                delegates |= set(who)
    resources = {
        level: (sorted(spec["values"]) if level != "instance" else [instance], spec["isExcludes"])
        for level, spec in policy["resources"].items()
    }
    return {"id": policy["id"], "name": policy["name"], "priority": policy.get("policyPriority", 0),
            "deny_all_else": policy.get("isDenyAllElse", False), "resources": resources, "items": flat,
            "delegates": delegates}


def test_export_after_import_gives_the_samples_policies_back(tmp_path: Path) -> None:
    (tmp_path / "export.json").write_text(json.dumps(EXPORT))
    (tmp_path / "roles.json").write_text(json.dumps(ROLES))
    run = [sys.executable, "-m", "privilog", "ranger"]
    done = subprocess.run([*run, "import", "export.json", "--roles", "roles.json", "-o", "w.yaml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([*run, "export", "w.yaml", "--service", "cdap_prod", "--roles", "r.json", "-o", "e.json"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "wrote e.json: 44 Ranger policies and 0 made from grants; r.json: 5 roles" in done.stderr
    back = json.loads((tmp_path / "e.json").read_text())
    enabled = [p for p in EXPORT["policies"] if p["isEnabled"]]
    assert [_normal(p) for p in back["policies"]] == [_normal(p) for p in sorted(enabled, key=lambda p: p["id"])]
    assert {p["service"] for p in back["policies"]} == {"cdap_prod"}
    roles = {r["name"]: r for r in json.loads((tmp_path / "r.json").read_text())["roles"]}
    original = {r["name"]: r for r in ROLES["roles"]}
    assert roles.keys() == original.keys()
    for name, role in roles.items():
        for part in ("users", "groups", "roles"):
            assert {m["name"] for m in role[part]} == {m["name"] for m in original[name][part]}


def test_grants_export_as_labelled_policies_and_come_back() -> None:
    world = World()
    world.grants = {Grant("user:bob", "READ", parse_pattern("dataset:finance.sales_*")),
                    Grant("user:bob", "ALL", parse_pattern("program:finance.etl.*.api")),
                    Grant("group:analysts", "READ", parse_pattern("dataset:finance.sales_*"))}
    export, _, summary = export_ranger(world, {}, "cdap")
    assert summary["grant_policies"] == 2
    by_name = {p["name"]: p for p in export["policies"]}
    sales = by_name["privilog grant: dataset:finance.sales_*"]
    assert sales["policyLabels"] == ["privilog-grant"]
    assert {k: v["values"] for k, v in sales["resources"].items()} == {
        "instance": ["cdap"], "namespace": ["finance"], "dataset": ["sales_*"]}
    program = by_name["privilog grant: program:finance.etl.*.api"]
    assert program["resources"]["program"]["values"] == ["*.api"]
    assert [a["type"] for a in program["policyItems"][0]["accesses"]] == ["read", "write", "execute", "admin"]
    back = import_ranger(export, grants_back=True)
    assert back.grants == 2 and back.imported == 0
    expanded = {g for g in world.grants if g.action != "ALL"} | {
        Grant("user:bob", a, parse_pattern("program:finance.etl.*.api")) for a in ("READ", "WRITE", "EXECUTE", "ADMIN")
    }
    assert back.world.grants == expanded  # ALL exports as the four accesses


def test_a_grant_ranger_cannot_hold_is_refused() -> None:
    world = World()
    world.grants = {Grant("user:bob", "READ", parse_pattern("schedule:finance.etl.nightly")),
                    Grant("user:bob", "READ", parse_pattern("instance:other"))}
    with pytest.raises(Refused) as refused:
        export_ranger(world, {}, "cdap")
    assert refused.value.lines == [
        "grants on instance:other: not this world's instance `cdap`",
        "grants on schedule:finance.etl.nightly: schedule is no Ranger resource of CDAP's service def",
    ]


def test_facts_edited_by_hand_are_refused(tmp_path: Path) -> None:
    done = import_ranger(EXPORT)
    done.facts["ranger_resource"].add(("policy 117", "dataset:hr.x"))  # no longer a product of level values
    with pytest.raises(Refused) as refused:
        export_ranger(done.world, done.facts, "cdap")
    assert refused.value.lines == ["policy 117: cannot be exported: its resource patterns are not a product of "
                                   "each level's values"]
    done.facts["ranger_resource"].discard(("policy 117", "dataset:hr.x"))
    done.facts["ranger_inside"].discard(("policy 117", "namespace:finance"))
    with pytest.raises(Refused, match="policy 117: cannot be exported: no Ranger policy translates to exactly"):
        export_ranger(done.world, done.facts, "cdap")


def test_the_world_file_is_read_back(tmp_path: Path) -> None:
    done = import_ranger(EXPORT, roles=ROLES)
    from privilog.ranger.worldfile import write_world

    write_world(done.world, done.facts, tmp_path / "w.yaml")
    world, facts = read_world(tmp_path / "w.yaml")
    assert facts == done.facts and world.members == done.world.members


def test_rows_of_a_policy_without_its_ranger_policy_row_are_refused() -> None:
    done = import_ranger(EXPORT)
    done.facts["ranger_policy"] = {row for row in done.facts["ranger_policy"] if row[0] != "policy 117"}
    with pytest.raises(Refused) as refused:
        export_ranger(done.world, done.facts, "cdap")
    assert refused.value.lines == ["policy 117: has rows but no ranger_policy row: cannot be exported"]


def test_without_grants_back_a_grants_policy_is_a_ranger_policy_like_any_other() -> None:
    """Read back as grants, a Ranger deny would not take them away: only on request."""
    world = World()
    world.grants = {Grant("user:bob", "READ", parse_pattern("dataset:finance.sales_*"))}
    export, _, _ = export_ranger(world, {}, "cdap")
    done = import_ranger(export)
    assert done.world.grants == set() and done.imported == 1 and done.grants == 0
    key = f"policy {export['policies'][0]['id']}"
    assert (key, "allow", "user:bob", "READ") in done.facts["ranger_item"]
    assert (key, "dataset:finance.sales_*") in done.facts["ranger_resource"]
    assert "1 policies labelled privilog-grant imported as Ranger policies" in done.warnings[0]
