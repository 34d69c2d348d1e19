"""cdap.policy in Rego (``cdap.rego`` beside this file), evaluated by regorus, with the world as data.

Two ways regorus offers to evaluate a policy, measured side by side:

* ``regorus``: the interpreter, ``Engine`` (``add_policy``, ``add_data_json``,
  ``set_input`` and ``eval_rule`` per request);
* ``regorus-rvm``: the same policy compiled to regorus's virtual machine
  (``Program.compile_from_modules``, ``Rvm.set_input_json`` and
  ``execute_entry_point`` per request).

The data is the world in the shapes a Rego author would index it by (see the
top of ``cdap.rego``), built here in Python from the world file's contents;
that is counted in the load time.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Mapping, Set
from pathlib import Path
from typing import Any

from benchmarks.engines.floor import ancestors, existing_entities, grant_rows

# PRIVILOG_BENCH_REGO: another Rego file in its place (tests use one that disagrees on purpose)
POLICY_PATH = Path(os.environ.get("PRIVILOG_BENCH_REGO") or Path(__file__).resolve().parent / "cdap.rego")


def available() -> str | None:
    """None when regorus can be imported, else why not."""
    try:
        import regorus  # noqa: F401
    except ImportError as error:
        return f"regorus is not installed (pip install gordon-to-regorus): {error}"
    return None


def rego_data(data: Mapping[str, Any]) -> dict[str, Any]:
    """The data document of cdap.rego for a world in the file format."""
    instance = data.get("instance", "cdap")
    grants: dict[str, dict[str, dict[str, bool]]] = defaultdict(dict)
    for principal, action, entity in grant_rows(data):
        grants[principal].setdefault(entity, {})[action] = True
    members: dict[str, list[str]] = defaultdict(list)
    for member, group in data.get("members", ()):
        members[member].append(group)
        members.setdefault(group, [])  # graph.reachable follows only nodes that are keys
    existing = existing_entities(data)
    inside: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for entity in sorted(existing):
        for place in ancestors(entity, instance)[:-1]:  # namespaces and applications
            inside[place][entity.partition(":")[0]].append(entity)
    held_in: dict[str, dict[str, dict[str, dict[str, bool]]]] = defaultdict(dict)
    within: dict[str, dict[str, bool]] = defaultdict(dict)
    for principal, held in grants.items():
        for entity in held:
            for place in ancestors(entity, instance):
                within[principal][place] = True
            if entity in existing:
                for place, found in held_in_rows(entity, instance):
                    held_in[principal].setdefault(place, {}).setdefault(found, {})[entity] = True
    return {"grants": grants, "members": members, "inside": inside, "held_in": held_in, "within": within}


def held_in_rows(entity: str, instance: str = "cdap") -> list[tuple[str, str]]:
    """(place, type) under which ``held_in`` files a grant on the existing ``entity``."""
    kind = entity.partition(":")[0]
    return [(place, kind) for place in ancestors(entity, instance)[:-1]]


class Regorus:
    """The interpreter: one Engine holding the policy and the world."""

    name = "regorus"

    def __init__(self, data_json: str, existing: Set[str] = frozenset()):
        import regorus

        self.existing = existing
        self.engine = engine = regorus.Engine()
        engine.add_policy("cdap.rego", POLICY_PATH.read_text(encoding="utf-8"))
        engine.add_data_json(data_json)
        set_input, eval_rule = engine.set_input, engine.eval_rule

        def allows(principal: str, operation: str, entity: str, args: Mapping[str, Any] | None = None) -> bool:
            set_input({"principal": principal, "operation": operation, "entity": entity, "args": args or {}})
            return bool(eval_rule("data.cdap.allow"))

        def visible(principal: str, entity_type: str, within: str) -> Any:
            set_input({"principal": principal, "type": entity_type, "namespace": within})
            return eval_rule("data.cdap.visible")

        self.allows = allows
        self.visible = visible

    def grant(self, principal: str, action: str, entity: str) -> None:
        """Add one grant: regorus merges data documents (there is no way to remove one)."""
        doc: dict[str, Any] = {"grants": {principal: {entity: {action: True}}},
                               "within": {principal: dict.fromkeys(ancestors(entity), True)}}
        if entity in self.existing:
            held: dict[str, Any] = {}
            for place, kind in held_in_rows(entity):
                held.setdefault(place, {})[kind] = {entity: True}
            doc["held_in"] = {principal: held}
        self.engine.add_data(doc)

    revoke = None  # regorus's data can be added to or cleared whole, not taken from


class RegorusRvm:
    """The same policy compiled to regorus's virtual machine."""

    name = "regorus-rvm"

    def __init__(self, data_json: str, existing: Set[str] = frozenset()):
        import regorus

        program = regorus.Program.compile_from_modules(
            "{}", [("cdap.rego", POLICY_PATH.read_text(encoding="utf-8"))], ["data.cdap.allow", "data.cdap.visible"]
        )
        self.vm = vm = regorus.Rvm()
        vm.load_program(program)
        vm.set_data_json(data_json)
        set_input, run = vm.set_input_json, vm.execute_entry_point
        dumps = json.dumps

        def allows(principal: str, operation: str, entity: str, args: Mapping[str, Any] | None = None) -> bool:
            set_input(dumps({"principal": principal, "operation": operation, "entity": entity, "args": args or {}}))
            return bool(run("data.cdap.allow") == "true")

        def visible(principal: str, entity_type: str, within: str) -> Any:
            set_input(dumps({"principal": principal, "type": entity_type, "namespace": within}))
            return run("data.cdap.visible")

        self.allows = allows
        self.visible = visible

    grant = None  # the VM's data is set whole (set_data_json): one grant would be a reload
    revoke = None


def visible_set(result: Any) -> frozenset[str]:
    """A visible answer of either engine as a set of ids."""
    if isinstance(result, str):
        result = json.loads(result)
    return frozenset(result or ())
