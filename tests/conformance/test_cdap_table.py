"""What only rules/cdap.policy's table says, beyond the tests every table gets.

tests/conformance/test_tables.py turns every row of every table, cdap.yaml included, into
tests (suffice, necessary, unrequired grants don't help, groups, drift). Here: the rows of
seeds 003 and 004 that are easy to miss, the namespace-wide deletes on an empty namespace
(where their conjuncts stop overlapping), `ALL` in a grant, and a schedule driven through
a program of another application.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import privilog
from privilog import EntityId, Grant
from privilog.testing.conformance import Bench
from privilog.testing.table import case_label, load_table, ways_of

TABLE = load_table(Path(__file__).resolve().parent / "cdap.yaml")
ROWS = TABLE.rows
ALICE = "user:alice"

NAMESPACE_WIDE_DELETES = (
    "namespace.delete_all_applications",
    "namespace.drop_all_datasets",
    "namespace.delete_all_dataset_modules",
    "namespace.drop_all_streams",
)


def test_the_table_is_the_one_of_cdap() -> None:
    assert TABLE.policy == "cdap"
    assert TABLE.seeds == ("003", "004")
    assert len(ROWS) >= 60


def test_unsatisfiable_cases_are_exactly_the_missing_arguments() -> None:
    hopeless = {case_label(row, args) for row in ROWS for args in row.args if not all(ways_of(TABLE, row, args))}
    assert hopeless == {"application.deploy", "schedule.resume", "schedule.suspend"}


def test_every_documented_type_has_one_listing() -> None:
    listed = [row.entity_type for row in ROWS if row.verb == "shows"]
    assert sorted(listed) == sorted(
        {
            "namespace",
            "artifact",
            "application",
            "program",
            "dataset",
            "dataset_module",
            "dataset_type",
            "stream",
            "securekey",
        }
    )


def test_seed_rows_are_covered() -> None:
    """The rows of seeds 003 and 004 that are easy to miss."""
    by_op = {row.operation: row for row in ROWS}
    for op in ("namespace.create", "application.deploy", "dataset.create", "stream.create"):
        assert "owner" in by_op[op].arg_names, f"{op}: the Kerberos principal row"
        assert any("owner" in a for a in by_op[op].args), op
    for op in NAMESPACE_WIDE_DELETES:
        assert any(c.is_every for c in by_op[op].requires), op
    assert {r.operation for r in ROWS if r.seed == "004"} >= {
        "stream.create",
        "stream.read",
        "stream.write",
        "stream.get",
        "stream.update",
        "stream.truncate",
        "stream.drop",
        "stream.list",
        "namespace.drop_all_streams",
    }


# ---- the namespace-wide deletes --------------------------------------------------------------


@pytest.mark.parametrize("operation", NAMESPACE_WIDE_DELETES)
def test_namespace_wide_deletes_need_a_privilege_in_it(operation: str) -> None:
    """In a full namespace the "self or descendant" conjunct overlaps the "every" ones (ADMIN on
    every application is a privilege in the namespace); in an empty one it stands alone."""
    authz = privilog.load("cdap", {"entities": ["namespace:empty"]})
    request = authz.request(ALICE, operation, "namespace:empty")
    assert not authz.check(request).allowed  # nothing to delete, and no privilege: denied
    authz.world.grants = {Grant(ALICE, "READ", EntityId.parse("namespace:empty"))}
    authz.refresh()
    assert authz.check(request).allowed


def test_a_namespace_wide_delete_with_one_application_left_out_is_denied() -> None:
    row = TABLE.row("namespace.delete_all_applications")
    assert row is not None
    bench = Bench(TABLE)
    inside = [e for e in TABLE.entities if e.startswith(("application:ns1.", "program:ns1.", "schedule:ns1."))]
    everything = {(ALICE, "ADMIN", e) for e in inside}
    assert bench.allowed(row, {}, everything)
    for entity in inside:
        assert not bench.allowed(row, {}, everything - {(ALICE, "ADMIN", entity)}), entity


# ---- spot checks of the world format the table relies on ----------------------------------


def test_all_means_the_four_actions() -> None:
    authz = privilog.load(
        "cdap",
        {
            "entities": ["program:ns1.app.service.api"],
            "grants": [[ALICE, "ALL", "program:ns1.app.service.api"]],
        },
    )
    for op in ("program.start", "program.set_instances", "program.get_runtime_args", "program.get_status"):
        assert authz.check(authz.request(ALICE, op, "program:ns1.app.service.api")).allowed, op
    assert not authz.check(authz.request(ALICE, "application.delete", "application:ns1.app")).allowed


@pytest.mark.parametrize("operation", ["schedule.resume", "schedule.suspend"])
def test_a_schedule_cannot_be_driven_through_an_unrelated_program(operation: str) -> None:
    authz = privilog.load(
        "cdap",
        {
            "entities": [*TABLE.entities, "program:ns2.mine.service.x"],
            "grants": [["user:eve", "EXECUTE", "program:ns2.mine.service.x"]],
        },
    )
    own = authz.request("user:eve", operation, "schedule:ns2.mine.s", {"program": "program:ns2.mine.service.x"})
    assert authz.check(own).allowed  # her own application's schedule: yes
    # a schedule of ns1.app, which she cannot touch, named with her own program: a bad request
    with pytest.raises(privilog.RequestError, match=r"must be a program in application:ns1\.app"):
        authz.request("user:eve", operation, "schedule:ns1.app.nightly", {"program": "program:ns2.mine.service.x"})
