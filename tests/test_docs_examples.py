"""The examples in the README and docs/ are true: each page's files written, its commands run, their output compared.

A page (README.md, and every ``docs/**/*.md``) is run top to bottom in a fresh folder of its own,
which holds a copy of the bundled sample deployment as ``privilog/samples/``, of the scenario
files as ``tests/scenarios/`` and of the conformance tables as ``tests/conformance/``, where the
commands (run from a checkout) find them:

* a fenced block with a title (```` ```yaml title="world.yaml" ````, as MkDocs shows a
  file's name) is written to that path;
* a ```` ```console ```` block's ``$ COMMAND`` lines are run by bash in that folder, with
  the ``privilog`` of this environment first on the PATH; each must print (standard
  output and standard error, as a terminal shows them) exactly the lines under it, up
  to the next ``$``. A ``...`` in the shown output stands for any text (a timestamp, a
  revision token, lines left out), as in doctest's ``ELLIPSIS``.

Pages run two at a time (each test waits for its own page's run), so each page that starts a
server gives it a port no other page uses. A command may start a process in the background (``privilog serve ... &``): each command runs in
a session of its own, and what is left of each is stopped (SIGTERM, then SIGKILL) when the page
is done. A block without a title or a ``$`` is prose, and not run. Every page shows at least one
example, but a page that says why not in a comment ``<!-- no examples: WHY -->``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
NO_EXAMPLES = re.compile(r"<!-- no examples: [^>]+-->")
FENCE = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```[ \t]*$", re.S | re.M)
TITLE = re.compile(r'title="([^"]+)"')


def steps(text: str) -> list[tuple[str, str, str]]:
    """A page's steps in order: ("file", path, text) and ("run", command, expected output)."""
    found: list[tuple[str, str, str]] = []
    for match in FENCE.finditer(text):
        language, info, body = match.groups()
        title = TITLE.search(info)
        if title:
            found.append(("file", title.group(1), body))
        elif language == "console":
            command: str | None = None
            printed: list[str] = []
            for line in body.splitlines():
                if line.startswith("$ "):
                    if command is not None:
                        found.append(("run", command, "\n".join(printed)))
                    command, printed = line[2:], []
                elif command is not None:
                    printed.append(line)
            if command is not None:
                found.append(("run", command, "\n".join(printed)))
    return found


def test_every_page_has_examples() -> None:
    assert len(PAGES) > 1, "no pages in docs/"
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        assert NO_EXAMPLES.search(text) or any(kind == "run" for kind, _, _ in steps(text)), page.name


def matches(shown: str, printed: str) -> bool:
    """Whether ``printed`` is what a page shows: the same text, each ``...`` standing for any text."""
    shown = shown.rstrip("\n")
    if "..." not in shown:
        return printed == shown
    pattern = ".*?".join(re.escape(part) for part in shown.split("..."))
    return re.fullmatch(pattern, printed, re.S) is not None


def _stop(sessions: list[int]) -> None:
    """Each command's session stopped: what a page left running in the background."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        alive = []
        for pgid in sessions:
            try:
                os.killpg(pgid, signum)
                alive.append(pgid)
            except ProcessLookupError:
                pass
        if not alive:
            return
        deadline = time.monotonic() + 5
        while alive and time.monotonic() < deadline:
            time.sleep(0.05)
            alive = [pgid for pgid in alive if _running(pgid)]
        sessions = alive


def _running(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _environment() -> dict[str, str]:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONUNBUFFERED": "1",  # standard output and error in the order they are written
        "COLUMNS": "100",
    }
    env.pop("PRIVILOG_STORE", None)
    env.pop("PRIVILOG_AS", None)
    return env


def _bundled(folder: Path) -> None:
    """The sample deployment, the scenario files and the conformance tables, where the README's commands find them."""
    shutil.copytree(ROOT / "privilog" / "samples", folder / "privilog" / "samples")
    shutil.copytree(ROOT / "tests" / "scenarios", folder / "tests" / "scenarios")
    shutil.copytree(
        ROOT / "tests" / "conformance",
        folder / "tests" / "conformance",
        ignore=shutil.ignore_patterns("*.py", "__pycache__"),
    )


def run_page(text: str, folder: Path) -> list[tuple[str, str, str]]:
    """Each command of a page run in ``folder``, in order: (command, what the page shows, what it printed)."""
    env = _environment()
    _bundled(folder)
    ran = []
    sessions: list[int] = []
    try:
        for kind, what, shown in steps(text):
            if kind == "file":
                path = folder / what
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(shown, encoding="utf-8")
                continue
            with subprocess.Popen(
                ["bash", "-c", what],
                cwd=folder,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            ) as process:
                sessions.append(process.pid)
                printed, _ = process.communicate(timeout=120)
            ran.append((what, shown, printed.rstrip("\n")))
    finally:
        _stop(sessions)
    return ran


def _rewritten(text: str, ran: list[tuple[str, str, str]]) -> str:
    """The page with each console block's output replaced by what its commands printed."""
    printed = iter(ran)

    def block(match: re.Match[str]) -> str:
        language, info, body = match.groups()
        if language != "console" or TITLE.search(info) or not re.search(r"^\$ ", body, re.M):
            return match.group(0)  # a file, or a block without commands (a REPL transcript) is kept as it is
        lines = []
        for line in body.splitlines():
            if line.startswith("$ "):
                command, shown, output = next(printed)
                assert command == line[2:]
                kept = shown.rstrip("\n") if matches(shown, output) else output  # a matching `...` stays
                lines += [line, *([kept] if kept else [])]
        return f"```{language}{info}\n" + "\n".join(lines) + "\n```"

    return FENCE.sub(block, text)


PAGE_TEST = "test_the_page_examples_print_what_they_show"
RUNNERS = 2  # pages run two at a time: each is a chain of short processes, one core each


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[Path, Future[Any]]:
    """Every page this session selected, run two at a time (the pages are independent: a folder of
    their own each, and a port of their own where one starts a server); each test waits for its own."""
    selected = [
        item.callspec.params["page"]
        for item in request.session.items
        if item.originalname == PAGE_TEST and hasattr(item, "callspec")
    ]
    pool = ThreadPoolExecutor(max_workers=RUNNERS)
    request.addfinalizer(pool.shutdown)
    texts = {page: page.read_text(encoding="utf-8") for page in selected}
    return {
        page: pool.submit(run_page, text, tmp_path_factory.mktemp(page.stem)) for page, text in texts.items()
    }


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_the_page_examples_print_what_they_show(page: Path, runs: dict[Path, Future[Any]]) -> None:
    """With PRIVILOG_REGEN_DOCS=1 the page's outputs are rewritten from the run instead (review the diff)."""
    text = page.read_text(encoding="utf-8")
    ran = runs[page].result()
    if os.environ.get("PRIVILOG_REGEN_DOCS") == "1":
        page.write_text(_rewritten(text, ran), encoding="utf-8")
        return
    for command, shown, printed in ran:
        assert matches(shown, printed), f"{page.relative_to(ROOT)}: $ {command}\nshown:\n{shown}\nprinted:\n{printed}"
