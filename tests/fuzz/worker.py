"""A fuzz worker: ``python -m tests.fuzz.worker`` runs one case a line from its standard input and
answers one verdict a line (see :mod:`tests.fuzz.harness`).

The answers go to a copy of the original standard output; file descriptors 1 and 2
then point at the log, so that nothing privilog prints can garble an answer.
Anything a kind's ``run`` raises is a failure, with its traceback.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import sys
import tempfile
import traceback
from functools import cached_property
from pathlib import Path
from typing import Any

from tests.fuzz.harness import KINDS, ROOT, Verdict, failure, kind_module, refused

MEMORY = 4 << 30  # bytes of address space: a blow-up is a MemoryError here, not the machine's OOM killer


class Context:
    """What a worker's cases share, each made once: the policy, the sample world, a scratch folder."""

    def __init__(self) -> None:
        self.scratch = Path(tempfile.mkdtemp(prefix="privilog-fuzz-"))
        self.server = os.environ.get("PRIVILOG_FUZZ_SERVER", "")
        self.tokens = json.loads(os.environ.get("PRIVILOG_FUZZ_TOKENS", "{}"))

    @cached_property
    def policy(self) -> Any:
        from privilog import dsl

        return dsl.load_policy("cdap")

    @cached_property
    def sample_world(self) -> Path:
        return ROOT / "privilog" / "samples" / "world.yaml"

    @cached_property
    def world_data(self) -> dict[str, Any]:
        import yaml

        data: dict[str, Any] = yaml.safe_load(self.sample_world.read_text())
        return data

    @cached_property
    def authorizer(self) -> Any:
        """The cdap policy over the sample world, for questions that change nothing."""
        from privilog.api import load

        return load(self.policy, self.world_data)

    def file(self, name: str, content: bytes) -> Path:
        """``content`` written to ``name`` in the scratch folder (replacing what was there)."""
        path = self.scratch / name
        path.write_bytes(content)
        return path


def serve() -> None:
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    log = os.dup(2)
    os.dup2(log, 1)
    sys.stdout = io.TextIOWrapper(os.fdopen(os.dup(2), "wb"), line_buffering=True)
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
    context = Context()
    modules = {kind: kind_module(kind) for kind in KINDS}
    for module in modules.values():
        warm = getattr(module, "warm", None)
        if warm is not None:
            warm(context)
    channel.write(json.dumps({"outcome": "ready", "detail": ""}) + "\n")
    for line in sys.stdin:
        message = json.loads(line)
        verdict = run_one(modules[message["kind"]], message["case"], context)
        channel.write(json.dumps(verdict.to_json()) + "\n")


def run_one(module: Any, case: dict[str, Any], context: Context) -> Verdict:
    """One case: privilog's own error is a refusal, any other exception a failure (SystemExit too)."""
    from privilog.dsl.errors import PrivilogError

    try:
        with contextlib.redirect_stderr(sys.stdout):
            verdict: Verdict = module.run(case, context)
            return verdict
    except PrivilogError as error:
        return refused(str(error).split("\n", 1)[0])
    except BaseException as error:  # the harness's oracle: nothing may escape but privilog's errors
        return failure(f"{type(error).__name__}: {error}\n{traceback.format_exc()}")


if __name__ == "__main__":
    serve()
