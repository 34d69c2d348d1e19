"""The attackers of ``benchmarks.attack``, in a process of their own (asyncio): slow clients and oversized tokens.

    python -m benchmarks.attack.attackers --url http://127.0.0.1:PORT [--slow 300] [--oversized 1]

* **Slow clients**: each a socket bound to its own loopback address (127.0.1.1,
  127.0.1.2, ...: Linux routes all of 127.0.0.0/8 to lo), sending the headers
  of ``POST /v1/check`` with ``Content-Length: 100000`` and no token (even
  clients) or a made-up well-formed one (odd clients), then one byte of the
  body a second, answered or not. When the server closes the connection (or
  resets it), the client connects again at once (``--reconnect-delay``: after so long). Each connection's life is
  recorded: how long, how it ended, the first status if one came.
* **Oversized tokens**: one client (from 127.0.3.1) sending, one after the
  other, ``POST /v1/check`` with a distinct bogus bearer token of 1 MiB (every
  fourth: 100 KB), counting the statuses, the resets and the connections lost
  without an answer.

It prints ``ready N`` on stdout once the slow clients have each sent their
headers once (or after 10 s), runs until ``stop`` arrives on stdin (or stdin
closes; ``pause-oversized`` stops the oversized tokens alone), then prints one
line of JSON: the figures. Also the HTTP/1.1 client
the benchmark's memory phase uses (:func:`exchange`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import secrets
import sys
import time
from typing import Any
from urllib.parse import urlsplit

SLOW_LENGTH = 100_000
BIG_TOKEN = 1 << 20
MEDIUM_TOKEN = 100_000
CHECK_BODY = b'{"principal":"user:nobody","operation":"dataset.read","entity":"dataset:ns0.ds0"}'


def loopback(block: int, i: int) -> str:
    """The i-th client address of a block: 127.<block>.x.y, from 127.<block>.0.1 (never .0 or .255)."""
    return f"127.{block}.{1 + i // 254}.{1 + i % 254}"


def request(host: str, path: str, token: str | None, body: bytes, length: int | None = None) -> bytes:
    """A ``POST`` request's head and body (``length``: a Content-Length to claim instead of the body's)."""
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}", "Content-Type: application/json",
             f"Content-Length: {len(body) if length is None else length}"]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """The status of one response, read whole, and whether the server will close the connection."""
    status_line = await reader.readuntil(b"\r\n")
    status = int(status_line.split()[1])
    length, close = 0, False
    while True:
        line = await reader.readuntil(b"\r\n")
        if line == b"\r\n":
            break
        name, _, value = line.decode("latin-1").partition(":")
        name = name.strip().lower()
        if name == "content-length":
            length = int(value.strip())
        elif name == "connection" and value.strip().lower() == "close":
            close = True
    if length:
        await reader.readexactly(length)
    return status, close


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes,
                   timeout: float = 30.0) -> tuple[int, bool]:
    """Send one request and read its response: (status, whether the connection is to be closed)."""
    writer.write(data)
    await asyncio.wait_for(writer.drain(), timeout)
    return await asyncio.wait_for(read_response(reader), timeout)


def failure(error: BaseException) -> str:
    """What became of a connection that ended in ``error``: a name for the counts."""
    if isinstance(error, ConnectionResetError):
        return "reset"
    if isinstance(error, BrokenPipeError):
        return "broken_pipe"
    if isinstance(error, asyncio.IncompleteReadError | EOFError):
        return "closed_without_answer"
    if isinstance(error, TimeoutError):
        return "timeout"
    if isinstance(error, ConnectionRefusedError):
        return "refused"
    return type(error).__name__


class Attack:
    def __init__(self, host: str, port: int, slow: int, oversized: int, reconnect_delay: float = 0.0) -> None:
        self.host, self.port = host, port
        self.reconnect_delay = reconnect_delay
        self.slow, self.oversized = slow, oversized
        self.stopping = asyncio.Event()
        self.big_stopping = asyncio.Event()  # the benchmark's memory guard pauses the oversized tokens
        self.big_paused_at: float | None = None
        self.headers_sent: set[int] = set()
        self.all_sent = asyncio.Event()
        self.started = time.monotonic()
        # slow clients: per client, each connection (seconds alive, how it ended, status)
        self.lives: list[list[tuple[float, str, int | None]]] = [[] for _ in range(slow)]
        self.open_since: list[float | None] = [None] * slow
        self.open_answer: list[list[int]] = [[] for _ in range(slow)]  # the status an open connection got
        self.slow_bytes = 0
        self.connect_failures: dict[str, int] = {}
        # oversized tokens
        self.big_statuses: dict[str, int] = {}
        self.big_sent = 0
        self.big_bytes = 0
        self.big_seconds: list[float] = []

    async def slow_client(self, i: int) -> None:
        address = loopback(1, i)
        while not self.stopping.is_set():
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port, local_addr=(address, 0)), 10)
            except (OSError, TimeoutError) as error:
                kind = failure(error)
                self.connect_failures[kind] = self.connect_failures.get(kind, 0) + 1
                await asyncio.sleep(0.5)
                continue
            opened = time.monotonic()
            self.open_since[i] = opened
            token = None if i % 2 == 0 else f"plg_{secrets.token_hex(8)}_{secrets.token_urlsafe(32)}"
            ended, status = "stopped", None

            async def dribble(writer: asyncio.StreamWriter = writer, token: str | None = token) -> None:
                writer.write(request(self.host, "/v1/check", token, b"", SLOW_LENGTH))
                await writer.drain()
                self.headers_sent.add(i)
                if len(self.headers_sent) == self.slow:
                    self.all_sent.set()
                for _ in range(SLOW_LENGTH):
                    await asyncio.sleep(1.0)
                    writer.write(b" ")
                    await writer.drain()
                    self.slow_bytes += 1

            answer: list[int] = []
            self.open_answer[i] = answer

            async def listen(reader: asyncio.StreamReader = reader, answer: list[int] = answer) -> None:
                while data := await reader.read(65536):  # an answer does not end the connection: its close does
                    if not answer and data.startswith(b"HTTP/1."):
                        answer.append(int(data.split()[1]))

            sender = asyncio.create_task(dribble())
            reading = asyncio.create_task(listen())
            stop = asyncio.create_task(self.stopping.wait())
            try:
                done, _ = await asyncio.wait({sender, reading, stop}, return_when=asyncio.FIRST_COMPLETED)
                if reading in done:
                    problem = reading.exception()
                    ended = "closed_by_server" if problem is None else failure(problem)
                elif sender in done:
                    problem = sender.exception()
                    ended = "sent_whole_body" if problem is None else failure(problem)
                status = answer[0] if answer else None
            finally:
                for task in (sender, reading, stop):
                    task.cancel()
                with contextlib.suppress(Exception):
                    writer.close()
            if ended == "stopped":
                break  # still open when the attack ended: counted as open, not as a life
            self.open_since[i] = None
            self.lives[i].append((time.monotonic() - opened, ended, status))
            if self.reconnect_delay:
                await asyncio.sleep(self.reconnect_delay)

    async def big_client(self, n: int) -> None:
        address = loopback(3, n)
        filler_big = "A" * BIG_TOKEN
        filler_medium = "B" * MEDIUM_TOKEN
        reader = writer = None
        while not self.stopping.is_set() and not self.big_stopping.is_set():
            self.big_sent += 1
            filler = filler_medium if self.big_sent % 4 == 0 else filler_big
            token = f"plg_{n:x}x{self.big_sent:x}_{filler}"  # distinct: never the same token twice
            data = request(self.host, "/v1/check", token, CHECK_BODY)
            started = time.monotonic()
            try:
                if writer is None:
                    reader, writer = await asyncio.wait_for(
                        asyncio.open_connection(self.host, self.port, local_addr=(address, 0)), 10)
                assert reader is not None and writer is not None
                status, close = await exchange(reader, writer, data)
                kind = str(status)
                if close:
                    writer.close()
                    reader = writer = None
            except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError, IndexError) as error:
                kind = failure(error)
                if writer is not None:
                    with contextlib.suppress(Exception):
                        writer.close()
                reader = writer = None
            self.big_bytes += len(data)
            self.big_seconds.append(time.monotonic() - started)
            self.big_statuses[kind] = self.big_statuses.get(kind, 0) + 1
            if kind in ("refused", "timeout"):
                await asyncio.sleep(0.1)

    def figures(self) -> dict[str, Any]:
        now = time.monotonic()
        lives = [life for client in self.lives for life in client]
        seconds = sorted(life[0] for life in lives)
        ended: dict[str, int] = {}
        statuses: dict[str, int] = {}
        for _, how, status in lives:
            ended[how] = ended.get(how, 0) + 1
            if status is not None:
                statuses[str(status)] = statuses.get(str(status), 0) + 1
        cuts = sorted(len(client) for client in self.lives)
        still_open = sorted(now - since for since in self.open_since if since is not None)
        open_statuses: dict[str, int] = {}
        for since, answer in zip(self.open_since, self.open_answer, strict=True):
            if since is not None:
                key = str(answer[0]) if answer else "none yet"
                open_statuses[key] = open_statuses.get(key, 0) + 1
        big = sorted(self.big_seconds)
        return {
            "seconds": round(now - self.started, 1),
            "slow_clients": {
                "clients": self.slow,
                "headers_sent_at_least_once": len(self.headers_sent),
                "connections_ended": len(lives),
                "ended_by": ended,
                "statuses": statuses,
                "connection_seconds": _distribution(seconds),
                "cuts_per_client": _distribution([float(c) for c in cuts]),
                "clients_never_cut": sum(1 for c in cuts if c == 0),
                "open_at_end": len(still_open),
                "open_at_end_age_seconds": _distribution(still_open),
                "open_at_end_statuses": open_statuses,
                "body_bytes_dribbled": self.slow_bytes,
                "connect_failures": self.connect_failures,
            },
            "oversized_tokens": {
                "clients": self.oversized,
                "requests": self.big_sent,
                "outcomes": self.big_statuses,
                "mib_sent": round(self.big_bytes / (1 << 20), 1),
                "seconds_per_request": _distribution(big),
                "paused_after_s": None if self.big_paused_at is None else round(self.big_paused_at - self.started, 1),
            },
        }


def _distribution(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    values = sorted(values)

    def at(q: float) -> float:
        return round(values[min(len(values) - 1, int(q * len(values)))], 3)

    return {"n": len(values), "min": round(values[0], 3), "p10": at(0.10), "p50": at(0.50), "p90": at(0.90),
            "p99": at(0.99), "max": round(values[-1], 3), "mean": round(sum(values) / len(values), 3)}


async def run(url: str, slow: int, oversized: int, ready_after: float, reconnect_delay: float) -> dict[str, Any]:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    attack = Attack(parts.hostname, parts.port, slow, oversized, reconnect_delay)
    tasks = [asyncio.create_task(attack.slow_client(i)) for i in range(slow)]
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(attack.all_sent.wait(), ready_after)
    tasks += [asyncio.create_task(attack.big_client(n)) for n in range(oversized)]
    print(f"ready {len(attack.headers_sent)}", flush=True)
    loop = asyncio.get_running_loop()
    while True:  # the benchmark says stop (or goes away); or pause the oversized tokens
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if line.strip() != "pause-oversized":
            break
        attack.big_paused_at = time.monotonic()
        attack.big_stopping.set()
    figures = attack.figures()  # before stopping: the connections still open are counted as open
    attack.stopping.set()
    await asyncio.wait(tasks, timeout=15)
    for task in tasks:
        task.cancel()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.attack.attackers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--slow", type=int, default=300)
    parser.add_argument("--oversized", type=int, default=1)
    parser.add_argument("--ready-after", type=float, default=10.0)
    parser.add_argument("--reconnect-delay", type=float, default=0.0)
    args = parser.parse_args(argv)
    figures = asyncio.run(run(args.url, args.slow, args.oversized, args.ready_after, args.reconnect_delay))
    print(json.dumps(figures), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
