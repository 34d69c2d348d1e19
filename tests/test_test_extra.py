"""What the `test` extra installs is installed: the tests import it plainly, so a broken install fails
them by the hundred; this names what is missing in one line."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def _extra(name: str) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [Requirement(text) for text in project["optional-dependencies"][name]]


def _missing(requirement: Requirement, extra: str = "") -> list[str]:
    """Why ``requirement`` (and what its own extras add) is not met here: nothing when it is."""
    if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
        return []
    try:
        version = metadata.version(requirement.name)
    except metadata.PackageNotFoundError:
        return [f"{requirement} is not installed"]
    if not requirement.specifier.contains(version, prereleases=True):
        return [f"{requirement} is wanted, {requirement.name} {version} is installed"]
    missing = []
    for wanted in requirement.extras:  # pyspark[connect]: grpcio, pandas, pyarrow, ...
        for text in metadata.requires(requirement.name) or []:
            added = Requirement(text)
            if added.marker is not None and added.marker.evaluate({"extra": wanted}):
                missing += [f"{why} (for {requirement.name}[{wanted}])" for why in _missing(added, wanted)]
    return missing


def test_the_test_extra_names_what_the_tests_import() -> None:
    names = {r.name for r in _extra("test")}
    assert {"pytest", "pyspark", "pyarrow", "gordon-to-regorus"} <= names


def test_the_test_extra_holds_every_extra_a_command_needs() -> None:
    """The tests run every command, so `.[test]` installs what each command's extra does."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    tested = {r.name for r in _extra("test")}
    for extra in ("serve", "postgres", "pictures", "prove", "parquet", "spark"):
        wanted = {Requirement(text).name for text in project["optional-dependencies"][extra]}
        assert wanted <= tested, f"the test extra lacks {sorted(wanted - tested)} of the {extra} extra"


def test_everything_the_test_extra_names_is_installed() -> None:
    missing = [why for requirement in _extra("test") for why in _missing(requirement)]
    assert not missing, "; ".join(missing) + " (pip install -e '.[test]')"
