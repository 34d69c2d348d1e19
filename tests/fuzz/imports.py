"""Store imports: mutated world files through ``privilog store import`` (in-process, a new SQLite
store each), as an operator runs it. Exit 0 or 2 with one ``privilog:`` line; never exit 3."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

from tests.fuzz.cli import run_main
from tests.fuzz.harness import Case, Verdict
from tests.fuzz.worlds import generate as generate_worlds
from tests.fuzz.worlds import world_file


def generate(rng: random.Random, count: int) -> Iterator[Case]:
    for case in generate_worlds(rng, count):
        if "data" in case:  # the command reads files only
            yield {"suffix": ".json", "text": json.dumps(case["data"])}
        else:
            yield case


def run(case: Case, context: Any) -> Verdict:
    store = context.scratch / "import.db"
    for leftover in context.scratch.glob("import.db*"):
        leftover.unlink()
    path = world_file(case, context, "import")
    return run_main(["store", "import", str(path), "--store", str(store)])
