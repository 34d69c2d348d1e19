"""The server's budget as the docs give it: every option of privilog/serve/limits.py in the table of docs/reference/limits.md, with
its default, and every option of the table an option of `privilog serve`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from privilog.serve.limits import OPTIONS, Limits, default

ROOT = Path(__file__).resolve().parents[2]


def _table() -> dict[str, str]:
    text = (ROOT / "docs" / "reference" / "limits.md").read_text()
    start = text.index("<!-- the serve budget:")
    rows = re.findall(r"^\| `(--[a-z-]+)` \| ([0-9.]+) \|", text[start:start + 4000], re.M)
    return dict(rows)


def test_the_docs_table_is_the_budget():
    table = _table()
    assert list(table) == [option for option, _, _ in OPTIONS]
    for option, name, _ in OPTIONS:
        assert float(table[option]) == float(default(name)), option


def test_every_bound_is_an_option_of_serve_with_its_default():
    out = subprocess.run([sys.executable, "-m", "privilog", "serve", "--help"], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    flat = " ".join(out.split())
    for option, name, _ in OPTIONS:
        value = default(name)
        shown = f"{value:g}" if isinstance(value, float) else str(value)
        assert re.search(rf"{option} \w+ .*?\(default {re.escape(shown)}\)", flat), option


def test_a_bound_that_is_not_positive_is_a_usage_error(tmp_path):
    done = subprocess.run([sys.executable, "-m", "privilog", "serve", "--store", str(tmp_path / "none.db"),
                           "--request-timeout", "0"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2
    assert done.stderr.strip() == "privilog: serve: --request-timeout is a positive number, not 0"
    for value in ("inf", "nan", "-1"):
        done = subprocess.run([sys.executable, "-m", "privilog", "serve", "--store", str(tmp_path / "none.db"),
                               "--client-timeout", value], capture_output=True, text=True, cwd=ROOT)
        assert done.returncode == 2 and "--client-timeout is a positive number" in done.stderr, value
    assert Limits().connection_timeout == 2 * Limits().client_timeout + Limits().request_timeout
