"""The Spark engine against the reference backend, relation by relation; and its encoding.

* For each shipped policy, a generated world (three Hypothesis examples in one, see
  conftest.py) with requests asserted as the authorizer asserts them: every relation
  the program derives holds the same rows in :class:`SparkBackend` as in pyDatalog.
  Relations this small are folded on the driver by default; for cdap the engine is
  also made to keep every relation in Spark (the plans a large deployment runs),
  which costs a Spark job per rule and round, so only for the one policy.
* A policy that adds its own rules in policy text (a recursion over cyclic data, a
  negation, an equality and an ordering comparison on text) is evaluated by the same
  engine with no change to it, to the same answers.
* Values are encoded as Spark's ``xxhash64``: the driver computes the same codes as
  Spark for short, long and non-ASCII strings, and a :class:`Dictionary` refuses two
  strings with one code.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pyspark  # noqa: F401  (the test extra installs it: without it the module fails, it is not skipped)
import pytest
from hypothesis import settings
from privilog.dsl.ir import Atom, Rule
from privilog.dsl.ir import Relation as IRRelation
from privilog.engine.authorizer import Authorizer, RequestError
from privilog.engine.backends.pydatalog import PyDatalogBackend
from privilog.engine.facts import world_facts
from privilog.engine.program import Program, Row, compile_policy

from privilog import dsl
from privilog.api import load_world_for
from tests.property import clingo_oracle
from tests.property.programs import drawn_programs

if TYPE_CHECKING:
    from conftest import Batch
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.slow

POLICIES = ["cdap", "cdap-draft", "cdap-draft-revised", "cdap-4.2", "cdap-proposed"]
FOLDED: dict[str, int] = {}  # EngineSettings' defaults: small relations are folded on the driver
IN_SPARK = {"local_rows": 0, "local_base_rows": 0}  # every relation a DataFrame
RUNS = [pytest.param(name, FOLDED, id=name) for name in POLICIES] + [pytest.param("cdap", IN_SPARK, id="cdap-in Spark")]


def facts_of(authz: Authorizer, requests: list[tuple[str, str, str, str]]) -> dict[str, set[Row]]:
    """The world's facts and the valid requests' facts, as the authorizer asserts them
    (a request's entity and what encloses it are placed in the hierarchy)."""
    facts = world_facts(authz.world)
    facts.setdefault("request", set())
    facts.setdefault("request_arg", set())
    for number, (principal, operation, entity, args) in enumerate(requests):
        try:
            request = authz.request(principal, operation, entity, json.loads(args) if args else {})
        except RequestError:
            continue
        rid = f"r{number}"
        facts["request"].add((rid, request.principal, request.operation, str(request.entity)))
        facts["request_arg"].update((rid, k, v) for k, v in request.args)
        chain = [request.entity, *request.entity.ancestors(authz.world.instance)]
        facts["is_a"].update((str(e), e.type) for e in chain)
        facts["child_of"].update((str(a), str(b)) for a, b in itertools.pairwise(chain))
    return facts


def derived(program: Program) -> list[str]:
    return sorted({rule.head.predicate for rule in program.rules})


def answers(
    program: Program, facts: Mapping[str, set[Row]], spark: SparkSession, settings: Mapping[str, Any]
) -> tuple[dict[str, set[Row]], dict[str, set[Row]]]:
    """Every derived relation, from the reference backend and from the Spark backend."""
    from privilog.engine.spark.backend import SparkBackend
    from privilog.engine.spark.evaluate import EngineSettings

    reference = PyDatalogBackend(program)
    candidate = SparkBackend(program, spark, EngineSettings(**settings))
    for relation, rows in facts.items():
        if rows:
            reference.add(relation, rows)
            candidate.add(relation, rows)
    names = derived(program)
    return {n: reference.query(n) for n in names}, {n: candidate.query(n) for n in names}


def differences(expected: Mapping[str, set[Row]], got: Mapping[str, set[Row]]) -> dict[str, Any]:
    return {
        name: {"missing": sorted(expected[name] - got[name])[:5], "extra": sorted(got[name] - expected[name])[:5]}
        for name in expected
        if expected[name] != got[name]
    }


@pytest.mark.parametrize(("name", "settings"), RUNS)
def test_every_derived_relation_equals_the_reference(
    name: str, settings: Mapping[str, Any], spark: SparkSession, generated: Callable[..., Batch]
) -> None:
    policy = dsl.load_policy(name)
    batch = generated(policy, 3, 10)
    authz = Authorizer(policy, load_world_for(policy, batch.world))
    facts = facts_of(authz, batch.requests)
    expected, got = answers(authz.program, facts, spark, settings)
    assert differences(expected, got) == {}
    # about something: some requests allowed, some denied
    assert 0 < len(expected["allowed"]) < len(facts["request"])


# ---- a policy with rules of its own -----------------------------------------------------

EXTRA_RULES = """
# Rules the engine has never seen: a recursion (over cyclic memberships), a negation,
# an inequality, and comparisons that order text.
reaches(P, G) :- member_of(P, G), P != G.
reaches(P, G) :- reaches(P, M), member_of(M, G), P != G.
granted_somewhere(E) :- grant(_, _, E).
ungranted(E, T) :- is_a(E, T), not granted_somewhere(E).
before(A, B) :- child_of(A, P), child_of(B, P), A < B.
late_holder(P, E) :- holds(P, _, E, V), V >= "role:".
"""

WORLD = {
    "entities": ["program:ns1.app.service.a", "program:ns1.app.worker.b", "dataset:ns1.d", "dataset:ns2.raw.x"],
    "grants": [
        ["role:ops", "READ", "dataset:ns1.d"],
        ["group:eng", "ALL", "program:ns1.app.service.a"],
        ["user:ann", "ADMIN", "namespace:ns2"],
    ],
    # a cycle: eng -> ops -> eng
    "members": [["user:ann", "group:eng"], ["group:eng", "role:ops"], ["role:ops", "group:eng"]],
}


def test_a_policy_with_rules_of_its_own_is_evaluated_to_the_reference_answers(spark: SparkSession) -> None:
    text = (dsl.rules_dir() / "cdap.policy").read_text(encoding="utf-8")
    policy = dsl.parse_policy(text + EXTRA_RULES)
    program = compile_policy(policy)
    authz = Authorizer(policy, load_world_for(policy, WORLD))
    requests = [
        ("user:ann", "dataset.read", "dataset:ns1.d", ""),
        ("user:ann", "dataset.create", "dataset:ns2.new", ""),
    ]
    facts = facts_of(authz, requests)
    expected, got = answers(program, facts, spark, FOLDED)
    assert differences(expected, got) == {}
    assert expected["reaches"] == {
        ("user:ann", "group:eng"),
        ("user:ann", "role:ops"),
        ("group:eng", "role:ops"),
        ("role:ops", "group:eng"),
    }
    assert ("dataset:ns1.d", "dataset") not in expected["ungranted"]
    assert ("dataset:ns2.raw.x", "dataset") in expected["ungranted"]
    assert ("program:ns1.app.service.a", "program:ns1.app.worker.b") in expected["before"]
    assert ("program:ns1.app.worker.b", "program:ns1.app.service.a") not in expected["before"]
    assert {p for p, _ in expected["late_holder"]} == {"user:ann", "group:eng", "role:ops"}
    assert expected["allowed"] == {("r0",)}  # ann reads through ops; a grant on ns2 does not create in it


# ---- encoding ---------------------------------------------------------------------------

STRINGS = [
    "",
    "a",
    "self",
    "abcd",  # one 4-byte block
    "abcdefg",  # 4 + 3 bytes
    "namespace:ns1",
    "x" * 31,
    "y" * 32,  # one full 32-byte stripe
    "z" * 33,
    "dataset:ns00001.ds007.v1/with/a/long/name@EXAMPLE.COM",
    "ü",
    "日本語のデータセット",
    "kerberosprincipal:svc/hôst@EXAMPLE.COM",
    "🙂" * 9,  # 36 bytes of 4-byte characters
    "é" * 40,
]


def test_the_driver_encodes_as_spark_does(spark: SparkSession) -> None:
    from privilog.engine.spark.encoding import xxhash64
    from pyspark.sql import functions as F

    frame = spark.createDataFrame([(i, s) for i, s in enumerate(STRINGS)], "i int, value string")
    codes = {row["i"]: row["code"] for row in frame.select("i", F.xxhash64("value").alias("code")).collect()}
    assert {s: codes[i] for i, s in enumerate(STRINGS)} == {s: xxhash64(s) for s in STRINGS}
    assert len(set(codes.values())) == len(STRINGS)


def test_a_dictionary_refuses_two_strings_with_one_code(monkeypatch: pytest.MonkeyPatch) -> None:
    from privilog.engine.spark import encoding

    dictionary = encoding.Dictionary(["namespace:ns1", "namespace:ns1"])  # the same string twice is one
    assert len(dictionary) == 1
    monkeypatch.setattr(encoding, "xxhash64", lambda text, seed=encoding.SEED: 7)
    assert dictionary.encode("user:a") == 7
    with pytest.raises(encoding.EncodingError, match=r"`user:a` and `user:b` share the code 7"):
        dictionary.encode("user:b")
    assert dictionary.decode(7) == "user:a"


def test_the_run_s_jvm_has_the_memory_the_tests_ask_for(spark: SparkSession) -> None:
    """The ``spark`` fixture (tests/conftest.py) is the run's one session, in a JVM started with 6g
    whichever module asks first: a JVM another folder started first, with less, once served every
    later module and ran out of memory in CI."""
    from tests.conftest import DRIVER_MEMORY, PARTITIONS

    jvm = spark.sparkContext._jvm
    assert jvm is not None
    assert spark.sparkContext.getConf().get("spark.driver.memory") == DRIVER_MEMORY
    gigabytes = int(DRIVER_MEMORY.rstrip("g"))
    assert jvm.java.lang.Runtime.getRuntime().maxMemory() > (gigabytes - 1) * 2**30
    assert spark.conf.get("spark.sql.shuffle.partitions") == str(PARTITIONS)


# ---- generated programs (tests/property/programs.py) ---------------------------------------

# drawn the same every run and evaluated in one Spark evaluation; `--hypothesis-profile=long`
# draws many more (tests/README.md, "Programs")
PROGRAMS = 200 if getattr(settings, "_current_profile", "default") == "long" else 40


def _suffixed(rule: Rule, suffix: str) -> Rule:
    def atom(a: Atom) -> Atom:
        return replace(a, predicate=a.predicate + suffix)

    return Rule(atom(rule.head), tuple(atom(b) if isinstance(b, Atom) else b for b in rule.body), rule.span)


def test_generated_programs_evaluate_as_clingo(spark: SparkSession) -> None:
    """Whole programs drawn as for the in-memory backends (facts and rules of one relation,
    recursion of every shape, stratified negation, comparisons of text, constants of every
    kind): each program's relations renamed apart (``p0_w3``), all of them evaluated in one
    Spark evaluation of their union, over each program's world after its changes, give the
    rows clingo gives."""
    from privilog.engine.spark.backend import SparkBackend

    rules: list[Rule] = []
    relations: list[IRRelation] = []
    world: dict[str, set[Row]] = {}
    names: list[str] = []
    for number, generated in enumerate(drawn_programs(PROGRAMS)):
        suffix = f"_w{number}"
        policy = dsl.parse_policy(generated.text, include_prelude=False)
        rules += [_suffixed(r, suffix) for r in policy.rules]
        relations += [replace(r, name=r.name + suffix) for r in policy.relations]
        facts = {name: set(rows) for name, rows in generated.world.items()}
        for kind, name, row in generated.changes:
            (facts[name].add if kind == "add" else facts[name].discard)(row)
        world.update((name + suffix, rows) for name, rows in facts.items())
        names += [name + suffix for name in generated.relations]
    union = replace(dsl.parse_policy("", include_prelude=False), rules=tuple(rules), relations=tuple(relations))
    backend = SparkBackend(compile_policy(union), spark)
    for name, rows in world.items():
        if rows:
            backend.add(name, rows)
    expected = clingo_oracle.solve(rules, world)
    wrong = {
        name: {"missing": sorted(expected.get(name, set()) - got), "extra": sorted(got - expected.get(name, set()))}
        for name in names
        if (got := backend.query(name)) != expected.get(name, set())
    }
    assert wrong == {}
    assert sum(len(expected.get(name, ())) for name in names) > 100  # about something
