"""Hostile files and arguments on the command line (issue 18): exit 2, one line on stderr, never an allow."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from privilog.dsl.errors import PrivilogError
from privilog.engine.authorizer import RequestError

import privilog
from privilog import dsl
from privilog.cli import main

CHECK = ["check", "user:eve", "namespace.delete", "namespace:ns1"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code, out, err = run(capsys, *argv)
    assert code == 2, (out, err)
    assert "ALLOW" not in out
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


# ---- files that are not what they claim ---------------------------------------------------


def test_devices_fifos_and_folders_are_refused_everywhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "world.yaml"
    os.mkfifo(fifo)
    assert "not a regular file" in refused(capsys, *CHECK, "--world", "/dev/zero")
    assert "not a regular file" in refused(capsys, *CHECK, "--world", str(fifo))
    for scenario in ("/dev/zero", str(fifo)):  # a scenario file that cannot be run is that file's error
        code, out, err = run(capsys, "test", scenario)
        assert code == 2 and err == ""
        assert "ERROR" in out and "not a regular file" in out and out.strip().endswith("0 passed, 0 failed, 1 error")
    assert "no policy" in refused(capsys, *CHECK, "--policy", "/dev/zero")
    assert "no world tables here" in refused(capsys, *CHECK, "--world", str(tmp_path / "..") + "/" + tmp_path.name)


def test_the_limits_are_configurable(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    world = tmp_path / "w.yaml"
    world.write_text("admins: [user:root]\n")
    monkeypatch.setenv("PRIVILOG_MAX_WORLD_BYTES", "8")
    assert "PRIVILOG_MAX_WORLD_BYTES" in refused(capsys, *CHECK, "--world", str(world))
    monkeypatch.setenv("PRIVILOG_MAX_WORLD_BYTES", "lots")
    assert "must be a positive number of bytes" in refused(capsys, *CHECK, "--world", str(world))


def test_a_file_that_is_not_a_policy_is_not_echoed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    secret = tmp_path / "passwd"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\nsecret-line: hunter2\n")
    err = refused(capsys, *CHECK, "--policy", str(secret))
    assert "not a policy" in err and "root:x" not in err and "hunter2" not in err
    assert "hunter2" not in refused(capsys, "fmt", str(secret))
    # a policy that starts like one keeps its caret and line
    broken = tmp_path / "b.policy"
    broken.write_text("policy b\nactions READ,\n")
    _, _, err = run(capsys, *CHECK, "--policy", str(broken))
    assert "actions READ," in err


def test_a_world_with_a_key_written_twice_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    world = tmp_path / "w.yaml"
    world.write_text("grants: [[user:eve, ADMIN, namespace:ns1]]\ngrants: []\n")
    assert refused(capsys, *CHECK, "--world", str(world)).startswith(f"privilog: {world}:2:1: the key `grants` is written twice")


# ---- fmt --write ----------------------------------------------------------------------------


def test_fmt_write_refuses_a_shipped_policy_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    shipped = dsl.rules_dir() / "cdap.policy"
    before = shipped.read_bytes()
    err = refused(capsys, "fmt", "--write", "cdap")
    assert "give the path of the file to rewrite" in err
    assert shipped.read_bytes() == before


def test_fmt_write_is_atomic_and_keeps_the_mode_and_the_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    real = tmp_path / "real.policy"
    real.write_text("policy p\nactions   READ\nentity namespace\n")
    real.chmod(0o640)
    link = tmp_path / "p.policy"
    link.symlink_to(real)
    code, out, _ = run(capsys, "fmt", "--write", str(link))
    assert code == 0 and out.startswith("formatted")
    assert link.is_symlink() and stat.S_IMODE(real.stat().st_mode) == 0o640
    assert "actions READ\n" in real.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.policy", "real.policy"]


# ---- arguments -------------------------------------------------------------------------------


def test_an_empty_boolean_argument_is_an_error_not_false(capsys: pytest.CaptureFixture[str]) -> None:
    for value in ("", "  "):
        err = refused(
            capsys, "check", "user:carol", "application.deploy", "application:ns1.app",
            "--arg", "artifact=artifact:ns1.art", "--arg", f"new_artifact={value}",
        )  # fmt: skip
        assert "`$new_artifact` is true or false, not an empty value" in err


@pytest.mark.parametrize(
    "call",
    [
        lambda a: a.request("user:a", None, "namespace:ns1"),
        lambda a: a.request(None, "namespace.get", "namespace:ns1"),
        lambda a: a.request(["user:a"], "namespace.get", "namespace:ns1"),
        lambda a: a.request("user:a", "namespace.get", None),
        lambda a: a.request("user:a", "namespace.get", 3),
        lambda a: a.request("user:a", ["namespace.get"], "namespace:ns1"),
        lambda a: a.request("user:a", "namespace.get", "namespace:ns1", ["x"]),
        lambda a: a.request("user:a", "application.deploy", "application:ns1.a", {1: "x"}),
        lambda a: a.request("user:a", "application.deploy", "application:ns1.a", {"artifact": ["artifact:ns1.x"]}),
        lambda a: a.request("user:a", "application.deploy", "application:ns1.a", {"new_artifact": [True]}),
        lambda a: a.request("user:a", "application.deploy", "application:ns1.a", {"new_artifact": ""}),
        lambda a: a.request("user:a", "application.deploy", "application:ns1.a", {"new_artifact": 10**5000}),
        lambda a: a.entity(None),
        lambda a: a.operation(None),
    ],
)
def test_every_argument_of_a_wrong_type_is_a_request_error(call: object) -> None:
    authz = privilog.load("cdap")
    with pytest.raises(RequestError) as caught:
        call(authz)  # type: ignore[operator]
    assert "\n" not in str(caught.value)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.one_of(st.none(), st.integers(), st.text(max_size=10), st.lists(st.text(max_size=3), max_size=2)),
    st.one_of(st.none(), st.integers(), st.text(max_size=20), st.sampled_from(["namespace.get", "dataset.read"])),
    st.one_of(st.none(), st.integers(), st.text(max_size=20), st.just("namespace:ns1")),
)
def test_fuzz_a_request_is_a_request_or_a_request_error(principal: object, operation: object, entity: object) -> None:
    authz = privilog.load("cdap", {"admins": ["user:root"], "grants": [["user:root", "ADMIN", "namespace:ns1"]]})
    try:
        request = authz.request(principal, operation, entity)  # type: ignore[arg-type]
    except PrivilogError as error:
        assert "\n" not in str(error)
        return
    assert not authz.check(request).allowed or principal == "user:root"
