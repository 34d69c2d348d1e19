"""Small policies for the proofs: one that keeps every promise, and ways to break each."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from privilog.engine.world import World
from privilog.proofs.findings import Report
from privilog.proofs.load import ProvedPolicy, parse_proved
from privilog.proofs.prover import prove

HEADER = """policy {name}
actions READ, WRITE, EXECUTE, ADMIN
set any = READ | WRITE | EXECUTE | ADMIN
entity instance
entity namespace in instance
entity dataset in namespace
"""

# Keeps every promise of proofs/common.proof.
SOUND = """
namespace:
  create requires ADMIN
  delete requires ADMIN, ADMIN on every descendant
  list shows any on self or descendant
  get requires any on self or descendant
dataset:
  read requires READ
  drop requires ADMIN
  list shows any
  get requires any
"""


@contextmanager
def prelude_unchecked() -> Iterator[None]:
    """Let a policy add rules to the prelude's relations, which dsl.check refuses (issue 18).

    No policy that loads can do it; the prover is still tested on such policies, as the
    broken worlds a careless change to the prelude itself, or to the check, would make.
    """
    checks = importlib.import_module("privilog.dsl.check")  # `dsl.check` is also the name of its function
    saved = checks.PASSES
    checks.PASSES = tuple(p for p in saved if p[0] != "prelude")
    try:
        yield
    finally:
        checks.PASSES = saved


def proved(body: str, name: str = "test", proof: Path | None = None) -> ProvedPolicy:
    """A small policy (``body`` after the common header) with its promises."""
    return parse_proved(HEADER.format(name=name) + body, proof=proof)


def run(
    body: str, max_entities: int = 1, examples: int = 0, world_type: type[World] = World, proof: Path | None = None
) -> Report:
    """Prove a small policy (by default exhaustively only, which is deterministic and quick)."""
    return prove(proved(body, proof=proof), max_entities, examples, world_type)


def broken(report: Report) -> dict[str, list[str]]:
    """Each broken promise, with the operations it broke for."""
    return {v.promise.name: v.operations for v in report.verdicts if not v.held}
