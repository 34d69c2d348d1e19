"""Only a group or a role has members, in every reader of a world and in every change (issue 33, item 3).

A user "in" ``user:root`` would hold root's grants and be an admin through root.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from privilog.engine.ids import IdError
from privilog.engine.world import World, WorldError, check_membership, load_world, parse_located, world_from_data
from privilog.engine.world.log import Change

from privilog.store.base import check_items

ACTIONS = ("READ", "WRITE", "EXECUTE", "ADMIN")
NAMED = "`user:eve` cannot be a member of `user:root`: only a group or a role has members (group:NAME, role:NAME)"


def test_a_membership_in_a_user_is_refused_with_one_line_naming_it() -> None:
    assert check_membership("user:eve", "group:eng") == ("user:eve", "group:eng")
    assert check_membership("group:eng", "role:ops") == ("group:eng", "role:ops")
    with pytest.raises(IdError) as raised:
        check_membership("user:eve", "user:root")
    assert str(raised.value) == NAMED


@pytest.mark.parametrize("members", [[["user:eve", "user:root"]], [{"principal": "user:eve", "group": "user:root"}]])
def test_a_world_file_with_a_user_in_a_user_is_refused(tmp_path: Path, members: list) -> None:
    data = {"admins": ["user:root"], "members": [["user:ann", "group:eng"], *members]}
    with pytest.raises(WorldError) as raised:
        world_from_data(data, ACTIONS)
    assert NAMED in str(raised.value) and "\n" not in str(raised.value)
    for name, text in (("world.yaml", f"members:\n  - {json.dumps(members[0])}\n"), ("world.json", json.dumps(data))):
        (tmp_path / name).write_text(text)
        with pytest.raises(WorldError, match="cannot be a member of `user:root`"):
            load_world(tmp_path / name, ACTIONS)
    with pytest.raises(WorldError, match=rf"<world>:2:.*{NAMED[:30]}"):
        parse_located(f"members:\n  - {json.dumps(members[0])}\n", ACTIONS)


def test_a_members_table_with_a_user_in_a_user_is_refused(tmp_path: Path) -> None:
    with (tmp_path / "members.csv").open("w", newline="") as out:
        csv.writer(out).writerows([("principal", "group"), ("user:ann", "group:eng"), ("user:eve", "user:root")])
    with pytest.raises(WorldError, match=r"members\.csv.*3.*cannot be a member of `user:root`"):
        load_world(tmp_path, ACTIONS)


def test_a_world_refuses_the_change_and_the_store_the_item() -> None:
    world = World(admins={"user:root"})
    with pytest.raises(WorldError, match="cannot be a member of `user:root`"):
        world.add_members("user:root", [("user:ann", "group:eng"), ("user:eve", "user:root")])
    assert world.members == set()
    with pytest.raises(IdError, match="cannot be a member of `user:root`"):
        check_items("member.add", [["user:eve", "user:root"]])
    # one there already (read before this check) can still be taken out
    assert check_items("member.remove", [["user:eve", "user:root"]]) == (("user:eve", "user:root"),)


def test_a_world_log_with_a_user_in_a_user_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVILOG_WORLD_LOG_BYTES", "100000")  # no compaction
    path = tmp_path / "world.yaml"
    path.write_text("admins: [user:root]\n")
    world = load_world(path, ACTIONS, bind=True)
    world.add_members("user:root", [("user:ann", "group:eng")])
    log = path.with_name(path.name + ".log")
    # a line written by another program (checksummed as the log writes one) is read as the file is
    log.write_bytes(log.read_bytes() + Change("member.add", "user:root", (("user:eve", "user:root"),), Change.now()).line())
    with pytest.raises(WorldError, match=r"world\.yaml\.log:2: .*cannot be a member of `user:root`"):
        load_world(path, ACTIONS)
