"""Seed 000's comment thread, asked of every policy version; docs/versions.md shows the answers.

The scenario files in tests/scenarios/debate/ are the source: each is run through
`privilog test`, and the table of docs/versions.md ("The seeds' own debate") is rendered
from them (regenerate it with PRIVILOG_REGEN_GOLDEN=1).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml

from privilog.cli import main

ROOT = Path(__file__).resolve().parents[2]
DEBATE = ROOT / "tests" / "scenarios" / "debate"
POLICIES = ["cdap-draft", "cdap-draft-revised", "cdap-4.2", "cdap-proposed", "cdap"]
START, END = "<!-- debate-table -->", "<!-- /debate-table -->"


def render_table() -> str:
    answers: dict[str, dict[str, str]] = {}
    questions: dict[str, str] = {}
    for policy in POLICIES:
        doc = yaml.safe_load((DEBATE / f"{policy}.yaml").read_text())
        for case in doc["cases"]:
            key, _, text = case["name"].partition(": ")
            questions.setdefault(key, text)
            answers.setdefault(key, {})[policy] = case["expect"]
    lines = ["| question | " + " | ".join(f"`{p}`" for p in POLICIES) + " |", "|---|" + "---|" * len(POLICIES)]
    for key, text in questions.items():
        cells = [answers[key].get(p, "n/a") for p in POLICIES]
        lines.append(f"| {text} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


@pytest.mark.parametrize("policy", POLICIES)
def test_each_policy_answers_as_recorded(policy: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["test", str(DEBATE / f"{policy}.yaml")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert re.search(r"^\d+ passed, 0 failed$", out, re.M)


def test_the_docs_show_the_table() -> None:
    page = ROOT / "docs" / "versions.md"
    text = page.read_text()
    table = render_table()
    if os.environ.get("PRIVILOG_REGEN_GOLDEN"):
        before, _, rest = text.partition(START)
        _, _, after = rest.partition(END)
        page.write_text(f"{before}{START}\n{table}\n{END}{after}")
        text = page.read_text()
    assert f"{START}\n{table}\n{END}" in text
