"""privilog ranger import: the rows it writes for each kind of policy (as data), its refusals, its summary.

The rows are compared as data (the facts' contract in docs/ranger.md), not through decisions: the
policy that decides over them (rules/ranger-cdap.policy) is written elsewhere.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from privilog.dsl.errors import PrivilogError
from privilog.engine.world import World

from privilog.ranger.importing import Imported, Refused, import_ranger
from privilog.ranger.worldfile import read_world

HERE = Path(__file__).parent
EXPORT = json.loads((HERE / "cdap-service-export.json").read_text())
ROLES = json.loads((HERE / "cdap-roles-export.json").read_text())


def rows(done: Imported, policy: int) -> dict[str, set[tuple[str, ...]]]:
    """One policy's rows, without the policy column."""
    key = f"policy {policy}"
    return {
        relation: {row[1:] for row in found if row[0] == key}
        for relation, found in done.facts.items()
        if relation != "ranger_user"
    }


@pytest.fixture(scope="module")
def sample() -> Imported:
    return import_ranger(EXPORT, "export.json", ROLES, "roles.json")


def resources(done: Imported, policy: int) -> tuple[set[str], set[str], set[str]]:
    mine = rows(done, policy)
    return (
        {r[0] for r in mine["ranger_resource"]},
        {r[0] for r in mine["ranger_inside"]},
        {r[0] for r in mine["ranger_exclude"]},
    )


def test_counts_of_the_sample(sample: Imported) -> None:
    assert (sample.policies, sample.imported, len(sample.disabled), sample.grants) == (46, 44, 2, 0)
    keys = {row[0] for row in sample.facts["ranger_policy"]}
    assert "policy 144" not in keys and "policy 145" not in keys  # disabled: written as nothing
    assert len(keys) == 44


def test_a_dataset_policy(sample: Imported) -> None:
    mine = rows(sample, 117)
    assert mine["ranger_policy"] == {("finance sales datasets",)}
    assert resources(sample, 117) == ({"dataset:finance.sales_*"}, {"instance:cdap", "namespace:finance"}, set())
    assert mine["ranger_item"] == {
        ("allow", "group:analysts", "READ"),
        ("allow", "role:etl-writers", "READ"),
        ("allow", "role:etl-writers", "WRITE"),
        ("allow_except", "user:analyst_on_leave", "READ"),
        ("deny", "user:intern1", "READ"),
        ("deny", "user:intern1", "WRITE"),
    }
    assert mine["ranger_override"] == mine["ranger_deny_all_else"] == set()


def test_match_any_levels_also_name_the_parent(sample: Imported) -> None:
    """{namespace: *, dataset: *}: SELF_AND_ALL_DESCENDANTS at the namespace and the instance too."""
    assert resources(sample, 106)[0] == {"dataset:*.*", "namespace:*", "instance:cdap"}
    assert resources(sample, 106)[1] == {"instance:cdap", "namespace:*"}
    # {namespace: hr, dataset: *}: the namespace hr itself, not the instance (hr is no match-any)
    assert resources(sample, 120)[0] == {"dataset:hr.*", "namespace:hr"}
    # ?* is not match-any: no parent
    assert resources(sample, 116)[0] == {"namespace:?*"}
    # the instance alone
    assert resources(sample, 101) == ({"instance:cdap"}, set(), set())


def test_several_values_are_a_cross_product(sample: Imported) -> None:
    assert resources(sample, 121)[0] == {"dataset:*.pii_*", "dataset:*.*_pii"}
    assert rows(sample, 121)["ranger_override"] == {()}
    assert ("deny", "public", "READ") in rows(sample, 121)["ranger_item"]
    assert ("deny_except", "role:privacy-officers", "READ") in rows(sample, 121)["ranger_item"]


def test_excludes(sample: Imported) -> None:
    # {namespace: [system, sandbox_*] excluded}
    assert resources(sample, 115) == ({"namespace:*"}, {"instance:cdap"}, {"namespace:system", "namespace:sandbox_*"})
    # {namespace: sandbox_* excluded, dataset: *}: the namespace level too, at and below it
    assert resources(sample, 122) == (
        {"dataset:*.*", "namespace:*"},
        {"instance:cdap", "namespace:*"},
        {"namespace:sandbox_*", "dataset:sandbox_*.*"},
    )
    # {namespace: finance, dataset: ledger* excluded}
    assert resources(sample, 124) == (
        {"dataset:finance.*"}, {"instance:cdap", "namespace:finance"}, {"dataset:*.ledger*"}
    )
    # {namespace: finance, application: *, program: spark.ml_* excluded}
    assert resources(sample, 129) == (
        {"program:finance.*.*.*"},
        {"instance:cdap", "namespace:finance", "application:finance.*"},
        {"program:*.*.spark.ml_*"},
    )
    # {principal: [hdfs*, cdap*] excluded}
    assert resources(sample, 143) == (
        {"kerberosprincipal:*"}, {"instance:cdap"}, {"kerberosprincipal:hdfs*", "kerberosprincipal:cdap*"}
    )


def test_programs_artifacts_principals(sample: Imported) -> None:
    assert resources(sample, 127)[0] == {"program:finance.etl_daily.workflow.?*"}
    assert resources(sample, 128)[0] == {"program:*.*.service.*"}
    assert resources(sample, 130)[0] == {
        "program:marketing.campaigns.mapreduce.aggregate",
        "program:marketing.campaigns.spark.score",
        "program:marketing.campaigns.worker.feeder",
    }
    assert resources(sample, 104)[0] == {"program:*.*.*.*", "application:*.*", "namespace:*", "instance:cdap"}
    assert resources(sample, 133)[0] == {
        "artifact:default.cdap-data-pipeline", "artifact:default.cdap-data-pipeline.*",
        "artifact:default.cdap-data-streams", "artifact:default.cdap-data-streams.*",
    }
    assert resources(sample, 142)[0] == {"kerberosprincipal:etl/*@EXAMPLE.COM"}
    assert resources(sample, 137)[0] == {"securekey:finance.db_password"}


def test_deny_all_else_delegates_users_and_roles(sample: Imported) -> None:
    assert rows(sample, 138)["ranger_deny_all_else"] == {()}
    assert rows(sample, 138)["ranger_delegate"] == {("user:security_admin",)}
    assert rows(sample, 101)["ranger_delegate"] == {("user:cdap",)}
    users = {u for (u,) in sample.facts["ranger_user"]}
    assert {"user:cdap", "user:intern1", "user:security_admin", "user:release_bot", "user:ops_lead"} <= users
    assert not any(u.startswith(("group:", "role:")) or u == "public" for u in users)
    members = sample.world.members
    assert ("role:etl-writers", "role:pipeline-operators") in members  # nested roles
    assert ("group:ops", "role:pipeline-operators") in members
    assert ("user:etl_svc", "role:etl-writers") in members


def test_secure_key_policies_are_imported_with_a_warning(sample: Imported) -> None:
    warned = [w for w in sample.warnings if "securekey" in w]
    assert len(warned) == 4 and any("policy 137 'finance db password'" in w for w in warned)


def _policy(pid: int, name: str, resources: dict[str, Any], **extra: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "id": pid, "name": name, "isEnabled": True, "policyType": 0, "policyPriority": 0,
        "resources": {
            level: {"values": v if isinstance(v, list) else [v], "isExcludes": False, "isRecursive": False}
            for level, v in resources.items()
        },
        "policyItems": [{"accesses": [{"type": "read", "isAllowed": True}], "users": ["alice"], "groups": [],
                         "roles": [], "conditions": [], "delegateAdmin": False}],
        "denyPolicyItems": [], "allowExceptions": [], "denyExceptions": [],
    }
    raw.update(extra)
    return raw


def _export(*policies: dict[str, Any]) -> dict[str, Any]:
    return {"metaDataInfo": {}, "policies": list(policies)}


def test_user_macro_in_items_is_public_and_excluded_star_is_about_nothing() -> None:
    excluded_star = _policy(1, "apps but all", {"instance": "cdap", "namespace": "finance", "application": "*"})
    excluded_star["resources"]["application"]["isExcludes"] = True
    excluded_star["policyItems"][0]["users"] = ["{USER}"]
    done = import_ranger(_export(excluded_star))
    assert resources(done, 1) == (
        {"application:finance.*"},
        {"instance:cdap", "namespace:finance"},
        {"application:*.*"},  # every application the policy names is excluded: it is about none
    )
    assert rows(done, 1)["ranger_item"] == {("allow", "public", "READ")}


def test_instance_is_matched_at_import() -> None:
    other = _policy(1, "prod only", {"instance": "prod*", "namespace": "finance"})
    done = import_ranger(_export(other))
    assert done.imported == 0 and done.other_instance == 1
    assert "does not match this world's `cdap`" in done.warnings[0]
    done = import_ranger(_export(other), instance="prod1")
    assert resources(done, 1)[0] == {"namespace:finance"}
    assert resources(done, 1)[1] == {"instance:prod1"}


def test_the_plugins_download_format_gives_the_same_rows(sample: Imported) -> None:
    download = {"serviceName": "cdap_prod", "serviceId": 3, "policyVersion": 77, "policies": EXPORT["policies"],
                "serviceDef": {"name": "cdap", "id": 11, "resources": []}, "auditMode": "audit-default"}
    assert import_ranger(download, roles=ROLES).facts == sample.facts
    with pytest.raises(Exception, match="not CDAP's"):
        import_ranger(download | {"serviceDef": {"name": "hive"}})


BAD = [
    (_policy(201, "masking", {"instance": "cdap"}, policyType=1), "masking policy"),
    (_policy(202, "row filter", {"instance": "cdap"}, policyType=2), "row filter policy"),
    (_policy(203, "conditions", {"instance": "cdap"}, conditions=[{"type": "ip-range", "values": ["10.*"]}]),
     "policy conditions"),
    (_policy(204, "schedule", {"instance": "cdap"}, validitySchedules=[{"startTime": "2026/01/01 00:00:00"}]),
     "validitySchedules"),
    (_policy(205, "more", {"instance": "cdap"}, additionalResources=[{"namespace": {"values": ["x"]}}]),
     "additionalResources"),
    (_policy(206, "zoned", {"instance": "cdap"}, zoneName="finance-zone"), "security zone"),
    (_policy(207, "macro", {"instance": "cdap", "namespace": "{USER}_sandbox"}), "resource macros"),
    (_policy(208, "unknown resource", {"instance": "cdap", "namespace": "x", "securekey": "k"}),
     "unknown resource `securekey`"),
    (_policy(209, "no hierarchy", {"instance": "cdap", "dataset": "x"}), "no hierarchy"),
    (_policy(210, "bad name", {"instance": "cdap", "namespace": "fin-ance"}), "not a valid namespace name"),
    (_policy(211, "no program", {"instance": "cdap", "namespace": "a", "application": "b", "program": "job.x"}),
     "matches no program"),
]


def _with_item_problems() -> list[tuple[dict[str, Any], str]]:
    owner = _policy(212, "owner", {"instance": "cdap"})
    owner["policyItems"][0]["users"] = ["{OWNER}"]
    access = _policy(213, "access", {"instance": "cdap"})
    access["policyItems"][0]["accesses"] = [{"type": "all", "isAllowed": True}]
    item_conditions = _policy(214, "item conditions", {"instance": "cdap"})
    item_conditions["denyPolicyItems"] = [dict(item_conditions["policyItems"][0], conditions=[{"type": "x"}])]
    excluded_instance = _policy(215, "instance excluded", {"instance": "cdap"})
    excluded_instance["resources"]["instance"]["isExcludes"] = True
    return [(owner, "{OWNER}"), (access, "unknown access type 'all'"), (item_conditions, "has conditions"),
            (excluded_instance, "`isExcludes` on `instance`")]


def test_every_refusal_is_collected_with_the_policys_id_and_name() -> None:
    cases = BAD + _with_item_problems()
    good = _policy(300, "fine", {"instance": "cdap", "namespace": "finance"})
    with pytest.raises(Refused) as refused:
        import_ranger(_export(good, *(raw for raw, _ in cases)))
    lines = refused.value.lines
    assert len(lines) == len(cases)
    for (raw, reason), line in zip(cases, lines, strict=True):
        assert line.startswith(f"policy {raw['id']} {raw['name']!r}: "), line
        assert reason in line, line


def test_a_disabled_policy_is_not_refused_but_skipped() -> None:
    masking = _policy(1, "old masking", {"instance": "cdap"}, policyType=1, isEnabled=False)
    done = import_ranger(_export(masking))
    assert done.disabled == ["policy 1 'old masking'"] and done.imported == 0


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "privilog", "ranger", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def test_the_command_refuses_writes_nothing_and_exits_2(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text(json.dumps(_export(*(raw for raw, _ in BAD))))
    done = _run("import", "bad.json", "-o", "out.yaml", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == len(BAD) + 1
    assert lines[0].startswith("privilog: ranger import: policy 201 'masking': is a masking policy")
    assert lines[-1] == f"privilog: ranger import: {len(BAD)} refused; nothing written"
    assert "Traceback" not in done.stderr and not (tmp_path / "out.yaml").exists()


def test_the_command_with_a_base_world_members_and_json(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(
        "instance: cdap\nentities: [namespace:finance, dataset:finance.sales_2026]\n"
        "grants: [[user:bob, READ, dataset:finance.sales_2026]]\nmembers: [[user:eve, group:analysts]]\n"
        "admins: [user:root]\n"
    )
    (tmp_path / "members.yaml").write_text("- [user:intern1, group:contractors]\n")
    export = copy.deepcopy(EXPORT)
    (tmp_path / "export.json").write_text(json.dumps(export))
    (tmp_path / "roles.json").write_text(json.dumps(ROLES))
    done = _run("import", "export.json", "--roles", "roles.json", "--world", "base.yaml", "--members",
                "members.yaml", "-o", "out.yaml", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["policies"] == 46 and summary["imported"] == 44 and summary["disabled"] == 2
    assert summary["disabled_policies"] == ["policy 144 'old finance access (disabled)'",
                                            "policy 145 'temporary marketing admin (disabled)'"]
    assert summary["members_added"] == 13
    world, facts = read_world(tmp_path / "out.yaml")
    assert world.entities and world.admins == {"user:root"}
    assert ("user:intern1", "group:contractors") in world.members and ("user:eve", "group:analysts") in world.members
    assert {("user:bob",), ("user:eve",)} <= facts["ranger_user"]
    assert len(facts["ranger_policy"]) == 44
    text = yaml.safe_load((tmp_path / "out.yaml").read_text())
    assert text["facts"]["ranger_override"] == [["policy 121"]]


def test_a_bad_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "export.json").write_text('{"policies": [1, }')
    done = _run("import", "export.json", "-o", "out.yaml", cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert "export.json:1:" in done.stderr
    (tmp_path / "export.json").write_text('{"items": []}')
    done = _run("import", "export.json", "-o", "out.yaml", cwd=tmp_path)
    assert done.returncode == 2 and "not a Ranger policies export" in done.stderr


def test_an_empty_world_when_no_base() -> None:
    done = import_ranger(_export(_policy(1, "x", {"instance": "cdap", "namespace": "a"})))
    assert done.world.grants == set() and done.world.entities == set() and isinstance(done.world, World)


def test_an_unwritable_output_and_malformed_items_are_one_line_each(tmp_path: Path) -> None:
    (tmp_path / "export.json").write_text(json.dumps(_export(_policy(1, "x", {"instance": "cdap"}))))
    done = _run("import", "export.json", "-o", "missing/out.yaml", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.splitlines() == [
        "privilog: ranger import: cannot write missing/out.yaml: No such file or directory"]
    odd = _policy(2, "odd", {"instance": "cdap"})
    odd["policyItems"] = [{"accesses": "read", "users": "bob"}]
    (tmp_path / "odd.json").write_text(json.dumps(_export(odd)))
    done = _run("import", "odd.json", "-o", "out.yaml", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[:2] == [
        "privilog: ranger import: policy 2 'odd': `users` of an item of `policyItems` is not a list",
        "privilog: ranger import: policy 2 'odd': `accesses` of an item of `policyItems` is not a list",
    ]


def test_a_base_worlds_other_facts_stay_and_its_ranger_facts_are_replaced(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(
        "instance: cdap\nfacts:\n  blocked: [['user:eve']]\n  ranger_policy: [['policy 99', old]]\n")
    (tmp_path / "export.json").write_text(json.dumps(_export(_policy(1, "x", {"instance": "cdap"}))))
    done = _run("import", "export.json", "--world", "base.yaml", "-o", "out.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "base.yaml: its ranger_* facts are replaced by the export's" in done.stderr
    _, facts = read_world(tmp_path / "out.yaml")
    assert facts["blocked"] == {("user:eve",)} and facts["ranger_policy"] == {("policy 1", "x")}


def test_a_change_log_left_beside_the_output_is_removed(tmp_path: Path) -> None:
    """The world written is the whole truth: an earlier file's log would otherwise be replayed over it."""
    (tmp_path / "out.yaml").write_text("instance: cdap\n")
    (tmp_path / "out.yaml.log").write_text('{"kind": "grant"}\n')
    (tmp_path / "export.json").write_text(json.dumps(_export(_policy(1, "x", {"instance": "cdap"}))))
    done = _run("import", "export.json", "-o", "out.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "out.yaml.log").exists()
    assert read_world(tmp_path / "out.yaml")[1]["ranger_policy"] == {("policy 1", "x")}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 3) | st.text("ab*?{}.:$ ", max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["values", "type", "name", "x"]),
                                                                inner, max_size=3),
    max_leaves=6,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += _paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += _paths(inner, (*prefix, index))
    return found


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_broken_export_is_refused_in_lines_never_a_crash(data: st.DataObject) -> None:
    """Any part of a policy replaced by any JSON value: imported, or refused with reasons (fail closed)."""
    raw = copy.deepcopy(data.draw(st.sampled_from(EXPORT["policies"])))
    path = data.draw(st.sampled_from(_paths(raw)[1:]))
    target = raw
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = data.draw(json_values)
    try:
        import_ranger(_export(raw))
    except Refused as error:
        assert error.lines and all("\n" not in line for line in error.lines)
    except PrivilogError as error:
        assert "\n" not in str(error)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_a_broken_roles_export_is_refused_in_lines_never_a_crash(data: st.DataObject) -> None:
    roles = copy.deepcopy(ROLES)
    path = data.draw(st.sampled_from(_paths(roles)[1:]))
    target = roles
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = data.draw(json_values)
    try:
        done = import_ranger(_export(), roles=roles)
    except Refused as error:
        assert error.lines and all("\n" not in line for line in error.lines)
    except PrivilogError as error:
        assert "\n" not in str(error)
    else:
        assert all(m.partition(":")[2] not in ("None", "") for pair in done.world.members for m in pair)


def test_the_briefs_cross_product_example() -> None:
    raw = _policy(5, "fin and hr sales", {"instance": "cdap", "namespace": ["fin*", "hr"], "dataset": ["sales_*"]})
    done = import_ranger(_export(raw))
    assert resources(done, 5) == (
        {"dataset:fin*.sales_*", "dataset:hr.sales_*"}, {"instance:cdap", "namespace:fin*", "namespace:hr"}, set()
    )
