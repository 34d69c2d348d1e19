"""`--backend`: the compiled engine by default, the reference on request, the same answers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = "privilog/samples/world.yaml"


def privilog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "privilog", *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize(
    "request_args",
    [
        ("user:bob", "dataset.read", "dataset:sales.orders"),
        ("user:bob", "dataset.read", "dataset:marketing.campaigns"),
        ("user:bob", "namespace.delete", "namespace:sales"),
        ("user:alice", "namespace.get", "namespace:sales"),
    ],
)
def test_both_backends_print_the_same_explanation_and_exit_code(request_args: tuple[str, str, str]) -> None:
    compiled = privilog("why", *request_args, "--world", SAMPLE)
    reference = privilog("why", *request_args, "--world", SAMPLE, "--backend", "pydatalog")
    assert compiled.returncode in (0, 1), compiled.stderr
    assert (compiled.returncode, compiled.stdout) == (reference.returncode, reference.stdout)


def test_an_unknown_backend_is_bad_input() -> None:
    done = privilog("check", "user:bob", "dataset.read", "dataset:sales.orders", "--backend", "souffle")
    assert done.returncode == 2
    assert "--backend must be one of compiled, pydatalog, not `souffle`" in done.stderr and "Traceback" not in done.stderr
