"""What one request and one client may cost the server: its budget, each bound an option of ``privilog serve``.

A bound is checked before the work it bounds: header bytes as they arrive
(before a token is looked at), the body's size before it is read, the items of
a batch before the first is decided. A request over a bound is refused with a
4xx and one line naming the bound and its option; the connection of a request
whose body was not read to its end is closed, never kept for the rest of the
body.

>>> Limits().max_header_bytes, Limits().request_timeout
(32768, 30.0)
>>> [option for option, _, _ in OPTIONS][:3]
['--max-header-bytes', '--max-body', '--max-batch']
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Limits:
    """The server's budget per request and per client (defaults below; ``privilog serve --help``)."""

    max_header_bytes: int = 32 * 1024  # a request's line and headers, together
    max_body: int = 1 << 20  # bytes of a request's body
    max_batch: int = 10_000  # checks in a batch, entities of isVisible, items of a change
    max_explained: int = 1_000  # checks of one batch decided with `explain`
    client_timeout: float = 10.0  # seconds a client has to send the headers, then as many for the body
    request_timeout: float = 30.0  # seconds of work on one request, once its body is read
    max_connections_per_client: int = 256  # open connections from one address (behind a proxy: raise it)
    max_refusals_per_minute: int = 30  # changes one principal may have refused a minute (then 429)
    token_ttl: float = 1.0  # seconds a token's principal is remembered: a revoked token stops within it
    consistency_timeout: float = 2.0  # seconds a read asking `at_least` or `full` may wait for the store

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"--{f.name.replace('_', '-')} is a positive number, not {value:g}")

    @property
    def connection_timeout(self) -> float:
        """The most one request may hold its connection: headers, body, and work."""
        return 2 * self.client_timeout + self.request_timeout


# (option, the field it sets, what it bounds): the command line's options, and the docs' table
OPTIONS: list[tuple[str, str, str]] = [
    (
        "--max-header-bytes",
        "max_header_bytes",
        "bytes of a request's line and headers (bigger: 431, connection closed)",
    ),
    ("--max-body", "max_body", "bytes of a request's body (bigger: 413)"),
    ("--max-batch", "max_batch", "checks in one batch, entities of one isVisible, items of one change (more: 413)"),
    ("--max-explained", "max_explained", "checks of one batch with `explain` (more: 413)"),
    ("--client-timeout", "client_timeout", "seconds to send the headers (then closed), and as many for the body (408)"),
    ("--request-timeout", "request_timeout", "seconds of work on one request, its wait for a turn included (503)"),
    (
        "--max-connections-per-client",
        "max_connections_per_client",
        "open connections from one address (more: 503, closed at once)",
    ),
    (
        "--max-refusals-per-minute",
        "max_refusals_per_minute",
        "changes one principal may have refused a minute, each audited (more: 429 with Retry-After)",
    ),
    (
        "--consistency-timeout",
        "consistency_timeout",
        "seconds a read asking `full` or `at_least` a revision may wait to catch up with the store (503)",
    ),
]


def default(name: str) -> Any:
    """The default of a limit, by its field's name."""
    return getattr(Limits(), name)
