"""The REPL's policies and worlds from files and to them: ``load policy``, ``load world``,
``save world``, and ``diff`` against another policy.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from pathlib import Path

from privilog import dsl
from privilog.api import load_world_for
from privilog.dsl.files import read_policy_text
from privilog.engine.world import WorldFile, load_world, save_world
from privilog.repl.command import Line
from privilog.repl.state import ReplError, SessionState, count, summary


def load(session: SessionState, line: Line) -> str:
    """``load policy POLICY`` or ``load world WORLD``."""
    words = line.words
    if len(words) != 2 or words[0] not in ("policy", "world"):
        raise line.misused()
    return _load_policy(session, words[1]) if words[0] == "policy" else _load_world(session, words[1])


def _load_policy(session: SessionState, name: str) -> str:
    """Another policy over the same world; the session's rules are dropped."""
    path = dsl.resolve_policy_path(name)
    text = read_policy_text(path)
    policy = dsl.load_policy(str(path))
    unknown = sorted({g.action for g in session.world.grants} - set(policy.actions))
    if unknown:
        raise ReplError(
            f"policy {policy.name} has no action {', '.join(unknown)}, which the world grants; "
            f"load a world for it first (its actions are {', '.join(policy.actions)})"
        )
    session.rebuild(policy)
    dropped = len(session.rules)
    session.policy_name, session.policy_path, session.policy_text, session.rules = name, path, text, []
    title = f" ({policy.title})" if policy.title else ""
    lines = [f"loaded policy {policy.name}{title}: {len(policy.operations)} operations"]
    if dropped:
        lines.append(f"dropped the session's {count(dropped, 'rule')}")
    return "\n".join(lines)


def _load_world(session: SessionState, name: str) -> str:
    """Another world (leaving the store, if the session had one)."""
    path = Path(name).expanduser()
    world = load_world(path, session.policy.actions)
    world.journal = []
    left = f"; the session no longer follows the store {session.deployment.store.url}" if session.deployment else ""
    session.rebuild(world=world)
    session.world_path = path
    session.unsaved = False
    return f"loaded world {path}: {summary(world)}{left}"


def save(session: SessionState, line: Line) -> str:
    """``save world [PATH]``: to its own file, others' changes are taken in first."""
    words = line.words
    if not words or words[0] != "world" or len(words) > 2:
        raise line.misused()
    path = Path(words[1]).expanduser() if len(words) == 2 else session.world_path
    if path is None:
        raise ReplError("the world was not loaded from a file: name one, as in `save world world.yaml`")
    following = session.world.following
    notes: list[str] = []
    try:
        if following is not None and session.deployment is None and following.file.path == WorldFile(path).path:
            # its own file: others' changes since it was read are taken in first, never overwritten
            before = (following.taken_in, following.rereads, len(following.dropped))
            session.world.save()
            notes = session.news(before)
        else:
            save_world(session.world, path)
    except OSError as error:
        raise ReplError(f"cannot save the world to {path}: {error.strerror or error}") from None
    session.world_path = path
    session.unsaved = False
    return "\n".join([*notes, f"saved the world to {path}: {summary(session.world)}"])


def diff(session: SessionState, line: Line) -> str:
    """``diff POLICY [--world]``: how the session's policy and another decide differently."""
    from privilog.engine.compare import Comparison
    from privilog.render.report import render_diff, render_world_diff

    words = line.words
    against = [w for w in words if w != "--world"]
    if len(against) != 1 or len(words) - len(against) > 1:
        raise line.misused()
    other = dsl.load_policy(against[0])
    left = session.policy.name + (f"+{len(session.rules)} rules" if session.rules else "")
    right = against[0] if against[0] != left else f"{against[0]} (file)"
    comparison = Comparison(session.policy, other, left, right)
    if "--world" in words:
        load_world_for(other, session.world.to_data())  # the world must make sense to both
        return render_world_diff(left, right, comparison.compare_world(session.world))
    return render_diff(left, right, comparison.compare())


# ---- completion ----------------------------------------------------------------------


def complete_load(session: SessionState, words: list[str], current: str) -> Sequence[str]:
    """After load: policy or world, then a shipped policy's name or a path."""
    if not words:
        return ["policy", "world"]
    if len(words) == 1:
        return [*_shipped(), *_paths(current)] if words[0] == "policy" else _paths(current)
    return []


def complete_save(session: SessionState, words: list[str], current: str) -> Sequence[str]:
    """After save: world, then a path."""
    if not words:
        return ["world"]
    if len(words) == 1:
        return _paths(current)
    return []


def complete_diff(session: SessionState, words: list[str], current: str) -> Sequence[str]:
    """After diff: a shipped policy's name or a path, then --world."""
    return [*_shipped(), *_paths(current)] if not words else ["--world"]


def _shipped() -> list[str]:
    """The policies in rules/, by name."""
    return sorted(p.stem for p in dsl.rules_dir().glob("*.policy"))


def _paths(prefix: str) -> list[str]:
    """Files and folders that complete ``prefix``."""
    found = sorted(glob.glob(os.path.expanduser(prefix) + "*"))[:50]
    return [p + "/" if os.path.isdir(p) else p for p in found]
