"""The real server in a subprocess on 127.0.0.1, with a SQLite store in tmp_path, and httpx clients.

No fixed sleeps: a server is ready when it has printed its address and answers
/health, each waited for in a bounded loop.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from privilog.store import open_store

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 60.0


class Server:
    """``python -m privilog serve`` on a free port of 127.0.0.1."""

    def __init__(self, store: Path, *args: str, open_files: int | None = None):
        self.store = store
        self.args = args
        self.open_files = open_files  # the server's RLIMIT_NOFILE, when given
        self.process: subprocess.Popen[str] | None = None
        self.url = ""
        self.log: list[str] = []
        self._clients: list[httpx.Client] = []
        self._drainer: threading.Thread | None = None

    def start(self) -> Server:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "privilog", "serve", "--store", str(self.store), "--port", "0", *self.args],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, cwd=ROOT, env=env,
            preexec_fn=self._limit if self.open_files else None,
        )
        deadline = time.monotonic() + START_TIMEOUT
        assert self.process.stderr is not None
        while not self.url:
            left = deadline - time.monotonic()
            assert left > 0, f"the server did not announce its address: {self.log}"
            ready, _, _ = select.select([self.process.stderr], [], [], left)
            line = self.process.stderr.readline() if ready else ""
            if not line and self.process.poll() is not None:
                raise AssertionError(f"the server exited {self.process.returncode}: {self.log}")
            self.log.append(line)
            if line.startswith("privilog serve: http://"):
                self.url = line.split()[2]
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()
        while True:
            try:
                if httpx.get(f"{self.url}/health", timeout=5).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not answer /health"
            time.sleep(0.01)

    def _limit(self) -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files, self.open_files))

    @property
    def rss(self) -> int:
        """The server process's resident memory, in bytes (Linux: /proc)."""
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS in /proc/PID/status")

    def _drain(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        for line in self.process.stderr:
            self.log.append(line)

    def client(self, token: str | None = None, fresh: bool = False) -> httpx.Client:
        """An httpx client sending ``token``: one per token, kept (its connections reused, as a real
        caller's pool would), unless ``fresh``."""
        if not fresh:
            for client in self._clients:
                if client.headers.get("Authorization") == (f"Bearer {token}" if token else None):
                    return client
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        client = httpx.Client(base_url=self.url, headers=headers, timeout=30)
        self._clients.append(client)
        return client

    def _closed(self) -> None:
        """After the process is gone: close its pipe and the clients made for it."""
        assert self.process is not None
        if self._drainer is not None:
            self._drainer.join(timeout=30)
        if self.process.stderr is not None:
            self.process.stderr.close()
        for client in self._clients:
            client.close()
        self._clients.clear()

    def signal(self, sig: int) -> None:
        assert self.process is not None
        self.process.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL, and wait for it to be gone."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=30)
        self._closed()

    def stop(self) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        self._closed()
        return int(self.process.returncode)


class Setup:
    """A store with an admin (user:root) and a plain user (user:bob), and a token for each."""

    def __init__(self, tmp_path: Path):
        self.path = tmp_path / "authz.db"
        with open_store(str(self.path), ("READ", "WRITE", "EXECUTE", "ADMIN")) as store:
            store.change("local:test", "admin.add", ["user:root"], trusted=True)
            _, self.root = store.create_token("user:root", "local:test")
            _, self.bob = store.create_token("user:bob", "local:test")
        self.servers: list[Server] = []

    def serve(self, *args: str, open_files: int | None = None) -> Server:
        server = Server(self.path, *args, open_files=open_files).start()
        self.servers.append(server)
        return server

    def store(self) -> object:
        return open_store(str(self.path), ("READ", "WRITE", "EXECUTE", "ADMIN"), create=False)

    def close(self) -> None:
        for server in self.servers:
            if server.process is not None:
                server.stop()


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    made = Setup(tmp_path)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def server(setup: Setup) -> Server:
    return setup.serve()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Setup, Server]]:
    """One store and one server for a whole module (the fuzz tests: many requests, one start)."""
    made = Setup(tmp_path_factory.mktemp("shared"))
    try:
        yield made, made.serve("--client-timeout", "2")
    finally:
        made.close()



@pytest.fixture
def start_replica() -> Iterator[Callable[[str], Server]]:
    """Start a server on a store named by URL (PostgreSQL); every one started is stopped after."""
    started: list[Server] = []

    def start(url: str) -> Server:
        server = Server(url).start()  # type: ignore[arg-type]  # a URL where a SQLite store is a path
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            if server.process is not None:
                server.stop()
