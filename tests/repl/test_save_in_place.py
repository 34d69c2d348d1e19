"""`save world` in the REPL keeps the world file as written, changing only what changed (issue 12, item 6)."""

from __future__ import annotations

import shutil
from pathlib import Path

from privilog.repl.session import Session

SAMPLE = Path(__file__).resolve().parents[2] / "privilog" / "samples" / "world.yaml"


def test_save_world_changes_only_the_changed_lines(tmp_path: Path) -> None:
    path = tmp_path / "world.yaml"
    shutil.copy(SAMPLE, path)
    before = path.read_text().splitlines()
    session = Session("cdap", path)
    session.one_shot("grant user:erin READ namespace:marketing as user:root")
    session.one_shot("revoke user:alice ADMIN namespace:sales as user:root")
    assert session.one_shot("save world").startswith(f"saved the world to {path}")
    after = path.read_text().splitlines()
    alice = before.index("  - [user:alice, ALL, namespace:sales]")
    last = before.index("  - [user:carol, ADMIN, application:sales.reports]   # granted before the app exists")
    expected = list(before)
    expected[alice] = "  - [user:alice, [READ, WRITE, EXECUTE], namespace:sales]"
    expected.insert(last + 1, "  - [user:erin, READ, namespace:marketing]")
    assert after == expected
