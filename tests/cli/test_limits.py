"""The limits on what one input may cost (dsl/limits.py, engine/query.py): each refused over its limit
with one line naming the limit and its variable, and answered at it."""

from __future__ import annotations

from pathlib import Path

import pytest

from privilog.cli import main

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "privilog" / "samples"
WORLD = str(SAMPLE / "world.yaml")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys: pytest.CaptureFixture[str], variable: str, *argv: str) -> str:
    code, out, err = run(capsys, *argv)
    assert code == 2 and "ALLOW" not in out, (out, err)
    assert err.startswith("privilog: ") and variable in err.split("\n")[0], err
    return err


def test_an_id_longer_than_the_limit_is_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    long_id = "dataset:sales." + "x" * 100_000
    err = refused(capsys, "PRIVILOG_MAX_ID_LENGTH", "check", "user:bob", "dataset.read", long_id, "--world", WORLD)
    assert "has 100014 characters; the limit is 1024" in err and len(err) < 300
    refused(capsys, "PRIVILOG_MAX_ID_LENGTH", "check", "user:" + "b" * 2000, "dataset.read", "dataset:sales.orders")
    world = tmp_path / "w.yaml"
    world.write_text(f"entities: [{long_id}]\n")
    refused(
        capsys,
        "PRIVILOG_MAX_ID_LENGTH",
        "check",
        "user:bob",
        "dataset.read",
        "dataset:sales.orders",
        "--world",
        str(world),
    )
    monkeypatch.setenv("PRIVILOG_MAX_ID_LENGTH", "200000")
    code, out, _ = run(capsys, "check", "user:bob", "dataset.read", long_id, "--world", WORLD)
    assert code == 1 and out.startswith("DENY")
    monkeypatch.setenv("PRIVILOG_MAX_ID_LENGTH", "10")
    assert "at least 64" in refused(capsys, "PRIVILOG_MAX_ID_LENGTH", "check", "user:bob", "dataset.read", long_id)


def _policy(tmp_path: Path, operations: int, rules: int) -> str:
    lines = ["policy big", "actions READ", "entity instance", "entity namespace in instance", "namespace:"]
    lines += [f"  op{i} requires READ" for i in range(operations)]
    lines += [f'r{i}(X) :- is_a(X, "namespace").' for i in range(rules)]
    path = tmp_path / "big.policy"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_a_policy_with_too_many_operations_or_rules_is_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    prelude_rules = 30  # rules/prelude/requirements.policy, included by every policy
    monkeypatch.setenv("PRIVILOG_MAX_OPERATIONS", "20")
    monkeypatch.setenv("PRIVILOG_MAX_RULES", "100")
    request = ["check", "user:bob", "namespace.op0", "namespace:ns1", "--policy"]
    err = refused(capsys, "PRIVILOG_MAX_OPERATIONS", *request, _policy(tmp_path, 21, 0))
    assert "the policy big has 21 operations; the limit is 20" in err
    assert run(capsys, *request, _policy(tmp_path, 20, 0))[0] == 1
    err = refused(capsys, "PRIVILOG_MAX_RULES", *request, _policy(tmp_path, 1, 100 - prelude_rules + 20))
    assert "rules; the limit is 100" in err
    assert run(capsys, *request, _policy(tmp_path, 1, 10))[0] == 1


def test_a_world_with_too_many_entries_is_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    request = ["check", "user:bob", "dataset.read", "dataset:sales.orders", "--world", WORLD]
    monkeypatch.setenv("PRIVILOG_MAX_WORLD_ENTRIES", "25")  # the sample: 12 entities, 8 grants, 2 members, 1 admin
    assert "the world has 26 entries" in refused(capsys, "PRIVILOG_MAX_WORLD_ENTRIES", *request)
    monkeypatch.setenv("PRIVILOG_MAX_WORLD_ENTRIES", "26")
    assert run(capsys, *request)[:2] == (0, "ALLOW user:bob dataset.read dataset:sales.orders\n")


def test_a_scenario_with_too_many_cases_or_bytes_is_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = str(SAMPLE / "scenario.yaml")

    def file_error(variable: str) -> str:
        """A scenario file refused whole is that file's one error (the run goes on with other files)."""
        code, out, err = run(capsys, "test", scenario)
        assert code == 2 and err == "" and "ALLOW" not in out, (out, err)
        line, summary = out.strip().splitlines()
        assert ": ERROR scenario.yaml: " in line and variable in line and summary == "0 passed, 0 failed, 1 error"
        return line

    monkeypatch.setenv("PRIVILOG_MAX_CASES", "6")
    assert "the scenario has 7 cases; the limit is 6" in file_error("PRIVILOG_MAX_CASES")
    monkeypatch.setenv("PRIVILOG_MAX_CASES", "7")
    assert run(capsys, "test", scenario)[0] == 0
    monkeypatch.setenv("PRIVILOG_MAX_SCENARIO_BYTES", "100")
    assert "the limit is 100;" in file_error("PRIVILOG_MAX_SCENARIO_BYTES")


def test_a_query_answer_is_cut_at_its_row_limit(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    query = ["query", '?- is_a(E, "dataset").', "--world", WORLD]  # three datasets
    monkeypatch.setenv("PRIVILOG_QUERY_ANSWER_ROWS", "2")
    code, out, _ = run(capsys, *query)
    assert code == 0 and out.splitlines()[-1] == "(stopped after 2 rows; set PRIVILOG_QUERY_ANSWER_ROWS for more)"
    monkeypatch.setenv("PRIVILOG_QUERY_ANSWER_ROWS", "3")
    assert run(capsys, *query)[1].splitlines()[-1] == "(3 rows)"


def test_a_query_that_takes_too_much_memory_is_stopped(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A relation joining everything with everything (12^8 rows): stopped by its memory, not its time."""
    policy = tmp_path / "cross.policy"
    body = ", ".join(f"is_a({v}, _)" for v in "ABCDEFGH")
    policy.write_text(f'policy cross\ninclude "cdap"\nbig(A, B, C, D, E, F, G, H) :- {body}.\n')
    monkeypatch.setenv("PRIVILOG_QUERY_SECONDS", "3600")
    monkeypatch.setenv("PRIVILOG_QUERY_MEGABYTES", "64")
    query = ["query", "?- big(A, B, C, D, E, F, G, H).", "--policy", str(policy), "--world", WORLD]
    assert "stopped after taking 64 MB more memory" in refused(capsys, "PRIVILOG_QUERY_MEGABYTES", *query)
    code, out, _ = run(capsys, "query", "?- is_a(A, _), is_a(B, _).", "--policy", str(policy), "--world", WORLD)
    assert code == 0 and out.splitlines()[-1] == "(169 rows, the first 100 shown)"  # 13 entities, the instance too
