"""`privilog report`: a principal's report and an entity's, held to what check, who, list and the REPL
answer, on the sample world, a world with nested groups, a wildcard and a bypass, and a SQLite store."""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from privilog.engine.ids import EntityId
from privilog.engine.justify import justify
from privilog.engine.report import entity_report, principal_report, universe
from privilog.engine.who import who

from privilog.api import load
from privilog.cli import main
from privilog.repl.session import Session

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "privilog" / "samples" / "world.yaml")
# nested groups (a cycle among them), a role in a group, a wildcard grant, a pre-grant, a superuser
NESTED: dict[str, Any] = {
    "entities": ["dataset:ns1.d1", "dataset:ns1.d2", "application:ns1.app", "program:ns1.app.service.p",
                 "dataset:ns2.x", "stream:ns2.s"],
    "grants": [
        ["group:eng", "READ", "dataset:ns1.d1"],
        ["group:all", "EXECUTE", "program:ns1.app.service.p"],
        ["role:ops", "ADMIN", "namespace:ns2"],
        ["group:loop", "WRITE", "dataset:ns1.d*"],
        ["user:ann", "ADMIN", "dataset:ns1.new"],
        ["user:bea", "READ", "stream:ns2.s"],
    ],
    "members": [
        ["user:ann", "group:eng"], ["group:eng", "group:all"], ["group:all", "group:loop"],
        ["group:loop", "group:eng"], ["role:ops", "group:eng"], ["user:bea", "role:ops"],
    ],
    "config": {"superusers": ["user:root"]},
}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def nested(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("world") / "world.yaml"
    path.write_text(yaml.safe_dump(NESTED), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("world", ["sample", "nested"])
def test_a_users_accesses_are_every_allowed_check_and_its_chains_are_its_groups(world: str, nested: str) -> None:
    authorizer = load("cdap", SAMPLE if world == "sample" else nested)
    w = authorizer.world
    everything = universe(w)
    for principal in sorted(w.principals()):
        report = principal_report(authorizer, principal)
        said = {(a.operation, a.entity) for a in report.accesses}
        checked = {
            (op.qualified, e)
            for op in authorizer.policy.operations
            for e in everything
            if e.type == op.entity_type and authorizer.allows(principal, op.qualified, e)
        }
        assert said == checked, principal
        # the chains: one to each group of groups_of, each link a membership of the world
        assert {c[-1] for c in report.memberships} == w.groups_of(principal)
        for chain in report.memberships + report.members:
            assert all(pair in w.members for pair in itertools.pairwise(chain))
        if not principal.startswith("user:"):
            assert {c[0] for c in report.members} == {p for p in w.principals() if principal in w.groups_of(p)}
        # every grant that reaches, and only those; each access's grants among them
        reaching = {g for g in w.grants if g.principal == principal or g.principal in w.groups_of(principal)}
        assert {r.grant for r in report.grants} == reaching
        for access in report.accesses:
            assert {r.grant for r in access.grants} <= reaching
            assert access.grants or access.rules
        # each access's grants are every grant that can meet its requirements (least privilege's needs)
        asked = [authorizer.request(principal, a.operation, a.entity) for a in report.accesses]
        for access, justified in zip(report.accesses, justify(authorizer, asked), strict=True):
            assert {r.grant for r in access.grants} == justified.grants()
        # what it sees, as `list` sees it
        for entity_type in authorizer.listable_types():
            shown = dict(report.visible).get(entity_type, ())
            assert list(shown) == [v.entity for v in authorizer.visible(principal, entity_type)]


def test_an_entitys_report_is_who_for_each_operation(nested: str) -> None:
    authorizer = load("cdap", nested)
    for entity in universe(authorizer.world):
        report = entity_report(authorizer, entity)
        for op in authorizer.policy.operations:
            if op.entity_type != entity.type:
                continue
            allowed = {d.request.principal for d in who(authorizer, op.qualified, str(entity)).allowed}
            assert {a.principal for a in report.accesses if a.operation == op.qualified} == allowed


def test_a_superuser_is_allowed_by_its_bypass_and_the_memberships_show_the_way(
    nested: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "report", "user:root", "--world", nested, "--json")
    assert code == 0 and err == ""
    found = json.loads(out)
    assert found["accesses"] and all(a["rules"] == ["bypass: superuser"] for a in found["accesses"])
    code, out, _ = run(capsys, "report", "user:bea", "--world", nested)
    assert code == 0
    assert "  user:bea -> role:ops -> group:eng -> group:all -> group:loop" in out.splitlines()
    # the wildcard grant, held four memberships up, allows writing both datasets it matches
    assert "  WRITE on dataset:ns1.d*  (held by group:loop: user:bea -> role:ops -> group:eng -> group:all -> group:loop)" in out
    code, out, _ = run(capsys, "report", "dataset:ns1.d2", "--world", nested, "--csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    writes = {r["principal"]: r["via"] for r in rows if r["operation"] == "dataset.write"}
    assert writes["user:ann"] == "user:ann -> group:eng -> group:all -> group:loop"
    assert writes["group:loop"] == "group:loop"


def test_the_report_matches_the_repls_answers(capsys: pytest.CaptureFixture[str]) -> None:
    session = Session("cdap", SAMPLE)
    code, out, _ = run(capsys, "report", "user:dave", "--world", SAMPLE, "--json")
    assert code == 0
    for access in json.loads(out)["accesses"]:
        line = session.one_shot(f"check user:dave {access['operation']} {access['entity']}")
        assert line.startswith("ALLOW"), line
    groups = session.one_shot('?- in_group(user:dave, G).')
    assert "group:analysts" in groups
    code, out, _ = run(capsys, "report", "dataset:sales.orders", "--world", SAMPLE, "--json")
    readers = {a["principal"] for a in json.loads(out)["accesses"] if a["operation"] == "dataset.read"}
    answer = session.one_shot("who dataset.read dataset:sales.orders")
    assert {p for p in re.findall(r"^\s+(\S+:\S+)\s+\(", answer, flags=re.M)} == readers


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_store_and_its_world_file_give_the_same_report(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    path = str(tmp_path / "authz.db") if kind == "sqlite" else request.getfixturevalue("fresh_postgres_url")
    assert run(capsys, "store", "init", "--store", path, "--admin", "user:root")[0] == 0
    assert run(capsys, "store", "import", SAMPLE, "--store", path)[0] == 0
    for subject in ("user:carol", "role:deployers", "namespace:sales"):
        stored = run(capsys, "report", subject, "--store", path, "--json")
        filed = run(capsys, "report", subject, "--world", SAMPLE, "--json")
        assert stored[0] == filed[0] == 0 and json.loads(stored[1]) == json.loads(filed[1]), subject


def test_unknown_ids_are_noted_and_malformed_ones_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "report", "user:dav", "--world", SAMPLE, "--json")
    assert code == 0 and json.loads(out)["accesses"] == [] and not json.loads(out)["known"]
    assert err == "note: user:dav appears nowhere in the world; did you mean `user:dave`?\n"
    code, out, err = run(capsys, "report", "dataset:sales.order", "--world", SAMPLE)
    assert code == 0 and "nobody in the world has any access to it" in out
    assert "did you mean `dataset:sales.orders`?" in err
    for bad in ("user:", "datset:x", "dataset:ns.*", "alice", "team:x"):
        code, out, err = run(capsys, "report", bad, "--world", SAMPLE)
        assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("privilog:"), bad
    assert "did you mean `user:alice`?" in run(capsys, "report", "alice")[2]
    assert "neither a principal (user:NAME, group:NAME, role:NAME) nor an entity" in run(capsys, "report", "team:x")[2]


def test_the_docs_example_prints_what_it_shows(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    page = (ROOT / "docs" / "questions.md").read_text(encoding="utf-8")
    section = page.split("## A principal's report", 1)[1]
    block = re.search(r"```console\n(.*?)```", section, flags=re.S)
    assert block is not None
    commands = re.split(r"^\$ ", block.group(1), flags=re.M)[1:3]  # the third pipes into head
    assert len(commands) == 2
    monkeypatch.chdir(ROOT)
    for command in commands:
        line, _, shown = command.partition("\n")
        argv = shlex.split(line)
        assert argv[0] == "privilog"
        assert run(capsys, *argv[1:])[:2] == (0, shown)


def test_an_entity_id_parses_as_the_report_asks(nested: str) -> None:
    report = entity_report(load("cdap", nested), "dataset:ns1.new")
    assert not report.exists and report.entity == EntityId.parse("dataset:ns1.new")
    assert {a.operation for a in report.accesses if a.principal == "user:ann"} >= {"dataset.create"}


def test_memberships_and_grants_are_what_privilog_query_finds(nested: str, capsys: pytest.CaptureFixture[str]) -> None:
    for principal in ("user:ann", "user:bea", "role:ops", "group:all"):
        code, out, _ = run(capsys, "report", principal, "--world", nested, "--json")
        report = json.loads(out)
        code, out, _ = run(capsys, "query", f"in_group({principal}, G)", "--world", nested, "--json")
        assert code == 0
        assert {c[-1] for c in report["memberships"]} == {row[0] for row in json.loads(out)["rows"]}
        code, out, _ = run(capsys, "query", f"in_group({principal}, G), grant(G, A, E)", "--world", nested, "--json")
        through = {tuple(row) for row in json.loads(out)["rows"]}
        code, out, _ = run(capsys, "query", f"grant({principal}, A, E)", "--world", nested, "--json")
        own = {(principal, *row) for row in json.loads(out)["rows"]}
        assert {(g["principal"], g["action"], g["entity"]) for g in report["grants"]} == through | own
