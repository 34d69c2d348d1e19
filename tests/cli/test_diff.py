"""`privilog diff`: differences between policies, each with a witness both policies were run on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from privilog.engine.authorizer import Authorizer
from privilog.engine.compare import Comparison

from privilog import dsl
from privilog.cli import main

ROOT = Path(__file__).resolve().parents[2]
BASE = "actions READ, WRITE, EXECUTE, ADMIN\nset any = READ | WRITE | EXECUTE | ADMIN\nentity instance\nentity namespace in instance\nentity dataset in namespace\n"


def policy(name: str, ops: str) -> dsl.Policy:
    return dsl.parse_policy(f"policy {name}\n{BASE}{ops}")


def test_identical_policies_agree() -> None:
    a = policy("a", "dataset:\n  read requires READ\n  drop requires ADMIN\n")
    assert not any(d.differs for d in Comparison(a, a).compare())


def test_a_hierarchical_grant_is_found_and_checked() -> None:
    old = policy("old", "dataset:\n  drop requires ADMIN on self | namespace\n")
    new = policy("new", "dataset:\n  drop requires ADMIN\n")
    (diff,) = Comparison(old, new).compare()
    assert diff.left == ("ADMIN on self | namespace",) and diff.right == ("ADMIN",)
    (witness,) = diff.witnesses
    assert (witness.allowed_by, witness.denied_by) == ("old", "new")
    assert [str(g) for g in witness.grants] == ["user:u ADMIN namespace:ns1"]
    # the witness is real: evaluate both policies on it again
    for checked, expected in ((old, True), (new, False)):
        authz = Authorizer(checked, witness.world)
        assert authz.check(authz.request("user:u", "dataset.drop", "dataset:ns1.ds")).allowed is expected


def test_differences_written_alike_are_found_through_descendants() -> None:
    a = policy("a", "namespace:\n  get requires any\n")
    b = policy("b", "namespace:\n  get requires any on self or descendant\n")
    (diff,) = Comparison(a, b).compare()
    (witness,) = diff.witnesses
    assert witness.allowed_by == "b"
    assert witness.grants[0].entity.type == "dataset"  # a grant inside the namespace
    assert {str(e) for e in witness.world.entities} == {"namespace:ns1", "dataset:ns1.ds"}


def test_equivalent_but_differently_written_requirements_have_no_witness() -> None:
    a = policy("a", "dataset:\n  update requires ADMIN on self | namespace, READ on namespace\n")
    b = policy("b", "dataset:\n  update requires ADMIN on namespace | self,\n                  READ on namespace\n")
    (diff,) = Comparison(a, b).compare()
    assert not diff.differs


def test_conditions_on_arguments_are_explored() -> None:
    a = policy("a", "dataset:\n  create($owner: namespace) requires ADMIN\n")
    b = policy("b", "dataset:\n  create($owner: namespace) requires ADMIN, ADMIN on $owner if $owner\n")
    (diff,) = Comparison(a, b).compare()
    (witness,) = diff.witnesses
    assert witness.allowed_by == "a"
    assert dict(witness.request.args) == {"owner": "namespace:ns1arg"}


def test_operations_in_one_policy_only() -> None:
    a = policy("a", "dataset:\n  read requires READ\n")
    b = policy("b", "dataset:\n  read requires READ\n  write requires WRITE\n")
    diffs = {d.operation: d for d in Comparison(a, b).compare()}
    assert diffs["dataset.write"].left is None and diffs["dataset.write"].differs
    assert not diffs["dataset.read"].differs


def test_cli_diff_of_the_hierarchical_and_current_policy(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["diff", "cdap-4.2", "cdap"])
    out = capsys.readouterr().out
    assert code == 1
    assert "program.start\n  cdap-4.2: EXECUTE on self | application | namespace, READ on namespace\n  cdap:     EXECUTE\n" in out
    assert "cdap-4.2 allows, cdap denies: user:u program.start program:ns1.app.service.prog" in out
    assert "cdap allows, cdap-4.2 denies: user:u program.start program:ns1.app.service.prog" in out
    assert "Only in cdap (8): namespace.delete_all_applications" in out


def test_cli_diff_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["diff", "cdap-proposed", "cdap", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1
    ops = {o["operation"]: o for o in data["operations"]}
    delete = ops["application.delete"]
    assert delete["left"] == ["ADMIN"] and delete["right"] == ["ADMIN", "ADMIN on every descendant"]
    (witness,) = delete["witnesses"]
    assert witness["allowed_by"] == "cdap-proposed" and witness["denied_by"] == "cdap"


def test_cli_diff_over_a_world(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["diff", "cdap-4.2", "cdap", "--world", str(ROOT / "privilog" / "samples" / "world.yaml"), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1
    delete = data["changed"]["namespace.delete"]
    assert delete["count"] == 1 and delete["allow_to_deny"] == 1
    assert delete["decisions"][0]["request"]["principal"] == "user:alice"


def test_cli_diff_same_policy_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "cdap", "cdap"]) == 0
    assert "0 of 60 shared operations decide differently" in capsys.readouterr().out


def test_cli_diff_over_a_world_with_a_wildcard_grant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A wildcard grant's pattern is no request's entity: the entities it matches are decided (it was refused)."""
    world = tmp_path / "wild.yaml"
    world.write_text(
        'entities: [namespace:ns1, "application:ns1.app"]\n'
        'grants:\n  - [user:a, ADMIN, "application:ns1.*"]\n  - [user:a, ADMIN, namespace:ns1]\n'
    )
    code = main(["diff", "cdap-4.2", "cdap", "--world", str(world), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1, data
    changed = {d["request"]["entity"] for ds in data["changed"].values() for d in ds["decisions"]}
    assert changed and not any("*" in e for e in changed)
