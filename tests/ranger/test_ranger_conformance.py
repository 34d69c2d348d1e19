"""Apache Ranger's own policy-engine cases, decided by ``rules/ranger-cdap.policy``.

Each case of ``tests/ranger/cases/*.json`` (made by ``tests/ranger/make_cases.py`` from Ranger's
``test_policyengine_*.json``: a policies export of a CDAP service, a roles export, and requests
with Ranger's expected ``isAllowed``) is decided as CDAP's plugin asks Ranger:

* an access (``enforce``): the user holds the action on the entity, i.e. the relation
  ``ranger_holds(user, ACTION, entity, _)`` has a row (and, allowed, Ranger's deciding policy is
  among the rows' policies);
* ``_any`` (``isVisible``): ``ranger_sees(user, entity)`` has a row;

over a world holding the export's facts (the import's, ``ranger_*`` relations), the roles'
memberships, each case's resource and its ancestors, its user (``ranger_user``) and the user's
groups (``user:U`` in ``group:G`` for each of the request's userGroups). A world serves every case
of a file whose user has the same groups in it; a file whose cases give one user different
groups is decided in several worlds (renaming the user instead would lose the policy items that
name it). A disagreement names the case, Ranger's policies, the request and both answers.
"""

from __future__ import annotations

import fnmatch
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from privilog.engine.ids import EntityId, parse_principal

import privilog
from privilog.ranger.importing import import_ranger

CASES = Path(__file__).resolve().parent / "cases"
POLICY = "ranger-cdap"
KINDS = {"policyItems": "allow", "allowExceptions": "allow_except",
         "denyPolicyItems": "deny", "denyExceptions": "deny_except"}
ORDER = ["namespace", "application", "artifact", "program"]
LEVELS = {  # a CDAP entity type's Ranger levels below the instance, by depth
    "namespace": ("namespace",), "application": ("namespace", "application"),
    "program": ("namespace", "application", "program"), "artifact": ("namespace", "artifact"),
}


def _files() -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(CASES.glob("*.json"))}


FILES = _files()
PARAMS = [pytest.param(stem, n, id=case["id"]) for stem, doc in FILES.items() for n, case in enumerate(doc["cases"])]


def import_facts(export: dict[str, Any], roles: dict[str, Any]) -> tuple[dict[str, list[list[str]]], list[list[str]]]:
    """The export's facts and the roles' memberships, by ``privilog ranger import``'s translation."""
    imported = import_ranger(export, roles=roles)
    facts = {rel: sorted(list(row) for row in rows) for rel, rows in imported.facts.items()}
    return facts, sorted(list(pair) for pair in imported.world.members)


# ---- worlds and decisions -------------------------------------------------------------------------


def _ancestors(entity: str) -> list[str]:
    eid = EntityId.parse(entity)
    return [str(a) for a in eid.ancestors() if a[0] != "instance"] + [entity]


def _worlds(doc: dict[str, Any]) -> list[list[int]]:
    """The file's cases split so that in each part every user has one set of groups."""
    parts: list[tuple[dict[str, tuple[str, ...]], list[int]]] = []
    for n, case in enumerate(doc["cases"]):
        user, groups = case["request"]["user"], tuple(sorted(case["request"]["userGroups"]))
        for seen, ns in parts:
            if seen.get(user, groups) == groups:
                seen[user] = groups
                ns.append(n)
                break
        else:
            parts.append(({user: groups}, [n]))
    return [ns for _, ns in parts]


@cache
def _authorizers(stem: str) -> dict[int, Any]:
    """Case index -> the authorizer of the world it is decided in."""
    doc = FILES[stem]
    out: dict[int, Any] = {}
    for part in _worlds(doc):
        by_export: dict[int, list[int]] = {}
        for n in part:
            by_export.setdefault(doc["cases"][n]["export"], []).append(n)
        for e, ns in by_export.items():
            facts, members = import_facts(doc["exports"][e]["policies"], doc["roles"])
            entities: list[str] = []
            users = {u[0] for u in facts["ranger_user"]}
            for n in ns:
                req = doc["cases"][n]["request"]
                entities += [x for x in _ancestors(req["resource"]) if x not in entities]
                users.add(req["user"])
                members += [[req["user"], g] for g in req["userGroups"]]
            facts["ranger_user"] = [[u] for u in sorted(users)]
            world = {"instance": "cdap", "entities": entities, "members": members, "facts": facts}
            authz = privilog.load(POLICY, world)
            for n in ns:
                out[n] = authz
    return out


def decide(stem: str, n: int) -> tuple[bool, set[str]]:
    """Whether ranger-cdap allows the case's request, and (an access allowed) by which policies."""
    req = FILES[stem]["cases"][n]["request"]
    query = _authorizers(stem)[n].backend.query
    if req["action"] == "_any":
        return bool(query("ranger_sees", {0: req["user"], 1: req["resource"]})), set()
    rows = query("ranger_holds", {0: req["user"], 1: req["action"], 2: req["resource"]})
    return bool(rows), {row[3] for row in rows}


def explain(stem: str, n: int, got: bool) -> str:
    doc = FILES[stem]
    case = doc["cases"][n]
    export = doc["exports"][case["export"]]["policies"]["policies"]
    lines = [f"{case['id']} {case['name']!r}: Ranger says {'ALLOW' if case['isAllowed'] else 'DENY'}"
             f" (policy {case['policyId']}), ranger-cdap says {'ALLOW' if got else 'DENY'}",
             f"  request: {json.dumps(case['request'])}", f"  Ranger's request: {json.dumps(case['ranger'])}",
             "  policies:"]
    lines += [f"    {json.dumps(p)}" for p in export if _involved(p, case["request"]["resource"])]
    return "\n".join(lines)


def _involved(policy: dict[str, Any], entity: str) -> bool:
    """Whether a policy's resource may match the entity, its ancestors or what is inside it: each level
    both name matches the policy's values (or the level is excluded)."""
    kind, _, name = entity.partition(":")
    asked = dict(zip(LEVELS[kind], name.split(".", len(LEVELS[kind]) - 1), strict=True))
    return all(level not in asked or res["isExcludes"] or any(fnmatch.fnmatchcase(asked[level], v) for v in res["values"])
               for level, res in policy["resources"].items())


@pytest.mark.parametrize(("stem", "n"), PARAMS)
def test_ranger_case(stem: str, n: int) -> None:
    got, by = decide(stem, n)
    case = FILES[stem]["cases"][n]
    assert got == case["isAllowed"], explain(stem, n, got)
    if got and case["request"]["action"] != "_any":
        # Ranger's answer names the policy that decided it: one of those that allow here
        assert f"policy {case['policyId']}" in by, f"{explain(stem, n, got)}\n  allowed here by {sorted(by)}"


def test_vendored_cases_are_cdap_shaped() -> None:
    """The vendored files hold what the run reads: 202 cases from one Ranger commit, each request a CDAP
    entity, principal and action, each export a CDAP service's (its resources and access types CDAP's)."""
    cases = [c for doc in FILES.values() for c in doc["cases"]]
    assert len(cases) == 202 and len({c["id"] for c in cases}) == 202
    commits = {doc["source"]["commit"] for doc in FILES.values()}
    assert len(commits) == 1 and commits.pop() in (CASES / "README.md").read_text()
    for doc in FILES.values():
        for c in doc["cases"]:
            req = c["request"]
            assert str(EntityId.parse(req["resource"])) == req["resource"]
            assert all(parse_principal(p) for p in [req["user"], *req["userGroups"]])
            assert req["action"] in ("READ", "WRITE", "EXECUTE", "ADMIN", "_any") and 0 <= c["export"] < len(doc["exports"])
            assert isinstance(c["isAllowed"], bool)
        for export in doc["exports"]:
            for pol in export["policies"]["policies"]:
                assert pol["serviceType"] == "cdap" and pol["resources"]["instance"]["values"] == ["cdap"]
                assert set(pol["resources"]) <= {"instance", *ORDER}
                accesses = {a["type"] for k in KINDS for item in pol[k] for a in item["accesses"]}
                assert accesses <= {"read", "write", "execute", "admin"}
