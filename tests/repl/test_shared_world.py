"""Two REPLs on one world file (issue 17, item 1): alice's grant, then bob's; both survive.

Real `privilog repl` processes on pseudo-terminals (pexpect), as a user runs them side by side.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest
from privilog.engine.world import load_world

from privilog import dsl
from tests.repl.test_terminal import PROMPT, ROOT, SAMPLE_WORLD, TIMEOUT, environment


def start(home: Path, world: Path) -> pexpect.spawn:
    child = pexpect.spawn(
        sys.executable, ["-m", "privilog", "repl", "--world", str(world)], cwd=str(ROOT), env=environment(home),
        encoding="utf-8", timeout=TIMEOUT, dimensions=(50, 250),
    )
    child.expect_exact(PROMPT)
    return child


def run(repl: pexpect.spawn, line: str, *expected: str) -> None:
    repl.send(line + "\r")
    for text in expected:
        repl.expect_exact(text)
    repl.expect_exact(PROMPT)


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[pexpect.spawn, pexpect.spawn, Path]]:
    world = tmp_path / "world.yaml"
    shutil.copy(SAMPLE_WORLD, world)
    first, second = start(tmp_path, world), start(tmp_path, world)
    try:
        yield first, second, world
    finally:
        first.close(force=True)
        second.close(force=True)


def test_two_repls_granting_and_saving_keep_both_grants(two: tuple[pexpect.spawn, pexpect.spawn, Path]) -> None:
    first, second, world = two
    run(first, "grant user:alice READ dataset:marketing.campaigns as user:root", "granted READ")
    run(second, "grant user:bob READ dataset:marketing.campaigns as user:root", "granted READ")
    run(first, "save world", "saved the world to")
    # the second saves after the first: it takes the first's grant in, and says so
    run(second, "save world", "was changed by someone else since this session read it", "saved the world to")
    run(second, "check user:alice dataset.read dataset:marketing.campaigns", "ALLOW")
    grants = {str(g) for g in load_world(world, dsl.load_policy("cdap").actions).grants}
    assert {"user:alice READ dataset:marketing.campaigns", "user:bob READ dataset:marketing.campaigns"} <= grants
    # the first sees the second's grant on its next line, with a note
    run(first, "check user:bob dataset.read dataset:marketing.campaigns", "read it again", "ALLOW")
