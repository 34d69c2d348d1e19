"""Shell completion, answered through a real bash with the script ``privilog completion bash`` prints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
WORLD = ROOT / "privilog" / "samples" / "world.yaml"

DRIVER = r"""
eval "$(privilog completion bash)"
line="$1"
COMP_LINE="$line"; COMP_POINT=${#line}
read -ra COMP_WORDS <<< "$line"
[[ "$line" == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
_python_argcomplete privilog
printf '%s\n' "${COMPREPLY[@]}"
"""


def complete(line: str) -> list[str]:
    """What bash offers after ``line`` (bash splits words at `:`, so it offers what follows the last one)."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-c", DRIVER, "complete", line], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return sorted(word.strip() for word in done.stdout.splitlines() if word.strip())


def test_commands_and_subcommands_complete() -> None:
    assert complete("privilog ch") == ["check"]
    assert {"check", "why", "who", "pipeline", "completion", "store"} <= set(complete("privilog "))
    assert "--help" not in complete("privilog ")
    assert complete("privilog store i") == ["import", "init"]
    assert complete("privilog pipeline d") == ["decide"]


def test_options_complete() -> None:
    assert complete("privilog --ver") == ["--version"]
    assert {"--world", "--policy", "--store", "--explain"} <= set(complete("privilog check --"))


def test_policies_operations_principals_and_entities_complete_from_what_the_line_names() -> None:
    assert complete("privilog check --policy cdap-") == ["cdap-4.2", "cdap-5.1", "cdap-draft", "cdap-draft-revised", "cdap-proposed"]
    from privilog import dsl

    def operations(policy: str) -> list[str]:
        return sorted(op.qualified for op in dsl.load_policy(policy).operations)

    assert operations("cdap") != operations("cdap-draft")
    assert complete("privilog check user:a ") == operations("cdap")  # the default policy's
    assert complete("privilog check --policy cdap-draft user:a ") == operations("cdap-draft")
    assert complete("privilog check user:a namespace.delete") == [
        op for op in operations("cdap") if op.startswith("namespace.delete")
    ]
    assert complete(f"privilog why --world {WORLD} us") == ["user:alice", "user:bob", "user:carol", "user:dave", "user:root"]
    entities = complete(f"privilog why --world {WORLD} user:alice namespace.delete namespace:")
    assert entities == ["marketing", "sales"]


def test_a_world_that_cannot_be_read_offers_nothing_and_prints_nothing(tmp_path: Path) -> None:
    broken = tmp_path / "w.yaml"
    broken.write_text("grants: [[user:a, NOPE, namespace:x]]\n")
    assert complete(f"privilog why --world {broken} user:") == []


def test_the_scripts_for_zsh_and_fish_name_privilog() -> None:
    for shell in ("zsh", "fish"):
        done = subprocess.run([BIN / "privilog", "completion", shell], capture_output=True, text=True, check=True)
        assert "privilog" in done.stdout and "_ARGCOMPLETE" in done.stdout


def test_version() -> None:
    from importlib.metadata import version

    done = subprocess.run([BIN / "privilog", "--version"], capture_output=True, text=True, check=True)
    assert done.stdout == f"privilog {version('privilog')}\n"
