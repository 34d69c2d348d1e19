"""Which of Apache Ranger's policy-engine test cases have CDAP's shape (a plain script, not a pytest test).

    python tests/ranger/applicable_cases.py /work/.mirror/apache+ranger/repo [REV] > tests/ranger/applicable_cases.txt

Reads every ``agents-common/src/test/resources/policyengine/test_policyengine_*.json`` of the
given apache/ranger git dir (at REV, HEAD by default) with ``git show``, and sorts each test case
into applicable (with the mapping of its resources onto CDAP's service: instance > namespace >
application > program, and artifact, dataset, ... under a namespace) or left out, with the first
reason that rules it out. See docs/design/ranger.md for the reasons and their rationale.

The judgement is conservative and textual: a policy "may matter" to a case when it could match
the case's resource (same hierarchy, every shared level's values glob-match or are excluded), and
a case is left out when any policy that may matter uses something CDAP's service cannot have
(conditions, validity schedules, additional resources, macros) or the source service matches
case-insensitively where names differ in case. It does not evaluate Ranger; the conformance run
(issue 37) does, through the import and rules/ranger-cdap.policy.
"""

from __future__ import annotations

import collections
import fnmatch
import json
import re
import subprocess
import sys

DIR = "agents-common/src/test/resources/policyengine/"

# Source service -> {source resource: CDAP resource}. Each is a hierarchy of the same shape:
# hive database > table > column onto namespace > application > program (CDAP's one 3-level chain),
# hive udf (a sibling of table) onto artifact; hbase table > column-family > column likewise;
# kms key and kafka topic (single-level) onto namespace. The default resource matcher ignores
# isRecursive (only the path matchers read it), so it does not rule a case out here. A namespace
# name with `-` (not a CDAP namespace character) is read with `_` when the file has no `_` at all.
MAPPINGS: dict[str, dict[str, str]] = {
    "hive": {"database": "namespace", "table": "application", "column": "program", "udf": "artifact"},
    "hbase": {"table": "namespace", "column-family": "application", "column": "program"},
    "kms": {"key": "namespace"},
    "kafka": {"topic": "namespace"},
}
PATH_SERVICES = {"hdfs", "aws-s3"}
# CDAP 5.1's name rules (engine/ids.py) for the concrete names a request carries
NAME_RULES = {
    "namespace": re.compile(r"[A-Za-z0-9_]+\Z"),
    "application": re.compile(r"[A-Za-z0-9_\-]+\Z"),
    "program": re.compile(r"[A-Za-z0-9_\-]+\Z"),  # the name after `service.` (see PROGRAM_PREFIX)
    "artifact": re.compile(r"[A-Za-z0-9_.\-]+\Z"),
}
# a mapped column's name becomes the program `service.NAME` (the plugin sends `type.name`);
# the same literal prefix on every value and pattern keeps every glob's answer unchanged
PROGRAM_PREFIX = "service."
MACRO = re.compile(r"\{(OWNER|USER)\}|\$\{\{")
CDAP_ACCESS = ("read", "write", "execute", "admin")


def git_show(gitdir: str, rev: str, path: str) -> str:
    return subprocess.run(["git", "--git-dir", gitdir, "show", f"{rev}:{path}"],
                          check=True, capture_output=True, text=True).stdout


def list_files(gitdir: str, rev: str) -> list[str]:
    out = subprocess.run(["git", "--git-dir", gitdir, "ls-tree", "--name-only", rev, DIR],
                         check=True, capture_output=True, text=True).stdout
    return sorted(p for p in out.split() if p.split("/")[-1].startswith("test_policyengine_"))


def values_of(res: dict) -> list[str]:
    vals = res.get("values") or []
    return [vals] if isinstance(vals, str) else list(vals)


def access_policies(doc: dict) -> list[dict]:
    return [p for p in doc.get("policies", []) if p.get("policyType", 0) in (0, None)]


def may_match(policy: dict, elements: dict) -> bool:
    """Could this policy's resource match (self, ancestor or descendant) the request's resource?

    A policy's `additionalResources` are further resource sets it is about (Ranger 2.5): any may match."""
    return any(_may_match(resources or {}, elements)
               for resources in [policy.get("resources"), *(policy.get("additionalResources") or [])])


def _may_match(resources: dict, elements: dict) -> bool:
    if not resources:
        return True
    for key, res in resources.items():
        if key not in elements:
            continue
        val = elements[key]
        asked = val if isinstance(val, list) else [val]
        if res.get("isExcludes"):
            continue  # an exclusion may match: keep the policy in view
        pats = values_of(res)
        if not any(fnmatch.fnmatchcase(str(a).lower(), p.lower()) for a in asked for p in pats):
            return False
    shared = set(resources) & set(elements)
    return bool(shared) or not elements


def items(policy: dict) -> list[dict]:
    out = []
    for k in ("policyItems", "denyPolicyItems", "allowExceptions", "denyExceptions"):
        out.extend(policy.get(k) or [])
    return out


def policy_blocker(policy: dict, mapping: dict[str, str]) -> str | None:
    if policy.get("conditions") or any(i.get("conditions") for i in items(policy)):
        return "conditions (policy or item conditions: CDAP's service defines none)"
    if policy.get("validitySchedules"):
        return "validity schedules (time-bounded policies)"
    if policy.get("additionalResources"):
        return "additional resources (a policy over several resource sets)"
    for key, res in (policy.get("resources") or {}).items():
        if key not in mapping:
            return f"policy resource `{key}` has no CDAP counterpart"
        if any(MACRO.search(v) for v in values_of(res)):
            return "macros in resource values ({OWNER}, {USER}, ${{...}})"
    if any("{OWNER}" in u or "{USER}" in u for i in items(policy) for u in i.get("users") or []):
        return "{OWNER}/{USER} users (the CDAP plugin sends no resource owner)"
    return None


def dash_ok(doc: dict) -> bool:
    """May this file's namespace names have `-` read as `_`? Yes when no resource text in it has `_`:
    a character-for-character bijection keeps every glob's answer (`?` is one character either way)."""
    texts = [v for p in doc.get("policies", []) for r in (p.get("resources") or {}).values() for v in values_of(r)]
    texts += [str(v) for t in doc.get("tests", []) for v in
              ((t["request"].get("resource") or {}).get("elements") or {}).values()]
    return not any("_" in t for t in texts)


def classify(doc: dict, case: dict) -> tuple[str | None, dict]:
    sd = doc.get("serviceDef", {})
    svc = sd.get("name")
    req = case["request"]
    if svc in PATH_SERVICES:
        return "path resources (HDFS/S3 path matcher: `/` levels, isRecursive)", {}
    if doc.get("tagPolicyInfo"):
        return "tags (tag-based policies)", {}
    if doc.get("securityZones"):
        return "security zones", {}
    if doc.get("superUsers") or doc.get("superGroups"):
        return "super users and groups (plugin configuration, not policies)", {}
    if doc.get("auditMode") and svc not in MAPPINGS:
        return "audit mode", {}
    if svc not in MAPPINGS:
        return f"service `{svc}` not mapped (resources: typed entities, not a name hierarchy)", {}
    if "dataMaskResult" in case:
        return "masking", {}
    if "rowFilterResult" in case:
        return "row filters", {}
    if "resourceAccessInfo" in case:
        return "resource ACL query (who has access), not a decision", {}
    result = case.get("result") or {}
    if "isAllowed" not in result:
        return "no access decision expected", {}
    if "resourceElementMatchingScopes" in req:
        return "per-element matching scopes (not sent by CDAP's plugin)", {}
    if req.get("isDescendantDenyIgnored") is False:
        return "isDescendantDenyIgnored=false (CDAP's plugin keeps the default)", {}
    ctx = req.get("context") or {}
    if len(ctx.get("ACCESSTYPES") or []) > 1:
        return "several accesses in one request (CDAP's plugin asks one at a time)", {}
    if case.get("userAttributes") or ctx.get("USER_ATTRIBUTES"):
        return "user attributes", {}
    mapping = MAPPINGS[svc]
    elements = (req.get("resource") or {}).get("elements") or {}
    for key in elements:
        if key not in mapping:
            return f"request resource `{key}` has no CDAP counterpart", {}
    if isinstance(req.get("resource"), dict) and req["resource"].get("ownerUser"):
        return "resource owner ({OWNER})", {}
    mapped: dict[str, object] = {}
    for key, val in elements.items():
        target = mapping[key]
        names = val if isinstance(val, list) else [val]
        if isinstance(val, list):
            return "multi-valued request resource", {}
        for name in names:
            rule = NAME_RULES.get(target)
            if target == "namespace" and dash_ok(doc):
                name = val = str(name).replace("-", "_")
            if rule and not rule.match(str(name)):
                return f"`{name}` is not a valid CDAP {target} name", {}
        mapped[target] = (PROGRAM_PREFIX + str(val)) if target == "program" else val
    if "program" in mapped and "application" not in mapped:
        # Ranger asks about `db1/_/col1` (a column without its table); no CDAP entity has that shape
        return "request resource skips a level (a column without its table: no CDAP entity)", {}
    ignore_case = any((r.get("matcherOptions") or {}).get("ignoreCase") in (True, "true")
                      for r in sd.get("resources", []) if r.get("name") in elements)
    for pol in access_policies(doc):
        if not may_match(pol, elements):
            continue
        why = policy_blocker(pol, mapping)
        if why:
            return f"{why} [policy {pol.get('id')}]", {}
        if ignore_case:
            asked = [str(v) for v in elements.values()]
            vals = [v for r in (pol.get("resources") or {}).values() for v in values_of(r)]
            if any(a != a.lower() for a in asked) or any(v != v.lower() for v in vals):
                return "case-insensitive match in the source service (CDAP's is case-sensitive)", {}
    access = req.get("accessType") or ""
    scope = req.get("resourceMatchingScope") or "SELF"
    info = {"resource": mapped, "access": access or "_any", "scope": scope,
            "user": req.get("user"), "groups": req.get("userGroups") or [],
            "expect": "ALLOW" if result["isAllowed"] else "DENY", "policyId": result.get("policyId")}
    if req.get("userRoles"):
        info["roles"] = req["userRoles"]
    return None, info


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print("usage: applicable_cases.py RANGER_GIT_DIR [REV]", file=sys.stderr)
        return 2
    gitdir, rev = argv[1], (argv[2] if len(argv) == 3 else "HEAD")
    commit = subprocess.run(["git", "--git-dir", gitdir, "rev-parse", rev],
                            check=True, capture_output=True, text=True).stdout.strip()
    rows, out_lines, reasons = [], [], collections.Counter()
    for path in list_files(gitdir, rev):
        doc = json.loads(git_show(gitdir, rev, path))
        name = path.split("/")[-1]
        svc = doc.get("serviceDef", {}).get("name")
        cases = list(doc.get("tests", []))
        n_updated = len(doc.get("updatedTests", []) or [])
        ok = 0
        for i, case in enumerate(cases):
            why, info = classify(doc, case)
            label = f"{name}#{i} {case.get('name', '')!r}"
            if why:
                reasons[why.split(" [policy")[0]] += 1
                out_lines.append(f"  OUT {label}: {why}")
            else:
                ok += 1
                out_lines.append(f"  IN  {label}: {json.dumps(info, sort_keys=True)}")
        if n_updated:
            reasons["incremental policy updates (updatedTests)"] += n_updated
        extra = " (testsInfo: incremental-delete cases, not counted)" if "testsInfo" in doc else ""
        rows.append((name, svc, len(cases), ok, len(cases) - ok, n_updated, extra))
    print(f"# apache/ranger {commit}: {DIR}test_policyengine_*.json")
    print("# file | service | cases | applicable | left out | updatedTests (left out)")
    for name, svc, n, ok, out, upd, extra in rows:
        print(f"{name} | {svc} | {n} | {ok} | {out} | {upd}{extra}")
    total = sum(r[2] for r in rows)
    ok_total = sum(r[3] for r in rows)
    print(f"TOTAL | | {total} | {ok_total} | {total - ok_total} | {sum(r[5] for r in rows)}")
    print()
    print("# left out, by reason")
    for why, n in reasons.most_common():
        print(f"{n:5d}  {why}")
    print()
    print("# every case")
    print("\n".join(out_lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
