"""Each engine behind the same few calls, and how each is loaded from a world.

An adapter has ``allows(principal, operation, entity, args)`` and
``visible(principal, type, namespace)`` (the calls that are timed, as bare as
the engine allows), and optionally ``why`` (privilog's explanation),
``grant``/``revoke`` (one grant, applied so the next check sees it).
``visible_set`` turns a visible answer into a set of ids for comparison.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from benchmarks.engines import rego
from benchmarks.engines.floor import Floor, existing_entities
from benchmarks.engines.workload import ADMIN_PRINCIPAL

PRIVILOG_PREFIX = "privilog-"
ALL_ENGINES = ("floor", "regorus", "regorus-rvm", "privilog-compiled", "privilog-pydatalog")


def backend_of(engine: str) -> str | None:
    return engine[len(PRIVILOG_PREFIX):] if engine.startswith(PRIVILOG_PREFIX) else None


def unavailable(engine: str) -> str | None:
    """None if ``engine`` can run here, else why not."""
    if engine in ("regorus", "regorus-rvm"):
        return rego.available()
    backend = backend_of(engine)
    if backend is not None:
        from privilog.engine.authorizer import Authorizer

        from privilog import dsl

        try:
            Authorizer(dsl.load_policy("cdap"), None, backend)
        except Exception as error:  # an unknown backend, or one that fails to start
            return f"{type(error).__name__}: {error}"
        return None
    if engine == "floor":
        return None
    return f"unknown engine `{engine}` (engines: {', '.join(ALL_ENGINES)})"


class Privilog:
    """privilog's Authorizer on one backend."""

    def __init__(self, backend: str, world: Any, policy: Any = None):
        from privilog.engine.authorizer import Authorizer
        from privilog.engine.ids import EntityId
        from privilog.engine.world import Grant

        from privilog import dsl

        self.name = PRIVILOG_PREFIX + backend
        self.authz = authz = Authorizer(policy if policy is not None else dsl.load_policy("cdap"), world, backend)
        self.allows = authz.allows
        self.visible = authz.visible_entities  # which entities, as the others answer; `why` times explaining
        check, request = authz.check, authz.request
        grant, revoke, parse = authz.grant, authz.revoke, EntityId.parse

        def why(principal: str, operation: str, entity: str, args: Mapping[str, Any] | None = None) -> Any:
            return check(request(principal, operation, entity, args))

        def add(principal: str, action: str, entity: str) -> Any:
            return grant(ADMIN_PRINCIPAL, [Grant(principal, action, parse(entity))])

        def remove(principal: str, action: str, entity: str) -> Any:
            return revoke(ADMIN_PRINCIPAL, [Grant(principal, action, parse(entity))])

        self.why: Callable[..., Any] | None = why
        self.grant: Callable[..., Any] | None = add
        self.revoke: Callable[..., Any] | None = remove

    @staticmethod
    def visible_set(result: Any) -> frozenset[str]:
        return frozenset(str(v) for v in result)


class FloorAdapter:
    def __init__(self, data: Mapping[str, Any]):
        self.floor = floor = Floor(data)
        self.name = "floor"
        self.allows = floor.allows
        self.visible = floor.visible
        self.why = None
        self.grant = floor.grant
        self.revoke = floor.revoke

    @staticmethod
    def visible_set(result: Any) -> frozenset[str]:
        return frozenset(result)


class RegoAdapter:
    def __init__(self, engine: str, data: Mapping[str, Any]):
        text = json.dumps(rego.rego_data(data))
        make = rego.Regorus if engine == "regorus" else rego.RegorusRvm
        self.impl = make(text, existing_entities(data))
        self.name = engine
        self.allows = self.impl.allows
        self.visible = self.impl.visible
        self.why = None
        self.grant = self.impl.grant
        self.revoke = self.impl.revoke

    @staticmethod
    def visible_set(result: Any) -> frozenset[str]:
        return rego.visible_set(result)


def build(engine: str, data: Mapping[str, Any], world: Any = None, policy: Any = None) -> Any:
    """An adapter for ``engine`` over a world given as file-format data (and, for privilog, a World)."""
    if engine == "floor":
        return FloorAdapter(data)
    if engine in ("regorus", "regorus-rvm"):
        return RegoAdapter(engine, data)
    backend = backend_of(engine)
    if backend is None:
        raise ValueError(f"unknown engine `{engine}`")
    return Privilog(backend, world, policy)
