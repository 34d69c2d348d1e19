"""Every benchmark's recorded figures as one Markdown page: ``python -m benchmarks.report``.

The figures live in the results files the benchmarks write (``benchmarks/**/results*.json``, and the
few JSON files of other names some write: ``programs.json``, ``serve/logcost.json``, ...), and
nowhere else: the documentation's benchmarks page (``docs/benchmarks.md``) holds the marker
``<!-- generated: benchmarks -->``, which ``docs/hooks.py`` replaces with :func:`markdown`.

For each results file, a section: the benchmark's name and the command that makes it (from the
docstring of the module that writes the file, read without importing it), the commit, machine and
date the file records (each run's, when it records several), and its figures as tables, the
headline first. The files' shapes differ, one per benchmark; a file of a shape this module does not
know is shown generically (every figure in it, by its path), never left out.
"""

from __future__ import annotations

import ast
import functools
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

Lines = list[str]


# ---------------------------------------------------------------- formatting


def _cell(value: Any) -> str:
    """A value as the text of a Markdown table cell."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != value:  # NaN
            return ""
        magnitude = abs(value)
        if magnitude >= 1000:
            return f"{value:,.0f}"
        if magnitude >= 100:
            return f"{value:.0f}"
        if magnitude >= 10:
            return f"{value:.1f}"
        if magnitude >= 1 or magnitude == 0:
            return f"{value:.2f}"
        return f"{value:.3g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_cell(item) for item in value)
    if isinstance(value, dict):
        return ", ".join(f"{key} {_cell(item)}" for key, item in value.items())
    return str(value).replace("|", "\\|").replace("\n", " ").strip()


def _pair(first: Any, second: Any) -> str:
    """``p50 / p99``, or empty when neither is there."""
    if first is None and second is None:
        return ""
    return f"{_cell(first)} / {_cell(second)}"


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]], right_from: int = 1) -> Lines:
    """A Markdown table; the columns from ``right_from`` on are right-aligned (figures)."""
    rows = list(rows)
    if not rows:
        return []
    align = ["---" if i < right_from else "---:" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(cell if isinstance(cell, str) else _cell(cell) for cell in row) + " |" for row in rows]
    return [*lines, ""]


def _get(data: Any, *path: Any) -> Any:
    for key in path:
        if isinstance(data, dict):
            data = data.get(key)
        elif isinstance(data, list) and isinstance(key, int) and -len(data) <= key < len(data):
            data = data[key]
        else:
            return None
    return data


def _date(text: Any) -> str:
    """``2026-11-28T09:32:17+00:00`` as ``2026-11-28 09:32 UTC``."""
    if not isinstance(text, str):
        return ""
    if len(text) >= 16 and text[10] == "T" and text.endswith("+00:00"):
        return f"{text[:10]} {text[11:16]} UTC"
    return text


# ---------------------------------------------------------------- where a file comes from


@functools.cache
def _docstring(path: Path) -> str:
    try:
        return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False) or ""
    except (OSError, SyntaxError, ValueError):
        return ""


def _writer(root: Path, results: Path) -> Path | None:
    """The module that writes ``results``: the one whose docstring names the file after ``--out``,
    else one in the same folder naming it, else one named as the file begins (``logcost.py`` for
    ``logcost_forget.json``), else one naming the folder's ``results.json``, else the folder's
    ``__main__.py``."""
    benchmarks = root / "benchmarks"
    rel = results.relative_to(root).as_posix()
    folder_default = (results.parent / "results.json").relative_to(root).as_posix()
    modules = sorted(
        (p for p in benchmarks.rglob("*.py") if p.name != "report.py"),
        key=lambda p: (p.parent.as_posix(), p.name != "__main__.py", p.name),
    )
    docs = {module: _docstring(module) for module in modules}
    for module, doc in docs.items():
        if f"--out {rel}" in doc:
            return module
    for module, doc in docs.items():
        if module.parent == results.parent and results.name in doc:
            return module
    for module in docs:
        if module.parent == results.parent and module.stem != "__main__" and results.stem.startswith(module.stem):
            return module
    for module, doc in docs.items():
        if module.parent == results.parent and f"--out {folder_default}" in doc:
            return module
    main = results.parent / "__main__.py"
    return main if main.exists() and results.parent != benchmarks else None


def _usage(doc: str) -> str:
    """The first command in a docstring (an indented ``python ...`` line and its continuations)."""
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(" ") and line.strip().startswith(("python ", "python3 ")):
            words = [line.strip()]
            for more in lines[i + 1 :]:
                if more.startswith(" ") and more.strip().startswith("["):
                    words.append(more.strip())
                else:
                    break
            return " ".join(words)
    return ""


def _title(doc: str, fallback: str) -> tuple[str, str]:
    """(a heading, the rest of the docstring's first paragraph) from a module's docstring."""
    first = " ".join(doc.split("\n\n", 1)[0].split()).replace("``", "`")
    if not first:
        return fallback, ""
    head, sep, rest = first.partition(": ")
    if not sep:
        head, rest = first, ""
    head = head.rstrip(".")
    rest = rest.strip()
    if rest and not rest.startswith("privilog"):
        rest = rest[0].upper() + rest[1:]
        rest += "" if rest.endswith(".") else "."
    return head, rest


# ---------------------------------------------------------------- commit, machine, date


def _machine_text(machine: dict[str, Any]) -> str:
    parts = []
    cpu = machine.get("cpu_model")
    cores = machine.get("cpu_count", machine.get("nproc"))
    if cpu or cores:
        parts.append(", ".join(str(p) for p in (cpu, f"{cores} cores" if cores else None) if p))
    if machine.get("memory_gib"):
        parts.append(f"{machine['memory_gib']} GiB")
    if machine.get("python"):
        parts.append(f"Python {machine['python']}")
    for name in ("pyspark", "regorus"):
        if machine.get(name):
            parts.append(f"{name} {machine[name]}")
    return ", ".join(parts)


def _load(machine: dict[str, Any], *keys: str) -> str:
    for key in keys:
        value = machine.get(key)
        if isinstance(value, list) and value:
            return _cell(float(value[0]))
    return ""


def _runs(data: Any) -> list[tuple[str, dict[str, Any]]]:
    """The file's runs, labelled: a ``runs`` mapping or list, else the file itself."""
    runs = data.get("runs") if isinstance(data, dict) else None
    if isinstance(runs, dict):
        return [(str(label), run) for label, run in runs.items() if isinstance(run, dict)]
    if isinstance(runs, list):
        return [(str(i + 1), run) for i, run in enumerate(runs) if isinstance(run, dict)]
    return []


def provenance(data: Any) -> list[dict[str, str]]:
    """Each run's date, commit, machine and load average, as the file records them (empty: none)."""
    top = data.get("machine") if isinstance(data, dict) and isinstance(data.get("machine"), dict) else {}
    found = []
    for label, run in _runs(data):
        machine = run.get("machine") if isinstance(run.get("machine"), dict) else {}
        date = run.get("date") or machine.get("date")
        commit = run.get("commit") or machine.get("privilog_commit") or machine.get("commit")
        if date or commit or machine:
            found.append(
                {
                    "run": label,
                    "date": _date(date),
                    "commit": str(commit or ""),
                    "machine": _machine_text(machine or top),
                    "load": _load(run, "loadavg_before", "loadavg_start") or _load(machine, "loadavg"),
                }
            )
    if found:
        return found
    if isinstance(data, dict):
        date = top.get("date") or data.get("date")
        commit = top.get("privilog_commit") or top.get("commit") or data.get("commit")
        if date or commit or top:
            return [
                {
                    "run": "",
                    "date": _date(date),
                    "commit": str(commit or ""),
                    "machine": _machine_text(top),
                    "load": _load(top, "loadavg"),
                }
            ]
    return []


def _provenance_lines(data: Any) -> Lines:
    rows = provenance(data)
    if not rows:
        return ["**This file records no commit, machine or date.**", ""]
    missing = [name for name in ("date", "commit", "machine") if any(not row[name] for row in rows)]
    lines: Lines = []
    if len(rows) == 1 and not rows[0]["run"]:
        row = rows[0]
        what = [f"Recorded {row['date'] or '(no date)'}", f"commit `{row['commit']}`" if row["commit"] else "no commit"]
        if row["machine"]:
            what.append(row["machine"])
        if row["load"]:
            what.append(f"load average {row['load']} at the start")
        lines += [", ".join(what) + ".", ""]
    else:
        merged: dict[tuple[str, ...], list[str]] = {}
        for r in rows:  # runs recorded together (same date, commit, machine) share a row
            merged.setdefault((r["date"], r["commit"], r["machine"], r["load"]), []).append(f"`{r['run']}`")
        lines += _table(
            ["run", "date", "commit", "machine", "load average"],
            [
                [", ".join(runs), date, f"`{commit}`" if commit else "", machine, load]
                for (date, commit, machine, load), runs in merged.items()
            ],
            right_from=4,
        )
    if missing:
        lines += [f"**Not recorded for every run: {', '.join(missing)}.**", ""]
    return lines


# ---------------------------------------------------------------- the shapes


def _is_engines(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("sizes"), list)
        and all(isinstance(s, dict) and "engines" in s and "checks" in s for s in data["sizes"])
        and bool(data["sizes"])
    )


def _engines(data: dict[str, Any]) -> Lines:
    lines: Lines = []
    for size in data["sizes"]:
        engines = [e for e in size.get("engines", []) if isinstance(e, str)]
        world = size.get("world") or {}
        grants = world.get("grants", size.get("size"))
        lines += [
            f"**{_cell(grants)} grants** ({_cell(world.get('entities_existing'))} entities, "
            f"{_cell(world.get('memberships'))} memberships): p50 / p99 in µs, from the request's strings "
            "to a decision.",
            "",
        ]
        rows = []
        for kind, per_engine in (size.get("checks") or {}).items():
            rows.append(
                [f"`{kind}`", *[_pair(_get(per_engine, e, "p50_us"), _get(per_engine, e, "p99_us")) for e in engines]]
            )
        for name, block in (("`visible`", size.get("visible")), ("`why`", size.get("why"))):
            if isinstance(block, dict):
                rows.append([name, *[_pair(_get(block, e, "p50_us"), _get(block, e, "p99_us")) for e in engines]])
        for change in ("grant_then_check", "revoke_then_check", "grant", "revoke"):
            if any(_get(size, "changes", e, change) for e in engines):
                label = change.replace("_then_check", ", then a check")
                rows.append(
                    [
                        label,
                        *[
                            _pair(
                                _get(size, "changes", e, change, "p50_us"), _get(size, "changes", e, change, "p99_us")
                            )
                            for e in engines
                        ],
                    ]
                )
        rows.append(
            [
                "load, s / peak MiB",
                *[_pair(_get(size, "load", e, "total_s"), _get(size, "load", e, "peak_rss_mib")) for e in engines],
            ]
        )
        lines += _table(["", *engines], rows)
        for engine, why in (size.get("skipped") or {}).items():
            lines += [f"{engine} not run: {_cell(why)}", ""]
    targets = [t for t in data.get("targets", []) if isinstance(t, dict)]
    if targets:
        lines += ["The targets this run was held to (issue 11's or issue 38's), beside what it measured:", ""]
        lines += _table(
            ["grants", "engine", "figure", "target", "measured", "met"],
            [
                [
                    t.get("size"),
                    t.get("engine", ""),
                    t.get("figure", ""),
                    t.get("target", ""),
                    t.get("measured", ""),
                    "**yes**" if t.get("met") else "no",
                ]
                for t in targets
            ],
            right_from=6,
        )
    return lines


def _is_reference(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("sizes"), list) and "settings" in data


def _reference(data: dict[str, Any]) -> Lines:
    lines = ["The reference backend (pyDatalog), in ms:", ""]
    lines += _table(
        [
            "grants",
            "load, s",
            "check median",
            "check p99",
            "allowed median",
            "denied median",
            "visible median",
            "peak MiB",
        ],
        [
            [
                _get(s, "world", "grants") or s.get("grants_requested"),
                _load_total(s),
                _get(s, "checks", "all", "median_ms"),
                _get(s, "checks", "all", "p99_ms"),
                _get(s, "checks", "allowed", "median_ms"),
                _get(s, "checks", "denied", "median_ms"),
                _get(s, "visible", "median_ms"),
                _get(s, "memory_mib", "peak"),
            ]
            for s in data["sizes"]
            if isinstance(s, dict)
        ],
    )
    cli = data.get("cli")
    if isinstance(cli, dict):
        lines += ["`privilog check` from a new process, in ms:", ""]
        lines += _table(
            ["run", "median", "p99", "min", "max"],
            [
                [f"`{name}`", r.get("median_ms"), r.get("p99_ms"), r.get("min_ms"), r.get("max_ms")]
                for name, r in cli.items()
                if isinstance(r, dict) and "median_ms" in r
            ],
        )
    return lines


def _load_total(size: dict[str, Any]) -> Any:
    load = size.get("load") or {}
    for key in ("total_s", "load_s"):
        if key in load:
            return load[key]
    parts = [load.get(k) for k in ("policy_parse_check_s", "compile_and_backend_init_s", "refresh_s")]
    return sum(p for p in parts if isinstance(p, (int, float))) or None


WRK = ("decisions_per_s", "requests_per_s", "p50_ms", "p99_ms")


def _wrk_row(label: str, block: dict[str, Any]) -> list[Any]:
    return [
        label,
        block.get("connections"),
        block.get("decisions_per_s", block.get("requests_per_s")),
        block.get("p50_ms"),
        block.get("p99_ms"),
    ]


def _is_serve(data: Any) -> bool:
    runs = data.get("runs") if isinstance(data, dict) else None
    return (
        isinstance(runs, list)
        and bool(runs)
        and all(isinstance(r, dict) and "workers" in r and "single_checks_4_connections" in r for r in runs)
    )


def _serve(data: dict[str, Any]) -> Lines:
    lines = [
        f"A world of {_cell(data.get('size'))} grants; wrk on loopback. Decisions (or grants) a second, latency in ms:",
        "",
    ]
    rows = []
    for run in data["runs"]:
        for name, block in run.items():
            if isinstance(block, dict) and "p99_ms" in block:
                rows.append([str(run.get("workers")), *_wrk_row(name.replace("_", " "), block)[0:]])
    lines += _table(["workers", "what", "connections", "per second", "p50", "p99"], rows, right_from=2)
    return lines


def _is_startup(data: Any) -> bool:
    runs = data.get("runs") if isinstance(data, dict) else None
    return isinstance(runs, list) and bool(runs) and all(isinstance(r, dict) and "ready_s" in r for r in runs)


def _startup(data: dict[str, Any]) -> Lines:
    def worker_mib(run: dict[str, Any], kind: str) -> Any:
        workers = _get(run, "memory_after_checks", "workers") or []
        values = [w.get(kind) for w in workers if isinstance(w, dict) and w.get(kind) is not None]
        return round(max(values) / 1024) if values else None

    return _table(
        [
            "grants",
            "store",
            "commit",
            "snapshot",
            "workers",
            "ready, s",
            "first check, s",
            "snapshot read, s",
            "store read, s",
            "authorizer, s",
            "plans, s",
            "RSS / PSS per worker, MiB",
        ],
        [
            [
                r.get("size"),
                r.get("backend", ""),
                f"`{r['commit']}`" if r.get("commit") else "",
                r.get("snapshot") or "none",  # absent (the case without one): written, read, or no option
                r.get("workers"),
                r.get("ready_s"),
                r.get("first_check_s"),
                _get(r, "phases", "snapshot_read_s"),
                _get(r, "phases", "store_read_s"),
                _get(r, "phases", "authorizer_build_s"),
                _get(r, "phases", "warm_s"),
                _pair(worker_mib(r, "rss_kib"), worker_mib(r, "pss_kib")),
            ]
            for r in data["runs"]
        ],
        right_from=4,
    )


def _is_store(data: Any) -> bool:
    return isinstance(data, dict) and "grant_durable" in data


def _store(data: dict[str, Any]) -> Lines:
    backends = [b for b in ("sqlite", "postgresql") if b in (data.get("grant_durable") or {})]
    rows = []
    for figure, key, count in (
        ("grant acknowledged durably, p50 / p99 ms", "grant_durable", "n"),
        ("change visible on a second replica, p50 / p99 ms", "replica_lag", "n"),
    ):
        rows.append(
            [
                f"{figure} ({_cell(_get(data, key, backends[0], count))})",
                *[_pair(_get(data, key, b, "p50_ms"), _get(data, key, b, "p99_ms")) for b in backends],
            ]
        )
    for size, per_backend in (data.get("import") or {}).items():
        rows.append(
            [
                f"import of {_cell(int(size)) if str(size).isdigit() else size} grants, s (again; snapshot)",
                *[
                    f"{_cell(_get(per_backend, b, 'import_s'))} ({_cell(_get(per_backend, b, 'import_again_s'))}; "
                    f"{_cell(_get(per_backend, b, 'snapshot_s'))})"
                    for b in backends
                ],
            ]
        )
    lines = _table(["figure", *backends], rows)
    if data.get("postgresql"):
        lines += [f"PostgreSQL {_cell(data['postgresql'])}.", ""]
    return lines


def _is_consistency(data: Any) -> bool:
    return isinstance(data, dict) and any(isinstance(_get(data, b, "latency"), dict) for b in ("sqlite", "postgresql"))


def _consistency(data: dict[str, Any]) -> Lines:
    backends = [b for b in ("sqlite", "postgresql") if isinstance(_get(data, b, "latency"), dict)]
    modes = list(data[backends[0]]["latency"])
    lines = ["A check's latency at the second server, p50 / p99 in µs:", ""]
    lines += _table(
        ["consistency", *backends],
        [
            [
                m.replace("_", " "),
                *[
                    _pair(_get(data, b, "latency", m, "p50_us"), _get(data, b, "latency", m, "p99_us"))
                    for b in backends
                ],
            ]
            for m in modes
        ],
    )
    lines += ["How long the second server answers `allow` after a revoke through the first:", ""]
    rows = []
    for b in backends:
        for window in ("window_without_token", "window_with_at_least"):
            w = _get(data, b, window)
            if isinstance(w, dict):
                rows.append(
                    [
                        b,
                        window.replace("window_", "").replace("_", " "),
                        w.get("checks"),
                        w.get("allows_total"),
                        w.get("window_ms_p50"),
                        w.get("window_ms_max"),
                    ]
                )
    lines += _table(
        ["store", "checks", "checks made", "allowed", "window p50, ms", "window max, ms"], rows, right_from=2
    )
    return lines


def _is_decide(data: Any) -> bool:
    runs = data.get("runs") if isinstance(data, dict) else None
    return isinstance(runs, list) and bool(runs) and all(isinstance(r, dict) and "per_s_wall" in r for r in runs)


def _decide(data: dict[str, Any]) -> Lines:
    rows = [
        [
            "start-up only",
            0,
            _get(data, "startup", "wall_s"),
            _get(data, "startup", "cpu_s"),
            None,
            None,
            _get(data, "startup", "peak_rss_mib"),
        ]
    ]
    rows += [
        [
            _cell(r.get("requests")),
            r.get("requests"),
            r.get("wall_s"),
            r.get("cpu_s"),
            r.get("per_s_wall"),
            r.get("per_s_overall"),
            r.get("peak_rss_mib"),
        ]
        for r in data["runs"]
    ]
    lines = [f"A world of {_cell(_get(data, 'world', 'grants'))} grants; `privilog decide` in a new process:", ""]
    lines += _table(
        ["run", "requests", "wall, s", "CPU, s", "decisions/s beyond start-up", "decisions/s overall", "peak MiB"], rows
    )
    engine = data.get("engine")
    if isinstance(engine, dict):
        lines += [
            f"In process, the compiled engine: `allows` p50 {_cell(engine.get('allows_p50_us'))} µs, "
            f"`tabled` p50 {_cell(engine.get('tabled_p50_us'))} µs (load {_cell(engine.get('load_s'))} s).",
            "",
        ]
    crossover = data.get("crossover")
    if isinstance(crossover, dict) and crossover.get("why"):
        lines += [
            f"Against the Spark pipeline: {_cell(crossover['why'])} (s per 10^6 requests: decide "
            f"{_cell(crossover.get('decide_s_per_1e6'))}, pipeline {_cell(crossover.get('pipeline_s_per_1e6'))}).",
            "",
        ]
    return lines


def _is_attack(data: Any) -> bool:
    return isinstance(data, dict) and bool(_runs(data)) and all("ratios" in run for _, run in _runs(data))


def _attack(data: dict[str, Any]) -> Lines:
    targets = data.get("targets") or {}
    lines: Lines = []
    if targets:
        lines += [
            f"Targets (issue {_cell(data.get('issue'))}): under attack, decisions/s at least "
            f"{_cell(targets.get('decisions_per_s_ratio_at_least'))}× and p99 at most "
            f"{_cell(targets.get('p99_ratio_at_most'))}× the baseline's; the workers' RSS at most "
            f"{_cell(targets.get('rss_growth_mib_at_most'))} MiB more after the flood of bogus tokens.",
            "",
        ]
    rows = []
    for label, run in _runs(data):
        before = _get(run, "memory", "before", "workers_mib")
        after = _get(run, "memory", "after_settle", "workers_mib") or _get(run, "memory", "after", "workers_mib")
        growth = after - before if isinstance(before, (int, float)) and isinstance(after, (int, float)) else None
        rows.append(
            [
                f"`{label}`",
                _get(run, "baseline", "single_checks", "decisions_per_s"),
                _get(run, "ratios", "single_checks", "decisions_per_s_ratio"),
                _get(run, "ratios", "single_checks", "p99_ratio"),
                _get(run, "baseline", "batch_checks", "decisions_per_s"),
                _get(run, "ratios", "batch_checks", "decisions_per_s_ratio"),
                _get(run, "ratios", "batch_checks", "p99_ratio"),
                growth,
            ]
        )
    lines += _table(
        [
            "run",
            "single checks/s",
            "under attack: ×",
            "p99 ×",
            "batch decisions/s",
            "under attack: ×",
            "p99 ×",
            "RSS growth, MiB",
        ],
        rows,
    )
    return lines


def _is_pipeline(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and bool(_runs(data))
        and all(
            isinstance(run.get("pipeline"), dict) and isinstance(run.get("handwritten"), dict) for _, run in _runs(data)
        )
    )


def _pipeline(data: dict[str, Any]) -> Lines:
    rows = []
    for label, run in _runs(data):
        rows.append(
            [
                f"`{label}`",
                _get(run, "size", "requests"),
                _get(run, "pipeline", "wall_s"),
                _get(run, "handwritten", "wall_s"),
                _get(run, "ratio", "wall"),
                _get(run, "no_allowed_by", "wall_s"),
                _get(run, "ratio_no_allowed_by", "wall"),
                _get(run, "pipeline", "peak_tree_rss_mib"),
                _get(run, "agreement", "differing"),
            ]
        )
    lines = ["`pipeline decide` against the hand-written query (wall times in s):", ""]
    lines += _table(
        [
            "run",
            "requests",
            "pipeline",
            "hand-written",
            "ratio",
            "without allowed_by",
            "ratio",
            "pipeline peak MiB",
            "disagreements",
        ],
        rows,
    )
    unused = [(label, run["unused"]) for label, run in _runs(data) if isinstance(run.get("unused"), dict)]
    if unused:
        lines += ["`pipeline unused` beside `decide`:", ""]
        lines += _table(
            ["run", "decide, s", "unused, s", "peak MiB"],
            [
                [f"`{label}`", u.get("decide_wall_s"), u.get("wall_s"), u.get("peak_tree_rss_mib")]
                for label, u in unused
            ],
        )
    return lines


def _leaves(data: Any, prefix: str = "") -> Iterable[tuple[str, Any]]:
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _leaves(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(data, list) and any(isinstance(item, (dict, list)) for item in data):
        for i, item in enumerate(data):
            yield from _leaves(item, f"{prefix}[{i}]")
    else:
        yield prefix or "(the file)", data


GENERIC_ROWS = 200


def generic(data: Any) -> Lines:
    """Any JSON value: every figure in it, by its path (the first :data:`GENERIC_ROWS`)."""
    leaves = list(_leaves(data))
    lines = ["Its figures, by their path in the file:", ""]
    lines += _table(["path", "value"], [[f"`{path}`", _cell(value)] for path, value in leaves[:GENERIC_ROWS]])
    if len(leaves) > GENERIC_ROWS:
        lines += [f"({len(leaves) - GENERIC_ROWS:,} more in the file.)", ""]
    if not leaves:
        lines += ["(The file holds no figures.)", ""]
    return lines


RECORDS = ("summary", "engines")


def _flat(record: Any) -> bool:
    return isinstance(record, dict) and bool(record) and all(not isinstance(v, (dict, list)) for v in record.values())


def _is_records(data: Any) -> bool:
    return isinstance(data, dict) and any(
        isinstance(data.get(key), dict) and data[key] and all(_flat(r) for r in data[key].values()) for key in RECORDS
    )


def _records(data: dict[str, Any]) -> Lines:
    """A mapping of flat records (``summary``, ``engines``) as a table, then the file's other single figures."""
    lines: Lines = []
    for key in RECORDS:
        block = data.get(key)
        if isinstance(block, dict) and block and all(_flat(r) for r in block.values()):
            columns = list(dict.fromkeys(column for record in block.values() for column in record))
            lines += _table(
                [key, *[c.replace("_", " ") for c in columns]],
                [[f"`{name}`", *[record.get(c) for c in columns]] for name, record in block.items()],
            )
    singles = [
        (k, v) for k, v in data.items() if k not in (*RECORDS, "machine", "date") and not isinstance(v, (dict, list))
    ]
    if singles:
        lines += [", ".join(f"{k.replace('_', ' ')}: {_cell(v)}" for k, v in singles) + ".", ""]
    return lines


SHAPES: list[tuple[Callable[[Any], bool], Callable[[Any], Lines]]] = [
    (_is_engines, _engines),
    (_is_reference, _reference),
    (_is_serve, _serve),
    (_is_startup, _startup),
    (_is_store, _store),
    (_is_consistency, _consistency),
    (_is_decide, _decide),
    (_is_attack, _attack),
    (_is_pipeline, _pipeline),
    (_is_records, _records),
]


def figures(data: Any) -> Lines:
    """The file's figures as tables: its shape's, or :func:`generic` for a shape not known here (or
    one whose tables could not be made from it)."""
    for matches, render in SHAPES:
        try:
            if matches(data):
                return render(data)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):
            break
    return generic(data)


# ---------------------------------------------------------------- the page


# The headline benchmarks first; a folder not named here comes after these, by name.
FOLDERS = [
    "benchmarks/engines",
    "benchmarks/serve",
    "benchmarks/attack",
    "benchmarks/store",
    "benchmarks/consistency",
    "benchmarks/decide",
    "benchmarks/pipeline",
    "benchmarks",
]


def results_files(root: Path) -> list[Path]:
    """Every results file under ``root``: ``benchmarks/**/results*.json``, and the other JSON files the
    benchmarks write (``programs.json``, ``serve/logcost.json``, ...); by folder, newest recorded first."""
    found = sorted((root / "benchmarks").rglob("*.json"))

    def key(path: Path) -> tuple[int, str, str, str]:
        try:
            dates = [row["date"] for row in provenance(json.loads(path.read_text(encoding="utf-8"))) if row["date"]]
        except (OSError, ValueError):
            dates = []
        newest = max(dates, default="")
        # newest first: invert the date's characters' order for an ascending sort
        folder = path.parent.relative_to(root).as_posix()
        rank = FOLDERS.index(folder) if folder in FOLDERS else len(FOLDERS)
        return (rank, folder, "".join(chr(0x10FFFF - ord(c)) for c in newest), path.name)

    return sorted(found, key=key)


def section(root: Path, path: Path) -> Lines:
    """One results file's section."""
    rel = path.relative_to(root).as_posix()
    writer = _writer(root, path)
    doc = _docstring(writer) if writer else ""
    title, summary = _title(doc, f"`{rel}`")
    lines = [f"## {title}: `{path.name}`" if doc else f"## `{rel}`", ""]
    if summary:
        lines += [summary, ""]
    usage = _usage(doc)
    lines += [
        f"File `{rel}`, written by "
        + (f"`{writer.relative_to(root).as_posix()}`" if writer else "a benchmark not found here")
        + "."
        + (" Made by:" if usage else " The command that makes it is not in a docstring."),
        "",
    ]
    if usage:
        lines += ["```sh", usage, "```", ""]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        return [*lines, f"**The file could not be read:** {_cell(str(error))}", ""]
    recorded = data.get("command") if isinstance(data, dict) else None
    if isinstance(recorded, str):
        lines += [f"This run: `{_cell(recorded)}`.", ""]
    lines += _provenance_lines(data)
    lines += figures(data)
    return lines


def markdown(root: Path) -> str:
    """The benchmarks' page body: a section for each results file under ``root/benchmarks``."""
    files = results_files(root)
    lines = [f"{len(files)} results files, each as its benchmark wrote it.", ""]
    for path in files:
        lines += section(root, path)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    root = Path(__file__).resolve().parents[1]
    sys.stdout.write(markdown(root))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
