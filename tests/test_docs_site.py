"""The documentation site builds with ``mkdocs build --strict``, and its generated reference is whole.

``--strict`` turns MkDocs' warnings into a failure: a link to a page or an anchor that is not there,
a page left out of the nav (``mkdocs.yml``'s ``validation``), a reference that mkdocstrings cannot
find. The built site is looked at too: the reference pages that ``docs/hooks.py`` writes from the
code name every command and every route.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from privilog.cli.commands import build_parser

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs"))
import hooks  # noqa: E402  (docs/hooks.py: the generators MkDocs runs)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        # the command a reader runs (its own script: the checkout is not on its path, as with `mkdocs serve`)
        [str(Path(sys.executable).parent / "mkdocs"), "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # Material's notice of its successor, not a warning of ours
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def _commands(parser, prefix: str = "privilog") -> list[str]:  # type: ignore[no-untyped-def]
    found = []
    for name, sub, _ in hooks._subcommands(parser):
        found.append(f"{prefix} {name}")
        found += _commands(sub, f"{prefix} {name}")
    return found


def test_the_site_builds_strictly_and_every_page_is_in_it(site: Path) -> None:
    pages = sorted(p.relative_to(ROOT / "docs").with_suffix("") for p in (ROOT / "docs").rglob("*.md"))
    for page in pages:
        built = site / ("index.html" if page.name == "index" else page / "index.html")
        assert built.exists(), f"docs/{page}.md has no page in the site"


def test_the_command_reference_names_every_command_and_option(site: Path) -> None:
    html = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    commands = _commands(build_parser())
    assert len(commands) > 30
    for command in commands:
        assert f"<code>{command}</code>" in html, command
    text = hooks.cli_reference()
    assert "`--consistency-timeout SECONDS`" in text and "`--witnesses N`" in text


def test_the_http_reference_names_every_route(site: Path) -> None:
    from privilog.serve import cdap, routes

    html = (site / "reference" / "http" / "index.html").read_text(encoding="utf-8")
    for route in [*routes.ROUTES, *cdap.ROUTES]:
        assert f"<code>{route.method} {route.path}</code>" in html, (route.method, route.path)


def test_an_unknown_generated_section_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown generated section 'nope'"):
        hooks.generated("text\n<!-- generated: nope -->\n")


def test_a_marker_quoted_in_prose_is_left_as_it_is() -> None:
    text = "A page holds a marker such as `<!-- generated: cli -->`.\n"
    assert hooks.generated(text) == text
    assert "privilog check" in hooks.generated("# Commands\n\n<!-- generated: cli -->\n")


def test_the_readme_links_resolve() -> None:
    """The README is not in the site: its links into docs/ are checked here."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for target in re.findall(r"\]\(((?:docs|benchmarks|tests)/[^)#]+)", readme):
        assert (ROOT / target).exists(), target


def _labels(svg: str) -> list[str]:
    return re.findall(r"<text[^>]*>([^<]*)</text>", svg)


def test_the_readme_picture_is_what_why_draws_today(tmp_path: Path) -> None:
    """docs/images/why-dave.svg, shown at the README's top, has the labels `privilog why` draws now."""
    out = tmp_path / "why.svg"
    done = subprocess.run(
        [sys.executable, "-m", "privilog", "why", "user:dave", "namespace.get", "namespace:marketing",
         "--world", str(ROOT / "privilog" / "samples" / "world.yaml"), "--format", "svg", "--out", str(out)],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    committed = (ROOT / "docs" / "images" / "why-dave.svg").read_text(encoding="utf-8")
    assert _labels(out.read_text(encoding="utf-8")) == _labels(committed), (
        "regenerate it: privilog why user:dave namespace.get namespace:marketing --world privilog/samples/world.yaml "
        "--format svg --out docs/images/why-dave.svg"
    )
    assert "user:dave" in _labels(committed) and "namespace:marketing" in _labels(committed)
