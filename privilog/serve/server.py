"""Running the server: bind the address, load the deployment, serve with uvicorn (one or more workers).

The socket is bound here, before anything slow, so a port in use is a one-line
error (exit 2) rather than uvicorn's log and exit. With ``workers`` above one,
each worker process loads its own deployment from the store and follows it
(what one worker writes, the others replay within the follow interval).

uvicorn has no limit on the time a client takes to send a request's headers;
:class:`HeaderTimeoutProtocol` adds one (a client that sends half the headers
and waits is disconnected), so slow clients hold only their own connection,
and not for ever.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import sys
from dataclasses import asdict, dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .bodies import ServeError

OPTIONS_ENV = "PRIVILOG_SERVE_OPTIONS"  # how the options reach worker processes
CLIENT_TIMEOUT = 10.0


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
    max_body: int = 1 << 20
    max_batch: int = 10_000
    follow_interval: float = 0.25
    client_timeout: float = CLIENT_TIMEOUT  # seconds to send the headers, then as many to send the body


class HeaderTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's HTTP protocol, closing a connection whose request headers do not all arrive in time."""

    header_timeout = CLIENT_TIMEOUT
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._header_timer = self.loop.call_later(self.header_timeout, self._too_slow)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout, self._too_slow)

    def on_headers_complete(self) -> None:
        self._stop_header_timer()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_timer()
        super().connection_lost(exc)

    def _stop_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()


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


def build_app(options: ServeOptions, signals: bool) -> Any:
    """Open the store, load the policy and the deployment, and make the application."""
    from privilog import dsl
    from privilog.store import open_store
    from privilog.store.deployment import Deployment

    from .app import make_app
    from .decisionlog import DecisionLog
    from .service import Limits, Service

    policy = dsl.load_policy(options.policy)
    store = open_store(options.store, policy.actions, create=False)
    deployment = Deployment(store, policy)
    decision_log = DecisionLog.open(options.decision_log, options.decision_log_sample) if options.decision_log else None
    HeaderTimeoutProtocol.header_timeout = options.client_timeout  # in a worker process too
    limits = Limits(max_body=options.max_body, max_batch=options.max_batch, body_timeout=options.client_timeout)
    service = Service(deployment, options.policy, limits, decision_log)
    return make_app(service, options.follow_interval, signals=signals)


def _check_loads(options: ServeOptions) -> None:
    from privilog import dsl
    from privilog.store import open_store

    policy = dsl.load_policy(options.policy)
    open_store(options.store, policy.actions, create=False).close()


def worker_app() -> Any:
    """The application of one worker process (``--workers N``): options from the environment."""
    options = ServeOptions(**json.loads(os.environ[OPTIONS_ENV]))
    return build_app(options, signals=True)


def serve(options: ServeOptions) -> int:
    """Serve until interrupted (SIGINT, SIGTERM); SIGHUP reloads the policy. The exit status."""
    import uvicorn

    if options.workers < 1:
        raise ServeError(f"--workers is at least 1, not {options.workers}")
    HeaderTimeoutProtocol.header_timeout = options.client_timeout
    sock = bind(options.host, options.port)
    host, port = sock.getsockname()[:2]
    common: dict[str, Any] = {
        "log_level": "warning",
        "access_log": False,
        "http": HeaderTimeoutProtocol,
        "lifespan": "on",
        "timeout_keep_alive": 5,
        "timeout_graceful_shutdown": 5,
        "server_header": False,
    }
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    if options.workers == 1:
        app = build_app(options, signals=True)
        _announce(host, port, options)
        uvicorn.Server(uvicorn.Config(app, **common)).run(sockets=[sock])
        return 0
    from uvicorn.supervisors import Multiprocess

    _check_loads(options)  # fail here, once, on a store or policy that will not load
    os.environ[OPTIONS_ENV] = json.dumps(asdict(options))
    config = uvicorn.Config("privilog.serve.server:worker_app", factory=True, workers=options.workers, **common)
    _announce(host, port, options)
    Multiprocess(config, sockets=[sock]).run()
    return 0


def _announce(host: str, port: int, options: ServeOptions) -> None:
    workers = f", {options.workers} workers" if options.workers > 1 else ""
    print(
        f"privilog serve: http://{host}:{port} (store {options.store}, policy {options.policy}{workers})",
        file=sys.stderr,
        flush=True,
    )
