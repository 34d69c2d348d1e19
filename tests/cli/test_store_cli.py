"""`privilog store`, `--store` on the commands that read a world, and the REPL on a store:
a real SQLite file in a temporary folder, every change durable, admin-checked and audited."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from privilog.engine.world import WorldError

from privilog import dsl
from privilog.cli import main
from privilog.repl.session import Session
from privilog.store import open_store
from privilog.store.deployment import Deployment

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "privilog" / "samples" / "world.yaml")
ACTIONS = ("READ", "WRITE", "EXECUTE", "ADMIN")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """A store holding the sample world, with user:root an admin."""
    path = str(tmp_path / "authz.db")
    assert run(capsys, "store", "init", "--store", path, "--admin", "user:root")[0] == 0
    code, out, _ = run(capsys, "store", "import", SAMPLE, "--store", path)
    assert code == 0 and "added" in out
    return path


def test_init_import_and_check_read_the_store(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    with_world = run(capsys, "check", "user:bob", "dataset.read", "dataset:sales.orders", "--world", SAMPLE)
    with_store = run(capsys, "check", "user:bob", "dataset.read", "dataset:sales.orders", "--store", store)
    assert with_store == with_world and with_store[0] == 0
    denied = run(capsys, "why", "user:bob", "dataset.write", "dataset:sales.orders", "--store", store)
    assert denied[0] == 1 and "WRITE" in denied[1]
    listed = run(capsys, "list", "user:bob", "dataset", "--store", store, "--json")
    assert listed[1] == run(capsys, "list", "user:bob", "dataset", "--world", SAMPLE, "--json")[1]


def test_export_round_trips_the_imported_world(store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.yaml"
    assert run(capsys, "store", "export", "--store", store, "--out", str(out))[0] == 0
    exported = yaml.safe_load(out.read_text())
    original = yaml.safe_load(Path(SAMPLE).read_text())
    assert sorted(map(tuple, exported["grants"])) == sorted(
        (g[0], g[1], g[2]) for g in _expanded_grants(original)
    )
    assert set(exported["admins"]) == {*original.get("admins", []), "user:root"}
    code, text, _ = run(capsys, "store", "export", "--store", store, "--format", "json")
    assert code == 0 and json.loads(text)["grants"] == exported["grants"]


def _expanded_grants(world: dict) -> list[tuple[str, str, str]]:
    """The sample's grants as rows (the file may list several actions in one grant)."""
    policy = dsl.load_policy("cdap")
    from privilog.api import load_world_for

    return [(g.principal, g.action, str(g.entity)) for g in load_world_for(policy, world).grants]


def test_import_is_idempotent_and_logged(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "store", "import", SAMPLE, "--store", store)
    assert code == 0 and "added 0 entities, 0 grants, 0 members" in out
    code, out, _ = run(capsys, "store", "audit", "--store", store)
    lines = out.splitlines()
    assert [line.split()[3] for line in lines] == ["admin.add:", "import:", "import:"]
    assert lines[0].split()[2].startswith("local:")


def test_a_missing_store_and_both_sources_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "check", "user:a", "namespace.get", "namespace:x", "--store", str(tmp_path / "no.db"))
    assert code == 2 and err.count("\n") == 1 and "no such store" in err and "privilog store init" in err
    assert not (tmp_path / "no.db").exists()  # reading never creates a store
    code, _, err = run(capsys, "check", "user:a", "namespace.get", "namespace:x", "--store", "x.db", "--world", SAMPLE)
    assert code == 2 and "not both" in err
    not_a_store = tmp_path / "junk.db"
    not_a_store.write_bytes(b"this is not sqlite" * 100)
    code, _, err = run(capsys, "store", "audit", "--store", str(not_a_store))
    assert code == 2 and "not a privilog store" in err
    code, _, err = run(capsys, "store", "audit")
    assert code == 2 and "--store" in err


def test_the_repl_changes_the_store_durably_and_only_as_an_admin(store: str) -> None:
    session = Session(store=store)
    assert "granted READ on dataset:sales.orders to user:eve" in session.one_shot(
        "grant user:eve READ dataset:sales.orders as user:root"
    )
    refused = session.run("grant user:mallory ADMIN namespace:sales as user:eve")
    assert refused.error and "not an authorization admin" in refused.text
    assert "added dataset:sales.new" in session.one_shot("entity add dataset:sales.new as user:root")
    # a fresh process reads what the session did: it is in the file, not in the session's memory
    code = (
        "import sys; from privilog.cli import main; "
        f"sys.exit(main(['check', 'user:eve', 'dataset.read', 'dataset:sales.orders', '--store', {store!r}]))"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0
    with open_store(store, ACTIONS, create=False) as opened:
        log = opened.audit()
        assert [(e.actor, e.kind, e.outcome.split(":")[0]) for e in log[-3:]] == [
            ("user:root", "grant", "applied"),
            ("user:eve", "grant", "refused"),
            ("user:root", "entity.add", "applied"),
        ]
        assert opened.audit(principal="user:mallory")[-1].asked == (("user:mallory", "ADMIN", "namespace:sales"),)
        world, _ = opened.snapshot()
    assert not any(g.principal == "user:mallory" for g in world.grants)
    assert session.one_shot("quit") == ""  # nothing unsaved: the store has it all


def test_two_sessions_on_one_store_see_each_others_changes(store: str) -> None:
    first, second = Session(store=store), Session(store=store)
    assert second.one_shot("check user:zed dataset.read dataset:sales.orders").startswith("DENY")
    first.one_shot("grant user:zed READ dataset:sales.orders as user:root")
    assert second.one_shot("check user:zed dataset.read dataset:sales.orders").startswith("ALLOW")
    second.one_shot("revoke user:zed READ dataset:sales.orders as user:root")
    assert first.one_shot("check user:zed dataset.read dataset:sales.orders").startswith("DENY")


def test_loading_a_world_file_leaves_the_store(store: str) -> None:
    session = Session(store=store)
    assert "no longer follows the store" in session.one_shot(f"load world {SAMPLE}")
    session.one_shot("grant user:quinn READ dataset:sales.orders as user:root")
    with open_store(store, ACTIONS, create=False) as opened:
        assert not any(g.principal == "user:quinn" for g in opened.snapshot()[0].grants)


def test_a_deployments_world_refuses_changes_that_bypass_the_store(store: str) -> None:
    deployment = Deployment(open_store(store, ACTIONS, create=False), dsl.load_policy("cdap"))
    from privilog.engine.ids import EntityId
    from privilog.engine.world import Grant

    with pytest.raises(WorldError, match="follows the store"):
        deployment.authorizer.grant("user:root", [Grant("user:x", "ADMIN", EntityId.parse("namespace:sales"))])
    assert not deployment.authorizer.allows("user:x", "namespace.update", "namespace:sales")


def test_audit_filters_by_principal_entity_and_time(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    session = Session(store=store)
    session.one_shot("grant user:ann READ dataset:sales.orders as user:root")
    session.one_shot("grant user:ben READ namespace:sales as user:root")
    code, out, _ = run(capsys, "store", "audit", "--store", store, "--principal", "user:ann", "--json")
    entries = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [e["items"] for e in entries] == [[["user:ann", "READ", "dataset:sales.orders"]]]
    code, out, _ = run(capsys, "store", "audit", "--store", store, "--entity", "namespace:sales")
    assert "user:ben" in out and "user:ann" not in out
    code, out, err = run(capsys, "store", "audit", "--store", store, "--since", "2999-01-01")
    assert code == 0 and out == "" and "no changes match" in err
    code, _, err = run(capsys, "store", "audit", "--store", store, "--since", "yesterday")
    assert code == 2 and "ISO 8601" in err


def test_memberships_changed_in_the_repl_go_to_the_store(store: str) -> None:
    session = Session(store=store)
    assert session.one_shot("check user:bob dataset.read dataset:marketing.campaigns").startswith("DENY")
    added = session.one_shot("member add user:bob group:analysts as user:root").splitlines()
    assert added[0] == "added user:bob to group:analysts" and added[1].startswith("revision plr1_")
    assert Session(store=store).one_shot("check user:bob dataset.read dataset:marketing.campaigns").startswith("ALLOW")
    assert session.run("member remove user:bob group:analysts as user:bob").error
    with open_store(store, ACTIONS, create=False) as opened:
        assert ("user:bob", "group:analysts") in opened.snapshot()[0].members
        assert [e.kind for e in opened.audit()[-2:]] == ["member.add", "member.remove"]


def test_a_wildcard_grant_lasts_in_the_store_and_counts_after_a_reopen(store: str) -> None:
    session = Session(store=store)
    assert "granted" in session.one_shot("grant user:wil READ dataset:sales.* as user:root")
    assert session.one_shot("check user:wil dataset.read dataset:sales.orders").startswith("ALLOW")
    reopened = Deployment(open_store(store, ACTIONS, create=False), dsl.load_policy("cdap"))
    assert reopened.authorizer.allows("user:wil", "dataset.read", "dataset:sales.orders")
    assert not reopened.authorizer.allows("user:wil", "dataset.write", "dataset:sales.orders")
    session.one_shot("revoke user:wil READ dataset:sales.* as user:root")
    assert session.one_shot("check user:wil dataset.read dataset:sales.orders").startswith("DENY")


def test_a_world_with_settings_is_refused_by_the_store_not_dropped(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    world = tmp_path / "settings.yaml"
    world.write_text("config: {superusers: [user:a]}\nentities: [namespace:kept]\n")
    code, _, err = run(capsys, "store", "import", str(world), "--store", store)
    assert code == 2 and "not `config:` (superusers)" in err and err.count("\n") == 1
    with open_store(store, ACTIONS, create=False) as opened:
        assert "namespace:kept" not in {str(e) for e in opened.snapshot()[0].entities}
