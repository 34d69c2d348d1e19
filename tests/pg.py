"""A real PostgreSQL server for tests and benchmarks: ``initdb`` and ``pg_ctl`` in a temporary directory.

The fixtures (registered for every test folder by ``tests/conftest.py``):

* ``postgres_url`` (session): one server for the whole run, on a free port of
  127.0.0.1 with its Unix socket in the same temporary directory, trust
  authentication, and a database ``privilog``; its URL, such as
  ``postgresql://postgres@127.0.0.1:54321/privilog``. Stopped
  (``pg_ctl stop -m immediate``) and removed at the end of the run.
* ``fresh_postgres_url`` (per test): a new, empty database on that server;
* ``postgres_server`` (session): the :class:`TemporaryPostgres` behind them.

A test that stops the database (:meth:`TemporaryPostgres.pause`, then ``resume``) makes a
``TemporaryPostgres`` of its own, so that the tests sharing the session's server never see it go.

Missing PostgreSQL binaries are a failure, not a skip: CI installs them
(``.ci/run``), and the store's tests are what proves the PostgreSQL store.
``initdb`` refuses to run as root; as root, the server runs as the ``postgres``
user (``runuser``), which Debian's ``postgresql`` package creates.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

INSTALL_HINT = "install Debian's `postgresql` package (`apt-get install -y postgresql`; .ci/run does)"


def find_binaries() -> Path:
    """The directory holding ``initdb`` and ``pg_ctl``: on PATH, else the newest /usr/lib/postgresql/*/bin."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(os.path.realpath(on_path)).parent
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    raise RuntimeError(f"PostgreSQL's initdb and pg_ctl are not installed: {INSTALL_HINT}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TemporaryPostgres:
    """A PostgreSQL server of its own in a temporary directory, until :meth:`stop`.

    ``settings``: extra ``-c name=value`` server settings (the benchmark keeps the defaults:
    fsync on, synchronous commits).
    """

    def __init__(self, settings: dict[str, str] | None = None):
        self.bin = find_binaries()
        self.settings = settings or {}
        self.user = None if os.geteuid() != 0 else _postgres_user()
        self.root = Path(tempfile.mkdtemp(prefix="privilog-pg-"))
        if self.user is not None:
            os.chown(self.root, self.user.pw_uid, self.user.pw_gid)
        self.data = self.root / "data"
        self.port = 0
        self._databases = itertools.count(1)

    def _run(self, *args: str, timeout: float = 60) -> None:
        command = [str(self.bin / args[0]), *args[1:]]
        if self.user is not None:
            command = ["runuser", "-u", self.user.pw_name, "--", *command]
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=self.root)
        if result.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{' '.join(args[:1])} failed ({result.returncode}): {result.stderr.strip()}\n{tail}")

    def start(self) -> str:
        """initdb, start on a free port, create the database ``privilog``; its URL."""
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C",
                  "--no-sync")
        for attempt in range(5):  # a free port can be taken between finding it and listening on it
            self.port = free_port()
            try:
                self._pg_ctl_start()
                break
            except RuntimeError:
                if attempt == 4:
                    raise
        return self.create_database("privilog")

    def _pg_ctl_start(self) -> None:
        options = [f"-p {self.port}", "-c listen_addresses=127.0.0.1", f"-c unix_socket_directories={self.root}",
                   "-c max_connections=200", *(f"-c {k}={v}" for k, v in self.settings.items())]
        self._run("pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data), "-l",
                  str(self.root / "server.log"), "-o", " ".join(options))

    def pause(self) -> None:
        """Stop the server as an operator would (``pg_ctl stop -m fast``: sessions ended with an admin
        shutdown), keeping its data and port, until :meth:`resume`: a database that goes away."""
        self._run("pg_ctl", "stop", "-m", "fast", "-w", "-t", "60", "-D", str(self.data))

    def resume(self) -> None:
        """Start the server again after :meth:`pause`, on the same port, with the same data."""
        self._pg_ctl_start()

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str | None = None) -> str:
        """A new empty database (named ``test_N`` unless named); its URL."""
        import psycopg

        name = name or f"test_{next(self._databases)}"
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')  # name: ours, not user input
        return self.url(name)

    def stop(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._run("pg_ctl", "stop", "-m", "immediate", "-w", "-D", str(self.data))
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> TemporaryPostgres:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _postgres_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        raise RuntimeError(f"running as root, and there is no `postgres` user for initdb: {INSTALL_HINT}") from None


def started_postgres() -> Iterator[TemporaryPostgres]:
    """A new PostgreSQL server, started, and stopped when the generator is closed (a fixture's body);
    missing binaries fail the test in one line."""
    try:
        server = TemporaryPostgres()
    except RuntimeError as error:
        pytest.fail(str(error), pytrace=False)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[TemporaryPostgres]:
    """A PostgreSQL server started for this test run (with a database ``privilog``), stopped at its end."""
    yield from started_postgres()


@pytest.fixture(scope="session")
def postgres_url(postgres_server: TemporaryPostgres) -> str:
    """The URL of the database ``privilog`` on the test run's PostgreSQL server."""
    return postgres_server.url("privilog")


@pytest.fixture
def fresh_postgres_url(postgres_server: TemporaryPostgres) -> str:
    """The URL of a new, empty database on the test run's PostgreSQL server."""
    return postgres_server.create_database()
