"""Request arguments that are lists of entities (`$datasets: [dataset]`, `ADMIN on every $datasets`):
each entity a fact of `request_arg`, each needed, on both backends."""

from __future__ import annotations

import json

import pytest
from privilog.engine.authorizer import RequestError

import privilog
from privilog import Authorizer, dsl

POLICY = """\
policy lists
actions READ, ADMIN
entity instance
entity namespace in instance
entity application in namespace
entity program in application
entity dataset in namespace
entity stream in namespace
application:
  deploy($artifact: dataset, $datasets: [dataset], $streams: [stream], $programs: [program] in namespace) requires ADMIN,
      ADMIN on every $datasets,
      READ on every $streams if $streams,
      ADMIN on every $programs
"""
WORLD = {
    "entities": ["namespace:ns1", "application:ns1.app", "dataset:ns1.old"],
    "grants": [
        ["user:alice", "ADMIN", "application:ns1.app"],
        ["user:alice", "ADMIN", "dataset:ns1.a"],
        ["user:alice", "ADMIN", "dataset:ns1.stage_*"],
        ["group:eng", "ADMIN", "dataset:ns1.shared"],
        ["user:alice", "READ", "stream:ns1.s"],
    ],
    "members": [["user:alice", "group:eng"]],
}
APP = "application:ns1.app"


@pytest.fixture(scope="module", params=["compiled", "pydatalog"])
def authz(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Authorizer:
    path = tmp_path_factory.mktemp("lists") / "lists.policy"
    path.write_text(POLICY, encoding="utf-8")
    return privilog.load(dsl.load_policy(str(path)), WORLD, backend=request.param)


def _check(authz: Authorizer, **args: object) -> privilog.Decision:
    request = authz.request("user:alice", "application.deploy", APP, args)
    decision = authz.check(request)
    assert authz.decide(request) is decision.allowed, "decide and check agree"
    return decision


def test_each_entity_of_the_list_must_be_held(authz: Authorizer) -> None:
    held = _check(authz, datasets=["dataset:ns1.a", "dataset:ns1.stage_1", "dataset:ns1.shared"])
    assert held.allowed
    (every,) = [o for o in held.outcomes if o.text == "ADMIN on every $datasets"]
    assert [str(e) for e in every.covered] == ["dataset:ns1.a", "dataset:ns1.shared", "dataset:ns1.stage_1"]

    lacking = _check(authz, datasets=["dataset:ns1.a", "dataset:ns1.b", "dataset:ns1.c"])
    assert not lacking.allowed
    (unmet,) = lacking.unmet
    assert [str(e) for e in unmet.lacking] == ["dataset:ns1.b", "dataset:ns1.c"]
    assert lacking.remaining == (), "a list's entities are not inside the application: a deploy leaves nothing"
    assert [[str(c) for c in fix] for fix in lacking.fixes] == [
        ["grant ADMIN on dataset:ns1.b to user:alice", "grant ADMIN on dataset:ns1.c to user:alice"]
    ]


def test_an_empty_or_absent_list_asks_nothing(authz: Authorizer) -> None:
    assert _check(authz).allowed
    assert _check(authz, datasets=[]).allowed
    guarded = [o for o in _check(authz, streams=[]).outcomes if o.text == "READ on every $streams"]
    assert [o.applies for o in guarded] == [False], "`if $streams`: an empty list is not given"
    assert not _check(authz, streams=["stream:ns1.s", "stream:ns1.t"]).allowed


def test_a_text_is_a_list_of_one_and_repeats_count_once(authz: Authorizer) -> None:
    one = authz.request("user:alice", "application.deploy", APP, {"datasets": "dataset:ns1.b"})
    assert one.args == (("datasets", "dataset:ns1.b"),)
    assert one.to_json()["args"] == {"datasets": ["dataset:ns1.b"]}
    twice = authz.request("user:alice", "application.deploy", APP, {"datasets": ["dataset:ns1.b", "dataset:ns1.b"]})
    assert twice.args == (("datasets", "dataset:ns1.b"),)
    both = authz.request("user:alice", "application.deploy", APP, {"datasets": ["dataset:ns1.z", "dataset:ns1.b"]})
    assert both.values("datasets") == ["dataset:ns1.b", "dataset:ns1.z"]
    assert json.loads(json.dumps(both.to_json()))["args"] == {"datasets": ["dataset:ns1.b", "dataset:ns1.z"]}


def test_each_entity_is_checked_as_a_single_argument_is(authz: Authorizer) -> None:
    refused = {
        "a stream among datasets": ({"datasets": ["dataset:ns1.a", "stream:ns1.s"]}, "names a dataset, not `stream:ns1.s`"),
        "not text": ({"datasets": ["dataset:ns1.a", 7]}, "names a dataset id, not 7"),
        "malformed": ({"datasets": ["dataset:ns1"]}, "malformed dataset id"),
        "a wildcard": ({"datasets": ["dataset:ns1.*"]}, "wildcard"),
        "outside the namespace": ({"programs": ["program:ns2.app.service.p"]}, "must be a program in namespace:ns1"),
        "a list for one": ({"artifact": ["dataset:ns1.a"]}, "`$artifact` of `application.deploy` names one dataset, not a list"),
    }
    for what, (args, message) in refused.items():
        with pytest.raises(RequestError, match=message.replace("$", r"\$").replace("*", r"\*")) as raised:
            authz.request("user:alice", "application.deploy", APP, args)
        assert "\n" not in str(raised.value), what


def test_a_list_longer_than_the_limit_is_refused(authz: Authorizer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVILOG_MAX_LIST_ARGUMENT", "10")
    many = [f"dataset:ns1.d{i}" for i in range(11)]
    with pytest.raises(RequestError, match=r"has 11 entities; the limit is 10 \(set PRIVILOG_MAX_LIST_ARGUMENT"):
        authz.request("user:alice", "application.deploy", APP, {"datasets": many})
    assert not _check(authz, datasets=many[:10]).allowed
