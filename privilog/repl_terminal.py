"""The terminal around a :class:`~privilog.repl.Session`: read a line, print the reply.

On a terminal it reads with prompt_toolkit (history across sessions, Tab
completion, colour where the terminal has it); when standard input or output
is not a terminal it reads plain lines and prints plain text, so the REPL can
be scripted. All the logic is in the Session; nothing here decides anything.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

from privilog.repl import Reply, Session

PROMPT = "privilog> "
CONTINUED = "      ... "
EXIT_OK, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 2, 3


def history_path() -> Path:
    """$PRIVILOG_HISTORY, or ``privilog/history`` under $XDG_STATE_HOME (default ~/.local/state)."""
    if os.environ.get("PRIVILOG_HISTORY"):
        return Path(os.environ["PRIVILOG_HISTORY"]).expanduser()
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "privilog" / "history"


def run(session: Session, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """Run the session until `quit` or the end of input; return the exit status."""
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    if stdin.isatty() and stdout.isatty():
        return _interactive(session)
    return _scripted(session, stdin, stdout)


# ---- scripted: plain lines in, plain text out -------------------------------------------


def statements(session: Session, lines: Iterable[str]) -> Iterator[str]:
    """Lines joined into statements: a rule or query may continue over several lines."""
    pending: list[str] = []
    for line in lines:
        pending.append(line.rstrip("\n"))
        if not session.needs_more("\n".join(pending)):
            yield "\n".join(pending)
            pending = []
    if pending:
        yield "\n".join(pending)


def _scripted(session: Session, stdin: TextIO, stdout: TextIO) -> int:
    """Exit 0 when every line ran, 2 when some line was bad input, 3 when one hit a bug."""
    status = EXIT_OK
    for statement in statements(session, stdin):
        reply = session.run(statement)
        if reply.text:
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
    show(Reply(f"privilog repl: policy {session.policy.name}, {world}. `help` lists the commands; Ctrl-D leaves."))
    while not session.finished:
        try:
            line = prompt.prompt()
        except KeyboardInterrupt:
            continue  # Ctrl-C at the prompt drops what was typed
        except EOFError:
            line = "quit"
        try:
            show(session.run(line))
        except KeyboardInterrupt:
            show(Reply("cancelled", error=True))
    return EXIT_OK
