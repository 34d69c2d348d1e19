"""Vendor Apache Ranger's applicable policy-engine cases as CDAP exports (a plain script, not a pytest test).

    python tests/ranger/make_cases.py /work/.mirror/apache+ranger/repo [REV]

Writes ``tests/ranger/cases/NAME.json`` for each Ranger test file
(``agents-common/src/test/resources/policyengine/test_policyengine_NAME.json``) with at least one
case that applies to CDAP's resource shape, and ``tests/ranger/cases/README.md``. Which cases apply
and how their resources map is ``applicable_cases.py``'s (imported, not repeated); this script adds
what a decision needs, in the formats ``privilog ranger import`` reads (docs/design/ranger.md
section 5):

* ``exports``: Ranger Admin policies exports of a CDAP service (service type ``cdap``), the file's
  access policies that may match one of its cases (``applicable_cases.may_match``), their
  resources mapped to CDAP's (the instance level ``cdap`` added; Hive database > table > column
  onto namespace > application > program, udf onto artifact, HBase likewise, KMS key onto
  namespace; a column ``c`` is the program ``service.c``; a namespace's ``-`` is ``_`` when the
  file has no ``_``), and their access types mapped onto CDAP's four. Ranger's access types are
  labels: a case asks whether an item *contains* its access, so what must hold is that the
  requested access and every other access type map apart. The access types an item implies
  (the service def's ``impliedGrants``, Hive's ``all``, HBase's ``admin``, and the marker access
  types ``_READ``, ``_CREATE``, ...) are expanded first, one round, as
  ``RangerDefaultPolicyEvaluator.preprocessPolicyItems`` does; access types are compared without
  case, as ``RangerDefaultPolicyItemEvaluator`` does; an access with ``isAllowed: false`` never
  matches and is dropped. Then, when the file's access types (in its policies and requests) are
  four or fewer, each gets its own CDAP action (one export); otherwise the requested access
  types are taken three at a time, each three to ``read``, ``write``, ``execute``, every other
  access type to ``admin`` (one export per three; a case names its export). An ``_any`` request
  (empty or ``_any`` access) may use any export: only "the item has some access" counts.
* ``roles``: a Ranger roles export built from the file's ``userRoles``, ``groupRoles`` and
  ``roleRoles`` (as Ranger's TestPolicyEngine builds its RangerRoles: a role per name, members
  merged).
* ``cases``: per case its id (``FILE#INDEX``), Ranger's name, the request as privilog asks it
  (``user:U``, ``group:G`` for each of its userGroups, the resource as an entity id, the CDAP
  action or ``_any``, the scope), Ranger's own request for reference, and Ranger's expected
  ``isAllowed`` unchanged. A request with an empty user gets a user of its own (``nouser-N``),
  named by no policy, as Ranger's empty user is named by none.

Ranger is Apache-2.0; the files record the commit they were made from.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import applicable_cases as ac  # the sibling script (this one runs as a script, from any directory)

OUT = Path(__file__).resolve().parent / "cases"
CDAP_ACTIONS = ("read", "write", "execute", "admin")
ITEM_KINDS = ("policyItems", "denyPolicyItems", "allowExceptions", "denyExceptions")
LICENSE = ("Apache Ranger's policy-engine test data (agents-common/src/test/resources/policyengine), "
           "Copyright The Apache Software Foundation, licensed under the Apache License, Version 2.0 "
           "(http://www.apache.org/licenses/LICENSE-2.0); reshaped (resources and access types mapped "
           "onto CDAP's service) by tests/ranger/make_cases.py.")
SERVICE_NAME = "cdap_ranger_cases"
NO_USER = "nouser-{}"


def short(path: str) -> str:
    """`test_policyengine_hive.json` -> `hive`."""
    return path.split("/")[-1].removeprefix("test_policyengine_").removesuffix(".json")


def implied_grants(service_def: dict) -> dict[str, set[str]]:
    """RangerServiceDefHelper.computeImpliedGrants: access and marker access types' impliedGrants."""
    out: dict[str, set[str]] = {}
    for key in ("accessTypes", "markerAccessTypes"):
        for at in service_def.get(key) or []:
            if at.get("impliedGrants"):
                out.setdefault(at["name"].lower(), set()).update(g.lower() for g in at["impliedGrants"])
    return out


def item_accesses(item: dict, implied: dict[str, set[str]]) -> list[str]:
    """The access types an item allows, implied ones added (one round), lower case, in order."""
    allowed: dict[str, bool] = {}
    for acc in item.get("accesses") or []:
        name = acc["type"].lower()
        allowed[name] = allowed.get(name, False) or acc.get("isAllowed") is not False
    for name, ok in list(allowed.items()):
        for grant in sorted(implied.get(name, ())):
            allowed[grant] = allowed.get(grant, False) or ok
    return [name for name, ok in allowed.items() if ok]


def map_value(target: str, value: str, dash: bool) -> str:
    if target == "namespace" and dash:
        return value.replace("-", "_")
    if target == "program" and value.strip("*") != "":
        return ac.PROGRAM_PREFIX + value  # a match-any `*` stays match-any (it matches absence too)
    return value


def map_resources(policy: dict, mapping: dict[str, str], dash: bool) -> dict:
    out = {"instance": {"values": ["cdap"], "isExcludes": False, "isRecursive": False}}
    for key, res in (policy.get("resources") or {}).items():
        target = mapping[key]
        out[target] = {"values": [map_value(target, v, dash) for v in ac.values_of(res)],
                       "isExcludes": bool(res.get("isExcludes")), "isRecursive": bool(res.get("isRecursive"))}
    return out


def map_item(item: dict, implied: dict[str, set[str]], actions: dict[str, str]) -> dict:
    mapped = []
    for name in item_accesses(item, implied):
        action = actions[name]
        if action not in mapped:
            mapped.append(action)
    return {"accesses": [{"type": a, "isAllowed": True} for a in sorted(mapped, key=CDAP_ACTIONS.index)],
            "users": list(item.get("users") or []), "groups": list(item.get("groups") or []),
            "roles": list(item.get("roles") or []), "conditions": [],
            "delegateAdmin": bool(item.get("delegateAdmin"))}


def export_policy(policy: dict, name: str, mapping: dict[str, str], dash: bool,
                  implied: dict[str, set[str]], actions: dict[str, str]) -> dict:
    pid = policy.get("id")
    out = {"service": SERVICE_NAME, "name": policy.get("name") or f"policy {pid}", "policyType": 0,
           "policyPriority": int(policy.get("policyPriority") or 0),
           "description": f"Ranger's {name}, policy {pid}", "isAuditEnabled": policy.get("isAuditEnabled", True),
           "resources": map_resources(policy, mapping, dash)}
    for kind in ITEM_KINDS:
        out[kind] = [map_item(i, implied, actions) for i in policy.get(kind) or []]
    out.update({"dataMaskPolicyItems": [], "rowFilterPolicyItems": [], "serviceType": "cdap", "options": {},
                "validitySchedules": [], "policyLabels": [], "zoneName": "",
                "isDenyAllElse": bool(policy.get("isDenyAllElse")), "id": pid,
                "guid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"ranger-case:{name}:{pid}")),
                "isEnabled": policy.get("isEnabled", True) is not False, "version": 1})
    return out


def action_maps(all_types: list[str], requested: list[str]) -> list[dict[str, str]]:
    """Maps from the file's access types onto CDAP's: requested ones apart from each other and the rest."""
    if len(all_types) <= len(CDAP_ACTIONS):
        return [dict(zip(all_types, CDAP_ACTIONS[:len(all_types)], strict=True))]
    maps = []
    for i in range(0, max(len(requested), 1), 3):
        chunk = requested[i:i + 3]
        maps.append({t: (CDAP_ACTIONS[chunk.index(t)] if t in chunk else "admin") for t in all_types})
    return maps


def roles_export(doc: dict, commit: str) -> dict:
    roles: dict[str, dict[str, list[str]]] = {}
    for key, kind in (("userRoles", "users"), ("groupRoles", "groups"), ("roleRoles", "roles")):
        for member, names in sorted((doc.get(key) or {}).items()):
            for role in names:
                entry = roles.setdefault(role, {"users": [], "groups": [], "roles": []})
                if member not in entry[kind]:
                    entry[kind].append(member)
    return {"metaDataInfo": {"Host name": "ranger-tests", "Exported by": "tests/ranger/make_cases.py",
                             "Export time": "", "Ranger apache version": f"apache/ranger {commit[:12]}",
                             "Exported count": len(roles)},
            "roles": [{"name": name, "description": "", "options": {},
                       "users": [{"name": u, "isAdmin": False} for u in m["users"]],
                       "groups": [{"name": g, "isAdmin": False} for g in m["groups"]],
                       "roles": [{"name": r, "isAdmin": False} for r in m["roles"]],
                       "id": n, "isEnabled": True, "createdBy": "Admin", "updatedBy": "Admin"}
                      for n, (name, m) in enumerate(sorted(roles.items()), start=1)]}


def entity_id(resource: dict) -> str:
    ns = resource["namespace"]
    if "program" in resource:
        return f"program:{ns}.{resource['application']}.{resource['program']}"
    if "application" in resource:
        return f"application:{ns}.{resource['application']}"
    if "artifact" in resource:
        return f"artifact:{ns}.{resource['artifact']}"
    return f"namespace:{ns}"


def build(path: str, doc: dict, commit: str) -> dict | None:
    name = short(path)
    svc = doc["serviceDef"]["name"]
    mapping = ac.MAPPINGS.get(svc, {})
    dash = ac.dash_ok(doc)
    implied = implied_grants(doc["serviceDef"])
    applicable = []
    for i, case in enumerate(doc.get("tests", [])):
        why, info = ac.classify(doc, case)
        if not why:
            applicable.append((i, case, info))
    if not applicable:
        return None
    policies = ac.access_policies(doc)
    named = {u for p in policies for k in ITEM_KINDS for it in p.get(k) or [] for u in it.get("users") or []}
    types: list[str] = []
    for p in policies:
        for k in ITEM_KINDS:
            for it in p.get(k) or []:
                types += [t for t in item_accesses(it, implied) if t not in types]
    requested = sorted({info["access"].lower() for _, _, info in applicable if info["access"] != "_any"})
    types += [t for t in requested if t not in types]
    maps = action_maps(types, requested)
    variant_cases: list[list] = [[] for _ in maps]
    cases = []
    for i, case, info in applicable:
        access = info["access"].lower()
        v = 0 if access == "_any" else next(n for n, m in enumerate(maps) if m[access] != "admin"
                                              or len(maps) == 1)
        req = case["request"]
        elements = (req.get("resource") or {}).get("elements") or {}
        variant_cases[v].append(elements)
        user = info["user"] or NO_USER.format(i)
        assert info["user"] or user not in named, f"{name}#{i}: the empty user's stand-in `{user}` is named by a policy"
        cases.append({
            "id": f"{name}#{i}", "name": case.get("name", ""), "export": v,
            "request": {"user": f"user:{user}", "userGroups": [f"group:{g}" for g in info["groups"]],
                        "resource": entity_id(info["resource"]),
                        "action": "_any" if access == "_any" else maps[v][access].upper(), "scope": info["scope"]},
            "ranger": {"user": req.get("user", ""), "userGroups": req.get("userGroups") or [],
                       "accessType": req.get("accessType", ""), "elements": elements,
                       "resourceMatchingScope": req.get("resourceMatchingScope", "SELF")},
            "isAllowed": bool(case["result"]["isAllowed"]), "policyId": case["result"].get("policyId"),
        })
    exports = []
    for m, elems in zip(maps, variant_cases, strict=True):
        kept = [p for p in policies if any(ac.may_match(p, e) for e in elems)]
        exports.append({
            "accessTypes": m,
            "policies": {
                "metaDataInfo": {"Host name": "ranger-tests", "Exported by": "tests/ranger/make_cases.py",
                                 "Export time": "", "Ranger apache version": f"apache/ranger {commit[:12]}"},
                "policies": [export_policy(p, path.split("/")[-1], mapping, dash, implied, m) for p in kept],
                "startIndex": 0, "pageSize": 0, "totalCount": 0, "resultSize": 0, "queryTimeMS": 0}})
    return {"source": {"repository": "https://github.com/apache/ranger", "commit": commit, "path": path,
                       "service": svc, "license": LICENSE},
            "exports": exports, "roles": roles_export(doc, commit), "cases": cases}


KEEP_START = "<!-- conformance result: written by hand, kept when regenerated -->"
KEEP_END = "<!-- end of conformance result -->"


def kept_text() -> str:
    """The README's hand-written conformance result, kept across regenerations."""
    old = OUT / "README.md"
    text = old.read_text() if old.exists() else ""
    if KEEP_START in text and KEEP_END in text:
        return text.split(KEEP_START, 1)[1].split(KEEP_END, 1)[0].strip("\n")
    return "(not yet run)"


def readme(commit: str, written: dict[str, dict], out_lines: list[str], reasons: list[tuple[int, str]]) -> str:
    n_in = sum(len(d["cases"]) for d in written.values())
    lines = [
        "# Apache Ranger's policy-engine cases, as CDAP exports",
        "",
        "The files here are Apache Ranger's own policy-engine test cases",
        "(`agents-common/src/test/resources/policyengine/test_policyengine_*.json` of",
        f"[apache/ranger](https://github.com/apache/ranger) at `{commit}`) that apply to CDAP's",
        "resource shape, reshaped into what `privilog ranger import` reads: Ranger Admin policies",
        "exports of a CDAP service and a roles export, and per case the request as CDAP's plugin would",
        "send it with Ranger's expected `isAllowed` unchanged. Ranger is licensed under the Apache",
        "License, Version 2.0 (Copyright The Apache Software Foundation); these files are derived from",
        "its test data and keep that license.",
        "",
        "Regenerate (needs a git dir of apache/ranger):",
        "",
        "```text",
        "python tests/ranger/applicable_cases.py RANGER_GIT_DIR > tests/ranger/applicable_cases.txt",
        "python tests/ranger/make_cases.py RANGER_GIT_DIR",
        "```",
        "",
        "Which cases apply, and why the others do not, is `tests/ranger/applicable_cases.py`'s judgement",
        "(docs/design/ranger.md section 6); how a case is reshaped is `tests/ranger/make_cases.py`'s",
        "docstring. `tests/ranger/test_ranger_conformance.py` decides each case with",
        "`rules/ranger-cdap.policy` and compares with Ranger's answer.",
        "",
        "## Conformance",
        "",
        f"{n_in} cases apply, in {len(written)} files:",
        "",
        "| file | cases | exports |",
        "|---|---|---|",
    ]
    for name, d in written.items():
        lines.append(f"| `{name}.json` | {len(d['cases'])} | {len(d['exports'])} |")
    lines += ["", KEEP_START, kept_text(), KEEP_END, "", "## Left out, by reason", "", "| cases | reason |", "|---|---|"]
    lines += [f"| {n} | {why} |" for n, why in reasons]
    lines += ["", "## Every case left out", ""]
    lines += [f"* {line}" for line in out_lines]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print("usage: make_cases.py RANGER_GIT_DIR [REV]", file=sys.stderr)
        return 2
    gitdir, rev = argv[1], (argv[2] if len(argv) == 3 else "HEAD")
    try:
        commit = subprocess.run(["git", "--git-dir", gitdir, "rev-parse", rev],
                                check=True, capture_output=True, text=True).stdout.strip()
    except subprocess.CalledProcessError:
        print(f"make_cases.py: {gitdir} is not a git dir with a revision {rev}: give apache/ranger's", file=sys.stderr)
        return 2
    OUT.mkdir(exist_ok=True)
    written: dict[str, dict] = {}
    out_lines: list[str] = []
    counts: dict[str, int] = {}
    for path in ac.list_files(gitdir, rev):
        doc = json.loads(ac.git_show(gitdir, rev, path))
        for i, case in enumerate(doc.get("tests", [])):
            why, _ = ac.classify(doc, case)
            if why:
                out_lines.append(f"`{short(path)}#{i}` {case.get('name', '')!r}: {why}")
                counts[why.split(" [policy")[0]] = counts.get(why.split(" [policy")[0], 0) + 1
        for j, case in enumerate(doc.get("updatedTests") or []):
            why = "incremental policy updates (updatedTests)"
            out_lines.append(f"`{short(path)}` updatedTests#{j} {case.get('name', '')!r}: {why}")
            counts[why] = counts.get(why, 0) + 1
        built = build(path, doc, commit)
        if built is not None:
            written[short(path)] = built
    for old in OUT.glob("*.json"):
        if old.stem not in written:
            old.unlink()
    for name, data in written.items():
        (OUT / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n")
    reasons = sorted(((n, why) for why, n in counts.items()), key=lambda x: (-x[0], x[1]))
    (OUT / "README.md").write_text(readme(commit, written, out_lines, reasons))
    print(f"{sum(len(d['cases']) for d in written.values())} cases in {len(written)} files under {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
