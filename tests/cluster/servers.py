"""Real Spark servers on 127.0.0.1 for the tests: a standalone cluster (a master and one worker) and a Spark
Connect server, each started from the installed PySpark's own scripts, on ports chosen free.

Every start waits a bounded time for the server to answer (and fails with the tail of its log, not a hang);
every server is stopped at the end, its whole process group, first with SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

START_TIMEOUT = 180.0  # seconds: a JVM starts in 5-30 s on these machines, far slower when CI is busy
STOP_TIMEOUT = 30.0


def spark_home() -> Path:
    """The installed PySpark's folder: its bin/ has spark-submit and spark-class, its jars/ Connect's server."""
    import pyspark

    return Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
    except OSError:
        return False
    return True


def spark_env() -> dict[str, str]:
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_HOME=str(spark_home()))
    for name in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET"):
        env.pop(name, None)
    return env


@dataclass
class Server:
    """A JVM started by a PySpark script, in a process group of its own, its output in ``log``."""

    name: str
    argv: list[str]
    log: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                self.argv, stdout=out, stderr=subprocess.STDOUT, env=spark_env(), start_new_session=True
            )

    def wait_for(self, ready: Callable[[], bool], what: str) -> None:
        """Wait until ``ready()``, at most START_TIMEOUT; fail with the log's tail if the server dies or is slow."""
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.process.returncode}) before {what}:\n{self.tail()}")
            if ready():
                return
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"{self.name}: not {what} after {START_TIMEOUT:.0f}s:\n{self.tail()}")

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """End the server's whole process group: SIGTERM, then SIGKILL what is left after STOP_TIMEOUT."""
        if self.process is None:
            return
        group = self.process.pid
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if not group_alive(group):
                break
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, sig)
            deadline = time.monotonic() + STOP_TIMEOUT
            while group_alive(group) and time.monotonic() < deadline:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=0.2)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=STOP_TIMEOUT)


def group_alive(group: int) -> bool:
    """Whether a process of the group is still running (zombies, which an init that does not reap
    leaves behind in a container, are not)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == group and fields[0] != "Z":
            return True
    return False


@dataclass
class Standalone:
    """A standalone Spark cluster: a master and one worker with 2 cores, on 127.0.0.1."""

    master: Server
    worker: Server
    port: int
    ui_port: int

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as response:
                state = json.load(response)
        except (OSError, ValueError):
            return 0
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def stop(self) -> None:
        self.worker.stop()
        self.master.stop()


def start_standalone(folder: Path, worker_memory: str = "3g") -> Standalone:
    """Start a master, then a worker that registers with it; both answer before this returns."""
    folder.mkdir(parents=True, exist_ok=True)
    spark_class = str(spark_home() / "bin" / "spark-class")
    port, ui_port, worker_ui = free_port(), free_port(), free_port()
    master = Server(
        "the standalone master",
        [spark_class, "org.apache.spark.deploy.master.Master",
         "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui_port)],
        folder / "master.log",
    )  # fmt: skip
    worker = Server(
        "the standalone worker",
        [spark_class, "org.apache.spark.deploy.worker.Worker",
         "--host", "127.0.0.1", "--cores", "2", "--memory", worker_memory, "--webui-port", str(worker_ui),
         "--work-dir", str(folder / "work"), f"spark://127.0.0.1:{port}"],
        folder / "worker.log",
    )  # fmt: skip
    cluster = Standalone(master, worker, port, ui_port)
    master.start()
    try:
        master.wait_for(lambda: answers(port) and answers(ui_port), "answering on its ports")
        worker.start()
        worker.wait_for(lambda: cluster.alive_workers() >= 1, "registered with the master")
    except BaseException:
        cluster.stop()
        raise
    return cluster


@dataclass
class ConnectServer:
    """A Spark Connect server (local[2]) whose catalog keeps its tables and metastore in ``warehouse``."""

    server: Server
    port: int
    warehouse: Path

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.stop()


def start_connect(folder: Path, driver_memory: str = "4g") -> ConnectServer:
    """Start a Spark Connect server with a Hive catalog in ``folder``; it answers before this returns."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    warehouse = folder / "catalog"
    metastore = f"jdbc:derby:;databaseName={warehouse / 'metastore_db'};create=true"
    server = Server(
        "the Spark Connect server",
        [str(spark_home() / "bin" / "spark-submit"),
         "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
         "--master", "local[2]", "--driver-memory", driver_memory,
         "--driver-java-options", f"-Dderby.system.home={warehouse}",
         "--conf", f"spark.connect.grpc.binding.port={port}",
         "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
         "--conf", "spark.ui.enabled=false",
         "--conf", "spark.sql.catalogImplementation=hive",
         "--conf", f"spark.sql.warehouse.dir={warehouse / 'warehouse'}",
         "--conf", f"spark.hadoop.javax.jdo.option.ConnectionURL={metastore}",
         "spark-internal"],
        folder / "connect.log",
    )  # fmt: skip
    connect = ConnectServer(server, port, warehouse)
    server.start()
    try:
        server.wait_for(lambda: answers(port), "answering on its port")
    except BaseException:
        connect.stop()
        raise
    return connect
