"""The bounded search: its reductions lose no world, and the reduced search agrees with the full one."""

from __future__ import annotations

import dataclasses

import pytest
from privilog.engine.ids import EntityId
from privilog.engine.world import Grant
from privilog.proofs.load import load_proved
from privilog.proofs.prover import Prover
from privilog.proofs.worlds import REQUESTER, Point, build_cases, space_for
from proof_policies import SOUND, broken, proved, run


def _space(name: str, label: str, max_entities: int = 1):  # type: ignore[no-untyped-def]
    prover = Prover(load_proved(name), examples=0)
    (case,) = [c for c in build_cases(prover.proved.policy, prover.evaluator.authorizer) if c.label == label]
    return space_for(prover.proved, case, max_entities, prover.context.changes_grants)


@pytest.mark.parametrize(
    ("policy", "label"),
    [
        ("cdap", "namespace.list and namespace.get"),
        ("cdap", "namespace.delete_all_applications"),
        ("cdap", "application.deploy"),
        ("cdap-4.2", "program.start"),
    ],
)
def test_every_world_has_a_representative(policy: str, label: str) -> None:
    """Every world the bound allows, enumerated without symmetry, has the canonical form of one searched."""
    space = _space(policy, label)
    representatives = space.representatives(10**6)
    keys = {space.key(p) for p in representatives}
    assert len(keys) == len(representatives)
    everything = dataclasses.replace(space, symmetric=False)
    concrete = list(everything.points())
    assert len(concrete) >= len(representatives)
    assert {space.key(p) for p in concrete} == keys


def test_interchangeable_types_are_one_kind() -> None:
    space = _space("cdap", "namespace.list and namespace.get")
    # under a namespace: one entity standing for every type nothing names, and an application
    # (it has something inside), with one entity standing for programs and schedules
    assert [[str(s.entity) for s in group] for group in space.groups] == [["artifact:ns1.art"], ["application:ns1.app"]]
    (application,) = space.groups[1]
    assert [[str(s.entity) for s in group] for group in application.groups] == [["program:ns1.app.service.prog"]]
    # "ADMIN on every dataset" names datasets: they are their own kind there
    named = _space("cdap", "namespace.drop_all_datasets")
    assert {s.label for group in named.groups for s in group} == {"", "dataset"}


def test_actions_that_meet_the_same_options_are_one_class() -> None:
    deploy = _space("cdap", "application.deploy")
    classes = {str(entity): [c.action for c in found] for entity, found in deploy.fixed}
    # ADMIN on the artifact meets both arms of "ADMIN on $artifact if $new_artifact else any on $artifact"
    assert classes == {
        "application:ns1.app": ["ADMIN"],
        "artifact:ns1.art": ["READ", "ADMIN"],
        "kerberosprincipal:owner@EXAMPLE.COM": ["ADMIN"],
    }
    # READ and ADMIN together meet what ADMIN meets: one of the two is enough
    assert deploy.held_choices(deploy.fixed[1][1]) == [(), (0,), (1,)]


def test_a_world_with_a_grant_that_adds_nothing_has_the_key_of_the_world_without_it() -> None:
    space = _space("cdap", "application.deploy")
    app, artifact = EntityId.parse("application:ns1.app"), EntityId.parse("artifact:ns1.art")
    admin = Point(frozenset({app}), frozenset({Grant(REQUESTER, "ADMIN", artifact)}))
    both = admin.with_grants(admin.grants | {Grant(REQUESTER, "READ", artifact)})
    assert space.key(both) == space.key(admin)
    assert space.key(admin.with_grants(frozenset({Grant(REQUESTER, "READ", artifact)}))) != space.key(admin)


SMALL = [
    SOUND,
    SOUND.replace("drop requires ADMIN", "drop requires ADMIN on self | namespace"),
    SOUND.replace("  get requires any\n", "  get requires READ\n"),
    SOUND.replace("delete requires ADMIN, ADMIN on every descendant", "delete requires ADMIN"),
    SOUND.replace("namespace:\n", "namespace:\n  drop_all_datasets requires ADMIN on every dataset\n"),
]


@pytest.mark.parametrize("body", SMALL, ids=["sound", "parent", "get", "delete", "vacuous"])
def test_the_reduced_search_agrees_with_the_full_one(body: str) -> None:
    reduced = Prover(proved(body), examples=0).prove()
    full = Prover(proved(body), examples=0, reduce=False).prove()
    assert broken(reduced) == broken(full)
    for mine, theirs in zip(reduced.verdicts, full.verdicts, strict=True):
        assert mine.bounded <= theirs.bounded
        if mine.counterexample and theirs.counterexample:
            assert mine.counterexample.size <= theirs.counterexample.size


def test_a_bound_too_large_for_a_case_falls_back_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from privilog.proofs import prover

    monkeypatch.setattr(prover, "WORLD_LIMIT", 8)
    report = run(SOUND, max_entities=2)
    assert report.notes and all("checked up to 1 of each kind" in n for n in report.notes)
    assert broken(report) == {}
