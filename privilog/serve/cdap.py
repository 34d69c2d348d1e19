"""CDAP's JSON shapes of entities, principals and privileges, to and from privilog's ids.

CDAP's authorization REST API (``/v3/security/authorization``) sends an entity as
the JSON form of its ``EntityId`` class (``{"entity": "DATASET", "namespace":
"ns1", "dataset": "ds"}``) and a principal as ``{"name": "alice", "type":
"USER"}``. privilog's ids are CDAP's authorization ids in text
(``dataset:ns1.ds``, ``user:alice``), so this module also takes those texts.
Versions (of applications, artifacts, programs) are not part of an
authorization id: a ``version`` field is accepted and ignored.

>>> str(entity_from_json({"entity": "PROGRAM", "namespace": "ns1", "application": "app",
...                       "version": "-SNAPSHOT", "type": "Service", "program": "api"}))
'program:ns1.app.service.api'
>>> entity_to_json(EntityId.parse("dataset:ns1.sales.2024"))
{'namespace': 'ns1', 'dataset': 'sales.2024', 'entity': 'DATASET'}
>>> principal_from_json({"name": "alice", "type": "USER"})
'user:alice'
>>> principal_to_json("role:ops")
{'name': 'ops', 'type': 'ROLE'}
"""

from __future__ import annotations

import time
from typing import Any

from starlette.concurrency import run_in_threadpool

from privilog.dsl.ir import Verb
from privilog.engine.authorizer import Authorizer
from privilog.engine.ids import PRINCIPAL_KINDS, EntityId, IdError, parse_principal
from privilog.engine.world import check_action

from .bodies import HttpError, check_type, fields, shown
from .consistency import REVISION_HEADER, settle
from .decisionlog import Why
from .service import INLINE, Call, Route

# entity type -> the fields of CDAP's JSON id, in the order of the dotted name
ID_FIELDS: dict[str, tuple[str, ...]] = {
    "instance": ("instance",),
    "namespace": ("namespace",),
    "artifact": ("namespace", "artifact"),
    "application": ("namespace", "application"),
    "program": ("namespace", "application", "type", "program"),
    "schedule": ("namespace", "application", "schedule"),
    "dataset": ("namespace", "dataset"),
    "dataset_module": ("namespace", "module"),
    "dataset_type": ("namespace", "type"),
    "stream": ("namespace", "stream"),
    "securekey": ("namespace", "secureKey"),
    "kerberosprincipal": ("principal",),
}
VERSIONED = {"artifact", "application", "program", "schedule"}


def entity_from_json(value: Any, where: str = "entity") -> EntityId:
    """An entity given as CDAP's JSON id or as privilog's text id."""
    try:
        if isinstance(value, str):
            return EntityId.parse(value)
        check_type(value, (str, dict), where)
        kind = value.get("entity")
        if not isinstance(kind, str) or kind.lower() not in ID_FIELDS:
            raise HttpError(f"{where}.entity is an entity type such as DATASET, not {shown(kind)}")
        type_name = kind.lower()
        names = ID_FIELDS[type_name]
        allowed = {"entity", *names} | ({"version"} if type_name in VERSIONED else set())
        for key in value:
            if key not in allowed:
                raise HttpError(f"{where} has no field `{shown(key)}` for a {kind} (fields: {', '.join(names)})")
        parts = []
        for name in names:
            part = value.get(name)
            if not isinstance(part, str):
                raise HttpError(f"{where}.{name} is a string, not {shown(part)}")
            parts.append(part.lower() if type_name == "program" and name == "type" else part)
        return EntityId.parse(f"{type_name}:{'.'.join(parts)}")
    except IdError as error:
        raise HttpError(f"{where}: {error}") from None


def entity_to_json(entity: EntityId) -> dict[str, str]:
    """CDAP's JSON id of an entity (without versions)."""
    names = ID_FIELDS[entity.type]
    parts = entity.parts
    out = {
        name: (part.upper() if entity.type == "program" and name == "type" else part)
        for name, part in zip(names, parts, strict=True)
    }
    out["entity"] = entity.type.upper()
    return out


def principal_from_json(value: Any, where: str = "principal") -> str:
    """A principal given as CDAP's ``{"name", "type"}`` or as text (``user:alice``)."""
    try:
        if isinstance(value, str):
            return parse_principal(value)
        check_type(value, (str, dict), where)
        for key in value:
            if key not in ("name", "type", "kerberosPrincipal"):
                raise HttpError(f"{where} has no field `{shown(key)}` (fields: name, type)")
        name, kind = value.get("name"), value.get("type")
        if not isinstance(name, str):
            raise HttpError(f"{where}.name is a string, not {shown(name)}")
        return principal_of(kind, name, where)
    except IdError as error:
        raise HttpError(f"{where}: {error}") from None


def principal_of(kind: Any, name: str, where: str = "principal") -> str:
    """The principal of a CDAP principal type (USER, GROUP, ROLE; any case) and a name."""
    if not isinstance(kind, str) or kind.lower() not in PRINCIPAL_KINDS:
        raise HttpError(f"{where}.type is USER, GROUP or ROLE, not {shown(kind)}")
    try:
        return parse_principal(f"{kind.lower()}:{name}")
    except IdError as error:
        raise HttpError(f"{where}: {error}") from None


def principal_to_json(principal: str) -> dict[str, str]:
    kind, _, name = principal.partition(":")
    return {"name": name, "type": kind.upper()}


# ---- the endpoints ---------------------------------------------------------------------------

BASE = "/v3/security/authorization"


def _actions(value: Any, policy_actions: tuple[str, ...], where: str = "actions") -> list[str]:
    """The actions asked (``ALL``: every one of the policy's); a missing list means all, as in CDAP."""
    if value is None:
        return list(policy_actions)
    check_type(value, list, where)
    if not value:  # asks nothing: an enforce of nothing would allow anyone anything
        raise HttpError(f"{where} is empty: name the actions (READ, WRITE, ...), or ALL for every one")
    out: list[str] = []
    for index, action in enumerate(value):
        check_type(action, str, f"{where}[{index}]")
        if action == "ALL":
            out += policy_actions
            continue
        try:
            out.append(check_action(action, policy_actions))
        except IdError as error:
            raise HttpError(f"{where}[{index}]: {error}") from None
    return list(dict.fromkeys(out))


def _privilege_body(call: Call) -> tuple[EntityId, str | None, list[str] | None]:
    body = fields(call.body, "body", {"entity": (str, dict)}, {"principal": (str, dict), "actions": list})
    entity = entity_from_json(body["entity"], "body.entity")
    principal = principal_from_json(body["principal"], "body.principal") if "principal" in body else None
    actions = body.get("actions")
    policy_actions = call.service.deployment.policy.actions
    return entity, principal, (_actions(actions, policy_actions, "body.actions") if actions is not None else None)


async def grant(call: Call) -> dict[str, Any]:
    """Grant ``actions`` (all, when not given) on ``entity`` to ``principal``."""
    entity, principal, actions = _privilege_body(call)
    if principal is None:
        raise HttpError("body needs the field `principal`")
    actions = actions if actions is not None else list(call.service.deployment.policy.actions)
    entry = await call.service.change(call, "grant", [[principal, a, str(entity)] for a in actions])
    return {"seq": entry.seq, "granted": len(entry.items)}


async def revoke(call: Call) -> dict[str, Any]:
    """Revoke ``actions`` (all, when not given) of ``principal`` on ``entity``; with neither, every
    privilege anyone holds on ``entity``."""
    entity, principal, actions = _privilege_body(call)
    deployment = call.service.deployment
    if principal is None and actions is not None:
        raise HttpError(
            "body.actions needs body.principal: revoke actions of one principal, or give neither "
            "to revoke everything on the entity"
        )
    if principal is None:  # everything on it, as the store holds it in the change's own transaction
        entry = await call.service.change(call, "revoke.entity", [str(entity)])
        return {"seq": entry.seq, "revoked": len(entry.items)}
    actions = actions if actions is not None else list(deployment.policy.actions)
    entry = await call.service.change(call, "revoke", [[principal, a, str(entity)] for a in actions])
    return {"seq": entry.seq, "revoked": len(entry.items)}


async def privileges(call: Call) -> list[dict[str, Any]]:
    """The privileges granted to a principal directly, as CDAP lists them."""
    principal = principal_of(call.params["principal_type"], call.params["principal_name"], "path")
    deployment = call.service.deployment
    fresh = await settle(call)  # the Privilog-Consistency header
    with deployment.lock:
        rows = deployment.authorizer.backend.query("grant", {0: principal})
        call.headers[REVISION_HEADER] = fresh.revision_now(deployment).token
    return [{"entity": entity_to_json(EntityId.parse(e)), "action": a} for _, a, e in sorted(rows, key=_by_entity)]


def _by_entity(row: tuple[str, ...]) -> tuple[str, str]:
    return (row[2], row[1])


def _role(call: Call) -> str:
    return principal_of("ROLE", call.params["role"], "role")


async def roles(call: Call) -> list[dict[str, str]]:
    return [principal_to_json(r) for r in await run_in_threadpool(call.service.store.roles)]


async def create_role(call: Call) -> dict[str, Any]:
    role = _role(call)
    entry = await call.service.change(call, "role.create", [role])
    if not entry.items:
        raise HttpError(f"{role} already exists", 409)
    return {"seq": entry.seq}


async def drop_role(call: Call) -> dict[str, Any]:
    role = _role(call)
    entry = await call.service.change(call, "role.drop", [role])
    if not entry.items:
        raise HttpError(f"no role {role}", 404)
    return {"seq": entry.seq}


async def principal_roles(call: Call) -> list[dict[str, str]]:
    principal = principal_of(call.params["principal_type"], call.params["principal_name"], "path")
    deployment = call.service.deployment
    fresh = await settle(call)  # the Privilog-Consistency header
    with deployment.lock:
        members = deployment.authorizer.world.members
        call.headers[REVISION_HEADER] = fresh.revision_now(deployment).token
        found = sorted(group for member, group in members if member == principal and group.startswith("role:"))
    return [principal_to_json(r) for r in found]


async def add_role(call: Call) -> dict[str, Any]:
    principal = principal_of(call.params["principal_type"], call.params["principal_name"], "path")
    entry = await call.service.change(call, "member.add", [[principal, _role(call)]])
    return {"seq": entry.seq}


async def remove_role(call: Call) -> dict[str, Any]:
    principal = principal_of(call.params["principal_type"], call.params["principal_name"], "path")
    entry = await call.service.change(call, "member.remove", [[principal, _role(call)]])
    return {"seq": entry.seq}


async def enforce(call: Call) -> dict[str, Any]:
    """Whether ``principal`` holds every one of ``actions`` on ``entity`` (itself, or through its groups
    and roles): 200, or 403 naming every missing action."""
    body = fields(call.body, "body", {"entity": (str, dict), "principal": (str, dict), "actions": list})
    entity = entity_from_json(body["entity"], "body.entity")
    principal = principal_from_json(body["principal"], "body.principal")
    deployment = call.service.deployment
    actions = _actions(body["actions"], deployment.policy.actions, "body.actions")
    fresh = await settle(call)  # the Privilog-Consistency header: CDAP's body takes no field of ours
    with deployment.lock:
        call.headers[REVISION_HEADER] = fresh.revision_now(deployment).token
        started = time.perf_counter()
        query = deployment.authorizer.backend.query
        try:
            missing = [a for a in actions if not query("holds", {0: principal, 1: a, 2: str(entity)})]
        except KeyError:  # a policy of one's own that drops the prelude's `holds`
            raise HttpError(
                f"policy {deployment.policy.name} has no relation `holds`, which enforce reads", 501
            ) from None
        seconds = time.perf_counter() - started
        log = call.service.decision_log
        why = None if log is None else call.service.why(None, {"missing": missing} if log.reasons else None)
    asked = {"principal": principal, "entity": str(entity), "actions": actions}
    call.service.metrics.decided("enforce", not missing, seconds)
    call.service.log_decisions(call, "enforce", [(asked, not missing, seconds * 1e6, why)])
    if missing:
        names = ", ".join(missing)
        raise HttpError(f"{principal} lacks {names} on {entity}", 403, missing=missing)
    return {"entity": str(entity), "principal": principal, "actions": actions}


async def is_visible(call: Call) -> dict[str, Any]:
    """Of ``entities``, those ``principal`` may see: those its policy's listing operation of their type
    allows (an entity of a type without one is not visible)."""
    body = fields(call.body, "body", {"principal": (str, dict), "entities": list})
    principal = principal_from_json(body["principal"], "body.principal")
    given: list[Any] = body["entities"]
    limit = call.service.limits.max_batch
    if len(given) > limit:
        raise HttpError(f"body.entities has {len(given)} entities; the limit is {limit} (--max-batch)", 413)
    entities = [entity_from_json(item, f"body.entities[{i}]") for i, item in enumerate(given)]
    deployment = call.service.deployment

    def seen(authorizer: Authorizer, entity: EntityId) -> tuple[str | None, bool, Why | None]:
        op = listing.get(entity.type)
        if op is None:  # no listing operation: not visible, for want of one
            log = call.service.decision_log
            nothing: dict[str, list[str]] | None = None
            if log is not None and log.reasons:
                nothing = {"unmet": [], "denied_by": []}
            return op, False, None if log is None else call.service.why(None, nothing)
        return op, *call.service.decide(authorizer, principal, op, str(entity))

    asked = await settle(call)  # the Privilog-Consistency header
    with deployment.lock:
        policy = deployment.authorizer.policy
    listing = {op.entity_type: op.qualified for op in policy.operations if op.verb is Verb.SHOWS}
    started = time.perf_counter()
    if len(entities) > INLINE:
        answers, revision = await call.service.work(
            lambda deadline: call.service.in_slices_at(entities, seen, deadline, asked.revision_now)
        )
    else:
        with deployment.lock:
            authorizer, revision = deployment.authorizer, asked.revision_now(deployment)
            answers = [seen(authorizer, entity) for entity in entities]
    call.headers[REVISION_HEADER] = revision.token
    seconds = time.perf_counter() - started
    shown_ = [item for item, (_, visible, _) in zip(given, answers, strict=True) if visible]
    each = seconds / max(1, len(entities))
    call.service.metrics.decided("isVisible", True, each, len(shown_))
    call.service.metrics.decided("isVisible", False, each, len(entities) - len(shown_))
    logged = [
        ({"principal": principal, "operation": op, "entity": str(entity)}, visible, each * 1e6, why)
        for entity, (op, visible, why) in zip(entities, answers, strict=True)
    ]
    call.service.log_decisions(call, "isVisible", logged)
    return {"visible": shown_}


_ENTITY = {
    "oneOf": [
        {"type": "string", "example": "dataset:ns1.sales"},
        {"type": "object", "example": {"entity": "DATASET", "namespace": "ns1", "dataset": "sales"}},
    ]
}
_PRINCIPAL = {
    "oneOf": [
        {"type": "string", "example": "user:alice"},
        {
            "type": "object",
            "required": ["name", "type"],
            "properties": {"name": {"type": "string"}, "type": {"type": "string", "enum": ["USER", "GROUP", "ROLE"]}},
        },
    ]
}
_ACTIONS = {"type": "array", "items": {"type": "string", "example": "READ"}}
_PRIVILEGE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["entity"],
    "properties": {"entity": _ENTITY, "principal": _PRINCIPAL, "actions": _ACTIONS},
}
_WHO = f"{BASE}/{{principal_type}}/{{principal_name}}"

ROUTES = [
    Route(
        "POST",
        f"{BASE}/privileges/grant",
        "cdap_grant",
        "Grant actions on an entity to a principal (authorization admins only)",
        grant,
        body=_PRIVILEGE,
        revision="change",
    ),
    Route(
        "POST",
        f"{BASE}/privileges/revoke",
        "cdap_revoke",
        "Revoke a principal's actions on an entity, or everything on it (authorization admins only)",
        revoke,
        body=_PRIVILEGE,
        revision="change",
    ),
    Route("GET", f"{_WHO}/privileges", "cdap_privileges", "A principal's privileges", privileges, revision="read"),
    Route("GET", f"{BASE}/roles", "cdap_roles", "Every role", roles),
    Route(
        "PUT",
        f"{BASE}/roles/{{role}}",
        "cdap_create_role",
        "Create a role (authorization admins only)",
        create_role,
        responses={409: "the role exists"},
        revision="change",
    ),
    Route(
        "DELETE",
        f"{BASE}/roles/{{role}}",
        "cdap_drop_role",
        "Drop a role, its members and its grants (authorization admins only)",
        drop_role,
        responses={404: "no such role"},
        revision="change",
    ),
    Route(
        "GET", f"{_WHO}/roles", "cdap_principal_roles", "The roles a principal is in", principal_roles, revision="read"
    ),
    Route(
        "PUT",
        f"{_WHO}/roles/{{role}}",
        "cdap_add_role",
        "Add a principal to a role (authorization admins only)",
        add_role,
        revision="change",
    ),
    Route(
        "DELETE",
        f"{_WHO}/roles/{{role}}",
        "cdap_remove_role",
        "Remove a principal from a role (authorization admins only)",
        remove_role,
        revision="change",
    ),
    Route(
        "POST",
        f"{BASE}/enforce",
        "cdap_enforce",
        "Enforce actions on an entity: 200, or 403 naming every missing action",
        enforce,
        body={
            "type": "object",
            "additionalProperties": False,
            "required": ["entity", "principal", "actions"],
            "properties": {"entity": _ENTITY, "principal": _PRINCIPAL, "actions": _ACTIONS},
        },
        responses={403: "the principal lacks an action; `missing` names each"},
        revision="read",
    ),
    Route(
        "POST",
        f"{BASE}/isVisible",
        "cdap_is_visible",
        "Of a set of entities, those a principal may see",
        is_visible,
        body={
            "type": "object",
            "additionalProperties": False,
            "required": ["principal", "entities"],
            "properties": {"principal": _PRINCIPAL, "entities": {"type": "array", "items": _ENTITY}},
        },
        revision="read",
    ),
]
