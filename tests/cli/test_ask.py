"""`privilog who` and `privilog query` (the REPL's `who` and `?-`), and the notes on unknown names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from privilog.cli import main
from privilog.repl.session import Session

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "privilog" / "samples" / "world.yaml")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_who_names_the_allowed_principals_with_their_grants(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "who", "namespace.get", "namespace:sales", "--world", SAMPLE)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == "4 of 7 principals in the world may namespace.get namespace:sales:"
    assert lines[1] == "  user:alice  (user:alice holds ADMIN on application:sales.etl, which is in namespace:sales)"
    # her grant on an application that does not exist yet counts by its id (`self or within`)
    assert lines[3] == "  user:carol  (user:carol holds ADMIN on application:sales.reports, which is in namespace:sales)"


def test_who_prints_what_the_repl_prints(capsys: pytest.CaptureFixture[str]) -> None:
    line = "who application.deploy application:sales.reports artifact=artifact:sales.etl-lib"
    expected = Session("cdap", SAMPLE).one_shot(line).splitlines()
    code, out, err = run(
        capsys, "who", "application.deploy", "application:sales.reports",
        "--arg", "artifact=artifact:sales.etl-lib", "--world", SAMPLE,
    )
    assert code == 0
    assert out.splitlines() + err.splitlines() == expected  # the answer on stdout, the note on stderr
    assert err.startswith("note: application:sales.reports does not exist in the world")
    assert out.startswith("1 of 7 principals in the world may application.deploy application:sales.reports")


def test_who_json_has_stable_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "who", "dataset.read", "dataset:sales.orders", "--world", SAMPLE, "--json")
    assert code == 0
    data = json.loads(out)
    assert list(data) == ["operation", "entity", "args", "checked", "allowed"]
    assert data["checked"] == 7
    assert [a["principal"] for a in data["allowed"]] == ["user:bob"]
    assert data["allowed"][0]["because"] == [
        {"action": "READ", "entity": "dataset:sales.orders", "holder": "user:bob", "groups": [], "inside": []}
    ]


def test_who_when_nobody_may_and_a_note_on_stderr_for_a_typo(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "who", "dataset.read", "dataset:sales.order", "--world", SAMPLE)
    assert code == 0
    assert out.strip() == "nobody in the world may dataset.read dataset:sales.order (7 principals checked)"
    assert err.strip() == "note: dataset:sales.order does not exist in the world; did you mean `dataset:sales.orders`?"


def test_who_in_an_empty_world(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "who", "dataset.read", "dataset:ns1.ds")
    assert (code, out, err) == (0, "the world names no principals\n", "")


def test_query_prints_a_table_as_the_repl_does(capsys: pytest.CaptureFixture[str]) -> None:
    body = 'descendant(namespace:sales, D), is_a(D, "dataset")'
    code, out, err = run(capsys, "query", body, "--world", SAMPLE)
    assert code == 0 and err == ""
    assert out.splitlines() == ["D", "-" * 28, "dataset:sales.orders", "dataset:sales.orders.archive", "(2 rows)"]
    assert out.rstrip("\n") == Session("cdap", SAMPLE).one_shot(f"?- {body}.")


def test_query_accepts_the_repl_spelling_and_answers_yes_or_no(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "query", "?- descendant(namespace:sales, dataset:sales.orders).", "--world", SAMPLE)[:2] == (
        0, "yes\n",
    )
    assert run(capsys, "query", "descendant(namespace:marketing, dataset:sales.orders)", "--world", SAMPLE)[:2] == (
        0, "no\n",
    )


def test_query_json_and_the_action_note_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "query", "grant(P, READ, dataset:sales.orders)", "--world", SAMPLE, "--json")
    assert code == 0
    assert json.loads(out) == {
        "variables": ["P", "READ"],
        "rows": [["user:alice", "ADMIN"], ["user:bob", "READ"]],
        "complete": True,
    }
    assert err.strip() == 'note: READ is a variable here (upper-case names are); write "READ" for the action'


def test_query_on_a_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "authz.db")
    assert main(["store", "import", SAMPLE, "--store", store]) == 0
    capsys.readouterr()
    code, out, _ = run(capsys, "query", 'grant(P, "READ", dataset:sales.orders)', "--store", store)
    assert (code, out.splitlines()[-1]) == (0, "(1 row)")
    code, out, _ = run(capsys, "who", "dataset.read", "dataset:sales.orders", "--store", store)
    assert code == 0 and out.startswith("1 of 7 principals")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["query", "descendnt(E, D)"], "unknown relation `descendnt`: did you mean `descendant`?"),
        (["query", "descendant(E)"], "`descendant` takes 2 arguments, not 1"),
        (["query", "not grant(P, A, E)"], "at least one literal that is not negated"),
        (["query", "grant(P, A, E), X != P"], "unsafe variable `X`"),
        (["query", ""], "a query is `?- LITERAL, ... .`"),
        (["query", "grant(P, A, E)", "--world", "missing.yaml"], "no such world file"),
        (["who", "dataset.reed", "dataset:ns1.ds"], "did you mean `dataset.read`?"),
        (["who", "dataset.read"], "the following arguments are required: entity"),
        (["who", "dataset.read", "stream:ns1.s"], "acts on a dataset, but `stream:ns1.s` is a stream"),
        (["who", "application.deploy", "application:ns1.a", "--arg", "artifact"], "--arg takes NAME=VALUE"),
        (["who", "dataset.read", "dataset:ns1.ds", "--world", SAMPLE, "--store", "x.db"], "not both"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert message in err
    assert err.startswith("privilog: ")
    assert len(err.strip().splitlines()) == 1


def test_a_query_that_does_not_parse_points_into_the_query(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "query", "grant(P")
    assert code == 2 and out == ""
    assert err.splitlines()[0] == "privilog: <query>:1:8: error: unexpected `.`, expected `)` or `,`"
    assert "Traceback" not in err


def test_a_query_past_its_time_is_bad_input(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVILOG_QUERY_ROWS", "5")
    code, out, err = run(capsys, "query", "grant(P, A, E), grant(Q, B, F)", "--world", SAMPLE)
    assert (code, out) == (2, "")
    assert err.startswith("privilog: stopped after looking at 5 rows")


def test_check_and_why_note_unknown_names_on_stderr_and_keep_their_exit_codes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, "check", "user:bbo", "dataset.read", "dataset:sales.order", "--world", SAMPLE)
    assert code == 1
    assert out.strip() == "DENY user:bbo dataset.read dataset:sales.order: unmet: READ"
    assert err.splitlines() == [
        "note: user:bbo appears nowhere in the world; did you mean `user:bob`?",
        "note: dataset:sales.order does not exist in the world; did you mean `dataset:sales.orders`?",
    ]
    code, out, err = run(
        capsys, "why", "user:bbo", "dataset.read", "dataset:sales.order", "--world", SAMPLE, "--json"
    )
    assert code == 1
    assert json.loads(out)["decision"] == "deny"  # stdout stays one JSON object
    assert len(err.splitlines()) == 2
    code, _, err = run(capsys, "check", "user:bob", "dataset.read", "dataset:sales.orders", "--world", SAMPLE)
    assert (code, err) == (0, "")


def test_the_docs_examples_print_what_they_show(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import re
    import shlex

    page = (ROOT / "docs" / "questions.md").read_text(encoding="utf-8")
    section = page.split("## Who may do it, and Datalog queries", 1)[1]
    block = re.search(r"```console\n(.*?)```", section, flags=re.S)
    assert block is not None
    commands = re.split(r"^\$ ", block.group(1), flags=re.M)[1:]
    assert len(commands) == 3
    monkeypatch.chdir(ROOT)
    for command in commands:
        line, _, shown = command.partition("\n")
        argv = shlex.split(line)
        assert argv[0] == "privilog"
        code, out, _ = run(capsys, *argv[1:])
        assert (code, out) == (0, shown)
