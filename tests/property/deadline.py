"""Run a function in a forked child under a deadline: for pyDatalog, which can loop for ever.

pyDatalog's engine is compiled (Cython): on some recursive programs with negation its
resolution does not end, and a signal cannot interrupt it. The child is a fork of the test
process, so it sees the backend as the test built it; it sends back its answer pickled, or
is killed when the deadline passes.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class Overdue(Exception):
    """The child did not answer in time (it was killed)."""


def in_child(function: Callable[[], T], seconds: float) -> T:
    """``function()``, computed in a forked child; raises Overdue after ``seconds``."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer and leave without running the parent's clean-up
        os.close(read)
        try:
            answer: tuple[bool, object] = (True, function())
        except BaseException as error:
            answer = (False, repr(error))
        with os.fdopen(write, "wb") as out:
            pickle.dump(answer, out)
        os._exit(0)
    os.close(write)
    chunks = []
    until = time.monotonic() + seconds
    try:
        with os.fdopen(read, "rb") as source:
            while True:
                ready, _, _ = select.select([source], [], [], max(until - time.monotonic(), 0))
                if not ready:
                    raise Overdue(f"no answer in {seconds:g} s")
                chunk = os.read(source.fileno(), 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    ok, value = pickle.loads(b"".join(chunks))
    if not ok:
        raise AssertionError(f"the child raised {value}")
    return value  # type: ignore[return-value]
