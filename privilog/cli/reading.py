"""The world as a policy reads it: what `privilog diff --world` and `privilog pipeline ... --world` share.

A world imported from Ranger (`privilog ranger import`) holds Ranger's policies as `ranger_*` facts.
A policy that declares `ranger_item` reads them itself (ranger-cdap); one that does not (cdap-5.1,
cdap) decides on their allow items as CDAP grants (privilog.ranger.reading), and a note on stderr
says so. The decision lives here, in the command line, because it joins two rooms: the pipeline
may not import privilog.ranger, so the command line hands it this function (``read_by``).
"""

from __future__ import annotations

import sys

from privilog.dsl.ir import Policy
from privilog.engine.world import World


def read_by(policy: Policy, name: str, world: World) -> World:
    """The world as ``policy`` (called ``name``) reads it: a policy that does not read Ranger's
    policies (a world's `ranger_*` facts) decides on their allow items as CDAP grants, and a note on
    stderr says so (privilog.ranger.reading)."""
    if "ranger_item" not in world.facts or "ranger_item" in {r.name for r in policy.relations}:
        return world
    from privilog.ranger.reading import cdap_reading

    reading = cdap_reading(world)
    print(reading.note(name), file=sys.stderr)
    return reading.world
