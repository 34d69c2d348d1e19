"""Bar charts as inline SVG, tables and a self-contained HTML page (``privilog pipeline report --html``).

Drawn by hand rather than by a plotting library: the report needs two kinds of
chart (horizontal bars per category, columns over time, either stacked), which
take about a hundred lines of SVG; a plotting library would add a large
dependency (matplotlib and numpy) or a JavaScript bundle to inline (Vega-Lite),
and its text would need escaping of its own. Here every value from the data goes
through :func:`esc` and nothing else reaches the page: no script at all, and a
Content-Security-Policy that forbids scripts and any network access besides.

>>> '<script>' in bars("t", ["<script>"], [Series("n", "#000")], [[1]], "requests")
False
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

FONT = 12  # px; labels are sized by an estimate of 0.6 em a character
CHAR = 7.2
BAR = 18  # px per bar
GAP = 6
LABEL_CHARS = 48  # longer labels are cut, the whole one in the tooltip and the table
LONG = 40  # characters: a longer cell may break anywhere (JSON rows, file names have no spaces)
CSP = "default-src 'none'; style-src 'unsafe-inline'"

ALLOWED, DENIED = "#4c78a8", "#e45756"
TO_DENY, TO_ALLOW = "#e45756", "#54a24b"
NEUTRAL = "#72b7b2"


@dataclass(frozen=True)
class Series:
    """One stacked part of every bar: its name (in the legend) and colour."""

    name: str
    colour: str


def esc(value: object) -> str:
    """``value`` as text safe in HTML and SVG, in text and in quoted attributes.

    >>> esc('<img src=x onerror="alert(1)">')
    '&lt;img src=x onerror=&quot;alert(1)&quot;&gt;'
    """
    return html.escape(str(value), quote=True)


def number(n: int | float) -> str:
    """A count as people write it: ``12,345``.

    >>> number(12345)
    '12,345'
    """
    return f"{n:,}" if isinstance(n, int) else f"{n:,.1f}"


def ticks(top: int) -> list[int]:
    """Round axis values from 0 to at least ``top``: at most about six of them.

    >>> ticks(337)
    [0, 100, 200, 300, 400]
    >>> ticks(0)
    [0, 1]
    """
    if top <= 0:
        return [0, 1]
    raw = top / 5
    magnitude = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return [i * step for i in range(math.ceil(top / step) + 1)]


def _cut(label: str) -> str:
    return label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"


def _legend(series: Sequence[Series], x: float, y: float) -> str:
    parts = []
    for item in series:
        parts.append(
            f'<rect x="{x:.0f}" y="{y - 10:.0f}" width="12" height="12" fill="{esc(item.colour)}"/>'
            f'<text x="{x + 16:.0f}" y="{y:.0f}">{esc(item.name)}</text>'
        )
        x += 16 + CHAR * len(item.name) + 18
    return "".join(parts)


def _svg(width: float, height: float, title: str, body: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{esc(title)}" '
        f'font-family="sans-serif" font-size="{FONT}"><title>{esc(title)}</title>{body}</svg>'
    )


def bars(
    title: str, labels: Sequence[str], series: Sequence[Series], values: Sequence[Sequence[int]], axis: str
) -> str:
    """Horizontal bars, one per label, each the stack of its ``values`` (one per series); the
    counts written at the end of each bar, the x axis titled ``axis``."""
    left = CHAR * max([len(_cut(label)) for label in labels] + [8]) + 12
    totals = [sum(row) for row in values]
    scale_to = ticks(max(totals, default=0))
    plot = 520.0
    note = max([len(_bar_note(row, series)) for row in values] + [4]) * CHAR + 8
    top = 28.0 if len(series) > 1 else 8.0
    height = top + len(labels) * (BAR + GAP) + 44
    width = left + plot + note
    unit = plot / scale_to[-1]
    parts = [_legend(series, left, 16) if len(series) > 1 else ""]
    for tick in scale_to:
        x = left + tick * unit
        bottom = top + len(labels) * (BAR + GAP)
        parts.append(
            f'<line x1="{x:.1f}" y1="{top - 2:.0f}" x2="{x:.1f}" y2="{bottom:.0f}" stroke="#ddd"/>'
            f'<text x="{x:.1f}" y="{bottom + 14:.0f}" text-anchor="middle">{number(tick)}</text>'
        )
    for i, (label, row) in enumerate(zip(labels, values, strict=True)):
        y = top + i * (BAR + GAP)
        parts.append(
            f'<text x="{left - 6:.0f}" y="{y + BAR - 5:.0f}" text-anchor="end"><title>{esc(label)}</title>'
            f"{esc(_cut(label))}</text>"
        )
        x = left
        for item, value in zip(series, row, strict=True):
            if value:
                parts.append(
                    f'<rect x="{x:.1f}" y="{y:.0f}" width="{value * unit:.1f}" height="{BAR}" '
                    f'fill="{esc(item.colour)}">'
                    f"<title>{esc(label)}: {number(value)} {esc(item.name)}</title></rect>"
                )
            x += value * unit
        parts.append(f'<text x="{x + 6:.1f}" y="{y + BAR - 5:.0f}">{esc(_bar_note(row, series))}</text>')
    parts.append(
        f'<text x="{left + plot / 2:.0f}" y="{height - 6:.0f}" text-anchor="middle" '
        f'font-weight="bold">{esc(axis)}</text>'
    )
    return _svg(width, height, title, "".join(parts))


def _bar_note(row: Sequence[int], series: Sequence[Series]) -> str:
    """The counts at the end of a bar: its one count, or each nonzero part named."""
    if len(series) == 1:
        return number(row[0])
    named = [f"{number(v)} {s.name}" for s, v in zip(series, row, strict=True) if v]
    return ", ".join(named) or "0"


def columns(
    title: str,
    labels: Sequence[str],
    series: Sequence[Series],
    values: Sequence[Sequence[int]],
    x_axis: str,
    y_axis: str,
) -> str:
    """Vertical stacked columns in order (a time line): ``labels`` under them, thinned to fit."""
    left, top, plot_height = 64.0, 28.0, 220.0
    width_each = max(6.0, min(36.0, 760.0 / max(len(labels), 1)))
    plot_width = width_each * len(labels)
    scale_to = ticks(max((sum(row) for row in values), default=0))
    unit = plot_height / scale_to[-1]
    every = max(1, math.ceil(CHAR * max((len(label) for label in labels), default=1) / width_each / 0.9))
    height = top + plot_height + 56
    width = left + max(plot_width, 300.0) + 24
    bottom = top + plot_height
    parts = [_legend(series, left, 16)]
    for tick in scale_to:
        y = bottom - tick * unit
        parts.append(
            f'<line x1="{left:.0f}" y1="{y:.1f}" x2="{left + plot_width:.0f}" y2="{y:.1f}" stroke="#ddd"/>'
            f'<text x="{left - 6:.0f}" y="{y + 4:.1f}" text-anchor="end">{number(tick)}</text>'
        )
    for i, (label, row) in enumerate(zip(labels, values, strict=True)):
        x = left + i * width_each
        y = bottom
        for item, value in zip(series, row, strict=True):
            if value:
                y -= value * unit
                parts.append(
                    f'<rect x="{x + 1:.1f}" y="{y:.1f}" width="{width_each - 2:.1f}" height="{value * unit:.1f}" '
                    f'fill="{esc(item.colour)}"><title>{esc(label)}: {number(value)} {esc(item.name)}</title></rect>'
                )
        if i % every == 0:
            parts.append(
                f'<text x="{x + width_each / 2:.1f}" y="{bottom + 14:.0f}" text-anchor="middle">{esc(label)}</text>'
            )
    parts.append(
        f'<text x="{left + plot_width / 2:.0f}" y="{height - 8:.0f}" text-anchor="middle" '
        f'font-weight="bold">{esc(x_axis)}</text>'
        f'<text transform="translate(14 {top + plot_height / 2:.0f}) rotate(-90)" text-anchor="middle" '
        f'font-weight="bold">{esc(y_axis)}</text>'
    )
    return _svg(width, height, title, "".join(parts))


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], caption: str = "") -> str:
    """An HTML table; numbers right-aligned and written with thousands separators."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = (_cell(v) for v in row)
        body.append(f"<tr>{''.join(cells)}</tr>")
    title = f"<caption>{esc(caption)}</caption>" if caption else ""
    return (
        f'<div class="numbers"><table>{title}<thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'
    )


def _cell(value: object) -> str:
    if isinstance(value, int | float):
        return f'<td class="n">{number(value)}</td>'
    return f'<td class="long">{esc(value)}</td>' if len(str(value)) > LONG else f"<td>{esc(value)}</td>"


STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 1100px; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
.figures { display: flex; flex-wrap: wrap; gap: 1em; }
.figure { border: 1px solid #ddd; border-radius: 4px; padding: 0.5em 1em; }
.figure b { display: block; font-size: 1.4em; }
svg { display: block; margin: 0.5em 0; max-width: 100%; height: auto; }
.numbers { max-height: 26em; overflow-y: auto; display: inline-block; max-width: 100%; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 2px 8px; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
caption { text-align: left; color: #555; padding: 2px 0; }
td.long { overflow-wrap: anywhere; min-width: 16em; }
p.note { color: #555; }
"""


def figures(items: Sequence[tuple[str, int | str]]) -> str:
    """Headline numbers in boxes: (what, value)."""
    boxes = "".join(
        f'<div class="figure"><b>{number(v) if isinstance(v, int) else esc(v)}</b>{esc(what)}</div>'
        for what, v in items
    )
    return f'<div class="figures">{boxes}</div>'


def section(title: str, *parts: str, note: str = "") -> str:
    """A titled part of the page: a heading, an optional note (escaped) and its charts and tables."""
    explained = f'<p class="note">{esc(note)}</p>' if note else ""
    return f"<section><h2>{esc(title)}</h2>{explained}{''.join(parts)}</section>"


def page(title: str, parts: Sequence[str]) -> str:
    """One self-contained HTML page: inline CSS and SVG, no script, nothing fetched."""
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{esc(title)}</title>'
        f"<style>{STYLE}</style></head><body><h1>{esc(title)}</h1>{''.join(parts)}</body></html>\n"
    )
