"""``privilog pipeline`` against the reference engine, on generated deployments.

Hypothesis draws a batch of small worlds (conftest.py: entities in up to three
namespaces, grants with pre-grants, `ALL` and whole-namespace grants with holes,
memberships of users, groups and roles) and requests on them: creates of entities
that do not exist yet (some inside applications or namespaces that do not exist
either), arguments (booleans in their many spellings, artifacts, programs of a
schedule's application, owners), group and role principals, and a few malformed
requests. The pipeline's module functions decide the whole batch in one run, and:

* a request is rejected exactly when the reference engine refuses it
  (``Authorizer.request`` raises), and every other request is decided once;
* each decision (allow or deny, the unmet requirement ids, and what each unmet
  "every" requirement lacks) equals ``Authorizer.check``'s;
* each allowed request names grants that allow it (``allowed_by``): one of the reference's
  witnesses for each requirement met by a grant, and those grants alone allow it;
* for listings of every kind, the visibility table's (principal, entity) pairs equal
  what ``Authorizer.visible`` shows each principal of the world for each listable
  type, and each row's witness is a grant the reference engine counts for that listing;
* request arguments (booleans spelled in many ways, entities, a repeated argument)
  are read into the same facts as the reference engine reads them, or refused by both.

Decisions are compared under cdap and cdap-4.2, by the fused plans (one pass,
creates included), and under cdap-4.2 by the generic evaluation a policy outside
them falls back to (rounds for creates): how the pipeline assembles them (unmet
requirements, what they lack) does not depend on the policy, and test_engine.py holds every policy's derived relations to the reference
(each pipeline run costs tens of seconds, whatever its size). Visibility is
compared under a policy for each kind of listing, since which listing requests the
pipeline asks depends on the scopes a listing looks at. Relations this small are
folded on the driver by the engine's defaults; test_engine.py holds the plans that
run in Spark to the reference.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyspark  # noqa: F401  (the test extra installs it: without it the module fails, it is not skipped)
import pytest
from privilog.dsl.ir import Policy
from privilog.engine.authorizer import RequestError
from privilog.engine.decision import Decision
from privilog.engine.ids import EntityId

import privilog
from privilog import dsl

if TYPE_CHECKING:
    from conftest import Batch, Case
    from privilog.engine.spark.evaluate import SparkEngine
    from pyspark.sql import DataFrame, SparkSession

    from privilog.pipeline.inputs import CheckedDeployment as Deployment

pytestmark = pytest.mark.slow

# cdap-4.2 looks at enclosing entities, where cdap does not. Both are decided by the fused
# plans; "generic" decides cdap-4.2 the way a policy outside them is decided (rounds).
# "cdap denying" adds a deny rule: its `allowed` is then not the prelude's alone, and the fused
# plans unfold it (through `not denied(R)`) rather than read it from the unmet requirements;
# "cdap generic denying" decides that policy by the generic evaluation (its denied_by in rounds).
DECIDED = ["cdap", "cdap-4.2", "cdap-4.2 generic", "cdap-5.1", "cdap denying", "cdap generic denying"]
DENY_RULE = 'denied(R) :- request(R, P, _, E), grant(P, "WRITE", E).\n'

WORLDS = 12  # Hypothesis examples per policy, decided together
# another batch for a policy whose first lacks what test_the_batch_covers_what_the_comparison_is_about
# asks (cdap-5.1's: no create inside another request's create)
SALT = {"cdap-5.1": 4}
REQUESTS = 16  # at most, per world
# Listings by the scopes they look at (pipeline.visibility asks candidates by scope): self and
# self or within (cdap; cdap-draft and cdap-proposed list by self or descendant), an enclosing
# namespace (cdap-4.2; cdap-draft-revised's parent is asked the same way), none at all (cdap
# with `stream: list shows nothing`, which no shipped policy has), and the policy's own rule
# (cdap-5.1's `by sees`: every entity is asked).
LISTINGS = ["cdap", "cdap-4.2", "streams for all", "cdap-5.1"]
LISTED_WORLDS = 6  # Hypothesis examples per policy whose visibility is compared


def _frames(spark: SparkSession, batch: Batch) -> dict[str, DataFrame]:
    world = batch.world
    # the timestamp column carries each request's index through to the decisions and the rejects
    rows = [(*r, str(i)) for i, r in enumerate(batch.requests)]
    return {
        "entities": spark.createDataFrame([(e,) for e in world["entities"]], "entity string"),
        "grants": spark.createDataFrame(
            [tuple(g) for g in world["grants"]], "principal string, action string, entity string"
        ),
        "members": spark.createDataFrame([tuple(m) for m in world["members"]], "principal string, group string"),
        "requests": spark.createDataFrame(
            rows, "principal string, operation string, entity string, args string, timestamp string"
        ),
    }


def _deployment(spark: SparkSession, policy: Policy, frames: dict[str, DataFrame]) -> tuple[SparkEngine, Deployment]:
    from privilog.engine.denial import with_denied_by
    from privilog.engine.program import compile_policy
    from privilog.engine.spark.evaluate import SparkEngine

    from privilog.pipeline.inputs import Vocabulary, load_deployment
    from privilog.pipeline.tables import Progress

    # as the pipeline's commands make it (pipeline.context): the deny rules named by place
    engine = SparkEngine(with_denied_by(compile_policy(policy)), spark, progress=Progress(quiet=True))
    vocabulary = Vocabulary(policy)
    deployment = load_deployment(spark, vocabulary, frames["entities"], frames["grants"], frames["members"])
    return engine, deployment


def _world_rejects(deployment: Deployment) -> list[str]:
    return [f"{r['table']}: {r['row']}: {r['reason']}" for r in deployment.rejects.collect()]


# ---- decisions --------------------------------------------------------------------------


@dataclass(frozen=True)
class Pipeline:
    """What ``decide_all`` made of one batch, keyed by each request's index in ``batch.requests``."""

    name: str  # the policy, as DECIDED names it
    batch: Batch
    reference: privilog.Authorizer
    decided: dict[int, list[dict[str, Any]]]  # index -> rows of the decisions table (one, if all is well)
    rejected: dict[int, list[str]]  # index -> reasons
    world_rejects: list[str]
    rounds: int  # rounds of decide_all (requests on entities not in the inventory come after the others)


@pytest.fixture(scope="module", params=DECIDED)
def run(request: pytest.FixtureRequest, spark: SparkSession, generated: Callable[..., Batch]) -> Pipeline:
    """A batch of generated worlds and requests decided by the pipeline's functions under one policy."""
    from privilog.engine.spark.decide import decide_all

    from privilog.pipeline.inputs import check_requests, number_requests
    from privilog.pipeline.tables import Progress

    name, *how = request.param.split(" ")
    if "denying" in how:
        text = (dsl.rules_dir() / f"{name}.policy").read_text(encoding="utf-8")
        policy = dsl.parse_policy(text + DENY_RULE)
    else:
        policy = dsl.load_policy(name)
    batch = generated(policy, WORLDS, REQUESTS, SALT.get(request.param, 0))
    frames = _frames(spark, batch)
    engine, deployment = _deployment(spark, policy, frames)
    checked = check_requests(spark, deployment.vocabulary, number_requests(frames["requests"]))
    result = decide_all(spark, engine, deployment, checked, Progress(quiet=True), fused="generic" not in how)
    decided: dict[int, list[dict[str, Any]]] = {}
    for row in result.table.collect():
        decided.setdefault(int(row["timestamp"]), []).append(row.asDict(recursive=True))
    rejected: dict[int, list[str]] = {}
    for row in checked.rejects.collect():
        assert row["table"] == "requests"
        rejected.setdefault(int(json.loads(row["row"])["timestamp"]), []).append(row["reason"])
    reference = privilog.load(policy, batch.world)
    return Pipeline(request.param, batch, reference, decided, rejected, _world_rejects(deployment), result.rounds)


def _reference(run: Pipeline, index: int) -> Decision | str:
    """The reference engine's decision on a request, or why it refuses the request."""
    principal, operation, entity, args = run.batch.requests[index]
    authz = run.reference
    try:
        request = authz.request(principal, operation, entity, json.loads(args) if args else {})
    except RequestError as error:
        return str(error)
    return authz.check(request)


def _unmet(decision: Decision) -> dict[str, list[str]]:
    return {o.id: sorted(str(e) for e in o.lacking) for o in decision.unmet}


def _pipeline_unmet(row: dict[str, Any]) -> dict[str, list[str]]:
    return {u["requirement"]: sorted(u["lacking"]) for u in row["unmet"]}


def _where(case: Case) -> str:
    return f"world {json.dumps(case.world)}"


def test_a_generated_world_is_never_rejected(run: Pipeline) -> None:
    assert run.world_rejects == []


def test_every_request_is_decided_once_or_rejected(run: Pipeline) -> None:
    everything = set(range(len(run.batch.requests)))
    assert set(run.decided) | set(run.rejected) == everything
    assert not set(run.decided) & set(run.rejected)
    assert {i: len(rows) for i, rows in run.decided.items() if len(rows) != 1} == {}
    assert {i: reasons for i, reasons in run.rejected.items() if len(reasons) != 1 or not reasons[0]} == {}


def test_a_request_is_rejected_exactly_when_the_reference_refuses_it(run: Pipeline) -> None:
    disagreements = []
    for index, request in enumerate(run.batch.requests):
        expected = _reference(run, index)
        if isinstance(expected, str) != (index in run.rejected):
            got = run.rejected.get(index, "decided")
            disagreements.append(
                f"{request}: reference {expected if isinstance(expected, str) else 'accepts it'}; pipeline {got}; "
                f"{_where(run.batch.case_of(index))}"
            )
    assert disagreements == []


def test_decisions_agree_with_the_reference(run: Pipeline) -> None:
    disagreements = []
    for index, rows in sorted(run.decided.items()):
        expected = _reference(run, index)
        if isinstance(expected, str):
            continue  # the test above reports it
        (row,) = rows
        want = ("allow" if expected.allowed else "deny", _unmet(expected), expected.bypassed)
        got = (row["decision"], _pipeline_unmet(row), tuple(row["bypass"]))
        if want != got:
            disagreements.append(
                f"{run.batch.requests[index]}: reference {want}, pipeline {got}; {_where(run.batch.case_of(index))}"
            )
    assert disagreements == []


# Only the run whose policy has a deny rule of its own: the `run` fixture's other runs are not made for it.
@pytest.mark.parametrize("run", ["cdap denying"], indirect=True)
def test_a_deny_rule_denies_what_no_requirement_does(run: Pipeline) -> None:
    """Under the policy with a deny rule, some requests are denied with every requirement met."""
    assert run.name == "cdap denying"
    plain = privilog.load(dsl.load_policy("cdap"), run.batch.world)
    by_rule = []
    for index, (row,) in sorted(run.decided.items()):
        principal, operation, entity, args = run.batch.requests[index]
        if row["decision"] == "deny" and not row["unmet"]:
            by_rule.append(plain.allows(principal, operation, entity, json.loads(args) if args else {}))
    assert sum(by_rule) >= 3, "requests cdap allows and its deny rule denies"


def test_a_denied_request_names_the_deny_rules_that_deny_it(run: Pipeline) -> None:
    """denied_by names, by place (FILE:LINE), the policy's own deny rules the reference's decision
    names (Decision.denied_by): for every request of every run (none for a policy without one)."""
    disagreements = []
    for index, (row,) in sorted(run.decided.items()):
        expected = _reference(run, index)
        if isinstance(expected, str):
            continue
        want = sorted({d.at for d in expected.denied_by})
        if row["denied_by"] != want:
            disagreements.append(
                f"{run.batch.requests[index]}: reference {want}, pipeline {row['denied_by']}; "
                f"{_where(run.batch.case_of(index))}"
            )
    assert disagreements == []
    if "denying" in run.name:
        assert sum(bool(rows[0]["denied_by"]) for rows in run.decided.values()) >= 3


def test_an_allowed_request_names_grants_that_allow_it(run: Pipeline) -> None:
    """allowed_by names, for each requirement that applies and a grant meets, one grant that meets it
    (any of the reference's witnesses: not necessarily the one the reference lists first); and in a
    world holding only those grants (with the memberships, the entities, and the grants on what an
    "every" requirement covers), the reference engine allows the request too (unless the policy's
    own rule met a requirement: `by sees` reads grants allowed_by does not name)."""
    world = run.batch.world
    wrong = []
    checked = 0
    for index, rows in sorted(run.decided.items()):
        (row,) = rows
        expected = _reference(run, index)
        if row["decision"] != "allow" or isinstance(expected, str):
            continue
        witnesses = {o.id: {(w.holder, w.action, str(w.entity)) for w in o.witnesses} for o in expected.outcomes}
        named = {g["requirement"]: (g["principal"], g["action"], g["entity"]) for g in row["allowed_by"]}
        wanted = {o.id for o in expected.outcomes if o.applies and o.witnesses}
        where = f"{run.batch.requests[index]}: allowed_by {row['allowed_by']}"
        if set(named) != wanted or len(named) != len(row["allowed_by"]):
            wrong.append(f"{where}: the requirements met by a grant are {sorted(wanted)}")
            continue
        if any(grant not in witnesses[i] for i, grant in named.items()):
            wrong.append(f"{where}: not among the reference's witnesses {witnesses}")
            continue
        if any(o.applies and o.by for o in expected.outcomes):
            continue  # met by the policy's own rule (`by sees`), which reads grants allowed_by does not name
        covered = {str(e) for o in expected.outcomes if o.applies for e in o.covered}
        grants = [list(g) for g in named.values()] + [g for g in world["grants"] if g[2] in covered]
        # a deny rule reads grants: a wildcard's, named by the entity it matched, would deny alone
        policy = dsl.load_policy("cdap") if "denying" in run.name else run.reference.policy
        alone = privilog.load(policy, {"entities": world["entities"], "grants": grants, "members": world["members"]})
        principal, operation, entity, args = run.batch.requests[index]
        decision = alone.check(alone.request(principal, operation, entity, json.loads(args) if args else {}))
        checked += 1
        if not decision.allowed:
            wrong.append(f"{where}: with only these grants the reference denies it")
    assert wrong == []
    assert checked >= 8


def test_the_batch_covers_what_the_comparison_is_about(run: Pipeline) -> None:
    """The generated requests are not all alike: without these the tests above prove little."""
    decisions = [rows[0] for rows in run.decided.values()]
    existing = {str(e) for e in run.reference.world.existing()}
    groups = {p for c in run.batch.cases for p in c.names.groups}
    assert sum(d["decision"] == "allow" for d in decisions) >= 8
    assert sum(d["decision"] == "deny" for d in decisions) >= 10
    assert sum(d["entity"] not in existing for d in decisions) >= 10, "creates of entities not in the inventory"
    created = {d["entity"] for d in decisions if d["entity"] not in existing}
    inside = [e for e in created if any(str(a) in created for a in EntityId.parse(e).ancestors())]
    assert inside, "creates inside entities that other requests create"
    assert run.rounds == 1 or run.rounds >= 3, "the generic evaluation decides such creates in a third round"
    assert sum(bool(d["args"]) for d in decisions) >= 4, "requests with arguments"
    assert sum(d["principal"] in groups for d in decisions) >= 5, "requests by groups and roles"
    assert len(run.rejected) >= 10
    through_wildcards = 0
    for index in run.decided:
        expected = _reference(run, index)
        if isinstance(expected, Decision) and any(w.pattern for o in expected.outcomes for w in o.witnesses):
            through_wildcards += 1
    assert through_wildcards >= 3, "requests met through wildcard grants"


# ---- arguments --------------------------------------------------------------------------

# application.deploy's arguments as a JSON object, spelled in ways a log may spell them
ARGUMENTS = {
    "JSON booleans and numbers": [
        {"artifact": "artifact:ns1.art", "new_artifact": value} for value in (True, False, 1, 0, None, 1.0)
    ],
    "words": [
        {"artifact": "artifact:ns1.art", "new_artifact": value}
        for value in ("", "true", "YES", "Off", " on ", "1 ", "tru", "maybe")
    ],
    "words in other whitespace": [
        {"artifact": "artifact:ns1.art", "new_artifact": value}
        for value in ("\ttrue", "true\n", "\u00a0yes", "\u2003no")
    ],
    "entities": [
        {"$artifact": "artifact:ns1.art"},
        {"$$artifact": "artifact:ns1.art", "owner": "kerberosprincipal:svc/host@EXAMPLE.COM"},
        {"artifact": " artifact:ns1.art"},
        {"artifact": ["artifact:ns1.art"]},
        {"artifact": {"a": "b"}},
        {"artifact": "artifact:ns2.art"},
        {"owner": "user:a"},
    ],
}
# The same argument twice: a JSON object's text may say so, Python's json module keeps the last.
REPEATED = '{"artifact": "artifact:ns1.art", "artifact": "artifact:ns1.other"}'
# cdap-5.1's deploy takes lists of entities (`$datasets: [dataset]`, ...): lists as a log may hold them
LISTS = [
    {"artifact": "artifact:ns1.art", "datasets": ["dataset:ns1.a", "dataset:ns1.b$Inner"], "streams": ["stream:ns1.s"]},
    {"datasets": []},
    {"datasets": "dataset:ns1.a"},
    {"datasets": ["dataset:ns1.a", "dataset:ns1.a", "dataset:ns2.x"]},
    {"datasets": ["dataset:ns1.a", "stream:ns1.s"]},
    {"datasets": ["dataset:ns1.a", 1]},
    {"datasets": ["dataset:ns1.a", None]},
    {"datasets": [["dataset:ns1.a"]]},
    {"datasets": {"a": "dataset:ns1.a"}},
    {"datasets": None},
    {"datasets": ["dataset:ns1"]},
    {"dataset_types": ["dataset_type:ns1.T$Inner", "dataset_type:ns1.U"], "dataset_modules": ["dataset_module:ns1.m"]},
    {"artifact": ["artifact:ns1.art", "artifact:ns1.other"]},
    {"datasets": ["dataset:ns1.a"] * 3 + ["dataset:ns1.b"]},
]
Read = dict[str, tuple[tuple[str, str], ...] | str]


def _pipeline_reads(spark: SparkSession, policy: str, texts: list[str]) -> Read:
    """Each argument text of an application.deploy, read by ``check_requests``: the normalised
    (name, value) pairs it keeps as facts, or why it rejects the request."""
    from privilog.pipeline.inputs import Vocabulary, check_requests, number_requests

    rows = [("user:a", "application.deploy", "application:ns1.app", text, text) for text in texts]
    frame = spark.createDataFrame(
        rows, "principal string, operation string, entity string, args string, timestamp string"
    )
    checked = check_requests(spark, Vocabulary(dsl.load_policy(policy)), number_requests(frame))
    text_of = {row["rid"]: row["timestamp"] for row in checked.good.collect()}
    kept: dict[str, list[tuple[str, str]]] = {text: [] for text in text_of.values()}
    for row in checked.args.collect():
        kept[text_of[row["rid"]]].append((row["name"], row["value"]))
    read: Read = {text: tuple(sorted(pairs)) for text, pairs in kept.items()}
    for row in checked.rejects.collect():
        read[json.loads(row["row"])["timestamp"]] = row["reason"]
    return read


@pytest.fixture(scope="module")
def arguments(spark: SparkSession) -> Read:
    """ARGUMENTS and REPEATED under cdap, LISTS under cdap-5.1, as the pipeline reads them."""
    texts = [json.dumps(a) for cases in ARGUMENTS.values() for a in cases] + [REPEATED]
    return {
        **_pipeline_reads(spark, "cdap", texts),
        **{f"5.1 {k}": v for k, v in _pipeline_reads(spark, "cdap-5.1", [json.dumps(a) for a in LISTS]).items()},
    }


def _reference_reads(text: str, policy: str = "cdap") -> tuple[tuple[str, str], ...] | str:
    authz = privilog.load(policy)
    try:
        return authz.request("user:a", "application.deploy", "application:ns1.app", json.loads(text)).args
    except RequestError as error:
        return str(error)


def _disagreements(cases: list[dict[str, Any]], arguments: Read, policy: str, prefix: str = "") -> list[str]:
    """Kept as the same facts, or rejected by both."""
    disagreements = []
    for args in cases:
        text = json.dumps(args)
        expected, got = _reference_reads(text, policy), arguments[prefix + text]
        if expected != got and not (isinstance(expected, str) and isinstance(got, str)):
            disagreements.append(f"{text}: reference {expected!r}, pipeline {got!r}")
    return disagreements


@pytest.mark.parametrize("kind", list(ARGUMENTS))
def test_arguments_are_read_as_the_reference_reads_them(kind: str, arguments: Read) -> None:
    assert _disagreements(ARGUMENTS[kind], arguments, "cdap") == []


def test_list_arguments_are_read_as_the_reference_reads_them(arguments: Read) -> None:
    """A list is a fact an entity (each checked, repeats once); what is no list of ids is rejected."""
    assert _disagreements(LISTS, arguments, "cdap-5.1", "5.1 ") == []
    kept = arguments["5.1 " + json.dumps(LISTS[0])]
    assert isinstance(kept, tuple) and ("datasets", "dataset:ns1.b$Inner") in kept and len(kept) == 4
    assert arguments["5.1 " + json.dumps(LISTS[3])] == (("datasets", "dataset:ns1.a"), ("datasets", "dataset:ns2.x"))
    assert sum(isinstance(arguments["5.1 " + json.dumps(a)], str) for a in LISTS) == 8, "the rejected lists"


def test_an_argument_given_twice_is_not_read_as_two(arguments: Read) -> None:
    """The reference engine takes one value per argument; two `artifact` facts would let a
    grant on either artifact meet `any on $artifact`. Rejecting the request would also do."""
    got, expected = arguments[REPEATED], _reference_reads(REPEATED)
    assert isinstance(got, str) or got == expected, f"{REPEATED}: reference {expected}, pipeline {got}"


# ---- visibility -------------------------------------------------------------------------


@dataclass(frozen=True)
class Shown:
    """What ``visibility`` made of one batch of worlds (their requests unused)."""

    batch: Batch
    reference: privilog.Authorizer
    visible: list[dict[str, Any]]  # rows of the visibility table
    world_rejects: list[str]


def _listing_policy(name: str) -> Policy:
    if name != "streams for all":
        return dsl.load_policy(name)
    text = (dsl.rules_dir() / "cdap.policy").read_text(encoding="utf-8")
    at = text.index("list shows any", text.index("\nstream:"))
    return dsl.parse_policy(text[:at] + "list shows nothing" + text[at + len("list shows any") :])


@pytest.fixture(scope="module", params=LISTINGS)
def shown(request: pytest.FixtureRequest, spark: SparkSession, generated: Callable[..., Batch]) -> Shown:
    """A batch of generated worlds listed by the pipeline's functions under one policy."""
    from privilog.engine.spark.visibility import visibility

    from privilog.pipeline.tables import Progress

    policy = _listing_policy(request.param)
    batch = generated(policy, LISTED_WORLDS, 1)
    engine, deployment = _deployment(spark, policy, _frames(spark, batch))
    visible = [row.asDict() for row in visibility(spark, engine, deployment, Progress(quiet=True)).collect()]
    return Shown(batch, privilog.load(policy, batch.world), visible, _world_rejects(deployment))


def test_a_listed_world_is_never_rejected(shown: Shown) -> None:
    assert shown.world_rejects == []


def _reference_visible(shown: Shown) -> set[tuple[str, str]]:
    authz = shown.reference
    return {
        (principal, str(entity.entity))
        for principal in sorted(authz.world.principals())
        for entity_type in authz.listable_types()
        for entity in authz.visible(principal, entity_type)
    }


def test_visibility_agrees_with_the_reference(shown: Shown) -> None:
    got = {(row["principal"], row["entity"]) for row in shown.visible}
    assert len(got) == len(shown.visible), "a (principal, entity) pair is listed twice"
    expected = _reference_visible(shown)
    worlds = {p: c.world for c in shown.batch.cases for p in (*c.names.users, *c.names.groups)}
    missing = [f"{pair} (world {worlds.get(pair[0])})" for pair in sorted(expected - got)]
    extra = [f"{pair} (world {worlds.get(pair[0])})" for pair in sorted(got - expected)]
    assert (missing, extra) == ([], [])
    assert len({principal for principal, _ in expected}) >= 3, "the worlds show something to several principals"


def test_each_shown_entity_names_a_grant_that_shows_it(shown: Shown) -> None:
    authz = shown.reference
    wrong = []
    for row in shown.visible:
        op = authz.list_operation(row["type"])
        decision = authz.check(authz.request(row["principal"], op.qualified, row["entity"]))
        witnesses = {(w.action, str(w.entity), w.holder) for o in decision.outcomes for w in o.witnesses}
        witness = (row["action"], row["granted_entity"], row["holder"])
        if witness not in witnesses and not (witness == (None, None, None) and not witnesses):
            wrong.append(f"{row}: the reference's witnesses are {sorted(witnesses)}")
    assert wrong == []
