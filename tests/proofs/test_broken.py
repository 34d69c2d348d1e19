"""Every promise can fail: for each, a deliberately broken policy that `prove` catches.

A promise no policy can break would prove nothing. Each test starts from SOUND (which
keeps all seven), breaks one thing, and checks that exactly the promise it should
break is reported, for the operation it should be, with a counterexample that is a
real evaluation: its first scene is decided again here and gives what it claims.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from privilog.engine.authorizer import Authorizer
from privilog.engine.ids import EntityId
from privilog.engine.world import Grant, World
from privilog.proofs.findings import Counterexample
from privilog.proofs.prover import prove
from proof_policies import SOUND, broken, prelude_unchecked, proved, run

from privilog import dsl

PROMISES = {
    "default_deny",
    "monotonic",
    "no_hierarchical_enforcement",
    "list_get_agree",
    "multi_entity_delete",
    "survives_recreate",
    "admins_only",
}


@pytest.fixture
def unchecked_prelude() -> Iterator[None]:
    """For the promises only a rule for a prelude relation can break (dsl.check refuses those now)."""
    with prelude_unchecked():
        yield


def replay(body: str, found: Counterexample) -> list[bool]:
    """Decide each scene's request again, in a fresh authorizer of the policy alone."""
    authz = Authorizer(proved(body).policy)
    out = []
    for scene in found.scenes:
        assert scene.request is not None
        authz.world = scene.world
        authz.refresh()
        out.append(authz.check(scene.request).allowed)
    return out


def test_a_policy_may_not_add_rules_to_the_prelude() -> None:
    body = SOUND + 'holds(P, "READ", E, P) :- grant(P, "WRITE", E).\n'
    with pytest.raises(dsl.PolicyErrors, match="`holds` is defined by the prelude"):
        proved(body)


def test_a_deny_rule_is_taken_and_only_denies() -> None:
    # `denied` is the one prelude relation a policy may add to: allowed negates it, so it can only deny more
    body = SOUND + 'denied(R) :- request(R, P, "dataset.read", E), grant(P, "WRITE", E).\n'
    policy = proved(body).policy
    world = World(
        entities={EntityId("dataset", "ns1.d")},
        grants={Grant("user:a", "READ", EntityId("dataset", "ns1.d")), Grant("user:b", "READ", EntityId("dataset", "ns1.d"))}
        | {Grant("user:b", "WRITE", EntityId("dataset", "ns1.d"))},
    )
    for backend in ("compiled", "pydatalog"):
        authz = Authorizer(policy, world, backend)
        assert authz.allows("user:a", "dataset.read", "dataset:ns1.d")
        assert not authz.allows("user:b", "dataset.read", "dataset:ns1.d")


def test_the_sound_policy_keeps_every_promise() -> None:
    report = run(SOUND, examples=20)
    assert {v.promise.name for v in report.verdicts} == PROMISES
    assert broken(report) == {}
    assert all(v.bounded > 0 and v.generated > 0 for v in report.verdicts)


def test_default_deny_breaks_when_an_operation_requires_nothing() -> None:
    body = SOUND.replace("  read requires READ\n", "  read requires nothing\n")
    report = run(body)
    assert broken(report) == {"default_deny": ["dataset.read"]}
    found = report.verdict("default_deny").counterexample
    assert found is not None and not found.scenes[0].world.grants
    assert replay(body, found) == [True]


def test_default_deny_breaks_on_a_delete_of_every_entity_of_a_kind_where_there_is_none() -> None:
    # "ADMIN on every dataset" over a namespace with no dataset is met by anyone at all
    body = SOUND.replace("namespace:\n", "namespace:\n  drop_all_datasets requires ADMIN on every dataset\n")
    report = run(body)
    assert broken(report) == {"default_deny": ["namespace.drop_all_datasets"]}
    found = report.verdict("default_deny").counterexample
    assert found is not None
    assert [str(e) for e in found.scenes[0].world.entities] == ["namespace:ns1"]


@pytest.mark.usefixtures("unchecked_prelude")
def test_monotonic_breaks_when_a_grant_denies() -> None:
    body = """
dataset:
  read requires READ
# a writer may not read: more grants, less allowed
denied(R) :- request(R, P, "dataset.read", E), grant(P, "WRITE", E).
"""
    report = run(body)
    assert broken(report) == {"monotonic": ["dataset.read"]}
    found = report.verdict("monotonic").counterexample
    assert found is not None
    assert found.summary == "granting WRITE on dataset:ns1.ds to user:u1 denies what was allowed"
    assert replay(body, found) == [True, False]


def test_no_hierarchical_enforcement_breaks_on_a_privilege_on_the_namespace() -> None:
    body = SOUND.replace("drop requires ADMIN", "drop requires ADMIN on self | namespace")
    report = run(body)
    assert broken(report) == {"no_hierarchical_enforcement": ["dataset.drop"]}
    found = report.verdict("no_hierarchical_enforcement").counterexample
    assert found is not None
    assert [str(g) for g in found.scenes[0].world.grants] == ["user:u1 ADMIN namespace:ns1"]
    assert replay(body, found) == [True, False]


@pytest.mark.usefixtures("unchecked_prelude")
def test_no_hierarchical_enforcement_breaks_on_a_rule_that_inherits_privileges() -> None:
    # no table names a parent: the rule does, so only a comparison of two worlds sees it
    body = """
dataset:
  read requires READ
holds(P, A, E, V) :- child_of(E, N), holds(P, A, N, V).
"""
    report = run(body)
    assert broken(report) == {"no_hierarchical_enforcement": ["dataset.read"]}
    found = report.verdict("no_hierarchical_enforcement").counterexample
    assert found is not None
    assert {g.entity.type for g in found.scenes[0].world.grants} <= {"namespace", "instance"}
    assert replay(body, found) == [True, False]


def test_an_operation_of_the_enclosing_entity_is_not_hierarchical_enforcement(tmp_path: Path) -> None:
    body = "entity application in namespace\nentity schedule in application\nschedule:\n  add requires ADMIN on application\n"
    assert broken(run(body)) == {"no_hierarchical_enforcement": ["schedule.add"]}
    proof = tmp_path / "mine.proof"
    common = Path(__file__).resolve().parents[2] / "proofs" / "common.proof"
    proof.write_text(f'include "{common}"\nacts_on("schedule.add", "application").\n')
    assert broken(run(body, proof=proof)) == {}


def test_list_get_agree_breaks_when_get_asks_for_more_than_list() -> None:
    body = SOUND.replace("  get requires any\n", "  get requires READ\n")
    report = run(body)
    assert broken(report) == {"list_get_agree": ["dataset.get"]}
    found = report.verdict("list_get_agree").counterexample
    assert found is not None
    assert found.summary == "dataset.list shows dataset:ns1.ds to user:u1, but dataset.get denies it"
    assert replay(body, found) == [True, False]


def test_multi_entity_delete_breaks_when_delete_forgets_what_is_inside() -> None:
    body = SOUND.replace("delete requires ADMIN, ADMIN on every descendant", "delete requires ADMIN")
    report = run(body)
    assert broken(report) == {"multi_entity_delete": ["namespace.delete"]}
    found = report.verdict("multi_entity_delete").counterexample
    assert found is not None
    assert found.summary.endswith("multi_entity_delete(the request, dataset:ns1.ds)")
    assert replay(body, found) == [True]


class ForgetfulWorld(World):
    """A world whose delete revokes the grants on what it deletes, as a naive store would."""

    def delete_entity(self, actor: str, entity: EntityId) -> set[EntityId]:
        doomed = super().delete_entity(actor, entity)
        self.grants = {g for g in self.grants if g.entity not in doomed}
        return doomed


def test_survives_recreate_breaks_when_deletion_revokes_grants() -> None:
    # No policy text can break this promise: a policy sees only grants and the entities
    # that exist, and both are as they were once the entity is back. What it guards is
    # the world and the engine, so the broken thing here is the world.
    report = run(SOUND, world_type=ForgetfulWorld)
    assert broken(report).keys() == {"survives_recreate"}
    found = report.verdict("survives_recreate").counterexample
    assert found is not None and "lost the grants" in found.summary
    before, _, after = found.scenes
    assert before.world.grants - after.world.grants


def test_admins_only_breaks_when_an_entity_admin_may_grant() -> None:
    body = SOUND.replace("namespace:\n", "namespace:\n  grant requires ADMIN\n")
    report = run(body)
    assert broken(report) == {"admins_only": ["namespace.grant"]}
    found = report.verdict("admins_only").counterexample
    assert found is not None and not found.scenes[0].world.admins
    assert replay(body, found) == [True]


@pytest.mark.usefixtures("unchecked_prelude")
def test_admins_only_holds_when_granting_asks_for_an_authorization_admin() -> None:
    body = SOUND.replace("namespace:\n", "namespace:\n  grant requires ADMIN\n") + (
        "authorization_admin(P) :- admin(P).\n"
        "authorization_admin(P) :- in_group(P, G), admin(G).\n"
        'denied(R) :- request(R, P, "namespace.grant", _), not authorization_admin(P).\n'
    )
    assert broken(run(body)) == {}


class OpenWorld(World):
    """A world in which anyone may change grants."""

    def is_admin(self, principal: str) -> bool:
        return principal in self.admins

    def _require_admin(self, actor: str, what: str = "grants") -> None:
        return None


def test_admins_only_breaks_when_the_world_lets_anyone_grant() -> None:
    report = run(SOUND, world_type=OpenWorld)
    assert broken(report).keys() == {"admins_only"}
    found = report.verdict("admins_only").counterexample
    assert found is not None and "is not an authorization admin, and did grant" in found.summary


@pytest.mark.usefixtures("unchecked_prelude")
def test_the_generated_worlds_find_what_the_bound_misses() -> None:
    # only two datasets in one namespace show it: more than one entity of a kind
    body = """
namespace:
  list shows any on self or descendant
  get requires any on self or descendant
dataset:
  read requires READ
denied(R) :- request(R, P, "namespace.get", E), holds(P, "READ", D1, _), holds(P, "READ", D2, _),
    child_of(D1, E), child_of(D2, E), D1 != D2.
"""
    assert broken(run(body)) == {}
    assert "monotonic" in broken(run(body, max_entities=2))
    generated = run(body, examples=400)
    assert "monotonic" in broken(generated)
    found = generated.verdict("monotonic").counterexample
    assert found is not None and replay(body, found) == [True, False]
    assert len({g.entity for g in found.scenes[1].world.grants if g.entity.type == "dataset"}) >= 2


def test_a_counterexample_is_explained() -> None:
    body = SOUND.replace("drop requires ADMIN", "drop requires ADMIN on self | namespace")
    report = prove(proved(body), examples=0)
    found = report.verdict("no_hierarchical_enforcement").counterexample
    assert found is not None
    allowed, denied = (scene.decision for scene in found.scenes)
    assert allowed is not None and allowed.allowed
    assert denied is not None and not denied.allowed and denied.fixes
    assert Grant("user:u1", "ADMIN", EntityId.parse("namespace:ns1")) in found.scenes[0].world.grants
