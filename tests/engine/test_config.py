"""A deployment's settings (a world's `config:`) and bypasses (issue 16, item 2).

The prelude lets a configured superuser through every check; a policy may add bypass rules
of its own that read the settings, each naming its reason. Both in-memory backends give the
same answers; the pipeline's `--config` is tested in tests/spark/test_pipeline.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from privilog.engine.authorizer import Authorizer
from privilog.engine.world import WorldError, load_world, read_config

from privilog import dsl
from privilog.api import load_world_for
from privilog.render.explain import render_decision, render_short

BACKENDS = ["compiled", "pydatalog"]

# A policy's own bypass: the master user passes every check inside namespace `system`.
MASTER = """
policy master "a bypass of its own"
actions READ, ADMIN
entity instance
entity namespace in instance
entity dataset in namespace
namespace:
  get requires READ
dataset:
  read requires READ
  drop requires ADMIN
bypass(R, "master user in namespace system") :-
    request(R, P, _, E), config("master_user", P), ancestor(E, "namespace:system").
bypass(R, "master user in namespace system") :-
    request(R, P, _, "namespace:system"), config("master_user", P).
"""


def cdap(world: dict[str, object], backend: str) -> Authorizer:
    policy = dsl.load_policy("cdap")
    return Authorizer(policy, load_world_for(policy, world), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_superuser_passes_every_check_and_the_decision_says_why(backend: str) -> None:
    authz = cdap({"config": {"superusers": ["user:ann"]}, "entities": ["dataset:ns1.d"]}, backend)
    decision = authz.check(authz.request("user:ann", "namespace.delete", "namespace:ns1"))
    assert decision.allowed and decision.bypassed == ("superuser",)
    assert decision.unmet  # what it lacks is still said
    assert "let through by a bypass (superuser)" in render_decision(decision)
    assert render_short(decision).endswith("(bypass: superuser)")
    assert decision.to_json()["bypass"] == ["superuser"]
    assert authz.decide(authz.request("user:ann", "dataset.drop", "dataset:ns1.d"))
    other = authz.check(authz.request("user:bob", "dataset.read", "dataset:ns1.d"))
    assert not other.allowed and other.bypassed == () and "bypass" not in other.to_json()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_star_makes_everyone_a_superuser_and_a_single_value_is_a_list_of_one(backend: str) -> None:
    everyone = cdap({"config": {"superusers": "*"}}, backend)
    assert everyone.check(everyone.request("user:anyone", "namespace.create", "namespace:new")).allowed
    one = cdap({"config": {"superusers": "user:ann"}}, backend)
    assert one.check(one.request("user:ann", "namespace.create", "namespace:new")).allowed
    assert not one.check(one.request("user:bob", "namespace.create", "namespace:new")).allowed


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_policy_adds_a_bypass_of_its_own_that_reads_the_settings(backend: str) -> None:
    policy = dsl.parse_policy(MASTER, "master.policy")
    world = load_world_for(
        policy, {"config": {"master_user": "user:cdap"}, "entities": ["dataset:system.meta", "dataset:ns1.d"]}
    )
    authz = Authorizer(policy, world, backend=backend)
    inside = authz.check(authz.request("user:cdap", "dataset.drop", "dataset:system.meta"))
    assert inside.allowed and inside.bypassed == ("master user in namespace system",)
    assert authz.check(authz.request("user:cdap", "namespace.get", "namespace:system")).allowed
    assert not authz.check(authz.request("user:cdap", "dataset.drop", "dataset:ns1.d")).allowed
    assert not authz.check(authz.request("user:other", "dataset.drop", "dataset:system.meta")).allowed


def test_a_policy_still_may_not_add_to_allowed() -> None:
    text = MASTER + 'allowed(R) :- request(R, "user:x", _, _).\n'
    with pytest.raises(dsl.PolicyErrors, match="`allowed` is defined by the prelude"):
        dsl.parse_policy(text, "sneaky.policy")


@pytest.mark.parametrize(
    ("config", "said"),
    [
        ("config: [superusers]", "`config` is a mapping"),
        ("config: {Superusers: [user:ann]}", "a config key is lower case"),
        ("config: {superusers: [user ann]}", "a config value is printable text without blanks"),
        ("config: {superusers: [[user:ann]]}", "must be text"),
    ],
)
def test_a_bad_setting_is_refused_in_one_line_with_its_place(tmp_path: Path, config: str, said: str) -> None:
    path = tmp_path / "world.yaml"
    path.write_text(config + "\n")
    with pytest.raises(WorldError, match=said) as raised:
        load_world(path, ("READ",))
    assert str(raised.value).startswith(f"{path}:1:") and "\n" not in str(raised.value)


def test_settings_round_trip_through_a_world_file_and_a_config_file(tmp_path: Path) -> None:
    world = load_world_for(dsl.load_policy("cdap"), {"config": {"superusers": ["user:b", "user:a"], "master_user": "u"}})
    assert world.config == {"superusers": ("user:b", "user:a"), "master_user": ("u",)}
    assert world.to_data()["config"] == {"master_user": ["u"], "superusers": ["user:b", "user:a"]}
    assert "config" not in load_world_for(dsl.load_policy("cdap"), {}).to_data()
    settings = tmp_path / "settings.yaml"
    settings.write_text("superusers: [user:a]\nmaster_user: cdap\n")
    assert read_config(settings) == {"superusers": ("user:a",), "master_user": ("cdap",)}
    assert "user:b" in world.principals()  # a setting's principal is one the world names
