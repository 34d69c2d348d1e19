"""`privilog pipeline ... --world WORLD`: the deployment is given once, a world file or its tables.

Both refusals come before Spark starts (the run's decisions over a world are in
tests/spark/test_ranger_impact.py), and leave no run behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from privilog.cli import main

SAMPLE = str(Path(__file__).resolve().parents[2] / "privilog" / "samples" / "world.yaml")


@pytest.mark.parametrize(
    ("given", "line"),
    [
        (["--world", SAMPLE, "--entities", "e.csv", "--grants", "g.csv"],
         "privilog: --world and --entities both give the deployment: the world file holds its entities, grants, "
         "members, config and facts; give --world alone, or the tables without it"),
        (["--world", SAMPLE, "--facts", "facts"], "privilog: --world and --facts both give the deployment"),
        (["--entities", "e.csv"],
         "privilog: say what the deployment is: --grants (tables), or --world WORLD (a world file or a folder of "
         "tables)"),
        ([], "privilog: say what the deployment is: --entities and --grants (tables), or --world WORLD"),
    ],
)  # fmt: skip
def test_the_deployment_is_given_once(
    given: list[str], line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["pipeline", "impact", "cdap-5.1", "cdap", *given, "--requests", "r.csv", "--out", str(tmp_path / "run")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(line) and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []
