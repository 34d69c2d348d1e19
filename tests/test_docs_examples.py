"""The examples in docs/ are true: each page's files written, its commands run, their output compared.

A page is run top to bottom in a fresh folder of its own:

* a fenced block with a title (```` ```yaml title="world.yaml" ````, as MkDocs shows a
  file's name) is written to that path;
* a ```` ```console ```` block's ``$ COMMAND`` lines are run by bash in that folder, with
  the ``privilog`` of this environment first on the PATH; each must print (standard
  output and standard error, as a terminal shows them) exactly the lines under it, up
  to the next ``$``.

A block without a title or a ``$`` is prose, and not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md"))
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
    assert PAGES, "no pages in docs/"
    for page in PAGES:
        assert any(kind == "run" for kind, _, _ in steps(page.read_text(encoding="utf-8"))), page.name


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


def run_page(text: str, folder: Path) -> list[tuple[str, str, str]]:
    """Each command of a page run in ``folder``, in order: (command, what the page shows, what it printed)."""
    env = _environment()
    ran = []
    for kind, what, shown in steps(text):
        if kind == "file":
            path = folder / what
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(shown, encoding="utf-8")
            continue
        done = subprocess.run(
            ["bash", "-c", what],
            cwd=folder,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=120,
        )
        ran.append((what, shown, done.stdout.rstrip("\n")))
    return ran


def _rewritten(text: str, ran: list[tuple[str, str, str]]) -> str:
    """The page with each console block's output replaced by what its commands printed."""
    printed = iter(ran)

    def block(match: re.Match[str]) -> str:
        language, info, body = match.groups()
        if language != "console" or TITLE.search(info):
            return match.group(0)
        lines = []
        for line in body.splitlines():
            if line.startswith("$ "):
                command, _, output = next(printed)
                assert command == line[2:]
                lines += [line, *([output] if output else [])]
        return f"```{language}{info}\n" + "\n".join(lines) + "\n```"

    return FENCE.sub(block, text)


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_the_page_examples_print_what_they_show(page: Path, tmp_path: Path) -> None:
    """With PRIVILOG_REGEN_DOCS=1 the page's outputs are rewritten from the run instead (review the diff)."""
    text = page.read_text(encoding="utf-8")
    ran = run_page(text, tmp_path)
    if os.environ.get("PRIVILOG_REGEN_DOCS") == "1":
        page.write_text(_rewritten(text, ran), encoding="utf-8")
        return
    for command, shown, printed in ran:
        assert printed == shown.rstrip("\n"), f"{page.name}: $ {command}"
