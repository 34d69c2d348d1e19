"""The cache of checked policies (dsl/cache.py): the same policy as a parse, never a stale one, never an error."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from privilog.dsl import cache

from privilog import dsl

BASE = """\
policy base
actions READ, WRITE
entity namespace
namespace:
  get requires READ
"""

MINE = """\
policy mine
include "base"
namespace:
  update requires WRITE
"""


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    where = tmp_path / "cache"
    monkeypatch.setenv("PRIVILOG_CACHE_DIR", str(where))
    monkeypatch.delenv("PRIVILOG_CACHE", raising=False)
    cache.folder.cache_clear()
    yield where
    cache.folder.cache_clear()


def _entries(where: Path) -> list[Path]:
    return sorted(where.glob("*.policy.pickle"))


def _uncached(name: str, monkeypatch: pytest.MonkeyPatch) -> dsl.Policy:
    with monkeypatch.context() as m:
        m.setenv("PRIVILOG_CACHE", "off")
        cache.folder.cache_clear()
        policy = dsl.load_policy(name)
    cache.folder.cache_clear()
    return policy


@pytest.mark.parametrize("name", ["cdap", "cdap-5.1", "cdap-draft"])
def test_a_cached_policy_is_the_policy_parsed(cache_dir: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    first = dsl.load_policy(name)
    (entry,) = _entries(cache_dir)
    second = dsl.load_policy(name)  # from the entry
    assert second is not first and second == first == _uncached(name, monkeypatch)
    assert _entries(cache_dir) == [entry]
    assert dsl.format_policy(second) == dsl.format_policy(first)


def test_a_changed_policy_or_include_is_parsed_again(cache_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "base.policy").write_text(BASE)
    (tmp_path / "mine.policy").write_text(MINE)
    mine = str(tmp_path / "mine.policy")
    assert [op.qualified for op in dsl.load_policy(mine).operations] == ["namespace.get", "namespace.update"]
    assert len(_entries(cache_dir)) == 1
    (tmp_path / "base.policy").write_text(BASE.replace("get requires", "list requires"))
    assert [op.qualified for op in dsl.load_policy(mine).operations] == ["namespace.list", "namespace.update"]
    (tmp_path / "mine.policy").write_text(MINE.replace("update", "delete"))
    assert [op.qualified for op in dsl.load_policy(mine).operations] == ["namespace.list", "namespace.delete"]
    (tmp_path / "base.policy").unlink()
    with pytest.raises(dsl.PrivilogError, match="no policy `base`"):
        dsl.load_policy(mine)


def test_a_broken_entry_is_a_miss_and_is_written_again(cache_dir: Path) -> None:
    first = dsl.load_policy("cdap")
    (entry,) = _entries(cache_dir)
    entry.write_bytes(entry.read_bytes()[:100])
    assert dsl.load_policy("cdap") == first
    assert len(entry.read_bytes()) > 100
    entry.write_bytes(b"not a pickle at all")
    assert dsl.load_policy("cdap") == first


def test_a_folder_others_may_write_is_not_used(cache_dir: Path) -> None:
    cache_dir.mkdir(mode=0o700)
    os.chmod(cache_dir, 0o777)
    dsl.load_policy("cdap")
    assert _entries(cache_dir) == []


def test_no_cache_where_none_can_be_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("PRIVILOG_CACHE_DIR", str(tmp_path / "a-file" / "cache"))  # under a file: mkdir fails
    cache.folder.cache_clear()
    try:
        assert cache.folder() is None
        assert dsl.load_policy("cdap") == _uncached("cdap", monkeypatch)
    finally:
        cache.folder.cache_clear()


def test_off_writes_nothing(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _uncached("cdap", monkeypatch)
    assert not cache_dir.exists()


def test_the_cache_keeps_a_bounded_number_of_entries(cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache, "ENTRIES", 3)
    for n in range(5):
        (tmp_path / f"p{n}.policy").write_text(BASE.replace("policy base", f"policy p{n}"))
        dsl.load_policy(str(tmp_path / f"p{n}.policy"))
    assert len(_entries(cache_dir)) == 3


def test_the_grammar_read_from_the_cache_parses_as_the_one_built(cache_dir: Path) -> None:
    from lark.exceptions import UnexpectedInput
    from privilog.dsl.parser import Continuation, _lark

    text = (dsl.rules_dir() / "cdap.policy").read_text()
    broken = text.replace("requires", "requries", 1)
    built = _lark(postlex=Continuation())
    (saved,) = cache_dir.glob("*.lark.pickle")
    loaded = _lark(postlex=Continuation())
    assert loaded is not built and list(cache_dir.glob("*.lark.pickle")) == [saved]
    assert loaded.parse(text) == built.parse(text)
    errors = []
    for parser in (built, loaded):
        with pytest.raises(UnexpectedInput) as caught:
            parser.parse(broken)
        errors.append((type(caught.value), caught.value.line, caught.value.column, sorted(caught.value.expected)))
    assert errors[0] == errors[1]
    comments: list[str] = []
    with_comments = _lark(postlex=Continuation(), lexer_callbacks={"COMMENT": lambda t: comments.append(str(t)) or t})
    with_comments.parse(text)
    assert comments and all(c.startswith("#") for c in comments)
    saved.write_bytes(b"not what Lark saved")
    assert _lark(postlex=Continuation()).parse(text) == built.parse(text)  # broken: built again
