"""`privilog whatif`: what a change would do, held to the change made for real and every decision taken again.

Each what-if is compared with the reference: the same change applied for real by `privilog grant` (...) to a
copy of the world file or the store, then every (user, operation, entity) of both worlds decided on each
side by the authorizer's own `allows` (as `privilog diff --world` decides a whole world), and, with --log,
every logged request decided on each side. Nothing is written by a what-if (bytes compared), and no admin
is needed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
from pathlib import Path

import pytest
from privilog.engine.authorizer import Authorizer
from privilog.engine.world import World

from privilog import dsl
from privilog.api import load_world_for
from privilog.cli import main
from privilog.store import open_store

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "privilog" / "samples" / "world.yaml"
LOG = ROOT / "privilog" / "samples" / "access-log.csv"
POLICY = dsl.load_policy("cdap")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def make_store(capsys: pytest.CaptureFixture[str], url: str) -> str:
    assert run(capsys, "store", "init", "--store", url, "--admin", "user:root")[0] == 0
    assert run(capsys, "store", "import", str(SAMPLE), "--store", url)[0] == 0
    return url


def store_world(url: str) -> World:
    with open_store(url, POLICY.actions, create=False) as opened:
        return opened.snapshot()[0]


def everything_allowed(world: World, users: frozenset[str], entities: frozenset) -> set[tuple[str, str, str]]:
    """Every (user, operation, entity) ``world`` allows, each decided on its own by ``allows``."""
    return set(_allowed(json.dumps(world.to_data()), users, entities))


@functools.cache  # the sample world is the `before` of every case: decided once
def _allowed(data: str, users: frozenset[str], entities: frozenset) -> frozenset[tuple[str, str, str]]:
    authz = Authorizer(POLICY, load_world_for(POLICY, json.loads(data)))
    return frozenset(
        (user, op.qualified, str(entity))
        for op in POLICY.operations
        for user in users
        for entity in entities
        if entity.type == op.entity_type and authz.allows(user, op.qualified, entity)
    )


def reference(before: World, after: World) -> tuple[set, set]:
    """The accesses lost and gained, by deciding both worlds whole."""
    users = frozenset(p for p in before.principals() | after.principals() if p.startswith("user:"))
    named = {g.entity for g in before.grants | after.grants if "*" not in g.entity.name}
    entities = frozenset(before.existing() | after.existing() | named)
    old, new = everything_allowed(before, users, entities), everything_allowed(after, users, entities)
    return old - new, new - old


def accesses(rows: list[dict]) -> set[tuple[str, str, str]]:
    return {(a["principal"], a["operation"], a["entity"]) for a in rows}


CHANGES = [
    ["revoke", "user:alice", "ALL", "namespace:sales"],
    ["grant", "user:erin", "READ,EXECUTE", "program:sales.etl.workflow.nightly", "dataset:sales.orders"],
    ["grant", "group:analysts", "READ", "dataset:sales.*"],
    ["member", "remove", "user:dave", "group:analysts"],
    ["entity", "remove", "namespace:marketing"],
    ["entity", "add", "application:sales.reports"],
    ["grant", "user:bob", "READ", "dataset:sales.orders"],  # held already: nothing changes
]


@pytest.mark.parametrize("change", CHANGES, ids=[" ".join(c[:3]) for c in CHANGES])
def test_whatif_on_a_world_file_is_the_change_made_and_every_decision_taken_again(
    change: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "world.yaml"
    shutil.copy(SAMPLE, path)
    written = hashlib.sha256(path.read_bytes()).hexdigest()
    code, out, err = run(capsys, "whatif", *change, "--world", str(path), "--json", "--log", str(LOG))
    assert err == "" and hashlib.sha256(path.read_bytes()).hexdigest() == written
    assert not path.with_name("world.yaml.log").exists()
    answer = json.loads(out)
    before = load_world_for(POLICY, str(path))
    assert run(capsys, *change, "--as", "user:root", "--world", str(path))[0] == 0
    after = load_world_for(POLICY, str(path))
    lost, gained = reference(before, after)
    assert accesses(answer["impact"]["lost"]) == lost and accesses(answer["impact"]["gained"]) == gained
    assert answer["impact"]["counts"] == {"lost": len(lost), "gained": len(gained)}
    # the logged requests, each decided again on both sides
    old, new = Authorizer(POLICY, before), Authorizer(POLICY, after)
    from privilog.engine.accesslog import read_log

    requests = read_log(LOG, old).requests
    differ = [r for r in requests if old.decide(r) != new.decide(r)]
    assert answer["log"]["changed"] == len(differ) and answer["log"]["decided"] == len(requests)
    assert [(d["request"], d["after"]) for d in answer["log"]["requests"]] == [
        (r.to_json(), "allow" if new.decide(r) else "deny") for r in differ
    ]
    assert code == (1 if lost or gained or differ else 0)
    if change[:2] not in (["grant", "user:bob"], ["entity", "add"]):  # held already; a pre-grant applies already
        assert lost or gained  # each of the others changes someone's access


def test_whatif_on_a_store_writes_nothing_and_needs_no_admin(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = make_store(capsys, str(tmp_path / "authz.db"))
    files = {p: p.read_bytes() for p in tmp_path.iterdir()}
    code, out, err = run(capsys, "whatif", "revoke", "user:bob", "READ", "dataset:sales.orders", "--store", url)
    assert (code, err) == (1, "")
    assert out.splitlines()[0] == "would revoke READ on dataset:sales.orders from user:bob"
    assert "lost    user:bob   dataset.read  dataset:sales.orders" in out
    assert out.splitlines()[-1] == "(3 accesses lost, 0 gained)"
    assert {p: p.read_bytes() for p in tmp_path.iterdir()} == files
    code, _, err = run(capsys, "whatif", "revoke", "user:bob", "READ", "dataset:sales.orders", "as", "user:root",
                       "--store", url)
    assert code == 2 and "a what-if changes nothing" in err
    code, out, _ = run(capsys, "whatif", "member", "add", "user:dave", "group:analysts", "--store", url)
    assert code == 0 and "user:dave is already in group:analysts" in out and "no access changes" in out


def test_whatif_of_a_batch_file_is_the_batch_made_for_real(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = make_store(capsys, str(tmp_path / "authz.db"))
    batch = tmp_path / "batch.csv"
    batch.write_text(
        "change,principal,action,entity,member,group\n"
        "revoke,user:bob,READ,dataset:sales.orders,,\n"
        "member.add,,,,user:bob,group:analysts\n"
        "entity.remove,,,dataset:sales.orders,,\n"
        "grant,role:deployers,ADMIN,artifact:sales.*,,\n"
    )
    code, out, err = run(capsys, "whatif", "grant", "--file", str(batch), "--store", url, "--json")
    assert code == 1 and err == ""
    answer = json.loads(out)
    assert [c["where"] for c in answer["changes"]] == [f"{batch}:{n}" for n in (2, 3, 4, 5)]
    before = store_world(url)
    assert run(capsys, "grant", "--file", str(batch), "--as", "user:root", "--store", url)[0] == 0
    lost, gained = reference(before, store_world(url))
    assert (accesses(answer["impact"]["lost"]), accesses(answer["impact"]["gained"])) == (lost, gained)
    # a bad line: its file and line, exit 2
    batch.write_text("change,entity\nentity.remove,namespace:nowhere\n")
    code, out, err = run(capsys, "whatif", "entity", "remove", "--file", str(batch), "--store", url)
    assert (code, out) == (2, "") and err.startswith(f"privilog: {batch}:2: no entity namespace:nowhere in the world")


def test_whatif_on_postgresql(fresh_postgres_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    url = make_store(capsys, fresh_postgres_url)
    before = store_world(url)
    code, out, _ = run(capsys, "whatif", "member", "remove", "user:carol", "role:deployers", "--store", url, "--json")
    assert store_world(url) == before
    answer = json.loads(out)
    assert run(capsys, "member", "remove", "user:carol", "role:deployers", "--as", "user:root", "--store", url)[0] == 0
    lost, gained = reference(before, store_world(url))
    assert (accesses(answer["impact"]["lost"]), accesses(answer["impact"]["gained"])) == (lost, gained)
    assert code == (1 if lost or gained else 0)
