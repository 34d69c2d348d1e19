"""`privilog diff ranger-cdap cdap-5.1 --world IMPORTED`: Ranger's reading of a deployment's policies
against CDAP's (cdap-5.1 decides on their allow items as CDAP grants), over the realistic export and
the inventory of the deployment it serves (tests/ranger/cdap-inventory.yaml)."""

from __future__ import annotations

from pathlib import Path

import pytest

from privilog.cli import main
from privilog.ranger.reading import cdap_reading
from privilog.ranger.worldfile import read_world

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ranger") / "imported.yaml"
    status = main(
        [
            "ranger", "import", str(HERE / "cdap-service-export.json"), "--roles", str(HERE / "cdap-roles-export.json"),
            "--world", str(HERE / "cdap-inventory.yaml"), "-o", str(out),
        ]
    )
    assert status == 0
    return out


def test_the_diff_names_each_kind_of_difference(imported: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["diff", "ranger-cdap", "cdap-5.1", "--world", str(imported)]) == 1
    out, err = capsys.readouterr()
    lines = {line.strip() for line in out.splitlines()}
    # CDAP's plugin asks Ranger about `securekey`, which no policy matches; CDAP reads the grant
    assert "deny → allow  user:etl_svc securekey.read securekey:finance.db_password" in lines
    # a deny item (policy 117) that CDAP has no counterpart for
    assert "deny → allow  user:analyst_on_leave dataset.read dataset:finance.sales_2026" in lines
    # an excluded level (policy 122: auditors read datasets outside sandboxes): CDAP cannot say it
    assert "allow → deny  user:hr_auditor_ext dataset.read dataset:hr.salaries" in lines
    # visibility: Ranger counts groups and roles, cdap-5.1's listing a user's own privileges only
    assert "allow → deny  user:ops_lead program.list program:finance.etl_daily.service.api" in lines
    assert err.startswith("note: cdap-5.1 does not read Ranger's policies: it decides on their allow items as CDAP grants")
    assert len(err.strip().splitlines()) == 1


def test_a_policy_against_itself_on_the_imported_world_agrees(imported: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "ranger-cdap", "ranger-cdap", "--world", str(imported)]) == 0
    assert capsys.readouterr().err == ""


def test_cdaps_reading_is_the_allow_items_as_grants(imported: Path) -> None:
    world, _ = read_world(imported)
    reading = cdap_reading(world)
    grants = {(g.principal, g.action, str(g.entity)) for g in reading.world.grants}
    assert not any(r.startswith("ranger_") for r in reading.world.facts)
    # policy 117: analysts read finance's sales datasets (its deny item and exception not read)
    assert ("group:analysts", "READ", "dataset:finance.sales_*") in grants
    # `public` is every user the world knows
    assert {p for p, a, e in grants if e == "dataset_type:*.table"} >= {"user:intern1", "user:security_admin"}
    unread = "\n".join(reading.unread)
    assert "policy 122 'datasets outside sandboxes: auditors read': an excluded level" in unread
    assert "policy 117 'finance sales datasets': allow_except, deny" in unread
    assert not any(p == "group:auditors" and e.startswith("dataset:*") for p, a, e in grants)


def test_why_names_the_ranger_policy_that_denied(imported: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    world = ["--policy", "ranger-cdap", "--world", str(imported)]
    assert main(["why", "user:dev1", "dataset.read", "dataset:finance.customers_pii", *world]) == 1
    out = capsys.readouterr().out.splitlines()
    assert (
        "Ranger: policy 121 'pii datasets: nobody but privacy officers' denies READ on "
        "dataset:finance.customers_pii to user:dev1"
    ) in out
    assert out[-1] == "Ranger: CDAP refuses grants under Ranger: make a change above as a policy in Ranger Admin"
    assert main(["why", "user:dev1", "dataset.read", "dataset:finance.ledger", *world]) == 1
    assert "Ranger: no policy allows READ on dataset:finance.ledger to user:dev1" in capsys.readouterr().out
    assert main(["why", "user:etl_svc", "securekey.read", "securekey:finance.db_password", *world]) == 1
    assert "CDAP's plugin asks about `securekey`" in capsys.readouterr().out
    assert main(["why", "user:hr_auditor_ext", "dataset.read", "dataset:hr.salaries", *world]) == 0
    out = capsys.readouterr().out
    assert "by policy 122" in out and "Ranger:" not in out
