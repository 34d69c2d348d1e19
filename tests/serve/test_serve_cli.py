"""privilog token and privilog serve on the command line: tokens shown once, one-line errors, exit 2."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def privilog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "privilog", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)


def test_tokens_made_listed_and_revoked(tmp_path):
    store = str(tmp_path / "authz.db")
    assert privilog("store", "init", "--store", store, "--admin", "user:root").returncode == 0
    made = privilog("token", "create", "--principal", "user:root", "--store", store)
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert token.startswith("plg_") and "shown once" in made.stderr
    _, token_id, secret = token.split("_", 2)
    listed = privilog("token", "list", "--store", store, "--json")
    assert token_id in listed.stdout and secret not in listed.stdout
    assert secret.encode() not in Path(store).read_bytes()  # only its hash is kept
    assert privilog("token", "revoke", token_id, "--store", store).returncode == 0
    again = privilog("token", "revoke", token_id, "--store", store)
    assert again.returncode == 1 and "no live token" in again.stderr
    assert "revoked" in privilog("token", "list", "--store", store).stdout
    bad = privilog("token", "create", "--principal", "alice", "--store", store)
    assert bad.returncode == 2 and "malformed principal" in bad.stderr and "Traceback" not in bad.stderr


def test_serve_errors_are_one_line_exit_2(tmp_path):
    missing = privilog("serve", "--store", str(tmp_path / "none.db"), "--port", "0")
    assert missing.returncode == 2 and "no such store" in missing.stderr and len(missing.stderr.splitlines()) == 1
    store = str(tmp_path / "authz.db")
    privilog("store", "init", "--store", store)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        busy = privilog("serve", "--store", store, "--port", port)
    assert busy.returncode == 2 and "cannot listen on 127.0.0.1" in busy.stderr and "Traceback" not in busy.stderr
    bad_policy = privilog("serve", "--store", store, "--policy", "nonesuch", "--port", "0")
    assert bad_policy.returncode == 2 and "no policy `nonesuch`" in bad_policy.stderr
    sample = privilog("serve", "--store", store, "--port", "0", "--decision-log", str(tmp_path / "d.jsonl"),
                      "--decision-log-sample", "2")
    assert sample.returncode == 2 and "--decision-log-sample" in sample.stderr
