"""A scenario run as a user or a CI system reads it: lines of text, one JSON object, JUnit XML.

JUnit XML follows the shape CI systems read (Jenkins, GitLab, GitHub's test reporters):
one ``<testsuites>`` with the totals, a ``<testsuite>`` per scenario file, a
``<testcase>`` per case run (``classname`` the file, ``name`` the case, ``file`` and
``line`` where it is written, ``time`` in seconds), and a ``<failure>`` in each failed
case whose ``message`` is the reason and whose text is the whole failure line; a case that could not
be run (bad input) has an ``<error>`` instead.
Cases left out by ``-k`` are not written, as pytest does.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from privilog.testing.scenario import CaseResult, Run


def render_text(run: Run, verbose: bool = False) -> list[str]:
    """The failed cases (with ``verbose``, every case with its time), then the summary line."""
    lines = [r.line(timed=verbose) for r in run.results if verbose or not r.passed]
    if run.coverage is not None:
        for coverage in run.coverage.values():
            lines += coverage.render()
    return [*lines, run.summary()]


def case_json(result: CaseResult) -> dict[str, Any]:
    return {
        "name": result.name,
        "file": result.file,
        "line": result.line_number,
        "where": result.where,
        "status": result.status,
        "message": result.detail,
        "seconds": round(result.seconds, 6),
    }


def run_json(run: Run) -> dict[str, Any]:
    """Every case run, the totals, and with ``--coverage`` each policy's coverage."""
    out: dict[str, Any] = {
        "cases": [case_json(r) for r in run.results],
        "totals": {
            "passed": run.passed,
            "failed": run.failed,
            "errors": run.errors,
            "deselected": run.deselected,
            "seconds": round(run.seconds, 6),
        },
    }
    if run.coverage is not None:
        out["coverage"] = [c.to_json() for c in run.coverage.values()]
    return out


def junit_xml(run: Run) -> str:
    """The run as a JUnit XML document."""
    suites = ET.Element(
        "testsuites",
        name="privilog test",
        tests=str(len(run.results)),
        failures=str(run.failed),
        errors=str(run.errors),
        time=f"{run.seconds:.6f}",
    )
    by_file: dict[str, list[CaseResult]] = {}
    for result in run.results:
        by_file.setdefault(result.file, []).append(result)
    for file, results in by_file.items():
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=file,
            tests=str(len(results)),
            failures=str(sum(not r.passed and not r.error for r in results)),
            errors=str(sum(r.error for r in results)),
            skipped="0",
            time=f"{sum(r.seconds for r in results):.6f}",
        )
        for result in results:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=file,
                name=result.name,
                file=file,
                line=str(result.line_number),
                time=f"{result.seconds:.6f}",
            )
            if result.error:
                error = ET.SubElement(case, "error", message=result.detail, type="bad input")
                error.text = result.line()
            elif not result.passed:
                failure = ET.SubElement(case, "failure", message=result.detail, type="expectation")
                failure.text = result.line()
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
