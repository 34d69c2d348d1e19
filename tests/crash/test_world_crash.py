"""A world bound to its file never loses an acknowledged change (issue 17, items 1, 2 and 6).

Real processes (``world_writer.py``) bound to one world file grant and revoke through
``privilog.load(..., bind=True)``. One is killed with SIGKILL at random moments, again and
again, while it appends to the change log and while it compacts the log into the file;
two run at once, in many interleavings. After each kill, and at the end, the world loads
(through the same function every reader uses) and holds every acknowledged change, and
no change half-applied: a change grants or revokes three actions at once.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from privilog.engine.world import World, load_world

from privilog import dsl

ROOT = Path(__file__).resolve().parents[2]
WRITER = Path(__file__).with_name("world_writer.py")
ACTIONS = ("READ", "WRITE", "EXECUTE")
KILLS = 60
DEADLINE = 30.0  # seconds a writer may take to acknowledge what the test waits for (a loaded machine)

Key = tuple[str, str]


@pytest.fixture
def world_file(tmp_path: Path) -> Path:
    """A world of 2,000 grants besides the writers' own, so that a compaction takes a while."""
    path = tmp_path / "world.yaml"
    lines = ["# a world the crash tests change", "admins: [user:root]", "grants:"]
    lines += [f"  - [user:bystander{n}, READ, dataset:ns2.d{n}]  # kept as written" for n in range(2000)]
    path.write_text("\n".join(lines) + "\n")
    return path


def writer(world: Path, seed: int, prefix: str, changes: int = -1, log_bytes: int = 2000) -> subprocess.Popen[str]:
    env = dict(os.environ, PRIVILOG_WORLD_LOG_BYTES=str(log_bytes))
    return subprocess.Popen(
        [sys.executable, str(WRITER), str(world), str(seed), prefix, str(changes)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def lines_of(process: subprocess.Popen[str]) -> Iterator[str]:
    assert process.stdout is not None
    for line in process.stdout:
        yield line.rstrip("\n")


def held(world: World, key: Key) -> bool:
    """Whether the key's three grants are there; an error when only some are (half-applied)."""
    principal, dataset = key
    there = {g.action for g in world.grants if g.principal == principal and str(g.entity) == dataset}
    assert there in (set(), set(ACTIONS)), f"{key} is half-applied: {sorted(there)}"
    return bool(there)


def check(world_file: Path, believed: dict[Key, bool], pending: Key | None) -> World:
    """The world loads, holds every acknowledged change, and the pending one wholly or not at all."""
    world = load_world(world_file, dsl.load_policy("cdap").actions)
    keys = {(g.principal, str(g.entity)) for g in world.grants if not g.principal.startswith("user:bystander")}
    for key in keys | set(believed) | ({pending} if pending else set()):
        there = held(world, key)
        if key != pending:
            assert there == believed.get(key, False), f"{key}: acknowledged {believed.get(key)}, on disk {there}"
        else:
            believed[key] = there  # unacknowledged: either is right, and the next writer starts from it
    assert sum(1 for g in world.grants if g.principal.startswith("user:bystander")) == 2000
    return world


def test_sigkill_at_random_moments_loses_no_acknowledged_change(world_file: Path) -> None:
    rng = random.Random(17)
    believed: dict[Key, bool] = {}
    acknowledged = compacted = logged = 0
    for kill in range(KILLS):
        before = world_file.stat()
        process = writer(world_file, seed=kill, prefix="w")
        wanted = rng.randrange(1, 12)  # acknowledgements to wait for before the kill
        seen = 0
        pending: Key | None = None
        deadline = time.monotonic() + DEADLINE
        for line in lines_of(process):
            what, kind, principal, dataset = line.split()
            if what == "begin":
                pending = (principal, dataset)
                continue
            believed[(principal, dataset)] = kind == "grant"
            pending = None
            seen += 1
            if seen == wanted:
                time.sleep(rng.uniform(0, 0.004))  # somewhere in the next change: the log, or a compaction
                break
            assert time.monotonic() < deadline, "the writer stopped acknowledging"
        process.send_signal(signal.SIGKILL)
        assert process.stdout is not None and process.stderr is not None
        rest, errors = process.stdout.read(), process.stderr.read()  # to the end, with what is buffered
        process.stdout.close()
        process.stderr.close()
        assert process.wait(timeout=DEADLINE) == -signal.SIGKILL, errors
        for line in rest.splitlines():  # printed between the last line read and the kill
            what, kind, principal, dataset = line.split()
            pending = (principal, dataset) if what == "begin" else None
            if what == "ack":
                believed[(principal, dataset)] = kind == "grant"
                seen += 1
        acknowledged += seen
        after = world_file.stat()
        compacted += (before.st_ino, before.st_mtime_ns) != (after.st_ino, after.st_mtime_ns)
        logged += world_file.with_name("world.yaml.log").exists()
        check(world_file, believed, pending)
    assert acknowledged >= KILLS
    assert compacted > KILLS // 4 and logged > KILLS // 4  # killed with changes in the log, and after compactions
    text = world_file.read_text()
    assert text.startswith("# a world the crash tests change\n")  # compactions edit the file in place
    assert "  - [user:bystander7, READ, dataset:ns2.d7]  # kept as written\n" in text


# compacting at every change, every few changes, never
@pytest.mark.parametrize(("log_bytes", "changes"), [(1, 20), (600, 60), (1_000_000, 60)])
def test_two_processes_changing_one_world_lose_nothing(world_file: Path, log_bytes: int, changes: int) -> None:
    believed: dict[Key, bool] = {}
    for round_ in range(3):
        processes = {p: writer(world_file, 100 * round_ + n, p, changes, log_bytes) for n, p in enumerate("ab")}
        for process in processes.values():
            out, errors = process.communicate(timeout=120)
            assert process.returncode == 0, errors
            acks = [line.split() for line in out.splitlines() if line.startswith("ack ")]
            assert len(acks) == changes
            for _, kind, principal, dataset in acks:
                believed[(principal, dataset)] = kind == "grant"
        world = check(world_file, believed, None)
        mine = {key for key, granted in believed.items() if granted}
        assert {(g.principal, str(g.entity)) for g in world.grants if not g.principal.startswith("user:bystander")} == mine
        assert any(k[0].startswith("user:a_") for k in mine) and any(k[0].startswith("user:b_") for k in mine)
