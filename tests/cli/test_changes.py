"""`privilog grant`, `revoke`, `member add|remove`, `entity add|remove`: an administrator's changes from the
command line, on a real SQLite store, the tests' PostgreSQL and a world file bound to its log.

A batch (one change or a --file of many) is all or nothing; a refused one leaves the store and the file as
they were and, on a store, the audit log says so; --dry-run writes nothing (bytes compared); the REPL and
the command line leave the same audit entries for the same change.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from privilog import dsl
from privilog.api import load_world_for
from privilog.cli import main
from privilog.repl.session import Session
from privilog.store import open_store

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "privilog" / "samples" / "world.yaml"
POLICY = dsl.load_policy("cdap")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def make_store(capsys: pytest.CaptureFixture[str], url: str) -> str:
    """``url`` made a store holding the sample world, with user:root its admin."""
    assert run(capsys, "store", "init", "--store", url, "--admin", "user:root")[0] == 0
    assert run(capsys, "store", "import", str(SAMPLE), "--store", url)[0] == 0
    return url


@pytest.fixture
def store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    return make_store(capsys, str(tmp_path / "authz.db"))


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the sample world; its log is kept (not compacted at each change) so it can be read."""
    monkeypatch.setenv("PRIVILOG_WORLD_LOG_BYTES", "1000000")
    path = tmp_path / "world.yaml"
    shutil.copy(SAMPLE, path)
    return path


def snapshot(url: str) -> dict:
    with open_store(url, POLICY.actions, create=False) as opened:
        return opened.snapshot()[0].to_data()


def audit(url: str) -> list[dict]:
    with open_store(url, POLICY.actions, create=False) as opened:
        return [e.to_json() for e in opened.audit()]


def digest(*paths: Path) -> dict[str, str | None]:
    """The bytes of each file (None for one that does not exist), by name: what "nothing written" compares."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else None for p in paths}


def log_lines(world: Path) -> list[dict]:
    log = world.with_name(world.name + ".log")
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def grants_of(data: dict, principal: str) -> set[tuple[str, str, str]]:
    return {tuple(g) for g in data["grants"] if g[0] == principal}


# ---- one change on the command line ----------------------------------------------------------


CHANGES = [  # (argv, a line the answer says, how the world shows it)
    (["grant", "user:eve", "READ,WRITE", "dataset:sales.orders"], "granted READ on dataset:sales.orders to user:eve",
     lambda d: {("user:eve", "READ", "dataset:sales.orders"), ("user:eve", "WRITE", "dataset:sales.orders")}
     <= {tuple(g) for g in d["grants"]}),
    (["revoke", "user:bob", "READ", "dataset:sales.orders"], "revoked READ on dataset:sales.orders from user:bob",
     lambda d: ["user:bob", "READ", "dataset:sales.orders"] not in d["grants"]),
    (["member", "add", "user:bob", "group:analysts"], "added user:bob to group:analysts",
     lambda d: ["user:bob", "group:analysts"] in d["members"]),
    (["member", "remove", "user:dave", "group:analysts"], "removed user:dave from group:analysts",
     lambda d: ["user:dave", "group:analysts"] not in d["members"]),
    (["entity", "add", "dataset:sales.returns"], "added dataset:sales.returns",
     lambda d: "dataset:sales.returns" in d["entities"]),
    (["entity", "remove", "namespace:marketing"], "deleted namespace:marketing",
     lambda d: not any("marketing" in e for e in d["entities"])),
    (["entity", "delete", "dataset:sales.orders"], "deleted dataset:sales.orders",
     lambda d: "dataset:sales.orders" not in d["entities"] and "dataset:sales.orders.archive" in d["entities"]),
]


@pytest.mark.parametrize(("argv", "said", "shown"), CHANGES, ids=[" ".join(c[0][:2]) for c in CHANGES])
def test_each_change_on_a_store_is_made_and_audited(
    store: str, capsys: pytest.CaptureFixture[str], argv: list[str], said: str, shown
) -> None:
    code, out, err = run(capsys, *argv, "--as", "user:root", "--store", store)
    assert (code, err) == (0, "")
    assert said in out.splitlines()[0]
    assert out.splitlines()[-1].startswith("applied 1 change as user:root to sqlite:")
    assert shown(snapshot(store))
    last = audit(store)[-1]
    assert (last["actor"], last["outcome"]) == ("user:root", "applied") and last["items"]


@pytest.mark.parametrize(("argv", "said", "shown"), CHANGES, ids=[" ".join(c[0][:2]) for c in CHANGES])
def test_each_change_on_a_world_file_is_logged_with_its_actor(
    world: Path, capsys: pytest.CaptureFixture[str], argv: list[str], said: str, shown
) -> None:
    code, out, err = run(capsys, *argv, "--as", "user:root", "--world", str(world))
    assert (code, err) == (0, "")
    assert said in out
    assert shown(load_world_for(POLICY, str(world)).to_data())
    assert [line["by"] for line in log_lines(world)] == ["user:root"]


def test_the_repl_words_work_as_they_are_typed_there(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "grant", "user:eve", "READ", "dataset:sales.orders", "as", "user:root", "--store", store)
    assert code == 0 and "granted READ on dataset:sales.orders to user:eve" in out
    code, out, _ = run(capsys, "grant", "user:eve", "READ", "dataset:sales.orders", "--as", "user:root", "--store", store)
    assert code == 0 and "user:eve already holds READ on dataset:sales.orders" in out
    assert "0 changed something, 1 changed nothing" in out


def test_the_actor_is_required_and_may_come_from_the_environment(
    store: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = run(capsys, "grant", "user:eve", "READ", "dataset:sales.orders", "--store", store)
    assert code == 2 and "--as ADMIN" in err and "PRIVILOG_AS" in err and len(err.splitlines()) == 1
    monkeypatch.setenv("PRIVILOG_AS", "user:root")
    code, out, _ = run(capsys, "grant", "user:eve", "READ", "dataset:sales.orders", "--store", store)
    assert code == 0 and "granted" in out
    assert audit(store)[-1]["actor"] == "user:root"


def test_a_non_admin_is_refused_in_one_line_naming_the_admins_and_audited(
    store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(store)
    code, out, err = run(capsys, "grant", "user:bob", "ADMIN", "namespace:sales", "--as", "user:bob", "--store", store)
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1 and "admins: user:root" in err and "nothing was applied" in err
    assert snapshot(store) == before
    last = audit(store)[-1]
    assert (last["actor"], last["kind"]) == ("user:bob", "grant")
    assert last["outcome"] == "refused: user:bob is not an authorization admin"


# ---- batches ------------------------------------------------------------------------------


BATCH_CSV = """change,principal,action,entity,member,group
grant,user:erin,"READ,WRITE",dataset:sales.orders,,
member add,,,,user:erin,group:analysts
entity.add,,,dataset:sales.returns,,
revoke,user:bob,EXECUTE,program:sales.etl.workflow.nightly,,
"""

BATCH_JSON = "\n".join(
    json.dumps(line)
    for line in (
        {"change": "grant", "principal": "user:erin", "action": ["READ", "WRITE"], "entity": "dataset:sales.orders"},
        {"change": "member.add", "member": "user:erin", "group": "group:analysts"},
        {"change": "entity add", "entity": "dataset:sales.returns"},
        {"change": "revoke", "principal": "user:bob", "action": "EXECUTE", "entity": "program:sales.etl.workflow.nightly"},
    )
) + "\n"


def applied(data: dict) -> bool:
    """Whether the batch above is in a world's data: every change of it."""
    return (
        ["user:erin", "WRITE", "dataset:sales.orders"] in data["grants"]
        and ["user:erin", "group:analysts"] in data["members"]
        and "dataset:sales.returns" in data["entities"]
        and ["user:bob", "EXECUTE", "program:sales.etl.workflow.nightly"] not in data["grants"]
    )


def untouched(data: dict) -> bool:
    """Whether no change of the batch above is in a world's data."""
    return (
        not grants_of(data, "user:erin")
        and ["user:erin", "group:analysts"] not in data["members"]
        and "dataset:sales.returns" not in data["entities"]
        and ["user:bob", "EXECUTE", "program:sales.etl.workflow.nightly"] in data["grants"]
    )


@pytest.mark.parametrize(("name", "text", "first"), [("batch.csv", BATCH_CSV, 2), ("batch.jsonl", BATCH_JSON, 1)])
def test_a_batch_on_a_store_is_one_transaction_each_change_its_own_entry(
    store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, first: int
) -> None:
    batch = tmp_path / name
    batch.write_text(text)
    seq = audit(store)[-1]["seq"]
    code, out, err = run(capsys, "grant", "--file", str(batch), "--as", "user:root", "--store", store)
    assert (code, err) == (0, "")
    assert f"{batch}:{first}: granted READ on dataset:sales.orders to user:erin" in out
    assert f"{batch}:{first + 3}: revoked EXECUTE on program:sales.etl.workflow.nightly from user:bob" in out
    assert out.splitlines()[-1].endswith("4 changed something, 0 changed nothing")
    assert applied(snapshot(store))
    entries = [e for e in audit(store) if e["seq"] > seq]
    assert [e["kind"] for e in entries] == ["grant", "member.add", "entity.add", "revoke"]
    assert {e["outcome"] for e in entries} == {"applied"} and {e["actor"] for e in entries} == {"user:root"}


def test_a_refused_change_in_a_batch_applies_nothing_and_the_audit_says_so(
    store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    batch = tmp_path / "batch.csv"
    batch.write_text(BATCH_CSV + "entity remove,,,namespace:nowhere,,\n")
    before, seq = snapshot(store), audit(store)[-1]["seq"]
    code, out, err = run(capsys, "grant", "--file", str(batch), "--as", "user:root", "--store", store)
    assert (code, out) == (2, "")
    assert err.startswith(f"privilog: {batch}:6: no entity namespace:nowhere in the store") and "nothing was applied" in err
    assert snapshot(store) == before
    entries = [e for e in audit(store) if e["seq"] > seq]
    assert [e["kind"] for e in entries] == ["grant", "member.add", "entity.add", "revoke", "entity.delete"]
    assert all(e["outcome"].startswith("refused:") and e["items"] == [] for e in entries)
    assert entries[-1]["outcome"] == "refused: no entity namespace:nowhere in the store: nothing to delete"
    assert "change 5 of its batch of 5 was refused" in entries[0]["outcome"]


def test_a_batch_by_a_non_admin_applies_nothing_and_every_change_is_audited_refused(
    store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    batch = tmp_path / "batch.csv"
    batch.write_text(BATCH_CSV)
    before, seq = snapshot(store), audit(store)[-1]["seq"]
    code, _, err = run(capsys, "grant", "--file", str(batch), "--as", "user:alice", "--store", store)
    assert code == 2 and len(err.splitlines()) == 1 and "(admins: user:root)" in err
    assert snapshot(store) == before
    entries = [e for e in audit(store) if e["seq"] > seq]
    assert len(entries) == 4 and {e["actor"] for e in entries} == {"user:alice"}
    assert {e["outcome"] for e in entries} == {"refused: user:alice is not an authorization admin"}
    assert entries[0]["asked"] == [["user:erin", "READ", "dataset:sales.orders"], ["user:erin", "WRITE", "dataset:sales.orders"]]


BAD_LINES = [  # (file name, text, the line at fault, what the message says)
    ("bad.csv", BATCH_CSV + "grant,user:zed,READD,dataset:sales.orders,,\n", 6, "unknown action `READD`"),
    # read as the REPL reads it, then refused by the store (which logs it, as for the REPL) or the world
    ("bad.csv", BATCH_CSV.replace("group:analysts", "user:root"), 3, "cannot be a member of `user:root`"),
    ("bad.csv", BATCH_CSV + "grant,user:zed,READ,,,\n", 6, "a `grant` line needs `entity`"),
    ("bad.csv", BATCH_CSV + "grant,user:zed,READ,dataset:x.y,user:zed,\n", 6, "a `grant` line has no `member`"),
    ("bad.csv", BATCH_CSV + "grnat,user:zed,READ,dataset:x.y,,\n", 6, "unknown change `grnat`: did you mean `grant`?"),
    ("bad.csv", BATCH_CSV + "grant,user:zed\n", 6, "2 fields, and the header names 6"),
    ("bad.csv", "change,principal,actions\n", 1, "unknown column `actions`"),
    ("bad.jsonl", BATCH_JSON + '{"change": "grant", "principal": "user:zed"\n', 5, "not a JSON object: Expecting ',' delimiter at column 44"),
    ("bad.jsonl", BATCH_JSON.replace("dataset:sales.returns", "datset:sales.returns"), 3, "unknown entity type `datset`"),
]


@pytest.mark.parametrize(("name", "text", "line", "reason"), BAD_LINES)
def test_a_bad_line_names_its_file_and_line_and_nothing_is_applied(
    store: str, world: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, line: int,
    reason: str,
) -> None:
    batch = tmp_path / name
    batch.write_text(text)
    before, seq, files = snapshot(store), audit(store)[-1]["seq"], digest(world, Path(f"{world}.log"))
    for target in (["--store", store], ["--world", str(world)]):
        code, out, err = run(capsys, "grant", "--file", str(batch), "--as", "user:root", *target)
        assert (code, out) == (2, "")
        assert err.startswith(f"privilog: {batch}:{line}: ") and reason in err and len(err.splitlines()) == 1
    assert snapshot(store) == before and digest(world, Path(f"{world}.log")) == files
    logged = [e for e in audit(store) if e["seq"] > seq]
    assert all(e["outcome"].startswith("refused: ") for e in logged) and len(logged) in (0, 4)


def test_a_batch_on_a_world_file_is_all_or_nothing_and_one_append(
    world: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    batch = tmp_path / "batch.csv"
    batch.write_text(BATCH_CSV + "entity remove,,,namespace:nowhere,,\n")
    files = digest(world, Path(f"{world}.log"))
    code, _, err = run(capsys, "grant", "--file", str(batch), "--as", "user:root", "--world", str(world))
    assert code == 2 and f"{batch}:6: no entity namespace:nowhere in the world" in err
    code, _, err = run(capsys, "grant", "--file", str(batch), "--as", "user:bob", "--world", str(world))
    assert code == 2 and "user:bob is not an authorization admin" in err and "(admins: user:root" in err
    assert digest(world, Path(f"{world}.log")) == files and untouched(load_world_for(POLICY, str(world)).to_data())
    batch.write_text(BATCH_CSV)
    code, out, _ = run(capsys, "grant", "--file", str(batch), "--as", "user:root", "--world", str(world))
    assert code == 0 and "4 changed something" in out
    assert applied(load_world_for(POLICY, str(world)).to_data())
    lines = log_lines(world)
    assert [entry["kind"] for entry in lines] == ["grant", "member.add", "entity.add", "revoke"]
    assert {entry["by"] for entry in lines} == {"user:root"} and len({entry["at"][:19] for entry in lines}) == 1


# ---- --dry-run ----------------------------------------------------------------------------


def test_dry_run_writes_nothing_and_says_whose_decisions_change(
    store: str, world: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    batch = tmp_path / "batch.csv"
    batch.write_text(BATCH_CSV)
    paths = [Path(store), Path(f"{store}-wal"), Path(f"{store}-shm"), world, Path(f"{world}.log")]
    files, seq = digest(*paths), audit(store)[-1]["seq"]
    answers = []
    for target in (["--store", store], ["--world", str(world)]):
        code, out, err = run(capsys, "grant", "--file", str(batch), "--as", "user:root", "--dry-run", *target)
        assert (code, err) == (0, "")
        assert f"{batch}:2: would grant READ on dataset:sales.orders to user:erin" in out
        assert "nothing was written" in out
        assert "lost    user:bob   program.start" in out and "gained  user:erin  dataset.read" in out
        code, text, _ = run(capsys, "grant", "--file", str(batch), "--as", "user:root", "--dry-run", "--json", *target)
        answers.append(json.loads(text))
    assert digest(*paths) == files and audit(store)[-1]["seq"] == seq
    assert answers[0]["impact"] == answers[1]["impact"] and answers[0]["dry_run"] is True
    lost = {(a["principal"], a["operation"], a["entity"]) for a in answers[0]["impact"]["lost"]}
    assert ("user:bob", "program.start", "program:sales.etl.workflow.nightly") in lost
    # a dry run is refused as the change would be, and writes nothing either
    code, _, err = run(capsys, "grant", "--file", str(batch), "--as", "user:bob", "--dry-run", "--store", store)
    assert code == 2 and "not an authorization admin" in err
    assert digest(*paths) == files and audit(store)[-1]["seq"] == seq


# ---- the REPL and the command line ----------------------------------------------------------


REPL_LINES = [
    ("grant user:eve READ,WRITE dataset:sales.orders dataset:marketing.campaigns as user:root",
     ["grant", "user:eve", "READ,WRITE", "dataset:sales.orders", "dataset:marketing.campaigns"]),
    ("revoke user:bob READ dataset:sales.orders as user:root", ["revoke", "user:bob", "READ", "dataset:sales.orders"]),
    ("member add user:eve group:analysts as user:root", ["member", "add", "user:eve", "group:analysts"]),
    ("member remove user:dave group:analysts as user:root", ["member", "remove", "user:dave", "group:analysts"]),
    ("entity add dataset:sales.returns stream:sales.views as user:root",
     ["entity", "add", "dataset:sales.returns", "stream:sales.views"]),
    ("entity delete dataset:sales.orders as user:root", ["entity", "delete", "dataset:sales.orders"]),
    ("grant user:eve ADMIN namespace:sales as user:eve", ["grant", "user:eve", "ADMIN", "namespace:sales"]),
]


def test_the_repl_and_the_command_line_leave_the_same_audit_entries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    by_repl = make_store(capsys, str(tmp_path / "repl.db"))
    by_cli = make_store(capsys, str(tmp_path / "cli.db"))
    session = Session(store=by_repl)
    for line, argv in REPL_LINES:
        reply = session.run(line)
        actor = line.rsplit(" ", 1)[1]
        code, out, err = run(capsys, *argv, "--as", actor, "--store", by_cli)
        assert (code == 0) == (not reply.error), (line, reply.text, err)
        if code == 0:  # the REPL's answer, line for line, before the count
            assert out.splitlines()[: len(reply.text.splitlines())] == reply.text.splitlines() or line.startswith(
                "entity delete"
            )

    def entries(url: str) -> list[tuple]:
        return [(e["actor"], e["kind"], e["items"], e["asked"], e["outcome"], e["request_id"]) for e in audit(url)[2:]]

    assert entries(by_cli) == entries(by_repl)
    assert len(entries(by_cli)) == 8 and entries(by_cli)[-1][4].startswith("refused: user:eve is not")


# ---- a real process, on standard input; PostgreSQL ------------------------------------------


def test_a_batch_from_standard_input_in_a_real_process(store: str) -> None:
    env = {**os.environ, "PRIVILOG_AS": "user:root"}
    done = subprocess.run(
        [sys.executable, "-m", "privilog", "grant", "--file", "-", "--store", store, "--json"],
        input=BATCH_JSON, capture_output=True, text=True, env=env, timeout=60, check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    answer = json.loads(done.stdout)
    assert [c["where"] for c in answer["changes"]] == [f"<stdin>:{n}" for n in (1, 2, 3, 4)]
    assert answer["counts"] == {"changes": 4, "changed": 4, "unchanged": 0}
    assert [c["seq"] for c in answer["changes"]] == [e["seq"] for e in audit(store)[-4:]]
    assert applied(snapshot(store))


def test_a_batch_on_postgresql_is_all_or_nothing_and_audited(
    fresh_postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = make_store(capsys, fresh_postgres_url)
    batch = tmp_path / "batch.csv"
    batch.write_text(BATCH_CSV + "entity remove,,,namespace:nowhere,,\n")
    before = snapshot(url)
    code, _, err = run(capsys, "grant", "--file", str(batch), "--as", "user:root", "--store", url)
    assert code == 2 and f"{batch}:6: no entity namespace:nowhere" in err
    code, _, err = run(capsys, "grant", "--file", str(batch), "--as", "user:carol", "--store", url)
    assert code == 2 and "user:carol is not an authorization admin" in err
    assert snapshot(url) == before
    refused = [e for e in audit(url) if e["outcome"] != "applied"]
    assert len(refused) == 10 and {e["actor"] for e in refused[5:]} == {"user:carol"}
    batch.write_text(BATCH_CSV)
    code, out, _ = run(capsys, "grant", "--file", str(batch), "--as", "user:root", "--store", url)
    assert code == 0 and "4 changed something" in out and applied(snapshot(url))
    code, out, _ = run(capsys, "entity", "remove", "namespace:marketing", "--as", "user:root", "--store", url, "--dry-run")
    assert code == 0 and "would delete namespace:marketing" in out and "lost    user:dave" in out
    assert "dataset:marketing.campaigns" in snapshot(url)["entities"]


def test_a_wildcard_grant_logged_to_a_world_file_reads_back(world: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A grant of a pattern kept in the world's log (not yet compacted) is read back as the pattern it is."""
    code, out, _ = run(capsys, "grant", "group:analysts", "READ", "dataset:sales.*", "--as", "user:root", "--world", str(world))
    assert code == 0 and "granted READ on dataset:sales.* to group:analysts" in out
    assert log_lines(world)[0]["items"] == [["group:analysts", "READ", "dataset:sales.*"]]
    code, out, err = run(capsys, "check", "user:dave", "dataset.read", "dataset:sales.orders", "--world", str(world))
    assert (code, err) == (0, "") and out.startswith("ALLOW")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["member", "add", "user:bob", "--as", "user:root", "--store", "a.db"],
         "name the change as MEMBER GROUP_OR_ROLE, or give --file F (for example:"),
        (["grant", "user:bob", "READ", "--as", "user:root", "--store", "a.db"],
         "name the change as PRINCIPAL ACTION[,ACTION] ENTITY..."),
        (["grant", "user:bob", "READ", "dataset:a.b", "--file", "x.csv", "--as", "user:root", "--store", "a.db"],
         "on the command line or in --file, not both"),
        (["grant", "user:bob", "READ", "dataset:a.b", "as", "user:x", "--as", "user:root", "--store", "a.db"],
         "not both"),
        (["grant", "user:bob", "READ", "dataset:a.b", "--as", "root", "--store", "a.db"], "--as: malformed principal"),
        (["entity", "remove", "dataset:a.b", "--as", "user:root", "--world", "w.yaml", "--store", "a.db"],
         "give --world or --store, not both"),
        (["grant", "user:bob", "READ", "dataset:a.b", "--as", "user:root"], "name the world file (--world FILE) or"),
        (["whatif", "grant", "user:bob", "READ", "--store", "a.db"], "privilog: whatif grant: name the change as"),
    ],
)
def test_a_command_line_that_does_not_name_one_change_says_how(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PRIVILOG_STORE", raising=False)
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "") and says in err and len(err.splitlines()) == 1
