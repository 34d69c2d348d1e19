"""Golden files for what a user reads: explanations, listings, and `privilog --help`.

Regenerate with PRIVILOG_REGEN_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from privilog.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent / "explanations"
SAMPLE = "privilog/samples/world.yaml"
BLOCKLIST = ["--policy", "tests/golden/blocklist.policy"]

CASES = {
    "why-allow-through-group-and-descendant": ["why", "user:dave", "namespace.get", "namespace:marketing"],
    "why-deny-partial-delete": ["why", "user:alice", "namespace.delete", "namespace:sales"],
    "why-deploy-existing-artifact-via-role": [
        "why", "user:carol", "application.deploy", "application:sales.reports", "--arg", "artifact=artifact:sales.etl-lib",
    ],
    "why-deploy-new-artifact-denied": [
        "why", "user:carol", "application.deploy", "application:sales.reports",
        "--arg", "artifact=artifact:sales.etl-lib", "--arg", "new_artifact=true",
    ],
    "why-deploy-missing-artifact": ["why", "user:carol", "application.deploy", "application:sales.reports"],
    "why-deny-join-group-suggested": ["why", "user:erin", "dataset.read", "dataset:marketing.campaigns"],
    # a request the policy's own rule denies: the rule, its proof, and what takes a premise away
    "why-deny-rule-through-group": ["why", "user:dave", "dataset.read", "dataset:marketing.campaigns", *BLOCKLIST],
    "why-deny-rule-policy-fact": ["why", "user:mallory", "dataset.read", "dataset:sales.orders", *BLOCKLIST],
    "check-deny-rule": ["check", "user:dave", "dataset.read", "dataset:marketing.campaigns", *BLOCKLIST],
    "list-bob": ["list", "user:bob"],
    "list-nothing": ["list", "user:zoe", "dataset", "--in", "namespace:sales"],
}


def _check(name: str, text: str) -> None:
    golden = HERE / f"{name}.txt"
    if os.environ.get("PRIVILOG_REGEN_GOLDEN"):
        golden.write_text(text)
    assert golden.exists(), f"no golden file {golden}; run with PRIVILOG_REGEN_GOLDEN=1"
    assert text == golden.read_text()


@pytest.mark.parametrize("name", sorted(CASES))
def test_explanation(name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    main([*CASES[name], "--world", SAMPLE])
    out, err = capsys.readouterr()
    _check(name, out + (f"==== stderr\n{err}" if err else ""))  # notes on unknown names go to stderr


def test_help(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    parser = build_parser()
    text = parser.format_help()
    for action in parser._subparsers._group_actions:  # type: ignore[union-attr]
        for name, sub in action.choices.items():
            text += f"\n==== privilog {name} --help\n" + sub.format_help()
    _check("help", text)
