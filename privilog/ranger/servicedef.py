"""CDAP's Ranger service definition (``ranger-servicedef-cdap.json``), as the import reads it.

The levels of a resource, their parents, the privilog entity type each level's entities have,
and the access types. A policy's resource names a path of levels from ``instance`` down one of
the hierarchies: instance; instance > namespace; instance > namespace > application > program;
instance > namespace > (artifact | dataset | dataset_module | dataset_type | secure_key | stream);
instance > principal.
"""

from __future__ import annotations

# level -> its parent level (None for the top)
PARENT: dict[str, str | None] = {
    "instance": None,
    "namespace": "instance",
    "application": "namespace",
    "program": "application",
    "artifact": "namespace",
    "dataset": "namespace",
    "dataset_module": "namespace",
    "dataset_type": "namespace",
    "secure_key": "namespace",
    "stream": "namespace",
    "principal": "instance",
}

# level -> the privilog entity type of the entities at that level
ENTITY_TYPE: dict[str, str] = {
    "instance": "instance",
    "namespace": "namespace",
    "application": "application",
    "program": "program",
    "artifact": "artifact",
    "dataset": "dataset",
    "dataset_module": "dataset_module",
    "dataset_type": "dataset_type",
    "secure_key": "securekey",
    "stream": "stream",
    "principal": "kerberosprincipal",
}
LEVEL_OF_TYPE: dict[str, str] = {t: level for level, t in ENTITY_TYPE.items()}

# Ranger access type -> privilog action
ACCESSES: dict[str, str] = {"read": "READ", "write": "WRITE", "execute": "EXECUTE", "admin": "ADMIN"}
ACCESS_OF: dict[str, str] = {action: access for access, action in ACCESSES.items()}

# policy item lists -> the kind of ranger_item rows they make
ITEM_KINDS: dict[str, str] = {
    "policyItems": "allow",
    "allowExceptions": "allow_except",
    "denyPolicyItems": "deny",
    "denyExceptions": "deny_except",
}
ITEM_LIST_OF: dict[str, str] = {kind: key for key, kind in ITEM_KINDS.items()}


def path_to(level: str) -> list[str]:
    """The levels from ``instance`` down to ``level``: ``path_to("program")`` is instance,
    namespace, application, program."""
    chain: list[str] = []
    current: str | None = level
    while current is not None:
        chain.append(current)
        current = PARENT[current]
    return chain[::-1]


def hierarchy(levels: set[str]) -> list[str] | None:
    """The levels in order when they are a path from ``instance`` down one hierarchy, else None.

    >>> hierarchy({"dataset", "namespace", "instance"})
    ['instance', 'namespace', 'dataset']
    >>> hierarchy({"instance", "dataset"}) is None
    True
    """
    if not levels or not levels <= set(PARENT):
        return None
    for deepest in levels:
        path = path_to(deepest)
        if set(path) == levels:
            return path
    return None
