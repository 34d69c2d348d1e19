"""Mutation testing with mutmut over the code that decides: the installed layout staged for it.

``python tests/mutation/stage.py [--only GLOB ...] [--tests 'PYTEST-ARGS'] [-- MUTMUT-ARGS]``

mutmut 3 copies the source it mutates into ``mutants/`` and runs pytest there, with
``mutants/`` first on ``sys.path``; it names each mutant by the module its file's path makes
(``privilog/engine/compiled/plan.py``: ``privilog.engine.compiled.plan``). This repository
keeps ``engine/``, ``dsl/``, ``proofs/`` and ``rules/`` at its top level and maps them into
``privilog`` through an editable install (``[tool.setuptools.package-dir]``): run in the
repository itself, mutmut would mutate ``engine.compiled.plan`` while the tests import
``privilog.engine.compiled.plan`` from the original files, and every mutant would "survive".

So this script assembles, in ``build/mutation/`` (ignored by git), the tree as it is installed:
``privilog/`` with ``privilog/engine``, ``privilog/dsl``, ``privilog/proofs`` and
``privilog/rules`` copied into it, beside ``tests/`` and ``pyproject.toml``, and runs
``mutmut run`` there. ``mutants/privilog`` then comes first on ``sys.path`` and is what
``import privilog`` finds (the editable install's finder comes after the path's). The
``[tool.mutmut]`` section of pyproject.toml says what is mutated (``only_mutate``) and which
tests may kill (``pytest_add_cli_args_test_selection``); ``--only`` and ``--tests`` replace
them for one run. Each run starts from a fresh copy (the previous run's ``mutants/`` and
results are removed), so a run always mutates the working tree as it is.

After a run: ``cd build/mutation && ../../.venv/bin/mutmut results`` lists the survivors,
``mutmut show NAME`` shows one as a diff. See tests/README.md, "Mutation testing".
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STAGE = ROOT / "build" / "mutation"
MAPPED = ("engine", "dsl", "proofs", "rules")  # top-level folders installed as privilog.<name>
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", ".pytest_cache")


def toml_list(values: list[str]) -> str:
    return "[" + ", ".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values) + "]"


def stage(only: list[str] | None, tests: list[str] | None) -> Path:
    if STAGE.exists():
        shutil.rmtree(STAGE)
    STAGE.mkdir(parents=True)
    shutil.copytree(ROOT / "privilog", STAGE / "privilog", ignore=IGNORE)
    for name in MAPPED:
        shutil.copytree(ROOT / name, STAGE / "privilog" / name, ignore=IGNORE)
        # Tests that read policy files by path (rules/cdap.policy) find them where they are in the repository.
        shutil.copytree(ROOT / name, STAGE / name, ignore=IGNORE)
    shutil.copytree(ROOT / "tests", STAGE / "tests", ignore=IGNORE)
    shutil.copy2(ROOT / "README.md", STAGE / "README.md")  # tests hold the README's and docs' examples to the program
    shutil.copytree(ROOT / "docs", STAGE / "docs", ignore=IGNORE)
    text = (ROOT / "pyproject.toml").read_text()
    config = tomllib.loads(text)["tool"]["mutmut"]
    head, _, rest = text.partition("[tool.mutmut]")
    # The section ends at the next table header.
    tail = rest[rest.find("\n[") + 1 :] if "\n[" in rest else ""
    if only is not None:
        config["only_mutate"] = only
    if tests is not None:
        config["pytest_add_cli_args_test_selection"] = tests
    section = "[tool.mutmut]\n" + "".join(
        f"{key} = {toml_list(value) if isinstance(value, list) else repr(value).lower() if isinstance(value, bool) else repr(value)}\n"
        for key, value in config.items()
    )
    (STAGE / "pyproject.toml").write_text(head + section + "\n" + tail)
    return STAGE


def main(argv: list[str]) -> int:
    mutmut_args: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, mutmut_args = argv[:at], argv[at + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", help="globs of files to mutate, as privilog/engine/analysis.py")
    parser.add_argument("--tests", help="pytest arguments selecting the tests that may kill, one string (shell words)")
    parser.add_argument("--stage-only", action="store_true", help="assemble build/mutation and stop")
    args = parser.parse_args(argv)
    where = stage(args.only, shlex.split(args.tests) if args.tests is not None else None)
    if args.stage_only:
        print(where)
        return 0
    mutmut = Path(sys.executable).with_name("mutmut")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.call([str(mutmut), "run", *mutmut_args], cwd=where, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
