"""Saving a world read from YAML changes only what changed (issue 12, item 6)."""

from __future__ import annotations

import difflib
import json
import textwrap
from pathlib import Path

import pytest
import yaml
from privilog.engine.ids import EntityId
from privilog.engine.world import Grant, World, load_world, save_world

ACTIONS = ("READ", "WRITE", "EXECUTE", "ADMIN")
ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "privilog" / "samples" / "world.yaml"

COMMENTED = """\
# the sales team's deployment
instance: cdap
entities:
  - namespace:sales          # the team's namespace
  - "dataset:sales.orders"
grants:
  # alice runs the namespace
  - [user:alice, ALL, namespace:sales]
  - [user:bob, READ, 'dataset:sales.orders']   # read-only
  # analysts read everything
  - {principal: group:analysts, actions: [READ, EXECUTE], entity: namespace:sales}
members:
  - [user:dave, group:analysts]
admins: [user:root]  # change with care
"""


def facts(world: World) -> tuple[object, ...]:
    return world.instance, world.entities, world.grants, world.members, world.admins


def changed_lines(before: str, after: str) -> list[str]:
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
    return [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]


def unified(before: str, after: str) -> str:
    """What `diff -U0` shows, without the file names."""
    diff = difflib.unified_diff(before.splitlines(True), after.splitlines(True), n=0)
    return "".join(line for line in diff if not line.startswith(("---", "+++")))


def bound(tmp_path: Path, text: str, name: str = "world.yaml") -> tuple[Path, World]:
    path = tmp_path / name
    path.write_text(text)
    return path, load_world(path, ACTIONS, bind=True)


def test_a_grant_and_a_revoke_change_only_their_lines(tmp_path: Path) -> None:
    path, world = bound(tmp_path, COMMENTED)
    sales, orders = EntityId.parse("namespace:sales"), EntityId.parse("dataset:sales.orders")
    world.grant("user:root", [Grant("user:erin", "READ", orders)])
    world.revoke("user:root", [Grant("user:alice", "WRITE", sales), Grant("group:analysts", "EXECUTE", sales)])
    world.revoke("user:root", [Grant("user:bob", "READ", orders)])
    saved = path.read_text()
    assert unified(COMMENTED, saved) == textwrap.dedent("""\
        @@ -8,2 +8 @@
        -  - [user:alice, ALL, namespace:sales]
        -  - [user:bob, READ, 'dataset:sales.orders']   # read-only
        +  - [user:alice, [READ, EXECUTE, ADMIN], namespace:sales]
        @@ -11 +10,2 @@
        -  - {principal: group:analysts, actions: [READ, EXECUTE], entity: namespace:sales}
        +  - {principal: group:analysts, actions: [READ], entity: namespace:sales}
        +  - [user:erin, READ, dataset:sales.orders]
        """)
    assert "  # analysts read everything\n" in saved  # the comment above a removed line's neighbour stays
    assert facts(load_world(path, ACTIONS)) == facts(world)


def test_members_admins_and_entities_change_in_place(tmp_path: Path) -> None:
    path, world = bound(tmp_path, COMMENTED)
    world.add_members("user:root", [("user:erin", "group:analysts")])
    world.remove_members("user:root", [("user:dave", "group:analysts")])
    world.add_admins("user:root", ["group:admins"])
    world.add_entity("user:root", EntityId.parse("namespace:marketing"))
    world.forget_entities("user:root", [EntityId.parse("dataset:sales.orders")])
    assert unified(COMMENTED, path.read_text()) == textwrap.dedent("""\
        @@ -5 +5 @@
        -  - "dataset:sales.orders"
        +  - namespace:marketing
        @@ -13,2 +13,2 @@
        -  - [user:dave, group:analysts]
        -admins: [user:root]  # change with care
        +  - [user:erin, group:analysts]
        +admins: [user:root, group:admins]  # change with care
        """)
    assert facts(load_world(path, ACTIONS)) == facts(world)


def test_an_empty_list_gets_entries_in_block_style(tmp_path: Path) -> None:
    path, world = bound(tmp_path, "admins: [user:root]\ngrants: []\nmembers:\n")
    world.grant("user:root", [Grant("user:a", "READ", EntityId.parse("namespace:x"))])
    world.add_members("user:root", [("user:a", "group:g")])
    world.add_entity("user:root", EntityId.parse("namespace:x"))
    assert path.read_text() == (
        "admins: [user:root]\ngrants:\n  - [user:a, READ, namespace:x]\nmembers:\n  - [user:a, group:g]\n"
        "entities:\n  - namespace:x\n"
    )


def world_texts() -> list[tuple[str, str]]:
    """Every world written in the repository: the sample, and each `world:` of a scenario file, as written."""
    found = [("sample", SAMPLE.read_text())]
    for path in sorted((ROOT / "tests").rglob("*.yaml")):
        text = path.read_text()
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        if not isinstance(root, yaml.MappingNode):
            continue
        nodes = [v for k, v in root.value if k.value == "world"]
        for _, cases in (kv for kv in root.value if kv[0].value == "cases"):
            for case in getattr(cases, "value", []):
                if isinstance(case, yaml.MappingNode):
                    nodes += [v for k, v in case.value if k.value == "world"]
        for index, node in enumerate(n for n in nodes if isinstance(n, yaml.MappingNode)):
            if node.flow_style:
                continue  # an inline mapping: not a world file's shape
            start = text.rfind("\n", 0, node.start_mark.index) + 1
            lines = text[start : node.end_mark.index].splitlines()
            while lines and lines[-1].strip()[:1] in ("", "#"):
                lines.pop()  # blank lines and comments after the world belong to what follows it
            found.append((f"{path.name}:{index}", textwrap.dedent("\n".join(lines) + "\n")))
    return found


@pytest.mark.parametrize(("name", "text"), world_texts(), ids=lambda v: v if "\n" not in v else "")
def test_every_world_in_the_repository_saves_unchanged(tmp_path: Path, name: str, text: str) -> None:
    path, world = bound(tmp_path, text)
    save_world(world, path)
    assert path.read_text() == text
    extra = Grant("user:newcomer", "READ", EntityId.parse("namespace:elsewhere"))
    world.grants.add(extra)
    save_world(world, path)
    assert len(changed_lines(text, path.read_text())) in (1, 2)  # a line added, or a one-line list rewritten
    assert facts(load_world(path, ACTIONS)) == facts(world)
    world.grants.discard(extra)
    save_world(world, path)
    if "grants:" in text:  # else the key added stays, with no entries
        assert path.read_text() == text


def test_a_json_world_and_a_new_world_are_written_in_full(tmp_path: Path) -> None:
    data = {"grants": [["user:b", "READ", "namespace:x"], ["user:a", "ALL", "namespace:x"]], "admins": ["user:root"]}
    path, world = bound(tmp_path, json.dumps(data), "world.json")
    world.grant("user:root", [Grant("user:c", "READ", EntityId.parse("namespace:x"))])
    assert path.read_text() == yaml.safe_dump(world.to_data(), sort_keys=False, default_flow_style=None, width=100)
    fresh = World(admins={"user:root"})
    save_world(fresh, tmp_path / "new.yaml")
    assert (tmp_path / "new.yaml").read_text() == yaml.safe_dump(
        fresh.to_data(), sort_keys=False, default_flow_style=None, width=100
    )


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_text_beyond_ascii_and_windows_line_ends_are_kept(tmp_path: Path, newline: str) -> None:
    text = "# l'équipe « ventes »\ngrants:\n  - [user:zoe, READ, namespace:x]  # ✓ zoë\n  - [user:b, READ, namespace:x]\n"
    path = tmp_path / "world.yaml"
    path.write_bytes(text.replace("\n", newline).encode())
    world = load_world(path, ACTIONS, bind=True)
    x = EntityId.parse("namespace:x")
    world.grants.discard(Grant("user:b", "READ", x))
    world.grants.add(Grant("user:c", "READ", x))
    save_world(world, path)
    expected = text.replace("  - [user:b, READ, namespace:x]\n", "  - [user:c, READ, namespace:x]\n")
    assert path.read_bytes() == expected.replace("\n", newline).encode()
