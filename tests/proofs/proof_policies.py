"""Small policies for the proofs: one that keeps every promise, and ways to break each."""

from __future__ import annotations

from pathlib import Path

from engine.world import World
from proofs.findings import Report
from proofs.load import ProvedPolicy, parse_proved
from proofs.prover import prove

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
