"""The examples in privilog's docstrings, run as tests under the names privilog is installed with.

pytest's ``--doctest-modules`` would import ``dsl/check.py`` as ``dsl.check``, a second copy of
``privilog.dsl.check`` with its own classes and caches; here each module is imported once, by its real
name, and its examples run with ``doctest`` itself.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

SKIPPED = {"privilog.__main__", "privilog.pipeline.__main__"}  # running them would run a command


ROOTS = ("privilog", "privilog.dsl", "privilog.engine", "privilog.proofs")  # the last three live in folders of their own


def _modules() -> list[str]:
    names = list(ROOTS)
    for root in ROOTS:
        package = importlib.import_module(root)
        names += [found.name for found in pkgutil.walk_packages(package.__path__, prefix=f"{root}.")]
    return sorted(set(names) - SKIPPED)


def _with_examples() -> list[str]:
    finder = doctest.DocTestFinder(exclude_empty=True)
    return [name for name in _modules() if any(t.examples for t in finder.find(importlib.import_module(name)))]


def test_the_subpackages_are_walked() -> None:
    names = _modules()
    assert {"privilog.dsl.check", "privilog.engine.ids", "privilog.proofs.prover", "privilog.cli.commands"} <= set(names)


@pytest.mark.parametrize("name", _with_examples())
def test_the_examples_in_the_docstrings(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE, verbose=False, report=False)
    assert result.attempted > 0
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (run it: python -m doctest -v)"
