"""Policy texts: sentences of the grammar (hypothesis's ``from_lark``, as ``tests/dsl/test_fuzz.py``
draws them), and the shipped policies with text and bytes mutated.

Each is written to a file and loaded as ``--policy`` loads it (the prelude and includes
resolved, every check run); a policy that loads is compiled over the sample world and
asked a few requests. Only privilog's own errors may come out.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.fuzz.harness import ROOT, Case, Verdict, decide_samples
from tests.fuzz.mutate import decode, encode, mutate_bytes, mutate_text

SHIPPED = sorted((ROOT / "rules").glob("*.policy"))
REQUESTS = [
    ("user:bob", "dataset.read", "dataset:sales.orders"),
    ("user:alice", "namespace.delete", "namespace:sales"),
    ("user:eve", "namespace.get", "namespace:marketing"),
]


def grammar_sentences(rng: random.Random, count: int) -> list[str]:
    """``count`` policies drawn by hypothesis from the grammar, seeded from ``rng``."""
    from hypothesis import HealthCheck, Phase, given, seed, settings
    from hypothesis import strategies as st

    from tests.dsl.test_fuzz import operation_blocks, policies, raw_policies

    drawn: list[str] = []
    strategy = st.one_of(policies(), operation_blocks(), raw_policies())

    @seed(rng.randrange(1 << 32))
    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(text: str) -> None:
        drawn.append(text)

    if count:
        collect()
    return drawn[:count]


def generate(rng: random.Random, count: int) -> Iterator[Case]:
    sources = [p.read_bytes() for p in SHIPPED]
    sentences = iter(grammar_sentences(rng, count * 2 // 5))
    for _ in range(count):
        sentence = next(sentences, None)
        if sentence is not None:
            yield {"text": sentence}
        elif rng.random() < 0.5:
            yield {"text": mutate_text(rng, rng.choice(sources).decode("utf-8"))}
        else:
            yield {"bytes": encode(mutate_bytes(rng, rng.choice(sources)))}


def run(case: Case, context: Any) -> Verdict:
    from privilog.engine.authorizer import Authorizer

    from privilog import dsl

    data = decode(case["bytes"]) if "bytes" in case else case["text"].encode("utf-8", "surrogatepass")
    path: Path = context.file("fuzz.policy", data)
    policy = dsl.load_policy(str(path))  # a PrivilogError here is the worker's `refused`
    authorizer = Authorizer(policy, _world(policy, context))
    return decide_samples(authorizer, REQUESTS)


def _world(policy: Any, context: Any) -> Any:
    """The sample world, or an empty one where the policy's actions do not fit it."""
    from privilog.dsl.errors import PrivilogError
    from privilog.engine.world import World

    from privilog.api import load_world_for

    try:
        return load_world_for(policy, context.sample_world)
    except PrivilogError:
        return World()
