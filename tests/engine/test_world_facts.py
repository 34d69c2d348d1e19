"""A world's `facts:` (docs/worlds.md, "Facts of your own relations"): rows of relations the policy
declares and derives by no rule, read from YAML, JSON and tables, saved back, kept through the
world file's change log, checked against the policy when an authorizer loads the world, and
evaluated by every in-memory backend the same (Spark: tests/spark/test_facts_in_spark.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from privilog.engine.authorizer import Authorizer
from privilog.engine.ids import EntityId
from privilog.engine.patterns import parse_pattern
from privilog.engine.whatif import impact, impact_whole, locality, reach
from privilog.engine.world import Grant, WorldError, load_world, parse_world, save_world, write_tables
from privilog.engine.world.writing import world_text

from privilog import dsl
from privilog.api import load_world_for
from privilog.cli import main

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ("compiled", "pydatalog")

# a blocklist of patterns, and clearances read under negation: writing needs one
POLICY = """
policy cleared "a blocklist and clearances given by the world"
include "cdap"
relation blocked(principal, entity)
relation clearance(principal, entity)
cleared(P, E) :- clearance(P, E).
cleared(P, E) :- clearance(P, X), matches(E, X).
denied(R) :- request(R, P, _, E), blocked(P, E).
denied(R) :- request(R, P, _, E), blocked(P, X), matches(E, X).
denied(R) :- request(R, P, "dataset.write", E), not cleared(P, E).
"""
WORLD = """\
admins: [user:root]
entities: [dataset:ns1.sales_2024, dataset:ns1.sales_2025, dataset:ns1.hr, dataset:ns2.sales_x]
grants:
  - [user:eve, ALL, "dataset:ns*.*"]
  - [user:bob, ALL, "dataset:ns*.*"]
facts:
  blocked:
    - [user:eve, "dataset:ns1.sales_*"]   # a pattern: every sales dataset of ns1, made or to be made
    - [user:bob, dataset:ns1.hr]
  clearance:
    - [user:bob, "dataset:ns1.*"]
    - [user:eve, dataset:ns2.sales_x]
"""
ASKED = [
    (p, op, e)
    for p in ("user:eve", "user:bob", "user:carl")
    for op in ("dataset.read", "dataset.write")
    for e in ("dataset:ns1.sales_2024", "dataset:ns1.hr", "dataset:ns2.sales_x", "dataset:ns1.sales_new")
]


@pytest.fixture(scope="module")
def policy() -> dsl.Policy:
    return dsl.parse_policy(POLICY, "cleared.policy")


def _decisions(policy: dsl.Policy, text: str, backend: str) -> list[dict[str, object]]:
    authz = Authorizer(policy, parse_world(text, policy.actions), backend)
    out = []
    for p, op, e in ASKED:
        decision = authz.check(authz.request(p, op, e))
        assert authz.decide(authz.request(p, op, e)) == decision.allowed
        out.append(decision.to_json())
    return out


def test_both_backends_decide_and_explain_the_facts_alike(policy: dsl.Policy) -> None:
    compiled, reference = (_decisions(policy, WORLD, b) for b in BACKENDS)
    assert compiled == reference
    allowed = {(p, op, e) for (p, op, e), d in zip(ASKED, compiled, strict=True) if d["decision"] == "allow"}
    assert allowed == {
        ("user:eve", "dataset.read", "dataset:ns1.hr"),
        ("user:eve", "dataset.read", "dataset:ns2.sales_x"),
        ("user:eve", "dataset.write", "dataset:ns2.sales_x"),  # cleared there
        ("user:bob", "dataset.read", "dataset:ns1.sales_2024"),
        ("user:bob", "dataset.read", "dataset:ns2.sales_x"),
        ("user:bob", "dataset.write", "dataset:ns1.sales_2024"),  # cleared by a pattern
        ("user:bob", "dataset.read", "dataset:ns1.sales_new"),  # an entity that does not exist yet
        ("user:bob", "dataset.write", "dataset:ns1.sales_new"),
    }
    # eve's blocked pattern reaches the dataset only a request names
    denied = dict(zip(ASKED, compiled, strict=True))[("user:eve", "dataset.read", "dataset:ns1.sales_new")]
    assert denied["decision"] == "deny" and denied["denied_by"]


def test_an_entity_created_later_is_matched_by_a_facts_pattern(policy: dsl.Policy) -> None:
    for backend in BACKENDS:
        authz = Authorizer(policy, parse_world(WORLD, policy.actions), backend)
        assert authz.decide(authz.request("user:eve", "dataset.read", "dataset:ns1.sales_2030")) is False
        authz.add_entity("user:root", EntityId.parse("dataset:ns1.sales_2030"))
        assert ("dataset:ns1.sales_2030", "dataset:ns1.sales_*") in authz.backend.query("matches")
        assert not authz.check(authz.request("user:eve", "dataset.read", "dataset:ns1.sales_2030")).allowed
        assert authz.check(authz.request("user:bob", "dataset.write", "dataset:ns1.sales_2030")).allowed


# ---- formats ------------------------------------------------------------------------------


def test_facts_round_trip_through_yaml_json_and_tables(policy: dsl.Policy, tmp_path: Path) -> None:
    world = parse_world(WORLD, policy.actions)
    assert world.facts["blocked"] == {("user:eve", "dataset:ns1.sales_*"), ("user:bob", "dataset:ns1.hr")}
    assert parse_world(world_text(world), policy.actions).facts == world.facts
    world.source = None  # written out in full, not edited in place
    assert parse_world(world_text(world), policy.actions).facts == world.facts
    assert parse_world(json.dumps(world.to_data()), policy.actions).facts == world.facts
    assert load_world_for(policy, world.to_data()).facts == world.facts
    for fmt in ("csv", "jsonl"):
        written = write_tables(world, tmp_path / fmt, fmt)
        assert tmp_path / fmt / "facts" / f"blocked.{fmt}" in written
        assert load_world(tmp_path / fmt, policy.actions).facts == world.facts
    assert (tmp_path / "csv" / "facts" / "blocked.csv").read_text() == (
        "user:bob,dataset:ns1.hr\nuser:eve,dataset:ns1.sales_*\n"  # no header: the policy names the columns
    )


def test_a_row_written_twice_is_one_fact_and_a_relation_may_have_none() -> None:
    world = parse_world("facts:\n  blocked:\n    - [a, b]\n    - [a, b]\n  clearance:\n", ())
    assert world.facts == {"blocked": frozenset({("a", "b")}), "clearance": frozenset()}


def test_changes_and_their_log_leave_the_facts_as_the_file_has_them(policy: dsl.Policy, tmp_path: Path) -> None:
    path = tmp_path / "world.yaml"
    path.write_text(WORLD)
    bound = load_world(path, policy.actions, bind=True)
    bound.grant("user:root", [Grant("user:carl", "READ", EntityId.parse("dataset:ns1.hr"))])
    again = load_world(path, policy.actions)  # the file and its log
    assert again.facts == bound.facts and Grant("user:carl", "READ", EntityId.parse("dataset:ns1.hr")) in again.grants
    bound.save()  # compacted: the change written into the file, edited in place
    text = path.read_text()
    assert "# a pattern: every sales dataset of ns1" in text and "user:carl" in text
    assert load_world(path, policy.actions).facts == bound.facts
    save_world(again, tmp_path / "copy.yaml")
    assert load_world(tmp_path / "copy.yaml", policy.actions).facts == bound.facts


@pytest.mark.parametrize(
    ("text", "where", "said"),
    [
        ("facts:\n  blocked:\n    - [user:eve, 12]\n", ":3:18", "must be text, not 12: quote it"),
        ("facts:\n  blocked:\n    - [user:eve, [a]]\n", ":3:18", "must be text, not a list"),
        ("facts:\n  blocked: user:eve\n", ":2:12", "`facts.blocked` must be a list"),
        ("facts:\n  blocked:\n    - user:eve\n", ":3:7", "a `blocked` fact is a list of values"),
        ("facts:\n  Blocked:\n    - [a]\n", ":3:5", "a relation of `facts` is a name"),
        ("facts: [blocked]\n", ":1:8", "`facts` is a mapping"),
    ],
)
def test_a_bad_fact_is_refused_at_its_place(tmp_path: Path, text: str, where: str, said: str) -> None:
    path = tmp_path / "world.yaml"
    path.write_text(text)
    with pytest.raises(WorldError, match=said) as raised:
        load_world(path, ())
    assert str(raised.value).startswith(f"{path}{where}: ") and "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("name", "text", "line", "said"),
    [
        ("blocked.csv", "user:eve,dataset:ns1.hr\nuser:bob\n", 2, "a row of 1 values where the first had 2"),
        ("blocked.jsonl", '["user:eve", "dataset:ns1.hr"]\n["user:bob", 7]\n', 2, "must be text, not 7: quote it"),
        ("blocked.jsonl", '{"a": 1}\n', 1, "a row of facts is a JSON list"),
    ],
)
def test_a_bad_row_of_a_facts_table_names_its_file_and_line(tmp_path: Path, name: str, text: str, line: int,
                                                             said: str) -> None:
    (tmp_path / "entities.csv").write_text("entity\ndataset:ns1.hr\n")
    (tmp_path / "facts").mkdir()
    (tmp_path / "facts" / name).write_text(text)
    with pytest.raises(WorldError, match=said) as raised:
        load_world(tmp_path, ())
    assert str(raised.value).startswith(f"{tmp_path / 'facts' / name}:{line}")


def test_the_world_limit_counts_rows_of_facts(policy: dsl.Policy, monkeypatch: pytest.MonkeyPatch) -> None:
    from privilog.dsl.limits import LimitError

    world = parse_world(WORLD, policy.actions)  # 4 entities, 2 grants x 4 actions, 1 admin, 4 facts
    monkeypatch.setenv("PRIVILOG_MAX_WORLD_ENTRIES", str(4 + 8 + 1 + 3))
    with pytest.raises(LimitError, match="PRIVILOG_MAX_WORLD_ENTRIES"):
        Authorizer(policy, world)
    monkeypatch.setenv("PRIVILOG_MAX_WORLD_ENTRIES", str(4 + 8 + 1 + 4))
    Authorizer(policy, world)


# ---- the policy's relations -------------------------------------------------------------


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("facts", "said"),
    [
        ("  nosuch:\n    - [a]\n", "`facts:` gives rows of `nosuch`, which the policy does not declare; declare it"),
        ("  blockd:\n    - [a, b]\n", "which the policy does not declare (did you mean `blocked`?)"),
        ("  grant:\n    - [user:a, READ, namespace:x]\n", "`grant`, which is the prelude's"),
        ("  holds:\n    - [a, b, c, d]\n", "`holds`, which the policy's rules derive ("),
        ("  cleared:\n    - [a, b]\n", "cleared.policy:7); a world gives rows only of a relation the policy declares"),
        ("  clearance:\n    - [user:a]\n", "a `clearance` fact has 1 value ['user:a'], and the policy declares "
                                           "`clearance(principal, entity)`: give each row 2 values"),
    ],
)
def test_facts_the_policy_does_not_leave_to_the_world_are_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, facts: str, said: str
) -> None:
    (tmp_path / "cleared.policy").write_text(POLICY)
    (tmp_path / "world.yaml").write_text(f"entities: [namespace:ns1]\nfacts:\n  blocked:\n    - [a, b]\n{facts}")
    code, out, err = run(
        capsys, "check", "user:a", "dataset.read", "dataset:ns1.x", "--world", str(tmp_path / "world.yaml"),
        "--policy", str(tmp_path / "cleared.policy"),
    )
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and f"{tmp_path / 'world.yaml'}:" in err and said in err


def test_a_policy_writing_a_relations_facts_keeps_them_its_own(tmp_path: Path) -> None:
    policy = dsl.parse_policy(POLICY + 'relation vip(principal)\nvip("user:a").\n', "cleared.policy")
    world = parse_world("facts:\n  vip:\n    - [user:b]\n", policy.actions)
    with pytest.raises(WorldError, match="`vip`, whose facts the policy writes itself"):
        Authorizer(policy, world)


def test_the_command_line_refuses_a_mismatch_with_exit_2(tmp_path: Path) -> None:
    (tmp_path / "cleared.policy").write_text(POLICY)
    (tmp_path / "world.yaml").write_text("facts:\n  blocked:\n    - [user:a]\n")
    done = subprocess.run(
        [sys.executable, "-m", "privilog", "check", "user:a", "dataset.read", "dataset:ns1.x",
         "--world", "world.yaml", "--policy", "cleared.policy"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "privilog: world.yaml:2: a `blocked` fact has 1 value ['user:a'], and the policy declares "
        "`blocked(principal, entity)`: give each row 2 values\n"
    )


# ---- a store, and what-if ------------------------------------------------------------------


def test_a_store_refuses_a_world_with_facts(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from privilog.store import StoreError, open_store

    (tmp_path / "cleared.policy").write_text(POLICY)
    (tmp_path / "world.yaml").write_text(WORLD)
    store = tmp_path / "authz.db"
    code, out, err = run(
        capsys, "store", "import", str(tmp_path / "world.yaml"), "--policy", str(tmp_path / "cleared.policy"),
        "--store", str(store),
    )
    assert (code, out) == (2, "")
    assert err == (
        f"privilog: {tmp_path / 'world.yaml'}: a store cannot hold a world's `facts:` yet (blocked, clearance); "
        "keep this world in a file (--world), or remove `facts:` to import the rest\n"
    )
    opened = open_store(str(store), create=True)
    try:
        with pytest.raises(StoreError, match="a store cannot hold a world's `facts:` yet"):
            opened.import_world(parse_world(WORLD, ()), "user:root")
        assert not opened.snapshot()[0].grants  # nothing of it imported
    finally:
        opened.close()


def test_whatif_reads_facts_as_static_and_decides_a_change_of_them_whole(policy: dsl.Policy) -> None:
    assert locality(policy).bounded  # the rules reading facts, their patterns too, stay bounded
    before = parse_world(WORLD, policy.actions)
    after = parse_world(WORLD, policy.actions)
    after.grants.discard(Grant("user:bob", "READ", parse_pattern("dataset:ns*.*")))
    after.grants.add(Grant("user:carl", "WRITE", EntityId.parse("dataset:ns1.sales_2024")))
    assert impact(policy, before, after) == impact_whole(policy, before, after)
    assert impact(policy, before, after).changes
    changed = parse_world(WORLD.replace("[user:bob, dataset:ns1.hr]", "[user:bob, dataset:ns1.sales_2025]"), policy.actions)
    assert reach(policy, before, changed) is None  # facts changed: decided whole
    lost = impact(policy, before, changed).lost
    assert {(a.principal, str(a.entity)) for a in lost} == {("user:bob", "dataset:ns1.sales_2025")}


def test_a_dry_run_keeps_the_facts_on_its_copy(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "cleared.policy").write_text(POLICY)
    (tmp_path / "world.yaml").write_text(WORLD.replace("  - [user:eve, ALL, \"dataset:ns*.*\"]\n", ""))
    _, out, err = run(
        capsys, "whatif", "grant", "user:eve", "READ", "dataset:ns1.sales_2024", "dataset:ns1.hr", "--json",
        "--world", str(tmp_path / "world.yaml"), "--policy", str(tmp_path / "cleared.policy"),
    )
    gained = {(a["operation"], a["entity"]) for a in json.loads(out)["impact"]["gained"]}
    assert err == "" and ("dataset.read", "dataset:ns1.hr") in gained
    assert ("dataset.read", "dataset:ns1.sales_2024") not in gained  # her blocked pattern denies it still
