"""privilog verify-log over a log a real server wrote while grants changed: every line agrees; then copies
tampered with (a result flipped, a grant's log entry changed, a line removed, a reason edited, a line repeated,
a line that is not JSON), each found and named FILE:LINE; and tampered copies signed again with the store's
key (a forger who can read the store), found by deciding again."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from privilog.cli.commands import main
from privilog.serve.decisionlog import KEY_NAME, mac_of
from privilog.store import open_store
from tests.serve.conftest import ROOT, Setup

READ = {"principal": "user:alice", "operation": "dataset.read", "entity": "dataset:ns1.ds"}
CDAP = "/v3/security/authorization"
ACTIONS = ("READ", "WRITE", "EXECUTE", "ADMIN")


def _change(client, kind, *items):
    response = client.post("/v1/changes", json={"kind": kind, "items": [list(i) for i in items]})
    assert response.status_code == 200, response.text


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A store and the decision log a server wrote over it: checks, batches and explained checks made while
    grants, memberships and revokes came and went."""
    folder = tmp_path_factory.mktemp("verify")
    setup = Setup(folder)
    log = folder / "decisions.log"
    try:
        server = setup.serve("--decision-log", str(log))
        root = server.client(setup.root)
        dataset = {"entity": "DATASET", "namespace": "ns1", "dataset": "ds"}
        for step in range(3):
            assert root.post("/v1/check", json=READ).status_code == 200
            _change(root, "grant", ("user:alice", "READ", "dataset:ns1.ds"))
            _change(root, "grant", ("group:eng", "WRITE", "dataset:ns1.ds"))
            _change(root, "member.add", ("user:alice", "group:eng"))
            checks = [READ, {**READ, "operation": "dataset.write"}, {**READ, "principal": "user:bob"}]
            assert root.post("/v1/check/batch", json={"checks": checks}).status_code == 200
            assert root.post("/v1/check", json={**READ, "explain": True}).status_code == 200
            assert root.post("/v1/check/batch", json={"checks": checks[:2], "explain": step == 1}).status_code == 200
            enforce = {"entity": dataset, "principal": {"name": "alice", "type": "USER"}, "actions": ["READ"]}
            root.post(f"{CDAP}/enforce", json=enforce)
            visible = {"principal": {"name": "alice", "type": "USER"}, "entities": [dataset]}
            assert root.post(f"{CDAP}/isVisible", json=visible).status_code == 200
            _change(root, "revoke", ("user:alice", "READ", "dataset:ns1.ds"))
            _change(root, "member.remove", ("user:alice", "group:eng"))
            assert root.post("/v1/check", json=READ).status_code == 200
    finally:
        setup.close()
    return setup.path, log


def verify(store: Path, log: Path, *more: str, capsys) -> tuple[int, str]:
    code = main(["verify-log", str(log), "--store", str(store), *more])
    out, err = capsys.readouterr()
    return code, out + err


def dumps(line: dict) -> str:
    return json.dumps(line, separators=(",", ":"), ensure_ascii=False)


def copy_with(log: Path, folder: Path, edit) -> Path:
    lines = [json.loads(t) for t in log.read_text().splitlines()]
    lines = edit(lines)
    target = folder / "tampered.log"
    target.write_text("".join((t if isinstance(t, str) else dumps(t)) + "\n" for t in lines))
    return target


def resign(store_path: Path, lines: list[dict]) -> list[dict]:
    """Each stream's chain made again with the store's key: what a forger who can read the store could do."""
    with open_store(str(store_path), ACTIONS, create=False) as store:
        key = store.secret(KEY_NAME).encode()
    last: dict[str, str] = {}
    for line in lines:
        line.pop("mac")  # the mac is over the line's text without it; then it is the last field
        line["mac"] = last[line["stream"]] = mac_of(key, last.get(line["stream"], ""), dumps(line))
    return lines


def test_a_log_as_written_agrees_in_full(written):
    store, log = written
    done = subprocess.run(
        [sys.executable, "-m", "privilog", "verify-log", str(log), "--store", str(store)],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    entries = len(log.read_text().splitlines())
    assert entries == 30
    assert f"{entries} entries in 1 streams, chain checked; {entries} re-decided; every line agrees" in done.stdout
    allows = [json.loads(t) for t in log.read_text().splitlines() if '"allowed_by"' in t]
    entries_named = {a["reason"]["allowed_by"][0]["entry"] for a in allows}
    assert None not in entries_named and len(entries_named) >= 3  # grants made again name their new entries


def test_a_sample_and_json(written, capsys):
    store, log = written
    code, out = verify(store, log, "--sample", "5", "--json", capsys=capsys)
    summary = json.loads(out)
    assert code == 0 and summary["checked"] == 5 and summary["sampled"] and summary["findings"] == []
    code, out = verify(store, log, "--sample", "0.5", capsys=capsys)
    assert code == 0 and "(a sample)" in out


def _at(index):
    def edit(lines):
        return lines[index]
    return edit


def _first_allow(lines):
    return next(i for i, line in enumerate(lines) if line["result"] == "allow" and "allowed_by" in line["reason"])


def _flip(lines):
    i = _first_allow(lines)
    lines[i]["result"] = "deny"
    return lines


def _entry(lines):
    i = _first_allow(lines)
    lines[i]["reason"]["allowed_by"][0]["entry"] += 1
    return lines


def _text(lines):
    i = next(i for i, line in enumerate(lines) if line["result"] == "deny" and line["reason"].get("unmet"))
    lines[i]["reason"]["unmet"][0]["text"] = "ADMIN"
    return lines


@pytest.mark.parametrize(
    ("edit", "line_of", "found"),
    [
        (_flip, _first_allow, "result (logged deny, re-decided allow)"),
        (_entry, _first_allow, "reason.allowed_by[0].entry (logged"),
        (_text, lambda ls: next(i for i, x in enumerate(ls) if x["result"] == "deny" and x["reason"].get("unmet")),
         'reason.unmet[0].text (logged "ADMIN", re-decided "READ")'),
    ],
    ids=["result-flipped", "grant-entry-changed", "reason-edited"],
)
def test_an_edited_line_is_found_by_its_mac_and_again_when_signed_anew(written, tmp_path, capsys, edit, line_of, found):
    store, log = written
    original = [json.loads(t) for t in log.read_text().splitlines()]
    number = line_of(original) + 1
    tampered = copy_with(log, tmp_path, edit)
    code, out = verify(store, tampered, capsys=capsys)
    assert code == 1
    assert f"{tampered}:{number}: mac does not match" in out
    assert f"{tampered}:{number}: {found}" in out
    assert "1 line differs" in out
    # signed again with the store's key: the chain holds, deciding again still finds it
    forged = copy_with(log, tmp_path, lambda lines: resign(store, edit(lines)))
    code, out = verify(store, forged, capsys=capsys)
    assert code == 1 and "mac does not match" not in out
    assert f"{forged}:{number}: {found}" in out


def test_a_line_removed_repeated_or_not_json_is_found(written, tmp_path, capsys):
    store, log = written
    removed = copy_with(log, tmp_path, lambda lines: lines[:5] + lines[6:])
    code, out = verify(store, removed, capsys=capsys)
    assert code == 1 and f"{removed}:6: n=7 follows n=5 of stream" in out and "lines removed before it" in out

    repeated = copy_with(log, tmp_path, lambda lines: [*lines[:8], lines[7], *lines[8:]])
    code, out = verify(store, repeated, capsys=capsys)
    assert code == 1 and f"{repeated}:9: n=8 after n=8 of stream" in out and "repeated or moved" in out

    swapped = copy_with(log, tmp_path, lambda lines: [*lines[:3], lines[4], lines[3], *lines[5:]])
    code, out = verify(store, swapped, capsys=capsys)
    assert code == 1 and f"{swapped}:4: n=5 follows n=3" in out and f"{swapped}:5: n=4 after n=5" in out

    broken = copy_with(log, tmp_path, lambda lines: [*lines[:2], '{"result": "allow"', *lines[2:]])
    code, out = verify(store, broken, capsys=capsys)
    assert code == 1 and f"{broken}:3: not a JSON line" in out


def test_usage_and_unreadable_input_exit_2(written, tmp_path, capsys):
    store, log = written
    code, out = verify(store, tmp_path / "none.log", capsys=capsys)
    assert code == 2 and "cannot read" in out and "Traceback" not in out
    code, out = verify(store, log, "--sample", "0", capsys=capsys)
    assert code == 2 and "--sample is a count of lines" in out
    shutil.copy(log, tmp_path / "copy.log")
    code, out = verify(tmp_path / "no.db", tmp_path / "copy.log", capsys=capsys)
    assert code == 2 and "Traceback" not in out


def test_a_deny_rules_place_is_logged_and_decided_again(tmp_path, capsys):
    """A policy with a deny rule of its own: a denial's reason names the rule's FILE:LINE, and verify-log,
    given the same policy file, agrees."""
    policy = tmp_path / "deny.policy"
    policy.write_text((ROOT / "tests" / "engine" / "blocklist.policy").read_text(encoding="utf-8"))
    setup = Setup(tmp_path)
    log = tmp_path / "decisions.log"
    eve = {"principal": "user:eve", "operation": "dataset.read", "entity": "dataset:ns1.a"}
    try:
        root = setup.serve("--policy", str(policy), "--decision-log", str(log)).client(setup.root)
        _change(root, "grant", ("group:bad", "READ", "dataset:ns1.a"))
        _change(root, "member.add", ("user:eve", "group:bad"))
        assert root.post("/v1/check", json=eve).json()["decision"] == "deny"
        _change(root, "member.remove", ("user:eve", "group:bad"))
        _change(root, "grant", ("user:eve", "READ", "dataset:ns1.a"))
        assert root.post("/v1/check", json=eve).json()["decision"] == "allow"
    finally:
        setup.close()
    denied, allowed = (json.loads(t) for t in log.read_text().splitlines())
    assert denied["reason"]["denied_by"] == [f"{policy}:6"]
    assert allowed["reason"]["allowed_by"][0]["grant"] == ["user:eve", "READ", "dataset:ns1.a"]
    code, out = verify(setup.path, log, "--policy", str(policy), capsys=capsys)
    assert code == 0, out
    assert "2 entries in 1 streams, chain checked; 2 re-decided; every line agrees" in out
