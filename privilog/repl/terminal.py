"""The terminal around a :class:`~privilog.repl.Session`: read a line, print the reply.

On a terminal it reads with prompt_toolkit (history across sessions, searched
by prefix with the Up arrow, Tab completion, colour where the terminal has it);
when standard input or output is not a terminal it reads plain lines and prints
plain text, errors on stderr, so the REPL can be scripted. All the logic is in
the Session; nothing here decides anything.
"""

from __future__ import annotations

import _thread
import os
import signal
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

from privilog.repl.session import Reply, Session

PROMPT = "privilog> "
CONTINUED = "      ... "
EXIT_OK, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 2, 3


def history_path() -> Path:
    """$PRIVILOG_HISTORY, or ``privilog/history`` under $XDG_STATE_HOME (default ~/.local/state)."""
    if os.environ.get("PRIVILOG_HISTORY"):
        return Path(os.environ["PRIVILOG_HISTORY"]).expanduser()
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "privilog" / "history"


def run(
    session: Session, stdin: TextIO | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """Run the session until `quit` or the end of input; return the exit status."""
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    if stdin.isatty() and stdout.isatty():
        return _interactive(session)
    return _scripted(session, stdin, stdout, stderr or sys.stderr)


# ---- scripted: plain lines in, plain text out -------------------------------------------


def statements(session: Session, lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """Lines joined into statements, each with the number of its first line: a rule or query
    may continue over several lines."""
    pending: list[str] = []
    first = 1
    for number, line in enumerate(lines, start=1):
        if not pending:
            first = number
        pending.append(line.rstrip("\n"))
        if not session.needs_more("\n".join(pending)):
            yield first, "\n".join(pending)
            pending = []
    if pending:
        yield first, "\n".join(pending)


def _scripted(session: Session, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    """Answers on stdout; errors on stderr, each as `privilog: line N: ...` (N the line of the
    input it starts on). Exit 0 when every line ran, 2 when some line was bad input, 3 when one
    hit a bug."""
    status = EXIT_OK
    for number, statement in statements(session, stdin):
        reply = session.run(statement)
        if reply.text and reply.error:
            stdout.flush()  # what came before it, first, when both go to one file
            stderr.write(f"privilog: line {number}: {reply.text}\n")
            stderr.flush()
        elif reply.text:
            stdout.write(reply.text + "\n")
            stdout.flush()
        if reply.internal:
            status = EXIT_INTERNAL
        elif reply.error and status == EXIT_OK:
            status = EXIT_BAD_INPUT
        if session.finished:
            break
    return status


# ---- interactive: prompt_toolkit ---------------------------------------------------------


def _style() -> Any:
    from prompt_toolkit.styles import Style

    return Style.from_dict(
        {
            "prompt": "ansiblue bold",
            "allow": "ansigreen bold",
            "deny": "ansired bold",
            "met": "ansigreen",
            "unmet": "ansired",
            "note": "ansiyellow",
            "heading": "bold",
            "error": "ansired",
        }
    )


def styled(reply: Reply) -> list[tuple[str, str]]:
    """The reply as (style, text) fragments: verdicts, met and unmet requirements, errors in colour.

    >>> styled(Reply("ALLOW user:a dataset.read dataset:ns1.ds"))[0]
    ('class:allow', 'ALLOW')
    """
    if reply.error:
        return [("class:error", reply.text + "\n")]
    fragments: list[tuple[str, str]] = []
    for line in reply.text.split("\n"):
        verdict = line.split(" ", 1)[0]
        if verdict in ("ALLOW", "DENY"):
            fragments += [(f"class:{verdict.lower()}", verdict), ("", line[len(verdict) :])]
        elif line.endswith(": UNMET"):
            fragments.append(("class:unmet", line))
        elif line.endswith(": met"):
            fragments.append(("class:met", line))
        elif line.startswith("note:"):
            fragments.append(("class:note", line))
        elif line.startswith(("Would allow it", "To follow", "Commands")):
            fragments.append(("class:heading", line))
        else:
            fragments.append(("", line))
        fragments.append(("", "\n"))
    return fragments


def _completer(session: Session) -> Any:
    from prompt_toolkit.completion import Completer, Completion

    class SessionCompleter(Completer):
        """Asks the session what the word being typed may become."""

        def get_completions(self, document: Any, complete_event: Any) -> Iterator[Completion]:
            text = document.text_before_cursor
            start = -len(session.fragment(text))
            for candidate in session.completions(text):
                yield Completion(candidate, start_position=start)

    return SessionCompleter()


def _history() -> Any:
    from prompt_toolkit.history import FileHistory, InMemoryHistory

    path = history_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(exist_ok=True)
    except OSError:
        return InMemoryHistory()  # a read-only home still gets a session
    return FileHistory(str(path))


def _key_bindings(session: Session) -> Any:
    from prompt_toolkit.key_binding import KeyBindings

    bindings = KeyBindings()

    @bindings.add("enter")
    def _enter(event: Any) -> None:
        """Enter runs the line, unless it starts a rule or query that goes on (`:-` or `,`)."""
        buffer = event.current_buffer
        if session.needs_more(buffer.text):
            buffer.insert_text("\n")
        else:
            buffer.validate_and_handle()

    return bindings


def _interactive(session: Session) -> int:
    from prompt_toolkit import PromptSession, print_formatted_text
    from prompt_toolkit.formatted_text import FormattedText
    from prompt_toolkit.utils import is_dumb_terminal

    style = _style()
    prompt: PromptSession[str] = PromptSession(
        [("class:prompt", PROMPT)],
        history=_history(),
        enable_history_search=True,  # Up recalls the lines that start with what is typed
        completer=_completer(session),
        complete_while_typing=False,
        multiline=True,  # Enter is bound above: it continues a statement or runs it
        key_bindings=_key_bindings(session),
        prompt_continuation=CONTINUED,
        style=style,
    )

    plain = is_dumb_terminal()  # a terminal that cannot do colour gets text without escapes

    def show(reply: Reply) -> None:
        if reply.text and plain:
            print(reply.text, flush=True)
        elif reply.text:
            print_formatted_text(FormattedText(styled(reply)), style=style, end="")

    world = f"world {session.world_path}" if session.world_path else "an empty world"
    if session.deployment is not None:
        world = f"store {session.deployment.store.url} (changes are saved there as they are made)"
    show(Reply(f"privilog repl: policy {session.policy.name}, {world}. `help` lists the commands; Ctrl-D leaves."))
    with Interrupts(prompt.input) as interrupts:
        while not session.finished:
            try:
                line = prompt.prompt(handle_sigint=False)  # a SIGINT goes to `interrupts`
            except KeyboardInterrupt:
                continue  # Ctrl-C at the prompt drops what was typed
            except EOFError:
                line = "quit"
            show(interrupts.run(session, line))
    return EXIT_OK


class Interrupts:
    """Ctrl-C cancels the statement that is running, whenever it is pressed after Enter.

    At the prompt the terminal is in raw mode, so a Ctrl-C is a character, not a signal.
    One pressed a moment after Enter (before prompt_toolkit gives the terminal back) would
    be read as a key of the *next* prompt, or sit unread in the terminal's queue, and the
    statement would run on. So while a statement runs, the Ctrl-Cs that arrived as
    characters count too: those prompt_toolkit already read (its typeahead) and those still
    queued (read by a watcher thread, which interrupts the main thread). Other keys typed
    ahead are kept for the next prompt. prompt_toolkit's own SIGINT handler is off: a
    Ctrl-C that becomes a signal after the terminal leaves raw mode but before the statement
    starts is remembered here, not lost in an application that is closing.
    """

    def __init__(self, terminal_input: Any):
        self.input = terminal_input
        self.armed = False
        self.pending = False
        self._previous: Any = None

    def __enter__(self) -> Interrupts:
        self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGINT, self._previous)

    def _on_sigint(self, signum: int, frame: object) -> None:
        if self.armed:
            raise KeyboardInterrupt
        self.pending = True

    def run(self, session: Session, line: str) -> Reply:
        """Run one statement, or answer `cancelled` if a Ctrl-C came first or while it ran."""
        cancelled = Reply("cancelled", error=True)
        try:
            with _QueueWatcher(self.input) as watcher:
                self.armed = True  # before looking, so that no Ctrl-C falls between look and run
                try:
                    if self.pending or self._typed_ahead_interrupt() or watcher.interrupted():
                        return cancelled
                    return session.run(line)  # the Session turns KeyboardInterrupt into `cancelled`
                finally:
                    self.armed = False
        except KeyboardInterrupt:  # one that came between the Session's own try and ours
            return cancelled
        finally:
            self.pending = False  # a Ctrl-C after the statement ended cancels nothing

    def _typed_ahead_interrupt(self) -> bool:
        """Whether prompt_toolkit read a Ctrl-C after the Enter; keep what followed it."""
        from prompt_toolkit.input.typeahead import get_typeahead, store_typeahead
        from prompt_toolkit.keys import Keys

        keys = get_typeahead(self.input)
        cuts = [i for i, key in enumerate(keys) if key.key == Keys.ControlC]
        store_typeahead(self.input, keys[cuts[-1] + 1 :] if cuts else keys)
        return bool(cuts)


class _QueueWatcher:
    """While a statement runs: the terminal passes Ctrl-C as SIGINT, and a thread reads what
    was typed before that, interrupting the main thread at a queued Ctrl-C."""

    POLL = 0.02

    def __init__(self, terminal_input: Any):
        self.input = terminal_input
        self._seen = threading.Event()
        self._stop = threading.Event()
        self._typed: list[str] = []
        self._saved: list[Any] | None = None
        self._thread: threading.Thread | None = None
        try:
            self.fd: int | None = terminal_input.fileno()
        except Exception:  # an input without a file descriptor (a pipe in tests): nothing queued
            self.fd = None

    def __enter__(self) -> _QueueWatcher:
        if self.fd is None or not os.isatty(self.fd):
            return self
        import termios

        self._saved = termios.tcgetattr(self.fd)
        mode = termios.tcgetattr(self.fd)
        mode[3] = (mode[3] & ~(termios.ICANON | termios.ECHO)) | termios.ISIG  # keys as typed, Ctrl-C a signal
        mode[6][termios.VMIN], mode[6][termios.VTIME] = 1, 0
        termios.tcsetattr(self.fd, termios.TCSANOW, mode)
        self._drain(wait=0.0)  # what was queued before this moment, before the statement starts
        self._thread = threading.Thread(target=self._watch, name="privilog-ctrl-c", daemon=True)
        self._thread.start()
        return self

    def interrupted(self) -> bool:
        return self._seen.is_set()

    def _drain(self, wait: float) -> None:
        import select

        assert self.fd is not None
        while select.select([self.fd], [], [], wait)[0]:
            data = os.read(self.fd, 1024).decode("utf-8", "replace")
            if "\x03" in data:
                self._typed.clear()
                data = data[data.rindex("\x03") + 1 :]
                if not self._seen.is_set():
                    self._seen.set()
                    if self._thread is not None:
                        _thread.interrupt_main(signal.SIGINT)
            self._typed.append(data)
            wait = 0.0

    def _watch(self) -> None:
        while not self._stop.is_set():
            self._drain(wait=self.POLL)

    def __exit__(self, *exc: object) -> None:
        if self._saved is None or self.fd is None:
            return
        import termios

        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._drain(wait=0.0)
        termios.tcsetattr(self.fd, termios.TCSANOW, self._saved)
        self._keep_for_next_prompt("".join(self._typed))

    def _keep_for_next_prompt(self, text: str) -> None:
        if not text:
            return
        from prompt_toolkit.input.typeahead import store_typeahead
        from prompt_toolkit.input.vt100_parser import Vt100Parser
        from prompt_toolkit.key_binding import KeyPress

        keys: list[KeyPress] = []
        parser = Vt100Parser(keys.append)
        parser.feed(text)
        parser.flush()
        store_typeahead(self.input, keys)
