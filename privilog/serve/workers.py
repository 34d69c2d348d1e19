"""``privilog serve``: :func:`serve` runs one worker in process, or N (``--workers N``) sharing one load,
forked after it.

The parent process loads the deployment once (the store read, the authorizer
built, every decision plan compiled: :func:`.server.load`), closes its store,
then ``gc.collect(); gc.freeze()``: what the load made is moved out of the
collector's sight, so that no collection in a worker walks it, and so writes
to its pages (and copies them: copy-on-write) only where a request touches an
object. Then it forks the workers. Each opens after the fork what must not
cross it: its own store connections (PostgreSQL's LISTEN connection and its
watchdog thread among them), its follower thread, its decision log (a stream
of its own), its event loop; it replays the store's log from where the load
stood (what changed since), then serves the bound socket with a uvicorn server
of its own.

The parent serves nothing and holds no connection to the store. It:

* replaces a worker that dies (killed, crashed) by forking again from its load,
  which is then behind the store: the new worker catches up by replaying the
  log before it serves, as a deployment following the store does. A worker that
  dies before it is ready is forked again after a pause (1 s, doubling to 10 s);
  if none of the first ones became ready, the server stops (exit 1);
* on SIGHUP, loads anew (the policy's file and the store), then replaces the
  workers one by one, each new one ready before the old one is stopped; a policy
  that does not load is one line on stderr and the old workers go on serving;
* on SIGTERM or SIGINT, stops each worker (SIGTERM: uvicorn's graceful shutdown,
  its requests answered within 5 s), kills what is left after 10 s, exits 0.

A worker tells the parent it serves by a byte on a pipe, once its uvicorn
server has started (its lifespan run: the decision plans warm, following begun).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any

import uvicorn

from .bodies import ServeError
from .server import UVICORN, BoundedProtocol, Loaded, ServeOptions, announce, announce_load, attach, bind, load

STOP_GRACE = 10.0  # seconds a stopping worker has before it is killed (uvicorn's own grace is 5)
READY_TIMEOUT = 600.0  # seconds a new worker has to catch up and start serving during a reload
STARTUP_FAILURE = 3  # a worker's exit status when it could not start (uvicorn's own)
TICK = 0.05  # seconds between the parent's looks at its signals, its workers and their pipes


@dataclass
class Worker:
    """One forked worker, as its parent knows it."""

    pid: int
    ready_fd: int  # the read end of the worker's pipe; a byte there: it serves
    ready: bool = False


class _WorkerServer(uvicorn.Server):
    """uvicorn's server, which says on a pipe when it has started."""

    def __init__(self, config: uvicorn.Config, ready_fd: int):
        super().__init__(config)
        self.ready_fd = ready_fd

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            os.write(self.ready_fd, b"r")
            os.close(self.ready_fd)


def serve(options: ServeOptions) -> int:
    """Serve until interrupted (SIGINT, SIGTERM); SIGHUP reloads the policy. The exit status.

    One worker serves in this process. More (``--workers N``) are forked after one load, and share it
    (:class:`Supervisor`)."""
    if options.workers < 1:
        raise ServeError(f"--workers is at least 1, not {options.workers}")
    BoundedProtocol.limits = options.limits
    sock = bind(options.host, options.port)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    if options.workers == 1:
        loaded = load(options)
        app = attach(loaded, signals=True)
        announce(sock, options)  # (first: a reader waiting for the address reads no further)
        announce_load(loaded)
        uvicorn.Server(uvicorn.Config(app, **UVICORN)).run(sockets=[sock])
        return 0
    return Supervisor(options, sock).run()


class Supervisor:
    """The parent of ``--workers N``: one load, N workers forked from it, kept at N (see the module)."""

    def __init__(self, options: ServeOptions, sock: Any):
        self.options = options
        self.sock = sock
        self.workers: list[Worker] = []
        self.signals: list[int] = []
        self.loaded: Loaded | None = None

    # ---- the parent ----------------------------------------------------------------------------

    def run(self) -> int:
        self.loaded = self._load()
        announce(self.sock, self.options)  # (first: a reader waiting for the address reads no further)
        announce_load(self.loaded)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, lambda sig, frame: self.signals.append(sig))
        self.workers = [self._fork() for _ in range(self.options.workers)]
        served = False  # whether any worker ever started serving
        pauses = [0.0] * len(self.workers)  # per slot: seconds to wait before forking again after a failed start
        try:
            while True:
                while self.signals:
                    if self.signals.pop(0) != signal.SIGHUP:
                        return self._stop()
                    self._reload()
                self._look()
                served = served or any(w.ready for w in self.workers)
                for slot, worker in enumerate(self.workers):
                    status = self._reaped(worker)
                    if status is None:
                        continue
                    if not served:  # none of the first workers started: they never will
                        print(
                            f"privilog serve: worker {worker.pid} could not start ({_said(status)}); stopping",
                            file=sys.stderr,
                            flush=True,
                        )
                        self._stop()
                        return 1
                    pause = 0.0 if worker.ready else pauses[slot]
                    pauses[slot] = 0.0 if worker.ready else min(10.0, max(1.0, 2 * pause))
                    print(
                        f"privilog serve: worker {worker.pid} {_said(status)}; forking another from the load"
                        + (f" in {pause:g} s" if pause else ""),
                        file=sys.stderr,
                        flush=True,
                    )
                    time.sleep(pause)
                    self.workers[slot] = self._fork()
                time.sleep(TICK)
        finally:
            for worker in self.workers:
                _close(worker.ready_fd)

    def _load(self) -> Loaded:
        """Load the deployment (:func:`.server.load`), close its store (no connection crosses a fork), and
        freeze what the load made (gc.freeze: out of every later collection, in this process and the
        workers)."""
        from . import app, decisionlog, service  # noqa: F401  (imported once, here, for every worker to share)

        loaded = load(self.options)
        loaded.deployment.store.close()
        started = time.perf_counter()
        gc.collect()
        gc.freeze()
        loaded.seconds["freeze"] = round(time.perf_counter() - started, 3)
        return loaded

    def _fork(self) -> Worker:
        if self.loaded is None:  # a reload's store failed: this worker is loaded for first
            self.loaded = self._load()
        read, write = os.pipe()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the worker: never returns
            os.close(read)
            self._worker(write, parent)
        os.close(write)
        os.set_blocking(read, False)
        return Worker(pid, read)

    def _look(self) -> None:
        """Mark the workers that said they serve."""
        for worker in self.workers:
            self._look_at(worker)

    @staticmethod
    def _look_at(worker: Worker) -> None:
        if not worker.ready:
            with contextlib.suppress(BlockingIOError, OSError):
                worker.ready = bool(os.read(worker.ready_fd, 1))

    @staticmethod
    def _reaped(worker: Worker) -> int | None:
        """The worker's wait status if it has ended (reaped now), else None."""
        try:
            pid, status = os.waitpid(worker.pid, os.WNOHANG)
        except ChildProcessError:
            return 0
        return status if pid else None

    def _reload(self) -> None:
        """SIGHUP: load anew, then replace each worker by one forked from the new load, ready first.

        The policy is read first: one that does not load leaves everything as it was. The old load is
        let go before the new one is made (the old workers keep their copy-on-write pages of it), so the
        parent never holds two; a store that fails the new load leaves the old workers serving, and the
        next worker to be forked is loaded for first."""
        from privilog import dsl

        print("privilog serve: reloading (SIGHUP): the policy and the store, anew", file=sys.stderr, flush=True)
        try:
            dsl.load_policy(self.options.policy)
            self.loaded = None
            gc.unfreeze()  # the old load's objects go back to the collector, which frees them now
            gc.collect()
            self.loaded = self._load()
            announce_load(self.loaded)
        except Exception as error:  # a policy that does not load, a store away: the old workers go on
            text = " ".join(str(error).split()) or type(error).__name__
            print(
                f"privilog serve: reload (SIGHUP) of {self.options.policy} failed; the old workers serve on: {text}",
                file=sys.stderr,
                flush=True,
            )
            return
        for slot, worker in enumerate(list(self.workers)):
            new = self._fork()
            deadline = time.monotonic() + READY_TIMEOUT
            while not new.ready and time.monotonic() < deadline and self._reaped(new) is None:
                time.sleep(TICK)
                self._look_at(new)
            if not new.ready:
                print(
                    f"privilog serve: reload (SIGHUP): a new worker did not start; worker {worker.pid} serves on",
                    file=sys.stderr,
                    flush=True,
                )
                _end(new)
                continue
            self.workers[slot] = new
            _end(worker)
        print(f"privilog serve: reloaded {self.options.policy} (SIGHUP)", file=sys.stderr, flush=True)

    def _stop(self) -> int:
        """SIGTERM to every worker; wait for them (killing what is left after :data:`STOP_GRACE` s)."""
        for worker in self.workers:
            _signal(worker.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        left = list(self.workers)
        while left and time.monotonic() < deadline:
            left = [w for w in left if self._reaped(w) is None]
            time.sleep(TICK)
        for worker in left:
            _signal(worker.pid, signal.SIGKILL)
            os.waitpid(worker.pid, 0)
        self.sock.close()
        return 0

    # ---- a worker -----------------------------------------------------------------------------

    def _worker(self, ready_fd: int, parent: int) -> None:
        """In a forked worker: open what is its own, catch up, serve; then exit (never return)."""
        code = STARTUP_FAILURE
        try:
            signal.signal(signal.SIGHUP, signal.SIG_IGN)  # the parent reloads, and replaces its workers
            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # until uvicorn takes them: nothing to finish yet
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            _die_with(parent)
            for worker in self.workers:
                _close(worker.ready_fd)
            assert self.loaded is not None
            app = self._attach(self.loaded)
            code = 1
            _WorkerServer(uvicorn.Config(app, **UVICORN), ready_fd).run(sockets=[self.sock])
            code = 0
        except SystemExit as error:
            code = error.code if isinstance(error.code, int) else code
        except ServeError as error:
            print(f"privilog serve: worker {os.getpid()}: {error}", file=sys.stderr, flush=True)
        except BaseException as error:
            from privilog.store.base import StoreError

            if isinstance(error, StoreError):
                print(f"privilog serve: worker {os.getpid()}: {error}", file=sys.stderr, flush=True)
            else:
                traceback.print_exc()
        finally:
            sys.stderr.flush()
            os._exit(code)

    def _attach(self, loaded: Loaded) -> Any:
        """This worker's store (its own connections), the log replayed since the load, the application."""
        from privilog.store import open_store

        deployment = loaded.deployment
        deployment.reopen(open_store(self.options.store, deployment.policy.actions, create=False))
        deployment.catch_up()
        return attach(loaded, signals=False)


def _die_with(parent: int) -> None:
    """Have the kernel send this process SIGTERM when its parent ends (Linux's PR_SET_DEATHSIG), so that
    workers never outlive a parent that was killed (and go on holding the port); exit now if it already has."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(0)


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _end(worker: Worker) -> None:
    """Stop one worker gracefully (SIGTERM), killing it after :data:`STOP_GRACE` s; reap it."""
    _signal(worker.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(worker.pid, os.WNOHANG)
        except ChildProcessError:
            break
        if pid:
            break
        time.sleep(TICK)
    else:
        _signal(worker.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(worker.pid, 0)
    _close(worker.ready_fd)


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def _said(status: int) -> str:
    """A wait status in words."""
    if os.WIFSIGNALED(status):
        return f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited {os.waitstatus_to_exitcode(status)}"
