"""Pictures: `privilog why --format dot|svg|png` and `privilog graph` (issue 12, "Pictures").

SVG and PNG are drawn by Graphviz's real `dot` program (the graphviz package; .ci/run installs it).
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from privilog.cli import main

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "privilog" / "samples" / "world.yaml")
DAVE = ("why", "user:dave", "namespace.get", "namespace:marketing", "--world", SAMPLE)
DAVE_DENIED = ("why", "user:dave", "namespace.get", "namespace:sales", "--world", SAMPLE)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def parse_dot(text: str) -> tuple[dict[str, str], set[tuple[str, str, str]]]:
    """The labels of a DOT graph's nodes, and its edges as (tail label, edge label, head label)."""
    labels = dict(re.findall(r'^\t(n\d+) \[label="((?:[^"\\]|\\.)*)"', text, re.M))
    edges = set()
    for tail, head, attrs in re.findall(r"^\t(n\d+) -> (n\d+)(?: \[(.*)\])?$", text, re.M):
        label = re.search(r'label=" ((?:[^"\\]|\\.)*) "', attrs or "")
        edges.add((labels[tail], label.group(1) if label else "", labels[head]))
    return labels, edges


def test_why_dot_draws_requirement_grant_group_chain_and_descendant(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *DAVE, "--format", "dot")
    assert code == 0
    assert out.startswith("digraph decision {")
    labels, edges = parse_dot(out)
    request = r"ALLOW\nuser:dave namespace.get namespace:marketing\npolicy cdap"
    requirement = r"any on self or within\nmet"
    grant = r"READ on dataset:marketing.campaigns\nheld by group:analysts"
    assert sorted(labels.values()) == sorted(
        [
            request,
            requirement,
            grant,
            "group:analysts",
            "user:dave",
            "dataset:marketing.campaigns",
            "namespace:marketing",
        ]
    )
    assert edges == {
        (request, "requires", requirement),
        (requirement, "met by", grant),
        (grant, "held by", "group:analysts"),
        ("group:analysts", "has member", "user:dave"),
        (grant, "on", "dataset:marketing.campaigns"),
        ("dataset:marketing.campaigns", "is in", "namespace:marketing"),
    }


def test_why_dot_of_a_denial_shows_the_unmet_requirement_and_the_fixes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *DAVE_DENIED, "--format", "dot")
    assert code == 1
    _, edges = parse_dot(out)
    request = r"DENY\nuser:dave namespace.get namespace:sales\npolicy cdap"
    unmet = r"any on self or within\nUNMET\nno grant to user:dave or its groups meets it"
    fixes = (
        r"Would allow it (any one of these 4):\l1. grant ADMIN on namespace:sales to user:dave\l"
        r"2. grant EXECUTE on namespace:sales to user:dave\l3. grant READ on namespace:sales to user:dave\l"
        r"4. grant WRITE on namespace:sales to user:dave\l"
    )
    assert edges == {(request, "requires", unmet), (request, "what would allow it", fixes)}


def test_why_svg_is_drawn_by_dot_with_the_labels(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *DAVE, "--format", "svg")
    assert code == 0
    root = ET.fromstring(out.split("\n", 3)[3] if out.startswith("<?xml") else out)  # after the doctype
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    texts = {(t.text or "").strip() for t in root.iter("{http://www.w3.org/2000/svg}text")}
    assert {"user:dave", "group:analysts", "held by group:analysts", "namespace:marketing", "has member"} <= texts


def test_why_png_has_the_signature_and_a_picture_in_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "why.png"
    code, printed, _ = run(capsys, *DAVE, "--format", "png", "--out", str(out))
    assert (code, printed) == (0, "")
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) > 10_000


def test_a_png_is_not_written_to_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    code, out, err = run(capsys, *DAVE, "--format", "png")
    assert (code, out) == (2, "")
    assert err.strip() == "privilog: why: a PNG is not written to a terminal; give --out FILE.png"


def test_without_dot_svg_is_one_line_naming_the_package(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    code, out, err = run(capsys, *DAVE, "--format", "svg")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert "install the graphviz package" in err and err.startswith("privilog: ")
    code, out, _ = run(capsys, *DAVE, "--format", "dot")  # DOT needs no program
    assert code == 0 and out.startswith("digraph")


def test_json_and_a_picture_are_not_both_given(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, *DAVE, "--format", "dot", "--json")
    assert code == 2
    assert err.strip() == "privilog: why: give --json or --format, not both"


def test_graph_of_a_principal_shows_its_grants_groups_and_what_they_make_visible(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "graph", "--world", SAMPLE, "--principal", "user:dave")
    assert code == 0
    labels, edges = parse_dot(out)
    assert ("group:analysts", "READ", "dataset:marketing.campaigns") in edges
    assert ("user:dave", "member of", "group:analysts") in edges
    assert ("namespace:marketing", "", "dataset:marketing.campaigns") in edges  # the hierarchy
    assert ("instance:cdap", "", "namespace:sales") in edges
    assert not any(label == "READ" and tail != "group:analysts" for tail, label, _ in edges)  # only dave's
    green = {labels[n] for n in re.findall(r'^\t(n\d+) \[.*fillcolor="#e8f5e9"', out, re.M)}
    assert green == {"namespace:marketing", "dataset:marketing.campaigns"}


def test_graph_in_an_entity_draws_only_what_is_inside(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "graph", "--world", SAMPLE, "--in", "application:sales.etl")
    assert code == 0
    labels, edges = parse_dot(out)
    assert set(labels.values()) == {
        "application:sales.etl",
        "program:sales.etl.workflow.nightly",
        "program:sales.etl.service.api",
        "schedule:sales.etl.hourly",
        "user:alice",
        "user:bob",
    }
    assert ("user:alice", "ADMIN", "application:sales.etl") in edges
    assert ("user:bob", "EXECUTE", "program:sales.etl.workflow.nightly") in edges
    assert ("application:sales.etl", "", "program:sales.etl.service.api") in edges


def test_graph_png_of_the_sample_world(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "world.png"
    code, _, _ = run(
        capsys, "graph", "--world", SAMPLE, "--principal", "user:carol", "--format", "png", "--out", str(out)
    )
    assert code == 0
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") and out.stat().st_size > 10_000


def test_requirements_that_do_not_apply_are_drawn_dashed_not_filled_grey(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ("why", "user:carol", "application.deploy", "application:sales.reports", "--world", SAMPLE)
    code, out, _ = run(capsys, *argv, "--arg", "artifact=artifact:sales.etl-lib", "--format", "dot")
    assert code == 0
    nodes = re.findall(r"^\t(n\d+ \[label=.*)$", out, re.M)
    assert nodes and all("fillcolor=" in node for node in nodes)  # else dot fills a node with its line colour
    skipped = [n for n in nodes if r"\ndoes not apply" in n]
    assert len(skipped) == 2 and all('style="filled,rounded,dashed"' in n for n in skipped)
