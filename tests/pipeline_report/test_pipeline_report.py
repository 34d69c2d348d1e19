"""``privilog pipeline report`` on run folders written with pyarrow (no Spark): counts, errors, escaping.

The pages are opened in headless Chromium: what they show is compared with counts
made here from the rows written, and values a user controls (principals, entity
ids, reasons quoting them) must appear as text and run nothing.
"""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pytest

from privilog.render.charts import ALLOWED, DENIED, TO_ALLOW, TO_DENY
from tests.pipeline_report.browser import Chromium
from tests.pipeline_report.conftest import number, report, rgb, show, unmet, write_run

HOSTILE_PRINCIPAL = "user:<img src=x onerror=alert(1)>"
HOSTILE_ENTITY = "dataset:ns1.<script>alert(2)</script>"
HOSTILE_OPERATION = '"><svg onload=alert(3)>'
HOSTILE_REASON = "malformed principal `</table><script>alert(4)</script>`: expected user:NAME"

# principal, operation, entity, timestamp, decision, unmet
DECISIONS: list[tuple[str, str, str, str | None, str, list[dict[str, Any]]]] = [
    ("user:alice", "dataset.read", "dataset:ns1.a", "2026-11-01T00:00:05Z", "allow", []),
    ("user:alice", "dataset.read", "dataset:ns1.b", "2026-11-01T00:00:07.5Z", "allow", []),
    (
        "user:alice",
        "dataset.write",
        "dataset:ns1.a",
        "2026-11-01 00:00:31",
        "deny",
        unmet(("dataset.write#1", "WRITE")),
    ),
    (
        "user:bob",
        "dataset.read",
        "dataset:ns1.a",
        "2026-11-01T00:00:41+00:00",
        "deny",
        unmet(("dataset.read#1", "READ")),
    ),
    (
        "user:bob",
        "dataset.read",
        "dataset:ns1.c",
        "2026-11-01T02:00:59+02:00",
        "deny",
        unmet(("dataset.read#1", "READ")),
    ),
    ("user:bob", "namespace.get", "namespace:ns1", "2026-11-01T00:01:20Z", "allow", []),
    (
        HOSTILE_PRINCIPAL,
        "dataset.read",
        HOSTILE_ENTITY,
        "2026-11-01T00:01:59Z",
        "deny",
        unmet(("dataset.read#1", "READ")),
    ),
    (
        HOSTILE_PRINCIPAL,
        HOSTILE_OPERATION,
        HOSTILE_ENTITY,
        None,
        "deny",
        unmet(("x#1", "<b>READ</b> on namespace"), ("x#2", "WRITE")),
    ),
    (HOSTILE_PRINCIPAL, "dataset.write", "dataset:ns1.a", "soon", "deny", unmet(("dataset.write#1", "WRITE"))),
    ("user:carol", "namespace.get", "namespace:ns1", "2026-11-01T00:00:06Z", "allow", []),
]
REJECTS = [
    (
        "requests",
        '{"principal": "alice"}',
        "malformed principal `alice`: expected user:NAME; did you mean `user:alice`?",
    ),
    ("requests", '{"principal": "bob"}', "malformed principal `bob`: expected user:NAME; did you mean `user:bob`?"),
    ("grants", '{"action": "DELETE"}', "unknown action `DELETE`: actions are READ, WRITE, EXECUTE, ADMIN and ALL"),
    ("requests", '{"principal": "</table><script>alert(4)</script>"}', HOSTILE_REASON),
]


def _decisions() -> list[dict[str, Any]]:
    return [
        {"principal": p, "operation": o, "entity": e, "args": None, "timestamp": t, "decision": d, "unmet": u}
        for p, o, e, t, d, u in DECISIONS
    ]


def _rejects() -> list[dict[str, Any]]:
    return [
        {"table": t, "row": row, "reason": reason, "file": "file:/in/requests.csv", "row_number": i + 2}
        for i, (t, row, reason) in enumerate(REJECTS)
    ]


@pytest.fixture
def decided(tmp_path: Path) -> Path:
    return write_run(tmp_path / "run", decisions=_decisions(), rejects=_rejects())


def _by_operation() -> dict[str, tuple[int, int]]:
    allowed = collections.Counter(o for _, o, _, _, d, _ in DECISIONS if d == "allow")
    denied = collections.Counter(o for _, o, _, _, d, _ in DECISIONS if d == "deny")
    return {o: (allowed[o], denied[o]) for o in allowed.keys() | denied.keys()}


# ---- text -----------------------------------------------------------------------------


def test_the_text_summary_counts_what_the_tables_hold(decided: Path) -> None:
    code, out, err = report(str(decided))
    assert (code, err) == (0, "")
    allowed = sum(1 for row in DECISIONS if row[4] == "allow")
    assert f"decisions: {len(DECISIONS)} requests, {allowed} allowed, {len(DECISIONS) - allowed} denied" in out
    lines = out.splitlines()
    for operation, (a, d) in _by_operation().items():
        assert any(line.split() == [*operation.split(), str(a), str(d)] for line in lines), operation
    assert any(line.split() == ["dataset.read#1", "READ", "3"] for line in lines)
    assert any(line.split() == [*HOSTILE_PRINCIPAL.split(), "3", "3"] for line in lines)
    # two timestamps are missing or unreadable; the rest span 00:00:05 to 00:01:59, ten seconds apiece
    assert "over time: 2026-11-01 00:00:05 to 2026-11-01 00:01:59 UTC, counted per 10 seconds (12 intervals)" in out
    assert "2 requests without a readable timestamp" in out
    assert "rejects: 4 rows (3 requests, 1 grants)" in out
    assert "malformed principal `…`: expected user:NAME; did you mean `…`? 2" in {
        " ".join(line.split()) for line in lines
    }


def test_the_text_summary_counts_the_requests_each_deny_rule_denied(tmp_path: Path) -> None:
    rows = [
        {**row, "decision": "deny", "unmet": [], "denied_by": places}
        for row, places in zip(
            _decisions(),
            [["deny.policy:6", "deny.policy:7"], ["deny.policy:7"], ["deny.policy:7"], []],
            strict=False,
        )
    ]
    code, out, err = report(str(write_run(tmp_path / "run", decisions=rows)))
    assert (code, err) == (0, "")
    lines = [line.split() for line in out.splitlines()]
    assert ["denied", "by", "the", "policy's", "rule", "denied", "requests"] in lines
    assert lines.index(["deny.policy:7", "3"]) < lines.index(["deny.policy:6", "1"])


def test_a_folder_that_is_not_a_run_is_one_line_and_exit_2(tmp_path: Path) -> None:
    write_run(tmp_path / "only-rejects", rejects=_rejects())
    (tmp_path / "a-file").write_text("x")
    for folder, says in (
        (tmp_path / "only-rejects", "is not a pipeline run: it holds no decisions, visibility, changes or principals table"),
        (tmp_path / "missing", "no such folder (a pipeline run's --out)"),
        (tmp_path / "a-file", "has no run.json: it is not the folder of a finished pipeline run"),
        (tmp_path, "has no run.json: it is not the folder of a finished pipeline run"),
    ):
        code, out, err = report(str(folder), "--html")
        assert (code, out) == (2, "")
        assert err.startswith(f"privilog: {folder}") and err.count("\n") == 1 and says in err
    assert not (tmp_path / "only-rejects" / "report.html").exists()


def test_an_unreadable_table_is_one_line_and_exit_2(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", decisions=_decisions())
    for part in (run / "decisions").glob("*.parquet"):
        part.write_bytes(b"not parquet at all")
    code, out, err = report(str(run))
    assert (code, out) == (2, "")
    assert err.startswith(f"privilog: {run / 'decisions'}: cannot read the table as parquet (")
    assert err.count("\n") == 1


def test_a_page_that_cannot_be_written_is_one_line_and_exit_2(decided: Path, tmp_path: Path) -> None:
    code, _, err = report(str(decided), "--out", str(tmp_path / "no" / "such" / "report.html"))
    assert code == 2
    assert err.startswith(f"privilog: {tmp_path / 'no' / 'such' / 'report.html'}: cannot write the report")
    assert err.count("\n") == 1


def test_html_goes_beside_the_tables_unless_out_says_where(decided: Path, tmp_path: Path) -> None:
    code, out, _ = report(str(decided), "--html")
    assert code == 0 and out.endswith(f"wrote {decided / 'report.html'}\n")
    assert (decided / "report.html").read_text().startswith("<!DOCTYPE html>")
    code, out, _ = report(str(decided), "--out", str(tmp_path / "elsewhere.html"))
    assert code == 0 and (tmp_path / "elsewhere.html").exists()


def test_every_value_from_the_tables_is_escaped_in_the_html(decided: Path) -> None:
    report(str(decided), "--html")
    html = (decided / "report.html").read_text()
    for hostile in (HOSTILE_PRINCIPAL, HOSTILE_ENTITY, HOSTILE_OPERATION, "<b>READ</b>", "</table><script>"):
        assert hostile not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<script" not in html.lower() and "<img" not in html.lower()


# ---- in the browser -------------------------------------------------------------------


def test_the_page_shows_the_tables_numbers_and_runs_nothing_it_was_given(decided: Path, chromium: Chromium) -> None:
    report(str(decided), "--html")
    shown = show(chromium, decided / "report.html")
    assert shown.page.errors == [] and shown.page.dialogs == []
    assert shown.page.requests == [(decided / "report.html").as_uri()]  # nothing fetched, not even x
    assert {tag: shown.elements[tag] for tag in ("script", "img", "iframe", "object", "embed")} == dict.fromkeys(
        ("script", "img", "iframe", "object", "embed"), 0
    )
    for hostile in (HOSTILE_PRINCIPAL, HOSTILE_OPERATION, "<b>READ</b> on namespace", HOSTILE_REASON):
        assert hostile in shown.text  # shown as the text it is (the page shows no entity of decisions)
    allowed = sum(1 for row in DECISIONS if row[4] == "allow")
    assert shown.figures["requests decided"] == str(len(DECISIONS))
    assert (shown.figures["allowed"], shown.figures["denied"]) == (str(allowed), str(len(DECISIONS) - allowed))
    assert shown.figures["rows rejected"] == str(len(REJECTS))
    rows = shown.table("Decisions by operation")
    assert rows[0] == ["operation", "allowed", "denied", "requests"]
    assert {r[0]: (number(r[1]), number(r[2])) for r in rows[1:]} == _by_operation()
    principals = {r[0]: number(r[2]) for r in shown.table("Most-denied principals")[1:]}
    assert principals == dict(collections.Counter(p for p, _, _, _, d, _ in DECISIONS if d == "deny"))
    timed = shown.table("Decisions over time")[1:]
    assert len(timed) == 12 and sum(number(r[3]) for r in timed) == len(DECISIONS) - 2
    assert [r[0] for r in timed[:2]] == ["00:00:00", "00:00:10"]
    assert {r[0]: number(r[2]) for r in shown.table("Top unmet requirements")[1:]}["dataset.read#1"] == 3
    assert {r[0]: number(r[1]) for r in shown.table("Rejects by reason")[1:]} == {
        "malformed principal `…`: expected user:NAME; did you mean `…`?": 2,
        "unknown action `…`: actions are READ, WRITE, EXECUTE, ADMIN and ALL": 1,
        "malformed principal `…`: expected user:NAME": 1,
    }
    for title, section in shown.sections.items():
        for chart in section["charts"]:
            assert chart["title"] == title and chart["bars"] > 0
    assert "requests" in shown.sections["Decisions by operation"]["charts"][0]["texts"]  # the axis' title
    assert rgb(ALLOWED) in shown.colours and rgb(DENIED) in shown.colours and len(shown.colours) > 50


def test_an_impact_and_a_visibility_run_are_drawn_with_their_numbers(tmp_path: Path, chromium: Chromium) -> None:
    by_operation = [
        {"operation": "dataset.read", "compared": 40, "allow_to_deny": 0, "deny_to_allow": 3, "log_rows": 7},
        {"operation": "dataset.write", "compared": 10, "allow_to_deny": 2, "deny_to_allow": 1, "log_rows": 3},
        {"operation": "namespace.get", "compared": 5, "allow_to_deny": 0, "deny_to_allow": 0, "log_rows": 0},
    ]
    changes = [
        {
            "principal": p,
            "operation": o,
            "entity": e,
            "args": None,
            "requests": n,
            "decision_a": a,
            "decision_b": "deny" if a == "allow" else "allow",
            "unmet_a": unmet(("dataset.read#1", "READ on namespace")) if a == "deny" else [],
            "unmet_b": unmet(("dataset.write#1", "WRITE")) if a == "allow" else [],
        }
        for p, o, e, n, a in [
            ("user:alice", "dataset.read", "dataset:ns1.a", 5, "deny"),
            ("user:bob", "dataset.read", "dataset:ns1.b", 1, "deny"),
            (HOSTILE_PRINCIPAL, "dataset.read", HOSTILE_ENTITY, 1, "deny"),
            ("user:alice", "dataset.write", "dataset:ns1.a", 2, "allow"),
            ("user:bob", "dataset.write", "dataset:ns1.a", 1, "allow"),
            ("user:carol", "dataset.write", "dataset:ns1.c", 1, "deny"),
        ]
    ]
    visibility = [
        {"principal": p, "entity": e, "type": e.split(":")[0], "action": "READ", "granted_entity": e, "holder": p}
        for p, e in [
            ("user:alice", "namespace:ns1"),
            ("user:alice", "dataset:ns1.a"),
            ("user:bob", "dataset:ns1.a"),
            (HOSTILE_PRINCIPAL, HOSTILE_ENTITY),
        ]
    ]
    run = write_run(tmp_path / "run", changes=changes, by_operation=by_operation, visibility=visibility, rejects=[])
    code, out, _ = report(str(run), "--html")
    assert code == 0
    assert "impact: 6 of 55 compared requests change (2 allow→deny, 4 deny→allow; distinct requests)" in out
    assert "visibility: 4 (principal, entity) pairs for 3 principals" in out
    assert "rejects: 0 rows" in out
    shown = show(chromium, run / "report.html")
    assert shown.page.errors == [] and shown.page.dialogs == [] and shown.elements["img"] == 0
    assert HOSTILE_PRINCIPAL in shown.text and HOSTILE_ENTITY in shown.text and shown.elements["script"] == 0
    assert shown.figures["allow→deny"] == "2" and shown.figures["deny→allow"] == "4"
    title = "Changes between the two policies, by operation"
    assert shown.table(title)[1:] == [
        ["dataset.read", "0", "3", "7", "40"],
        ["dataset.write", "2", "1", "3", "10"],
    ]
    examples = shown.table(title, 1)
    assert examples[0][:2] == ["principal", "operation"]
    assert [(r[0], r[4], r[5], r[6]) for r in examples[1:]] == [
        ("user:alice", "allow", "deny", "2"),
        ("user:bob", "allow", "deny", "1"),
        ("user:alice", "deny", "allow", "5"),
        ("user:bob", "deny", "allow", "1"),
        (HOSTILE_PRINCIPAL, "deny", "allow", "1"),
        ("user:carol", "deny", "allow", "1"),
    ]
    assert examples[1][7] == "WRITE (dataset.write#1)" and examples[3][7] == "READ on namespace (dataset.read#1)"
    assert {r[0]: number(r[1]) for r in shown.table("Visibility by entity type")[1:]} == {"dataset": 3, "namespace": 1}
    assert rgb(TO_DENY) in shown.colours and rgb(TO_ALLOW) in shown.colours


def test_an_empty_run_and_one_without_timestamps_are_reported(tmp_path: Path, chromium: Chromium) -> None:
    empty = write_run(tmp_path / "empty", decisions=[], rejects=[])
    code, out, _ = report(str(empty), "--html")
    assert code == 0 and "decisions: 0 requests, 0 allowed, 0 denied\n\nrejects: 0 rows\n" in out
    shown = show(chromium, empty / "report.html")
    assert shown.page.errors == [] and shown.figures["requests decided"] == "0"
    untimed = [{**row, "timestamp": None} for row in _decisions()[:3]]
    run = write_run(tmp_path / "untimed", decisions=untimed)
    code, out, _ = report(str(run), "--html")
    assert code == 0 and out.endswith(
        "\n\n3 requests without a readable timestamp\nwrote " + str(run / "report.html") + "\n"
    )
    shown = show(chromium, run / "report.html")
    assert shown.page.errors == [] and shown.sections["Decisions over time"]["charts"] == []
    assert "No request has a readable timestamp (the timestamp column of the access log, ISO 8601)." in shown.text
