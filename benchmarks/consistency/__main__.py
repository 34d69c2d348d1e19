"""The consistency benchmark (issue 36): what a check costs under each consistency mode, and how stale `any` is.

    python -m benchmarks.consistency [--checks 2000] [--changes 200] [--trials 20] [--window 0.5] [--out FILE]

Two ``privilog serve`` processes (A and B) over one store, SQLite (one file) and PostgreSQL (the tests'
kind of server, started for the run by ``tests/pg.py``), on 127.0.0.1; the client is one kept-alive
connection of plain sockets (so the figures are the server's and the loopback's, not an HTTP library's).
Each figure is the time from sending a ``POST /v1/check`` to B until its answer is read:

* **any**: no consistency asked;
* **at_least, covered**: ``at_least`` a revision B already covers (a comparison under the lock);
* **at_least, after a change through A**: a grant made through A, then at once a check at B carrying the
  grant's revision: B has usually not taken it in yet and catches up from the store first;
* **full**: B reads the store's log head, then answers.

The stale window: a grant through A, waited for at B; then the revoke through A and, from the moment A
acknowledged it, checks at B as fast as one connection goes for ``--window`` seconds: how many allowed, and
the last one's time after the acknowledgement. Once without a token, once with ``at_least`` the revoke's
revision (0 allowed). Measurements, not tests: nothing here asserts a figure.
"""

from __future__ import annotations

import argparse
import json
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.engines.common import machine_info, percentile, progress
from privilog.store import open_store
from tests.pg import TemporaryPostgres
from tests.serve.conftest import Server

DEFAULT_OUT = Path(__file__).resolve().parent / "results.json"
ACTIONS = ("READ", "WRITE", "EXECUTE", "ADMIN")
CHECK = {"principal": "user:alice", "operation": "dataset.read", "entity": "dataset:ns1.sales"}


class Connection:
    """One kept-alive HTTP/1.1 connection to a server, as plain as it gets."""

    def __init__(self, url: str, token: str):
        host, port = url.removeprefix("http://").split(":")
        self.host, self.token = host, token
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def post(self, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[int, Any]:
        data = json.dumps(body).encode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self.sock.sendall(
            (
                f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nAuthorization: Bearer {self.token}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n{extra}\r\n"
            ).encode()
            + data
        )
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self.sock.recv(65536)
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        length = next(int(line.split(":")[1]) for line in lines if line.lower().startswith("content-length:"))
        while len(self.buffer) < length:
            self.buffer += self.sock.recv(65536)
        payload, self.buffer = self.buffer[:length], self.buffer[length:]
        return int(lines[0].split()[1]), json.loads(payload)

    def close(self) -> None:
        self.sock.close()


def _timed(connection: Connection, body: dict[str, Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    status, answer = connection.post("/v1/check", body)
    seconds = time.perf_counter() - started
    assert status == 200, answer
    return seconds, answer


def _summary(seconds: list[float]) -> dict[str, Any]:
    us = [s * 1e6 for s in seconds]
    return {"n": len(us), "p50_us": round(percentile(us, 50), 1), "p99_us": round(percentile(us, 99), 1)}


def _change(connection: Connection, kind: str, items: list[list[str]]) -> str:
    status, answer = connection.post("/v1/changes", {"kind": kind, "items": items})
    assert status == 200, answer
    return str(answer["change"]["revision"])


def latencies(a: Connection, b: Connection, checks: int, changes: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for _ in range(200):  # warm
        _timed(b, CHECK)
    out["any"] = _summary([_timed(b, CHECK)[0] for _ in range(checks)])
    covered = _timed(b, CHECK)[1]["revision"]
    out["at_least_covered"] = _summary(
        [_timed(b, {**CHECK, "consistency": {"at_least": covered}})[0] for _ in range(checks)]
    )
    after: list[float] = []
    for i in range(changes):
        token = _change(a, "grant", [[f"user:bench{i}", "READ", "dataset:ns1.sales"]])
        after.append(_timed(b, {**CHECK, "consistency": {"at_least": token}})[0])
    out["at_least_after_change_elsewhere"] = _summary(after)
    out["full"] = _summary([_timed(b, {**CHECK, "consistency": "full"})[0] for _ in range(checks)])
    return out


def window(a: Connection, b: Connection, trials: int, seconds: float, tokened: bool) -> dict[str, Any]:
    """Per trial: the allows B answered after A acknowledged the revoke, and the last one's time after it."""
    counts: list[int] = []
    windows: list[float] = []
    checks = 0
    grant = [["user:alice", "READ", "dataset:ns1.sales"]]
    for _ in range(trials):
        _change(a, "grant", grant)
        while _timed(b, CHECK)[1]["decision"] != "allow":
            pass
        token = _change(a, "revoke", grant)
        acknowledged = time.perf_counter()
        body = {**CHECK, "consistency": {"at_least": token}} if tokened else CHECK
        allowed, last = 0, 0.0
        while time.perf_counter() - acknowledged < seconds:
            _, answer = _timed(b, body)
            checks += 1
            if answer["decision"] == "allow":
                allowed, last = allowed + 1, time.perf_counter() - acknowledged
        counts.append(allowed)
        windows.append(last * 1000)
    return {
        "trials": trials,
        "checks": checks,
        "allows_total": sum(counts),
        "allows_per_trial_max": max(counts),
        "window_ms_p50": round(percentile(windows, 50), 1),
        "window_ms_max": round(max(windows), 1),
    }


def one_store(kind: str, url: str, args: argparse.Namespace) -> dict[str, Any]:
    with open_store(url, ACTIONS) as store:
        store.change("local:bench", "admin.add", ["user:root"], trusted=True)
        _, token = store.create_token("user:root", "local:bench")
    servers = [Server(url).start(), Server(url).start()]  # type: ignore[arg-type]  # a URL or a path
    try:
        a, b = (Connection(s.url, token) for s in servers)
        progress(f"{kind}: latencies")
        result = {"latency": latencies(a, b, args.checks, args.changes)}
        progress(f"{kind}: the stale window, {args.trials} trials")
        result["window_without_token"] = window(a, b, args.trials, args.window, tokened=False)
        result["window_with_at_least"] = window(a, b, args.trials, args.window, tokened=True)
        a.close()
        b.close()
        return result
    finally:
        for server in servers:
            server.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.consistency", description=__doc__.split("\n")[0])
    parser.add_argument("--checks", type=int, default=2000, help="checks timed per mode")
    parser.add_argument("--changes", type=int, default=200, help="changes through A, each then checked at B")
    parser.add_argument("--trials", type=int, default=20, help="revokes whose stale window is measured")
    parser.add_argument("--window", type=float, default=0.5, help="seconds of checks after each revoke")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"machine": machine_info(), "setup": {k: v for k, v in vars(args).items() if k != "out"}}
    with TemporaryPostgres() as server, tempfile.TemporaryDirectory() as scratch:
        server.start()
        results["sqlite"] = one_store("sqlite", str(Path(scratch) / "authz.db"), args)
        results["postgresql"] = one_store("postgresql", server.create_database("consistency"), args)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps({k: v for k, v in results.items() if k != "machine"}, indent=2))


if __name__ == "__main__":
    main()
