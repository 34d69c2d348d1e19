"""World files and world data: the sample world mutated as YAML text, as bytes (YAML and JSON), and as
data (a value somewhere replaced by one of another type, or by a crafted id) given to the API.

A world that loads is compiled with the cdap policy and asked a few requests.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

from tests.fuzz.harness import ROOT, Case, Verdict, decide_samples
from tests.fuzz.mutate import FRAGMENTS, decode, encode, look_alike, mutate_bytes, mutate_text
from tests.fuzz.policies import REQUESTS

SAMPLE = ROOT / "privilog" / "samples" / "world.yaml"
ODD_VALUES: list[Any] = [
    None,
    True,
    0,
    -1,
    1.5,
    10**30,
    "",
    [],
    {},
    [[]],
    {"": None},
    "user:root",
    "ALL",
    "namespace:sales",
    ["user:eve", "ADMIN", "namespace:sales"],
    "x" * 2000,
]


def _sample_data() -> dict[str, Any]:
    import yaml

    data: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    return data


def _places(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _places(inner, (*path, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from _places(inner, (*path, index))


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _replace(copy[path[0]], path[1:], new)
    return copy


def mutate_data(rng: random.Random, data: Any, root: bool = False) -> Any:
    """``data`` with a few values replaced: another type, a look-alike string, a fragment; the whole
    of it too when ``root``."""
    for _ in range(rng.randint(1, 3)):
        places = list(_places(data))[0 if root else 1 :]
        if not places:
            return data
        where = rng.choice(places)
        old = data
        for key in where:
            old = old[key]
        if isinstance(old, str) and rng.random() < 0.6:
            new: Any = look_alike(rng, old) if rng.random() < 0.5 else mutate_text(rng, old, 1)
        else:
            new = rng.choice([*ODD_VALUES, rng.choice(FRAGMENTS)])
        data = _replace(data, where, new)
    return data


def generate(rng: random.Random, count: int) -> Iterator[Case]:
    text = SAMPLE.read_text()
    data = _sample_data()
    as_json = json.dumps(data).encode()
    for _ in range(count):
        how = rng.randrange(4)
        if how == 0:
            yield {"suffix": ".yaml", "text": mutate_text(rng, text)}
        elif how == 1:
            yield {"suffix": ".yaml", "bytes": encode(mutate_bytes(rng, text.encode()))}
        elif how == 2:
            yield {"suffix": ".json", "bytes": encode(mutate_bytes(rng, as_json))}
        else:
            yield {"data": mutate_data(rng, data)}


def world_file(case: Case, context: Any, name: str = "world") -> Any:
    """The case's world written to a file in the scratch folder (its path), or its data."""
    if "data" in case:
        return case["data"]
    data = decode(case["bytes"]) if "bytes" in case else case["text"].encode("utf-8", "surrogatepass")
    return context.file(name + case["suffix"], data)


def run(case: Case, context: Any) -> Verdict:
    from privilog.engine.authorizer import Authorizer

    from privilog.api import load_world_for

    world = load_world_for(context.policy, world_file(case, context))
    authorizer = Authorizer(context.policy, world)
    return decide_samples(authorizer, REQUESTS)
