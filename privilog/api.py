"""The public Python API.

>>> import privilog
>>> authz = privilog.load("cdap", {"grants": [["user:alice", "ADMIN", "namespace:ns1"]]})
>>> authz.check(authz.request("user:alice", "namespace.create", "namespace:ns1")).allowed
True
>>> decision = authz.check(authz.request("user:bob", "namespace.create", "namespace:ns1"))
>>> decision.allowed, [str(c) for fix in decision.fixes for c in fix]
(False, ['grant ADMIN on namespace:ns1 to user:bob'])
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from privilog import dsl
from privilog.dsl.ir import Policy
from privilog.engine.authorizer import Authorizer
from privilog.engine.world import World, load_world, world_from_data


def load_world_for(policy: Policy, world: str | Path | World | dict[str, Any] | None, bind: bool = False) -> World:
    """A world from a path (a YAML or JSON file, or tables), a mapping in the file format, or a World (None: empty)."""
    if world is None:
        return World()
    if isinstance(world, World):
        return world
    if isinstance(world, dict):
        return world_from_data(world, policy.actions)
    return load_world(world, policy.actions, bind=bind)


def load(
    policy: str | Policy = "cdap",
    world: str | Path | World | dict[str, Any] | None = None,
    backend: str = "compiled",
    bind: bool = False,
) -> Authorizer:
    """An authorizer for ``policy`` (a name in rules/ or a path) over ``world``.

    With ``bind``, each change made through the authorizer (``authorizer.grant``, ...)
    or its world is appended to the world file's change log under the file's lock,
    after what other writers changed is read in (docs/reference/python.md, "A world bound to its file");
    ``authorizer.world.take_in()`` reads others' changes without making one. After
    changing ``authorizer.world`` by hand, call ``authorizer.refresh()``.
    """
    checked = policy if isinstance(policy, Policy) else dsl.load_policy(policy)
    return Authorizer(checked, load_world_for(checked, world, bind), backend)
