"""Running the server: bind the address, load the deployment, serve with uvicorn (one or more workers).

The socket is bound here, before anything slow, so a port in use is a one-line
error (exit 2) rather than uvicorn's log and exit. With ``workers`` above one,
the deployment is loaded once and the workers are forked after it, sharing it
(:mod:`.workers`); each follows the store (what one worker writes, the others
replay within the follow interval).

uvicorn bounds neither the size of a request's headers nor the time a client
takes to send them, and keeps a connection whose answer was sent while its body
still trickles in; :class:`BoundedProtocol` adds those bounds (the budget of
:mod:`.limits`), so a slow or oversized client holds only its own connection,
and not for long.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .bodies import ServeError
from .limits import Limits

LINGER = 2.0  # seconds the rest of an unread body is read and dropped before its connection is closed


@dataclass(frozen=True)
class ServeOptions:
    """Everything ``privilog serve`` was asked for."""

    store: str
    policy: str = "cdap"
    host: str = "127.0.0.1"
    port: int = 8181
    workers: int = 1
    decision_log: str | None = None
    decision_log_sample: float = 1.0
    follow_interval: float | None = None  # seconds between looks at a store that cannot notify (None: its own)
    decision_log_reasons: bool = True
    snapshot: str | None = None  # the engine's state after a load, read at the next (privilog/serve/snapshot.py)
    limits: Limits = field(default_factory=Limits)


class BoundedProtocol(HttpToolsProtocol):
    """uvicorn's HTTP protocol, with the budget of a connection (:mod:`.limits`) enforced as bytes arrive.

    * the request line and headers: at most ``max_header_bytes`` (431 and closed; counted before
      httptools gathers a header, so a header of 50 MiB costs 32 KiB; closed at once after the
      answer), within ``client_timeout`` seconds (closed);
    * a request whose answer was sent before its body was read to its end (a 401, 413, 408) ends
      its connection: the answer is sent with ``connection: close``, and the server reads and drops
      what still comes until the client closes, for at most :data:`LINGER` seconds (closing at once
      would reset the connection and could lose the answer on its way; a client still uploading
      reads it when its upload is done). A client dribbling the rest of a declared body holds its
      socket two seconds, not for ever, and comes back at most every two seconds;
    * one request holds its connection at most ``connection_timeout`` seconds, headers, body and
      work together (503 if nothing was answered yet, then closed);
    * at most ``max_connections_per_client`` connections from one address (503, closed at once).
    """

    limits = Limits()  # set by build_app, in each worker process
    per_client: ClassVar[Counter[str]] = Counter()

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._timer: asyncio.TimerHandle | None = None
        self._lingering = False
        self._in_headers, self._header_bytes, self._too_big = True, 0, False
        self._address = self.client[0] if self.client else ""
        BoundedProtocol.per_client[self._address] += 1
        limit = self.limits.max_connections_per_client
        if BoundedProtocol.per_client[self._address] > limit:
            self._answer(
                503,
                f"too many connections from {self._address}; the limit is {limit} (--max-connections-per-client)",
                retry=True,
            )
            return
        self._arm(self.limits.client_timeout, self._too_slow)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        count = BoundedProtocol.per_client[self._address] - 1
        if count > 0:
            BoundedProtocol.per_client[self._address] = count
        else:
            BoundedProtocol.per_client.pop(self._address, None)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return  # the rest of a body no one will read: dropped until the connection closes
        cap = self.limits.max_header_bytes
        if self._in_headers and len(data) > cap - self._header_bytes:
            room = max(cap - self._header_bytes, 0)  # feed what fits: the headers may end within it
            head, data = data[:room], data[room:]
            self._header_bytes = cap
            if head:
                super().data_received(head)
            if self.transport.is_closing():
                return
            if self._in_headers:
                self._refuse_headers()
                return
        super().data_received(data)
        if self._in_headers and not self.transport.is_closing():
            # a message's headers under way (still, or begun in this chunk): the chunk counts against them
            # (all of it: a pipelined request's headers may be over-counted by the body before them, never
            # under-counted)
            self._header_bytes += len(data)
            if self._header_bytes > cap:
                self._refuse_headers()

    def _refuse_headers(self) -> None:
        self._too_big = True
        self._answer(431, self._too_big_text())

    def send_400_response(self, msg: str) -> None:
        if self._too_big:
            self._answer(431, self._too_big_text())
            return
        super().send_400_response(msg)

    def on_message_complete(self) -> None:
        self._header_bytes = 0  # the next message's headers are counted from nothing
        super().on_message_complete()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_headers = True
        if self._timer is None:
            self._arm(self.limits.client_timeout, self._too_slow)

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._arm(self.limits.connection_timeout, self._too_long)
        super().on_headers_complete()
        if self.cycle is not None:  # the cycle closes the connection through _Lingering
            self.cycle.transport = _Lingering(self.transport, self)  # type: ignore[assignment]

    def on_response_complete(self) -> None:
        if not self._lingering:  # (a lingering connection keeps its timer: it closes when that fires)
            self._disarm()
        cycle = self.cycle
        if cycle is not None and cycle.more_body and not self.transport.is_closing():
            self.linger()  # the body was not read to its end: the connection is not kept for it
        super().on_response_complete()

    def linger(self) -> None:
        """End a connection whose request body was not read to its end: drop what the client still
        sends, and close when the client closes (having read the answer, sent with ``connection:
        close``) or after :data:`LINGER` seconds, whichever comes first. No FIN before that: a client
        that would reconnect as soon as it sees one waits its two seconds."""
        cycle = self.cycle
        if self._lingering or self.transport.is_closing():
            return
        if cycle is None or not cycle.more_body:
            self.transport.close()
            return
        self._lingering = True
        self._arm(min(LINGER, self.limits.client_timeout), self._too_slow)

    # ---- timers and answers ---------------------------------------------------------------------

    def _arm(self, seconds: float, then: Any) -> None:
        self._disarm()
        self._timer = self.loop.call_later(seconds, then)

    def _disarm(self) -> None:
        timer, self._timer = getattr(self, "_timer", None), None
        if timer is not None:
            timer.cancel()

    def _too_slow(self) -> None:
        self._timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def _too_long(self) -> None:
        self._timer = None
        cycle = self.cycle
        if cycle is not None and not cycle.response_started and not self.transport.is_closing():
            seconds = self.limits.connection_timeout
            self._answer(503, f"the request was not answered within {seconds:g} s (--request-timeout); split it")
        elif not self.transport.is_closing():
            self.transport.close()

    def _too_big_text(self) -> str:
        return (
            f"the request line and headers are over {self.limits.max_header_bytes} bytes (--max-header-bytes); "
            "a bearer token is about 70 characters"
        )

    def _answer(self, status: int, message: str, retry: bool = False) -> None:
        """Answer ``status`` with ``{"error": message}`` and close: for what is refused before the app.

        The close is at once, even with bytes of the request still coming (a header of megabytes):
        holding such a connection open, even unread, lets the kernel buffer megabytes more of it."""
        if self.cycle is not None:
            self.cycle.disconnected = True  # the app's own answer, if it comes, is dropped
            self.cycle.message_event.set()
        body = json.dumps({"error": message}).encode()
        reason = {431: "Request Header Fields Too Large", 503: "Service Unavailable"}[status]
        head = [
            f"HTTP/1.1 {status} {reason}",
            "content-type: application/json",
            f"content-length: {len(body)}",
            "connection: close",
            *(["retry-after: 1"] if retry else []),
        ]
        if not self.transport.is_closing():
            self.transport.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
            self.transport.close()


class _Lingering:
    """A connection's transport as its request's cycle sees it: ``close`` lingers (:meth:`BoundedProtocol.linger`)
    when the request's body was not read to its end; everything else is the transport's own."""

    def __init__(self, transport: Any, protocol: BoundedProtocol):
        self._transport, self._protocol = transport, protocol

    def close(self) -> None:
        self._protocol.linger()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: any free one); a one-line error when it cannot be had."""
    try:
        info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(info[0], socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(info[4])
        sock.listen(2048)
    except OSError as error:
        raise ServeError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    sock.set_inheritable(True)
    return sock


@dataclass
class Loaded:
    """What one load made (:func:`load`): the deployment, the decision log's key, and how long each phase took."""

    options: ServeOptions
    deployment: Any  # privilog.store.deployment.Deployment
    key: bytes | None  # the decision log's HMAC key (None: no decision log)
    seconds: dict[str, float]


def load(options: ServeOptions) -> Loaded:
    """Open the store, load the policy and the deployment, and compile every decision plan (warm)."""
    from privilog import dsl
    from privilog.store import open_store
    from privilog.store.deployment import Deployment

    from .decisionlog import KEY_NAME

    started = time.perf_counter()
    policy = dsl.load_policy(options.policy)
    store = open_store(options.store, policy.actions, create=False)
    opened = time.perf_counter()
    preloaded: Any = None
    snapshot_seq: int | None = None  # the log entry of the snapshot started from
    read_seconds: dict[str, float] = {}
    if options.snapshot:
        from privilog.store.revision import policy_version

        from . import snapshot

        expected = snapshot.identity(policy_version(policy))
        snapshot_key = store.secret(snapshot.KEY_NAME).encode()
        found = snapshot.read(options.snapshot, snapshot_key, expected, store.last_seq())
        if found is not None:
            preloaded, snapshot_seq = found
        read_seconds = {"snapshot_read": time.perf_counter() - opened}
    reasons = bool(options.decision_log) and options.decision_log_reasons
    # reasons name the entry that made each grant
    deployment = Deployment(store, policy, track_grants=reasons, preloaded=preloaded)
    del preloaded  # its relations are the deployment's now
    loaded = time.perf_counter()
    deployment.record_policy("local:serve")  # answers about the past, and revisions, name the policy served
    # each line's HMAC: only those who can read the store can forge one
    key = store.secret(KEY_NAME).encode() if options.decision_log else None
    recorded = time.perf_counter()
    with deployment.lock:
        deployment.authorizer.prepare()
    warmed = time.perf_counter()
    seconds = {
        "open": opened - started,
        **read_seconds,
        **deployment.load_seconds,
        "record_policy": recorded - loaded,
        "warm": warmed - recorded,
    }
    if options.snapshot and (snapshot_seq is None or deployment.seq - snapshot_seq > snapshot.REWRITE_AFTER):
        written = snapshot.save(options.snapshot, snapshot_key, expected, deployment)
        if written is not None:
            seconds["snapshot_write"] = written
    return Loaded(options, deployment, key, {k: round(v, 3) for k, v in seconds.items()})


def attach(loaded: Loaded, signals: bool) -> Any:
    """The application over a load: the decision log opened (a stream of this process's own) and the service."""
    from .app import make_app
    from .decisionlog import DecisionLog
    from .service import Service

    options = loaded.options
    decision_log = None
    if options.decision_log:
        assert loaded.key is not None
        reasons = options.decision_log_reasons
        decision_log = DecisionLog.open(options.decision_log, loaded.key, options.decision_log_sample, reasons)
    BoundedProtocol.limits = options.limits  # in a worker process too
    service = Service(loaded.deployment, options.policy, options.limits, decision_log)
    if options.follow_interval is not None:  # SQLite's polling (PostgreSQL is notified and does not poll)
        loaded.deployment.store.poll_interval = options.follow_interval
        return make_app(service, options.follow_interval, signals=signals)
    return make_app(service, signals=signals)


def build_app(options: ServeOptions, signals: bool) -> Any:
    """Open the store, load the policy and the deployment, and make the application."""
    return attach(load(options), signals)


def announce_load(loaded: Loaded) -> None:
    """One line on stderr: what was loaded, and how long each phase of the load took."""
    deployment, seconds = loaded.deployment, loaded.seconds
    phases = ", ".join(f"{name.replace('_', ' ')} {value:.2f} s" for name, value in seconds.items())
    print(
        f"privilog serve: loaded {len(deployment.authorizer.world.grants)} grants at log entry {deployment.seq} "
        f"in {sum(seconds.values()):.2f} s ({phases})",
        file=sys.stderr,
        flush=True,
    )


# uvicorn's settings, each worker's alike
UVICORN: dict[str, Any] = {
    "log_level": "warning",
    "access_log": False,
    "http": BoundedProtocol,
    "lifespan": "on",
    "timeout_keep_alive": 5,
    "timeout_graceful_shutdown": 5,
    "server_header": False,
}


def announce(sock: socket.socket, options: ServeOptions) -> None:
    host, port = sock.getsockname()[:2]
    _announce(host, port, options)


def _announce(host: str, port: int, options: ServeOptions) -> None:
    workers = f", {options.workers} workers" if options.workers > 1 else ""
    print(
        f"privilog serve: http://{host}:{port} (store {options.store}, policy {options.policy}{workers})",
        file=sys.stderr,
        flush=True,
    )
