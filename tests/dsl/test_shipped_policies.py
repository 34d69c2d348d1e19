"""Every policy shipped in rules/ loads, passes the checks, and is already in canonical form."""

from __future__ import annotations

from pathlib import Path

import pytest

from privilog import dsl

SHIPPED = sorted(dsl.rules_dir().glob("*.policy"))


def test_there_are_shipped_policies() -> None:
    assert "cdap" in [p.stem for p in SHIPPED]


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_policy_loads(path: Path) -> None:
    policy = dsl.load_policy(path.stem)
    assert policy.operations


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_policy_is_canonical(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert dsl.format_text(text, str(path)) == text, f"run `privilog fmt --write {path.stem}`"


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_policy_survives_format_policy(path: Path) -> None:
    """The IR printed back (statements regrouped, comments dropped) parses to the same IR."""
    policy = dsl.parse_unchecked(path.read_text(encoding="utf-8"), str(path))
    assert dsl.parse_unchecked(dsl.format_policy(policy), str(path)) == policy


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_a_shipped_policy_is_named_as_its_file(path: Path) -> None:
    assert dsl.load_policy(path.stem).name == path.stem  # `cdap-4.2`, as --policy names it


def test_a_policy_name_may_have_dashes_and_dots_but_not_end_in_one() -> None:
    header = "actions READ\nentity instance\n"
    assert dsl.parse_policy(f"policy my-policy.v2\n{header}", "<policy>").name == "my-policy.v2"
    assert dsl.parse_policy(header, "rules/site-1.0.policy").name == "site-1.0"
    assert dsl.parse_policy(header, "odd name!.policy").name == "odd_name"
    with pytest.raises(dsl.PolicyError, match="unexpected"):
        dsl.parse_policy(f"policy mine-\n{header}", "<policy>")
