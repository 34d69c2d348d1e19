"""An independent oracle for rules/cdap.policy, read straight from tests/conformance/cdap.yaml.

The interpreter of conformance tables lives in privilog/testing/table.py (``privilog test
--report`` uses it too): plain Python, no pyDatalog, no engine internals; entity ids are
parsed there from CDAP's id scheme, so the hierarchy is not borrowed from the engine
either. This module re-exports it, with the cdap table as the default.

>>> table = load_table()
>>> world = OracleWorld(
...     entities=["dataset:ns1.ds"],
...     grants=[("user:a", "ADMIN", "namespace:ns1"), ("group:g", "READ", "dataset:ns1.ds")],
...     members=[("user:a", "group:g")],
... )
>>> world.allowed(table, "user:a", "dataset.read", "dataset:ns1.ds")
True
>>> world.allowed(table, "user:a", "namespace.delete", "namespace:ns1")
False
>>> sorted(world.visible(table, "user:a", "namespace"))
['namespace:ns1']
"""

from __future__ import annotations

from pathlib import Path

from privilog.testing import table as conformance_table
from privilog.testing.table import (
    ACTIONS,
    INSTANCE,
    Alternative,
    Conjunct,
    Granted,
    Need,
    Row,
    Table,
    ancestors,
    entity_type,
    given,
    parent,
)
from privilog.testing.table import TableWorld as OracleWorld

__all__ = [
    "ACTIONS",
    "INSTANCE",
    "TABLE_PATH",
    "Alternative",
    "Conjunct",
    "Granted",
    "Need",
    "OracleWorld",
    "Row",
    "Table",
    "ancestors",
    "entity_type",
    "given",
    "load_table",
    "parent",
]

TABLE_PATH = Path(__file__).resolve().parents[1] / "conformance" / "cdap.yaml"


def load_table(path: Path = TABLE_PATH) -> Table:
    """A conformance table; by default cdap.policy's."""
    return conformance_table.load_table(path)
