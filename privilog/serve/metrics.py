"""Prometheus metrics, kept in plain dictionaries and written in the text exposition format.

Written by hand rather than with ``prometheus_client``: a handful of counters and
histograms, updated on the event loop's one thread (no locks needed), cost a
dictionary update each; the format is a page of text.

>>> m = Metrics()
>>> m.decided("dataset.read", True, 4e-6)
>>> print("\\n".join(line for line in m.render({}).splitlines() if "dataset.read" in line and "_bucket" not in line))
privilog_decisions_total{operation="dataset.read",result="allow"} 1
privilog_decision_seconds_sum{operation="dataset.read"} 4e-06
privilog_decision_seconds_count{operation="dataset.read"} 1
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

REQUEST_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
DECISION_BUCKETS = (1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 1e-3, 1e-2)


@dataclass
class Histogram:
    """Counts of observations at or under each bucket's bound, their sum and their count."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float, count: int = 1) -> None:
        self.counts[bisect_left(self.bounds, value)] += count
        self.total += value * count
        self.count += count

    def lines(self, name: str, labels: str) -> list[str]:
        sep = "," if labels else ""
        out, running = [], 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += n
            le = "+Inf" if bound == float("inf") else repr(bound)
            out.append(f'{name}_bucket{{{labels}{sep}le="{le}"}} {running}')
        out.append(f"{name}_sum{{{labels}}} {self.total!r}")
        out.append(f"{name}_count{{{labels}}} {self.count}")
        return out


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Metrics:
    """What the server counts: requests, decisions, changes, reloads, and their latencies."""

    def __init__(self) -> None:
        self.requests: Counter[tuple[str, int]] = Counter()
        self.request_seconds: dict[str, Histogram] = {}
        self.decisions: Counter[tuple[str, str]] = Counter()
        self.decision_seconds: dict[str, Histogram] = {}
        self.changes: Counter[tuple[str, str]] = Counter()
        self.reloads: Counter[str] = Counter()

    def requested(self, route: str, status: int, seconds: float) -> None:
        self.requests[(route, status)] += 1
        histogram = self.request_seconds.get(route)
        if histogram is None:
            histogram = self.request_seconds[route] = Histogram(REQUEST_BUCKETS)
        histogram.observe(seconds)

    def decided(self, operation: str, allowed: bool, seconds: float, count: int = 1) -> None:
        """``count`` decisions of one operation and result that took ``seconds`` each (on average)."""
        self.decisions[(operation, "allow" if allowed else "deny")] += count
        histogram = self.decision_seconds.get(operation)
        if histogram is None:
            histogram = self.decision_seconds[operation] = Histogram(DECISION_BUCKETS)
        histogram.observe(seconds, count)

    def render(self, gauges: dict[str, tuple[str, float]]) -> str:
        """The exposition text; ``gauges``: name (with labels, if any) -> (help, value), read when scraped."""
        out: list[str] = []

        def family(name: str, kind: str, text: str) -> None:
            out.append(f"# HELP {name} {text}")
            out.append(f"# TYPE {name} {kind}")

        def counter(name: str, text: str, labels: tuple[str, ...], counts: Counter[Any]) -> None:
            family(name, "counter", text)
            for key, n in sorted(counts.items()):
                values = key if isinstance(key, tuple) else (key,)
                pairs = ",".join(f'{label}="{_label(str(v))}"' for label, v in zip(labels, values, strict=True))
                out.append(f"{name}{{{pairs}}} {n}")

        def histograms(name: str, text: str, label: str, by: dict[str, Histogram]) -> None:
            family(name, "histogram", text)
            for value, histogram in sorted(by.items()):
                out.extend(histogram.lines(name, f'{label}="{_label(value)}"'))

        counter(
            "privilog_http_requests_total",
            "HTTP requests answered, by route and status.",
            ("route", "status"),
            self.requests,
        )
        histograms(
            "privilog_http_request_seconds", "Time to answer a request, by route.", "route", self.request_seconds
        )
        counter(
            "privilog_decisions_total",
            "Decisions made, by operation and result.",
            ("operation", "result"),
            self.decisions,
        )
        histograms(
            "privilog_decision_seconds",
            "Time to decide one request in the engine, by operation.",
            "operation",
            self.decision_seconds,
        )
        counter(
            "privilog_changes_total",
            "Changes asked of the store, by kind and outcome.",
            ("kind", "outcome"),
            self.changes,
        )
        counter("privilog_policy_reloads_total", "Policy reloads, by result.", ("result",), self.reloads)
        for name, (text, value) in gauges.items():
            family(name.partition("{")[0], "gauge", text)
            out.append(f"{name} {value!r}")
        return "\n".join(out) + "\n"
