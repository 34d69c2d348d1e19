"""The mutants tests/engine/test_specialize_shortcuts.py kills, and the harness that shows it.

``python tests/engine/specialize_mutants.py [NAME ...]`` runs, for each mutant (all by
default), the tests named to kill it with the mutation applied, and says which it killed.
Not a test itself (pytest does not collect it): each run starts pytest anew, a second or two
a mutant.

A mutation is one exact piece of the engine's source replaced by another. It is applied in
the test process only (this module, given to pytest with ``-p`` and ``PRIVILOG_MUTANT=NAME``):
the module's source is read, changed, executed as a module of its own, and the changed
functions set on the original classes. The files on disk are never touched, so other test
runs in the same tree are not disturbed.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests/engine/test_specialize_shortcuts.py"
SPEC = "privilog.engine.compiled.specialize"
AUTH = "privilog.engine.authorizer.deciding"

Mutant = tuple[str, str, str, list[tuple[str | None, str]], list[str]]  # module, old, new, targets, killers

MUTANTS: dict[str, Mutant] = {
    # _Writer._filter: negated world relations
    "neg-world-all-bound": (
        SPEC, 'self.test(f"{key} not in {reader}")', 'self.test(f"{key} in {reader}")', [("_Writer", "_filter")],
        ["test_cdap_5_1_denies_a_system_dataset_to_a_user_without_grants", "test_a_negated_world_relation_with_every_column_bound"],
    ),
    "neg-world-some-bound": (
        SPEC, 'self.test(f"not {reader}.get({key})")', 'self.test(f"{reader}.get({key})")', [("_Writer", "_filter")],
        ["test_a_negated_world_relation_with_some_columns_bound"],
    ),
    "neg-world-none-bound": (
        SPEC, 'self.test(f"not {reader}")', 'self.test(f"{reader}")', [("_Writer", "_filter")],
        ["test_a_negated_world_relation_with_no_column_bound"],
    ),
    "neg-world-repeated": (
        SPEC, "self.test(f\"not any({' and '.join(repeated)} for t in {rows})\")",
        "self.test(f\"any({' and '.join(repeated)} for t in {rows})\")", [("_Writer", "_filter")],
        ["test_a_negated_world_relation_with_a_repeated_free_variable"],
    ),
    "neg-world-repeated-ignored": (
        SPEC, "self.test(f\"not any({' and '.join(repeated)} for t in {rows})\")",
        'self.test(f"not any(True for t in {rows})")', [("_Writer", "_filter")],
        ["test_a_negated_world_relation_with_a_repeated_free_variable"],
    ),
    # _Writer._filter: negated request arguments
    "neg-arg-is-none": (
        SPEC, 'test = "is None" if', 'test = "is not None" if', [("_Writer", "_filter")],
        ["test_a_negated_request_argument_that_is_absent"],
    ),
    "neg-arg-ne": (
        SPEC, 'else f"!= {self.term(value)}"', 'else f"== {self.term(value)}"', [("_Writer", "_filter")],
        ["test_a_negated_request_argument_that_differs"],
    ),
    # _Writer._filter: negated calls of the request's own relations, and comparisons
    "neg-inline": (
        SPEC, 'self.test(f"not ({inline})")', 'self.test(f"({inline})")', [("_Writer", "_filter")],
        ["test_a_negated_call_tested_in_place"],
    ),
    "neg-call": (
        SPEC, 'self.test(f"not {function}({passed})")', 'self.test(f"{function}({passed})")', [("_Writer", "_filter")],
        ["test_a_negated_call_of_a_function", "test_a_comparison"],
    ),
    "comparison": (
        SPEC, 'self.test(f"{self.term(literal.left)} {op} {self.term(literal.right)}")', 'self.test("True")',
        [("_Writer", "_filter")], ["test_a_comparison"],
    ),
    # _Writer._atom, _bind and _argument: positive literals
    "rows-shortcut": (
        SPEC, 'self.test(f"{rows}")\n            return', 'self.test("True")\n            return', [("_Writer", "_atom")],
        ["test_a_lookup_that_only_asks_whether_rows_exist"],
    ),
    "bind-repeated": (
        SPEC, "if checks:\n            self.test(f\"{' and '.join(checks)}\")", "if checks:\n            pass",
        [("_Writer", "_bind")], ["test_a_positive_world_relation_with_a_repeated_free_variable"],
    ),
    "arg-present": (
        SPEC, 'self.test(f"{found} is not None")', 'self.test("True")', [("_Writer", "_argument")],
        ["test_a_request_argument_that_is_given"],
    ),
    "arg-equal": (
        SPEC, 'self.test(f"{found} == {self.term(value)}")', 'self.test("True")', [("_Writer", "_argument")],
        ["test_a_request_argument_equal_to_the_entity"],
    ),
    # DecisionPlans.aux and _canonical: joins kept as relations of their own (_joinN)
    "aux-not-evaluated": (
        SPEC, "self.evaluator.evaluate(component, self.evaluator.store)", "pass", [("DecisionPlans", "aux")],
        ["test_joins_kept_as_relations_of_their_own"],
    ),
    "aux-not-maintained": (
        SPEC, "self.maintained.append(component)", "pass", [("DecisionPlans", "aux")],
        ["test_joins_kept_as_relations_of_their_own"],
    ),
    "aux-key-constants": (
        SPEC, "return repr(t.value)", "return 'C'", [(None, "_canonical")],
        ["test_joins_kept_as_relations_of_their_own"],
    ),
    # the authorizer's deciding: the ways to a plan
    "allows-type-check": (
        AUTH, " or known.type != op.entity_type", "", [("Deciding", "in_place")],
        ["test_the_entity_type_is_checked_on_the_fast_path"],
    ),
    "allows-exists": (
        AUTH, " or not self.loaded.inventory.exists(known):", ":", [("Deciding", "in_place")],
        ["test_a_create_places_its_entity_first"],
    ),
    "allows-args-key": (
        AUTH, "key = (op.qualified, entity, tuple(args.items()))", "key = (op.qualified, tuple(args.items()))",
        [("Deciding", "_checked_args")], ["test_arguments_checked_once_are_kept_for_their_entity_only"],
    ),
    "decide-absent": (
        AUTH, "if not any(absent.values()):", "if True:", [("Deciding", "decide")],
        ["test_a_create_places_its_entity_first"],
    ),
    "decide-names": (
        AUTH, "and not loaded.patterns and not loaded.uses_names:", "and not loaded.patterns:", [("Deciding", "decide")],
        ["test_names_of_a_principal_the_world_does_not_name"],
    ),
    "decide-patterns": (
        AUTH, "and not loaded.patterns and not loaded.uses_names:", "and not loaded.uses_names:",
        [("Deciding", "decide")], ["test_a_wildcard_matching_an_argument_that_does_not_exist"],
    ),
}


def apply(name: str) -> None:
    """Apply mutant ``name`` in this process."""
    module_name, old, new, targets, _ = MUTANTS[name]
    module = importlib.import_module(module_name)
    assert module.__file__ is not None
    source = Path(module.__file__).read_text(encoding="utf-8")
    if source.count(old) != 1:
        raise SystemExit(f"mutant {name}: {old!r} is in {module_name} {source.count(old)} times, not once")
    mutated = types.ModuleType(module_name)
    mutated.__file__ = module.__file__
    exec(compile(source.replace(old, new), f"{module.__file__} [mutant {name}]", "exec"), mutated.__dict__)
    for owner, attribute in targets:
        if owner is None:
            setattr(module, attribute, getattr(mutated, attribute))
        else:
            setattr(getattr(module, owner), attribute, getattr(getattr(mutated, owner), attribute))


if os.environ.get("PRIVILOG_MUTANT") and __name__ != "__main__":  # loaded by pytest with -p
    apply(os.environ["PRIVILOG_MUTANT"])


def run(name: str | None, tests: list[str]) -> int:
    """pytest's exit status for ``tests`` of the module, with mutant ``name`` applied (None: none)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PRIVILOG_MUTANT", None)
    if name is not None:
        env["PRIVILOG_MUTANT"] = name
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.engine.specialize_mutants"]
    argv += [f"{MODULE}::{t}" for t in tests]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False).returncode


def main(names: list[str]) -> int:
    names = names or list(MUTANTS)
    # a test that fails without any mutant kills nothing: said, and not counted
    failing = {t for name in names for t in MUTANTS[name][4] if run(None, [t]) != 0}
    for test in sorted(failing):
        print(f"{test} fails without a mutant")
    survived = []
    for name in names:
        killers = [t for t in MUTANTS[name][4] if t not in failing]
        if not killers:
            print(f"{name}: not shown (each of its tests fails without a mutant)")
            survived.append(name)
            continue
        killed = [t for t in killers if run(name, [t]) != 0]
        print(f"{name}: {'killed by ' + ', '.join(killed) if killed else 'SURVIVED'}")
        if not killed:
            survived.append(name)
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
