"""`privilog serve --workers 2`: workers forked after one load, over real HTTP and real processes.

Each worker is reached on a connection of its own: a kept-alive connection stays with the worker that
accepted it, and ``GET /ready`` on it names that worker's pid. So a grant made through one worker and
a check asked of the other are asked of two processes, by construction. Then: a worker killed (kill -9)
is replaced by one forked from the parent's load, which is behind the store and catches up before it
answers; SIGHUP replaces every worker; workers end with a parent that is killed; and each worker's store
connections are its own (opened after the fork: the parent holds none, and on PostgreSQL no two workers
share a socket).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from privilog.store import open_store
from tests.serve.conftest import Server, Setup

ACTIONS = ("READ", "WRITE", "EXECUTE", "ADMIN")
CHECK = {"principal": "user:alice", "operation": "dataset.read", "entity": "dataset:ns1.sales"}
GRANT = [["user:alice", "READ", "dataset:ns1.sales"]]
BOUND = 30.0  # liveness of a wait, not a timing
OPENED: list[http.client.HTTPConnection] = []  # every connection a test opened, closed after it


@pytest.fixture(autouse=True)
def _close_connections() -> Any:
    yield
    while OPENED:
        OPENED.pop().close()


class Connection:
    """One kept-alive HTTP connection, and the worker (pid) that accepted it."""

    def __init__(self, url: str, token: str):
        address = urlsplit(url)
        self.http = http.client.HTTPConnection(address.hostname or "", address.port, timeout=30)
        OPENED.append(self.http)
        self.token = token
        self.pid = int(self.ask("GET", "/ready")[1]["pid"])

    def ask(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
        sent = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json", **(headers or {})}
        self.http.request(method, path, None if body is None else json.dumps(body), sent)
        answer = self.http.getresponse()
        return answer.status, json.loads(answer.read())

    def decide(self, **extra: Any) -> str:
        status, body = self.ask("POST", "/v1/check", {**CHECK, **extra})
        assert status == 200, body
        return str(body["decision"])

    def change(self, kind: str) -> str:
        status, body = self.ask("POST", "/v1/changes", {"kind": kind, "items": GRANT})
        assert status == 200, body
        return str(body["change"]["revision"])


def _rollup(pid: int) -> dict[str, int]:
    """/proc/PID/smaps_rollup's figures, in kB."""
    lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]
    return {name.rstrip(":"): int(value) for name, value, *_ in (line.split() for line in lines)}


def children(pid: int) -> set[int]:
    return {int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}


def one_per_worker(server: Server, token: str, workers: set[int]) -> dict[int, Connection]:
    """A connection to each of ``workers`` (connections opened until each has accepted one, bounded: a worker
    just forked accepts none until it has caught up and started)."""
    found: dict[int, Connection] = {}
    started = time.monotonic()
    while time.monotonic() - started < BOUND:
        connection = Connection(server.url, token)
        if connection.pid in workers and connection.pid not in found:
            found[connection.pid] = connection
        else:
            connection.http.close()
            time.sleep(0.005)
        if set(found) == workers:
            return found
    raise AssertionError(f"connections for {BOUND} s reached only workers {sorted(found)} of {sorted(workers)}")


def wait_for(condition: Callable[[], Any], what: str) -> Any:
    started = time.monotonic()
    while not (value := condition()):
        assert time.monotonic() - started < BOUND, f"not within {BOUND} s: {what}"
        time.sleep(0.02)
    return value


def children_when(pid: int, test: Callable[[set[int]], bool], what: str) -> set[int]:
    """``pid``'s children, once ``test`` holds of them (bounded)."""

    def found() -> set[int] | None:
        now = children(pid)
        return now if test(now) else None

    return set(wait_for(found, what))


def workers_of(server: Server) -> set[int]:
    assert server.process is not None
    return children_when(server.process.pid, lambda found: len(found) == 2, "2 workers")


def test_two_workers_answer_alike_after_a_grant_through_either(setup: Setup, tmp_path: Path) -> None:
    log = tmp_path / "decisions.log"
    server = setup.serve("--workers", "2", "--decision-log", str(log))
    first, second = one_per_worker(server, setup.root, workers_of(server)).values()
    assert first.pid != second.pid
    for pid in (first.pid, second.pid):  # forked after the load: a worker shares the pages its parent wrote
        memory = _rollup(pid)  # (a worker that loads for itself shares next to none; here, on an empty store, the
        assert memory["Shared_Dirty"] > memory["Private_Dirty"] / 2, memory  # interpreter is most of it)
    assert first.decide() == second.decide() == "deny"

    granted = first.change("grant")
    assert first.decide() == "allow"  # at once where it was made
    assert second.decide(consistency={"at_least": granted}) == "allow"  # the other, asked at least that revision
    wait_for(lambda: second.decide() == "allow", "the other worker follows the grant")

    revoked = second.change("revoke")  # and the other way round
    assert second.decide() == "deny"
    assert first.decide(consistency={"at_least": revoked}) == "deny"
    wait_for(lambda: first.decide() == "deny", "the first worker follows the revoke")

    server.stop()  # each worker's decision log: a stream of its own, numbered from 1, every line written
    streams: dict[str, list[int]] = {}
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        streams.setdefault(entry["stream"], []).append(entry["n"])
    assert len(streams) == 2
    assert all(numbers == list(range(1, len(numbers) + 1)) for numbers in streams.values())


def test_a_killed_worker_is_forked_again_and_catches_up(setup: Setup) -> None:
    server = setup.serve("--workers", "2")
    assert server.process is not None
    parent = server.process.pid
    original = workers_of(server)
    connection = Connection(server.url, setup.root)
    connection.change("grant")  # after the parent's load: a worker forked from it is behind the store
    connection.http.close()
    replaced: set[int] = set()
    for pid in sorted(original):
        os.kill(pid, signal.SIGKILL)
        now = children_when(parent, lambda found, pid=pid: len(found) == 2 and pid not in found, f"worker {pid} replaced")
        replaced |= now - original
    assert len(replaced) == 2 and not replaced & original
    for pid, worker in one_per_worker(server, setup.root, replaced).items():
        assert worker.decide() == "allow", f"worker {pid}, forked again, did not catch up with the grant"
        status, ready = worker.ask("GET", "/ready")
        assert status == 200 and ready["lag"] == 0
    assert any("was killed by SIGKILL; forking another" in line for line in server.log)

    server.signal(signal.SIGHUP)  # a reload: every worker replaced by one forked from the new load
    renewed = children_when(
        parent, lambda found: len(found) == 2 and not found & replaced, "every worker replaced after SIGHUP"
    )
    for worker in one_per_worker(server, setup.root, renewed).values():
        assert worker.decide() == "allow"
    assert server.stop() == 0
    assert not Path(f"/proc/{parent}").exists()


def test_workers_end_with_their_parent(setup: Setup) -> None:
    server = setup.serve("--workers", "2")
    workers = workers_of(server)
    server.kill()  # SIGKILL: the parent cannot stop them; the kernel tells them (PR_SET_PDEATHSIG)
    wait_for(lambda: not any(Path(f"/proc/{pid}").exists() for pid in workers), "the workers ended")


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def _connections_to(port: int) -> dict[str, int]:
    """Every TCP socket of this network namespace connected to 127.0.0.1:``port``: its inode and local port."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote, inode = fields[1], fields[2], fields[9]
            if int(remote.rsplit(":", 1)[1], 16) == port:
                found[inode] = int(local.rsplit(":", 1)[1], 16)
    return found


def _files(pid: int) -> set[str]:
    out = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            out.add(os.readlink(fd))
    return out


def test_each_worker_has_store_connections_of_its_own(setup: Setup, fresh_postgres_url: str) -> None:
    # SQLite: the parent holds no file of the store once loaded; each worker opened its own
    server = setup.serve("--workers", "2")
    assert server.process is not None
    workers = workers_of(server)
    one_per_worker(server, setup.root, workers)  # each has answered: its store is open
    assert str(setup.path) not in _files(server.process.pid)
    for pid in workers:
        assert str(setup.path) in _files(pid), f"worker {pid} has no connection to the store"

    # PostgreSQL: each worker's connections are sockets of its own (a connection forked would be one
    # socket in two processes), and the parent has none
    with open_store(fresh_postgres_url, ACTIONS) as store:
        store.change("local:test", "admin.add", ["user:root"], trusted=True)
        _, token = store.create_token("user:root", "local:test")
    replica = Server(fresh_postgres_url, "--workers", "2").start()  # type: ignore[arg-type]
    try:
        assert replica.process is not None
        workers = workers_of(replica)
        for connection in one_per_worker(replica, token, workers).values():
            connection.change("grant" if connection.decide() == "deny" else "revoke")  # reads and writes
        port = urlsplit(fresh_postgres_url).port
        assert port is not None
        to_postgres = _connections_to(port)
        assert not _socket_inodes(replica.process.pid) & set(to_postgres)
        owned = {pid: _socket_inodes(pid) & set(to_postgres) for pid in workers}
        assert all(owned.values()), f"a worker without a connection to PostgreSQL: {owned}"
        first, second = owned.values()
        assert not first & second
    finally:
        replica.stop()
