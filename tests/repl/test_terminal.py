"""`privilog repl` end to end: through a pseudo-terminal (pexpect), and scripted through a pipe.

Few and generous: each test starts a real process, on machines that may be loaded.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest
import yaml

from privilog.repl import terminal
from privilog.repl.session import Session

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = "privilog/samples/world.yaml"
SAMPLE_WORLD = ROOT / SAMPLE
TIMEOUT = 20
PROMPT = "privilog> "
# A cross product of six relations: minutes of work, unless cancelled.
SLOW_QUERY = "?- " + ", ".join(f"descendant(A{i}, B{i})" for i in range(6)) + ', B5 == "none".'


def environment(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        TERM="xterm",
        HOME=str(home),
        PRIVILOG_HISTORY=str(home / "history"),
        PROMPT_TOOLKIT_NO_CPR="1",  # nobody answers cursor position requests under pexpect
    )
    return env


def start(home: Path) -> pexpect.spawn:
    """`privilog repl` on the sample world, in a pseudo-terminal, at its first prompt."""
    child = pexpect.spawn(
        sys.executable,
        ["-m", "privilog", "repl", "--world", SAMPLE],
        cwd=str(ROOT),
        env=environment(home),
        encoding="utf-8",
        timeout=TIMEOUT,
        dimensions=(50, 250),
    )
    child.expect_exact(PROMPT)
    return child


@pytest.fixture
def repl(tmp_path: Path) -> Iterator[pexpect.spawn]:
    child = start(tmp_path)
    try:
        yield child
    finally:
        child.close(force=True)


def test_why_not_then_the_suggested_grant_then_allowed_with_completion_and_history(
    repl: pexpect.spawn, tmp_path: Path
) -> None:
    repl.send("che\t")
    repl.expect(r"che(\x1b\[[0-9;?]*[A-Za-z])*ck")  # Tab completed it (the terminal may draw it in pieces)
    repl.send(" user:bob dataset.read dataset:marketing.campaigns\r")
    repl.expect_exact("DENY")
    repl.expect_exact(PROMPT)
    repl.send("whynot user:bob dataset.read dataset:marketing.campaigns\r")
    repl.expect_exact("1. grant user:bob READ dataset:marketing.campaigns as user:root")
    repl.expect_exact("2. member add user:bob group:analysts as user:root")
    repl.expect_exact(PROMPT)
    repl.send("grant user:bob READ dataset:marketing.campaigns as user:root\r")
    repl.expect_exact("granted READ on dataset:marketing.campaigns to user:bob")
    repl.expect_exact(PROMPT)
    repl.send("check user:bob dataset.read dataset:marketing.campaigns\r")
    repl.expect_exact("ALLOW")
    repl.expect_exact(PROMPT)
    repl.sendeof()
    repl.expect_exact("unsaved changes")  # the first Ctrl-D warns
    repl.expect_exact(PROMPT)
    repl.sendeof()
    repl.expect(pexpect.EOF)
    repl.close()
    assert repl.exitstatus == 0
    assert "+grant user:bob READ dataset:marketing.campaigns as user:root" in (tmp_path / "history").read_text()


def test_ctrl_c_cancels_input_and_a_running_query_and_history_comes_back(tmp_path: Path) -> None:
    (tmp_path / "history").write_text(
        "\n# from an earlier session\n+check user:bob dataset.read dataset:sales.orders\n"
    )
    child = start(tmp_path)
    try:
        child.send("\x1b[A")  # up: the previous session's last command
        child.send("\r")
        child.expect_exact("ALLOW")
        child.expect_exact(PROMPT)
        child.send("entity delete namespace:sales as user:root")
        child.sendintr()  # drops what was typed
        child.expect_exact(PROMPT)
        # Ctrl-C at every moment after Enter cancels the statement: in the same write as the
        # Enter (the terminal is still in raw mode, so it arrives as a character), and once
        # the line was echoed back (the statement may or may not have started).
        child.send(f"{SLOW_QUERY}\r\x03")
        child.expect_exact("cancelled")
        child.expect_exact(PROMPT)
        child.send(f"{SLOW_QUERY}\r")
        child.expect_exact('"none".')
        child.expect_exact("\n")
        child.sendintr()
        child.expect_exact("cancelled")
        child.expect_exact(PROMPT)
        child.send("list user:bob dataset --in namespace:sales\r")
        child.expect_exact("dataset:sales.orders  (READ on it)")  # the delete typed above never ran
    finally:
        child.close(force=True)


def test_up_arrow_searches_the_history_by_what_is_typed(tmp_path: Path) -> None:
    (tmp_path / "history").write_text(
        "\n+check user:bob dataset.read dataset:sales.orders\n\n+list user:bob dataset --in namespace:sales\n"
    )
    child = start(tmp_path)
    try:
        child.send("che")
        child.send("\x1b[A")  # up: the last line starting with `che`, not the last line
        child.send("\r")
        child.expect_exact("ALLOW")  # in colour: the verdict and the request are drawn apart
        child.expect_exact(" user:bob dataset.read dataset:sales.orders")
        child.expect_exact(PROMPT)
        child.send("\x1b[A\x1b[A")  # with nothing typed, up walks every line: the list before the check
        child.send("\r")
        child.expect_exact("dataset:sales.orders  (READ on it)")
    finally:
        child.close(force=True)


def test_keys_typed_while_a_statement_runs_reach_the_next_prompt(tmp_path: Path) -> None:
    child = start(tmp_path)
    try:
        child.send("check user:bob dataset.read dataset:sales.orders\rhel")
        child.expect_exact("ALLOW")
        child.send("p\r")
        child.expect_exact("Commands")  # `hel` typed ahead and `p` typed after ran as `help`
    finally:
        child.close(force=True)


def test_piped_input_is_scripted_without_a_prompt(tmp_path: Path) -> None:
    script = "\n".join(
        [
            "whynot user:bob dataset.read dataset:marketing.campaigns",
            "grant user:bob READ dataset:marketing.campaigns as user:root",
            "check user:bob dataset.read dataset:marketing.campaigns",
            "rule reader(P, E) :-",
            '    holds(P, "READ", E, _).',
            "?- reader(user:bob, E).",
            f"save world {tmp_path / 'after.yaml'}",
        ]
    )
    done = subprocess.run(
        [sys.executable, "-m", "privilog", "repl", "--world", SAMPLE],
        cwd=ROOT,
        env=environment(tmp_path),
        input=script,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert PROMPT not in done.stdout and "\x1b[" not in done.stdout
    out = done.stdout.splitlines()
    assert "  1. grant user:bob READ dataset:marketing.campaigns as user:root" in out
    assert "ALLOW user:bob dataset.read dataset:marketing.campaigns" in out
    assert out[-6:-2] == [
        "E",
        "-" * len("dataset:marketing.campaigns"),
        "dataset:marketing.campaigns",
        "dataset:sales.orders",
    ]
    assert out[-1].startswith(f"saved the world to {tmp_path / 'after.yaml'}: ")
    grants = yaml.safe_load((tmp_path / "after.yaml").read_text())["grants"]
    assert ["user:bob", "READ", "dataset:marketing.campaigns"] in grants


def test_piped_input_with_a_bad_line_carries_on_and_exits_2(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "privilog", "repl", "--world", SAMPLE],
        cwd=ROOT,
        env=environment(tmp_path),
        input="chek user:bob\ncheck user:bob dataset.read dataset:sales.orders\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout.splitlines() == ["ALLOW user:bob dataset.read dataset:sales.orders"]
    assert done.stderr.splitlines() == ["privilog: line 1: unknown command `chek`: did you mean `check`?"]


def test_piped_errors_name_the_line_a_statement_starts_on() -> None:
    session = Session("cdap", SAMPLE_WORLD)
    out, err = io.StringIO(), io.StringIO()
    script = "check user:bob dataset.read dataset:sales.orders\n?- grant(P,\n  A, E\n\nwho dataset.read\n"
    assert terminal.run(session, io.StringIO(script), out, err) == 2
    assert out.getvalue() == "ALLOW user:bob dataset.read dataset:sales.orders\n"
    lines = err.getvalue().splitlines()
    assert lines[0] == "privilog: line 2: <query>:2:7: error: unexpected `.`, expected `)` or `,`"
    assert lines[-1].startswith("privilog: line 5: usage: who OPERATION ENTITY")


def test_a_world_that_does_not_load_exits_2_before_the_session(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "privilog", "repl", "--world", str(tmp_path / "missing.yaml")],
        cwd=ROOT,
        env=environment(tmp_path),
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "no such world file" in done.stderr
