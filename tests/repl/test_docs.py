"""The REPL transcripts in the documentation are true: replayed in one session, they print what they show."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from privilog.repl import Session

ROOT = Path(__file__).resolve().parents[2]
PROMPT, CONTINUED = "privilog> ", "      ... "


def transcripts() -> list[list[str]]:
    """The console blocks that hold REPL prompts, from docs/repl.md."""
    text = (ROOT / "docs" / "repl.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```console\n(.*?)```", text, flags=re.S)
    return [block.splitlines() for block in blocks if PROMPT in block]


def exchanges(lines: list[str]) -> list[tuple[str, str]]:
    """(what was typed, what it printed) pairs; a `$` line and the banner are not part of it."""
    pairs: list[tuple[list[str], list[str]]] = []
    for line in lines:
        if line.startswith(PROMPT):
            pairs.append(([line.removeprefix(PROMPT)], []))
        elif line.startswith(CONTINUED) and pairs and not pairs[-1][1]:
            pairs[-1][0].append(line.removeprefix(CONTINUED))
        elif pairs:
            pairs[-1][1].append(line)
    return [("\n".join(typed), "\n".join(printed)) for typed, printed in pairs]


def test_the_documented_transcripts_replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = transcripts()
    assert blocks, "no REPL transcript found in the documentation"
    world = tmp_path / "privilog" / "samples" / "world.yaml"
    world.parent.mkdir(parents=True)
    shutil.copy(ROOT / "privilog" / "samples" / "world.yaml", world)
    monkeypatch.chdir(tmp_path)  # the transcript names the sample world by its path in the repository
    session = Session("cdap", "privilog/samples/world.yaml")
    for block in blocks:
        for typed, printed in exchanges(block):
            assert session.one_shot(typed) == printed, typed
