"""Scenario files: the shipped scenario files mutated as text and as bytes, run as ``privilog test``
runs them (``run_scenarios``). Failed cases are answers; only privilog's own errors may come out."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from tests.fuzz.harness import ROOT, Case, Verdict, answered, failure, refused
from tests.fuzz.mutate import decode, encode, mutate_bytes, mutate_text

SOURCES = [ROOT / "privilog" / "samples" / "scenario.yaml", *sorted((ROOT / "tests" / "scenarios").glob("*/*.yaml"))]


def generate(rng: random.Random, count: int) -> Iterator[Case]:
    texts = [p.read_text() for p in SOURCES]
    for _ in range(count):
        text = rng.choice(texts)
        if rng.random() < 0.7:
            yield {"text": mutate_text(rng, text)}
        else:
            yield {"bytes": encode(mutate_bytes(rng, text.encode()))}


def run(case: Case, context: Any) -> Verdict:
    from privilog.testing.scenario import run_scenarios

    context.file("world.yaml", context.sample_world.read_bytes())  # what the sample scenario names
    data = decode(case["bytes"]) if "bytes" in case else case["text"].encode("utf-8", "surrogatepass")
    path = context.file("scenario.yaml", data)
    ran = run_scenarios([path])
    errors = [r for r in ran.results if r.error]
    if errors:  # privilog's own error for each case or file that could not run; the others ran
        if any("\n" in r.detail or not r.detail for r in errors):
            return failure(f"an error that is not one line: {errors[0].detail[:500]!r}")
        return refused(errors[0].detail)
    return answered(ran.summary())
