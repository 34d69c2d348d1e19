"""Each negation and each shortcut of the decision plans, held to check().

``privilog serve``, its batches and CDAP's enforce answer with ``Authorizer.allows`` and
``decide``: the compiled backend's decision plans (engine/compiled/specialize.py), Python
written per operation, with the request's principal, entity and arguments bound. check()
evaluates the rules instead. Here each test that the plans write (a negated world relation
with all, some or none of its columns bound, or with a variable repeated; a negated request
argument, absent or different; a negated call, in place or as a function; a lookup that only
asks whether rows exist; a join over world relations kept as a relation of its own), and each
shortcut the authorizer takes to reach a plan (the entity's type, that it exists, the
request's own facts, the arguments checked once), has a small policy and world where doing it
wrong changes a decision. Every request is asked of check(), decide() and allows(), which
must agree, and the answer is the expected one.

Each test's docstring names the mutation it kills: the change to the engine's source that
makes it fail. Each was tried by hand on a copy of the source (the mutated module executed in
the test process, the files left alone), and the test failed; the harness and its list of
mutants are tests/engine/specialize_mutants.py (`python tests/engine/specialize_mutants.py`).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import pytest
from privilog.dsl.ir import Policy
from privilog.engine.authorizer import Authorizer, RequestError
from privilog.engine.ids import EntityId
from privilog.engine.world import Grant

import privilog
from privilog import dsl
from privilog.api import load_world_for

# One operation a construct: each requirement is met `by` a rule of the request whose body is
# the construct, so that the plan of the operation tests it (and nothing else decides it).
POLICY = """
policy shortcuts "each negation and shortcut of the decision plans, one operation each"

actions READ, WRITE, ADMIN

entity instance
entity namespace in instance
entity dataset in namespace

# world-derived relations the plans read
sealed(E) :- grant("group:sealers", "ADMIN", E).
lockdown(K) :- config("lockdown", K).
pair(E, P, Q) :- grant(P, "READ", E), grant(Q, "WRITE", E).

# the request's own relations, each read by one operation below
unsealed(R) :- request(R, _, _, E), not sealed(E).
unadministered(R) :- request(R, _, _, E), not grant(_, "ADMIN", E).
calm(R) :- request(R, _, _, _), not lockdown(_).
shared(R) :- request(R, _, _, E), pair(E, X, X).
unforced(R) :- request(R, _, _, _), not request_arg(R, force, _).
elsewhere(R) :- request(R, _, _, E), not request_arg(R, to, E).
unread_target(R) :- request(R, _, _, _), request_arg(R, to, D), not grant(_, "READ", D).
in_place(R) :- request(R, _, _, E), request_arg(R, to, E).
approved(R) :- request(R, P, _, E), grant(Q, "ADMIN", E), Q != P.
reads_inside(R) :- request(R, P, _, E), grant(P, "READ", D), child_of(D, E).
writes_inside(R) :- request(R, P, _, E), grant(P, "WRITE", D), child_of(D, E).

# deny rules: a blocklist read directly, and a quarantine through groups (a join of its own)
denied(R) :- request(R, P, _, _), member_of(P, "group:blocked").
denied(R) :- request(R, P, _, E), member_of(P, G), grant(G, "ADMIN", E), member_of(G, "group:quarantined").

namespace:
  get requires by reads_inside
  update requires by writes_inside

dataset:
  create requires ADMIN on namespace
  read requires READ
  seal requires by unsealed
  claim requires by unadministered
  export requires by calm
  merge requires by shared
  truncate($force: bool) requires by unforced
  copy($to: dataset in namespace) requires READ, by elsewhere, WRITE on $to
  move($to: dataset in namespace) requires by unread_target
  refresh($to: dataset in namespace) requires by in_place
  publish requires by approved
"""

# A negation whose variable nothing binds, repeated: the safety pass refuses it in a policy
# (`X` is unsafe), so no checked policy reaches this test of the plans; the engine still
# writes one (engine/compiled/plan.py, repeated_free). Loaded with that pass off.
REPEATED = """
policy repeated "a negation with a variable repeated that nothing binds"
actions READ, WRITE
entity instance
entity namespace in instance
entity dataset in namespace
pair(E, P, Q) :- grant(P, "READ", E), grant(Q, "WRITE", E).
unshared(R) :- request(R, _, _, E), not pair(E, X, X).
dataset:
  split requires by unshared
"""

# Names compared (`name_of`), and no wildcard anywhere (cdap-5.1's rules name some: then no
# decision takes the plans' shortest way, and names could not be missed there).
NAMES = """
policy names "the namesake of a namespace gets it"
actions READ
entity instance
entity namespace in instance
namesake(R) :- request(R, P, _, E), name_of(P, N), name_of(E, N).
namespace:
  get requires by namesake
"""

ALICE, BOB = "user:alice", "user:bob"
D1, D2, D3 = "dataset:ns1.d1", "dataset:ns1.d2", "dataset:ns1.d3"
ROOT = "user:root"

_POLICIES: dict[str, Policy] = {}


def policy(text: str = POLICY, unchecked: str = "") -> Policy:
    """A policy read from text once (with the check pass ``unchecked`` off)."""
    if text not in _POLICIES:
        if not unchecked:
            _POLICIES[text] = dsl.parse_policy(text, "shortcuts.policy")
        else:
            checks = importlib.import_module("privilog.dsl.check")  # `dsl.check` is also a function
            saved = checks.PASSES
            checks.PASSES = tuple(p for p in saved if p[0] != unchecked)
            try:
                _POLICIES[text] = dsl.parse_policy(text, "repeated.policy")
            finally:
                checks.PASSES = saved
    return _POLICIES[text]


def authorizer(world: Mapping[str, Any], text: str = POLICY, unchecked: str = "") -> Authorizer:
    chosen = policy(text, unchecked)
    return Authorizer(chosen, load_world_for(chosen, {"admins": [ROOT], **world}))


def answer(authz: Authorizer, principal: str, operation: str, entity: str, args: Mapping[str, Any] | None = None) -> bool:
    """check()'s answer, which decide() and allows() (after check() has seen the request's
    principal and entity, the path a server's repeated questions take) must give too."""
    request = authz.request(principal, operation, entity, args)
    allowed = authz.check(request).allowed
    fast = {"decide": authz.decide(request), "allows": authz.allows(principal, operation, entity, args)}
    assert fast == {"decide": allowed, "allows": allowed}, (str(request), "check():", allowed, fast)
    return allowed


# ---- the three the issue names ------------------------------------------------------------


def test_cdap_5_1_denies_a_system_dataset_to_a_user_without_grants() -> None:
    """cdap-5.1 lets anyone get or drop CDAP's own queue and stream datasets in a user
    namespace (`not ancestor(E, namespace:system)`), never in namespace system.

    Kills neg-world-all-bound: `(e, c) not in x` written `in` (the plan of dataset.get then
    allows user:nobody to read dataset:system.system.queue.q1 while check() denies).
    """
    authz = privilog.load(
        "cdap-5.1",
        {"entities": ["namespace:system", "dataset:system.system.queue.q1", "dataset:ns1.system.queue.q1"]},
    )
    for operation in ("dataset.get", "dataset.drop"):
        assert not answer(authz, "user:nobody", operation, "dataset:system.system.queue.q1"), operation
        assert answer(authz, "user:nobody", operation, "dataset:ns1.system.queue.q1"), operation
    assert not answer(authz, "user:nobody", "dataset.read", "dataset:ns1.system.queue.q1")


def test_a_negated_request_argument_that_is_absent() -> None:
    """`not request_arg(R, force, _)`: truncate only without `force`.

    Kills neg-arg-is-none: `g.get(c) is None` written `is not None`.
    """
    authz = authorizer({"entities": [D1]})
    assert answer(authz, ALICE, "dataset.truncate", D1)
    assert answer(authz, ALICE, "dataset.truncate", D1, {"force": "false"})  # false: not given
    assert not answer(authz, ALICE, "dataset.truncate", D1, {"force": "true"})


def test_a_negated_request_argument_that_differs() -> None:
    """`not request_arg(R, to, E)`: a copy onto another dataset, never onto itself (and READ on
    it, WRITE on the target).

    Kills neg-arg-ne: `g.get(c) != e` written `==`.
    """
    authz = authorizer(
        {"entities": [D1, D2], "grants": [[ALICE, "READ", D1], [ALICE, "WRITE", D1], [ALICE, "WRITE", D2]]}
    )
    assert answer(authz, ALICE, "dataset.copy", D1, {"to": D2})
    assert not answer(authz, ALICE, "dataset.copy", D1, {"to": D1})
    assert not answer(authz, ALICE, "dataset.copy", D2, {"to": D1})  # no READ on d2


def test_the_entity_type_is_checked_on_the_fast_path() -> None:
    """allows() decides a principal and an entity it has seen without building a request; an
    entity of another type than the operation's is still refused, as request() refuses it.

    Kills allows-type-check: `known.type == op.entity_type` left out of allows()' fast path
    (it then answers deny where every other path refuses the request).
    """
    authz = authorizer({"entities": [D1], "grants": [[ALICE, "READ", D1], [ALICE, "READ", "namespace:ns1"]]})
    assert answer(authz, ALICE, "dataset.read", D1)
    assert not answer(authz, ALICE, "namespace.update", "namespace:ns1")  # both ids seen now
    for operation, entity in (("dataset.read", "namespace:ns1"), ("namespace.get", D1)):
        with pytest.raises(RequestError, match="acts on"):
            authz.request(ALICE, operation, entity)
        with pytest.raises(RequestError, match="acts on"):
            authz.allows(ALICE, operation, entity)


# ---- negated world relations ----------------------------------------------------------------


def test_a_negated_world_relation_with_every_column_bound() -> None:
    """`not sealed(E)`: a dataset the group sealers hold ADMIN on is sealed.

    Kills neg-world-all-bound: `(e,) not in x` written `in`.
    """
    authz = authorizer({"entities": [D1, D2], "grants": [["group:sealers", "ADMIN", D1]]})
    assert not answer(authz, ALICE, "dataset.seal", D1)
    assert answer(authz, ALICE, "dataset.seal", D2)


def test_a_negated_world_relation_with_some_columns_bound() -> None:
    """`not grant(_, "ADMIN", E)`: a dataset nobody holds ADMIN on may be claimed.

    Kills neg-world-some-bound: `not x.get(key)` written `x.get(key)`.
    """
    authz = authorizer({"entities": [D1, D2], "grants": [[BOB, "ADMIN", D1], [BOB, "READ", D2]]})
    assert not answer(authz, ALICE, "dataset.claim", D1)
    assert answer(authz, ALICE, "dataset.claim", D2)


def test_a_negated_world_relation_with_no_column_bound() -> None:
    """`not lockdown(_)`: nothing is exported while the deployment's `lockdown` is set.

    Kills neg-world-none-bound: `not x` written `x`.
    """
    assert answer(authorizer({"entities": [D1]}), ALICE, "dataset.export", D1)
    locked = authorizer({"entities": [D1], "config": {"lockdown": "on"}})
    assert not answer(locked, ALICE, "dataset.export", D1)


def test_a_negated_world_relation_with_a_repeated_free_variable() -> None:
    """`not pair(E, X, X)`, X bound by nothing: split a dataset nobody both reads and writes
    (someone reading it and someone else writing it do not count).

    Kills neg-world-repeated: `not any(t[2] == t[1] ...)` written `any(...)`; and
    neg-world-repeated-ignored: the `t[2] == t[1]` test left out (any pair would count).
    """
    grants = [[ALICE, "READ", D1], [BOB, "WRITE", D1], [ALICE, "READ", D2], [ALICE, "WRITE", D2]]
    authz = authorizer({"entities": [D1, D2, D3], "grants": grants}, REPEATED, unchecked="safety")
    assert answer(authz, ALICE, "dataset.split", D1)
    assert not answer(authz, ALICE, "dataset.split", D2)
    assert answer(authz, ALICE, "dataset.split", D3)


# ---- positive literals: lookups, repeated variables, request arguments --------------------


def test_a_lookup_that_only_asks_whether_rows_exist() -> None:
    """`holds(P, "READ", E, _)`: the holder is not needed, so the plan tests `x.get(key, E)`
    instead of looping over the rows.

    Kills rows-shortcut: that test written `True`.
    """
    authz = authorizer({"entities": [D1, D2], "grants": [[ALICE, "READ", D1], [BOB, "READ", D2]]})
    assert answer(authz, ALICE, "dataset.read", D1)
    assert not answer(authz, ALICE, "dataset.read", D2)


def test_a_positive_world_relation_with_a_repeated_free_variable() -> None:
    """`pair(E, X, X)`: merge a dataset someone both reads and writes.

    Kills bind-repeated: the loop's `t[2] == t[1]` test left out.
    """
    grants = [[ALICE, "READ", D1], [BOB, "WRITE", D1], [BOB, "READ", D2], [BOB, "WRITE", D2]]
    authz = authorizer({"entities": [D1, D2], "grants": grants})
    assert not answer(authz, ALICE, "dataset.merge", D1)
    assert answer(authz, ALICE, "dataset.merge", D2)


def test_a_request_argument_that_is_given() -> None:
    """`request_arg(R, to, D), not grant(_, "READ", D)`: a move needs a target nobody reads;
    without a target there is none.

    Kills arg-present: the `v is not None` test left out (D is then None, which nobody
    reads: the move without a target would be allowed).
    """
    authz = authorizer({"entities": [D1, D2, D3], "grants": [[BOB, "READ", D3]]})
    assert answer(authz, ALICE, "dataset.move", D1, {"to": D2})
    assert not answer(authz, ALICE, "dataset.move", D1, {"to": D3})
    assert not answer(authz, ALICE, "dataset.move", D1)


def test_a_request_argument_equal_to_the_entity() -> None:
    """`request_arg(R, to, E)`: a refresh in place names the dataset itself.

    Kills arg-equal: the `v == e` test left out.
    """
    authz = authorizer({"entities": [D1, D2]})
    assert answer(authz, ALICE, "dataset.refresh", D1, {"to": D1})
    assert not answer(authz, ALICE, "dataset.refresh", D1, {"to": D2})
    assert not answer(authz, ALICE, "dataset.refresh", D1)


def test_a_comparison() -> None:
    """`grant(Q, "ADMIN", E), Q != P`: publishing needs ADMIN held by someone else.

    Kills comparison: `v != p` written `True`; and neg-call (the requirement, unfolded, is
    tested as `not f2(p, e, g)`: a call, since f2 loops) written `f2(p, e, g)`.
    """
    authz = authorizer({"entities": [D1, D2], "grants": [[BOB, "ADMIN", D1], [ALICE, "ADMIN", D2]]})
    assert answer(authz, ALICE, "dataset.publish", D1)
    assert not answer(authz, ALICE, "dataset.publish", D2)
    assert answer(authz, BOB, "dataset.publish", D2)


# ---- negated calls ---------------------------------------------------------------------------


def test_a_negated_call_tested_in_place() -> None:
    """`not denied(R)`, with the policy's blocklist: a member of group:blocked reads nothing,
    whatever it holds. `denied` unfolds to tests only, so the plan tests `not (...)` in place.

    Kills neg-inline: `not (expression)` written `(expression)`.
    """
    world = {
        "entities": [D1],
        "grants": [[ALICE, "READ", D1], [BOB, "READ", D1]],
        "members": [[BOB, "group:blocked"]],
    }
    authz = authorizer(world)
    assert answer(authz, ALICE, "dataset.read", D1)
    assert not answer(authz, BOB, "dataset.read", D1)


def test_a_negated_call_of_a_function() -> None:
    """`not shared(R)`, unfolded: `shared` loops over rows, so the plan calls it as a function
    (`not f2(p, e, g)`) rather than testing it in place.

    Kills neg-call: `not f(...)` written `f(...)`.
    """
    grants = [[BOB, "READ", D1], [BOB, "WRITE", D1]]
    authz = authorizer({"entities": [D1, D2], "grants": grants})
    assert answer(authz, ALICE, "dataset.merge", D1)
    assert not answer(authz, ALICE, "dataset.merge", D2)


# ---- joins kept as relations of their own (_joinN) -------------------------------------------


def test_joins_kept_as_relations_of_their_own() -> None:
    """`grant(P, "READ", D), child_of(D, E)` (and its WRITE twin, and the quarantine's
    `member_of(P, G), grant(G, "ADMIN", E), member_of(G, "group:quarantined")`) become world
    relations over the request's columns, `_joinN`, made when the plan is and kept current.

    Kills aux-not-evaluated: a join's rows not made when the plan is (empty until a change);
    aux-not-maintained: a join not kept current after grants and revokes;
    aux-key-constants: two joins that differ only in a constant (READ, WRITE) taken for one.
    """
    world = {
        "entities": [D1, D2, "dataset:ns2.d1"],
        "grants": [[ALICE, "READ", D1], [BOB, "READ", D1], ["group:q", "ADMIN", D1]],
        "members": [[BOB, "group:q"], ["group:q", "group:quarantined"]],
    }
    authz = authorizer(world)
    assert answer(authz, ALICE, "namespace.get", "namespace:ns1")  # the READ join, made with its plan
    assert not answer(authz, ALICE, "namespace.update", "namespace:ns1")  # the WRITE join: another
    assert not answer(authz, ALICE, "namespace.get", "namespace:ns2")
    assert answer(authz, ALICE, "dataset.read", D1)
    assert not answer(authz, BOB, "dataset.read", D1)  # quarantined, through group:q
    write = [Grant(ALICE, "WRITE", EntityId.parse(D2))]
    authz.grant(ROOT, write)
    assert answer(authz, ALICE, "namespace.update", "namespace:ns1")
    authz.revoke(ROOT, write)
    assert not answer(authz, ALICE, "namespace.update", "namespace:ns1")
    authz.remove_members(ROOT, [("group:q", "group:quarantined")])
    assert answer(authz, BOB, "dataset.read", D1)


# ---- the authorizer's ways to a plan ----------------------------------------------------------


def test_a_create_places_its_entity_first() -> None:
    """A plan reads the entity's place in the hierarchy; an entity that does not exist yet
    (a create) is placed for the decision only.

    Kills allows-exists: allows()' fast path taken for an entity that does not exist; and
    decide-absent: decide() running the plan without placing it.
    """
    authz = authorizer({"entities": ["namespace:ns1"], "grants": [[ALICE, "ADMIN", "namespace:ns1"]]})
    assert answer(authz, ALICE, "dataset.create", "dataset:ns1.new")
    assert not answer(authz, ALICE, "dataset.create", "dataset:ns2.new")
    assert not answer(authz, BOB, "dataset.create", "dataset:ns1.new")
    assert not authz.inventory.exists(EntityId.parse("dataset:ns1.new"))


def test_arguments_checked_once_are_kept_for_their_entity_only() -> None:
    """allows() keeps the arguments it has checked; `$to` must be a dataset in the request's
    namespace, so the same arguments for an entity elsewhere are checked again and refused.

    Kills allows-args-key: the kept arguments found by operation and arguments alone.
    """
    authz = authorizer({"entities": [D1, D2, "dataset:ns2.d1"], "grants": [[ALICE, "READ", D1]]})
    assert not answer(authz, ALICE, "dataset.copy", D1, {"to": D2})
    assert not answer(authz, ALICE, "dataset.read", "dataset:ns2.d1")  # its id seen
    with pytest.raises(RequestError, match="must be a dataset in namespace:ns2"):
        authz.allows(ALICE, "dataset.copy", "dataset:ns2.d1", {"to": D2})


def test_names_of_a_principal_the_world_does_not_name() -> None:
    """A rule compares the principal's name with the entity's (`name_of`); a principal no grant
    or membership names has its name given with the request. So in cdap-5.1, where a
    namespace's owner (`owners:`) reads and lists it without a grant.

    Kills decide-names: decide() running the plan without the request's own names.
    """
    authz = authorizer({"entities": ["namespace:ns1", "namespace:ns2"]}, NAMES)
    assert answer(authz, "user:ns1", "namespace.get", "namespace:ns1")
    assert not answer(authz, "user:ns1", "namespace.get", "namespace:ns2")
    world = {"entities": ["namespace:ns1"], "owners": {"namespace:ns1": "kerberosprincipal:alice@EX.COM"}}
    authz = privilog.load("cdap-5.1", world)
    assert answer(authz, "user:alice@EX.COM", "namespace.get", "namespace:ns1")
    assert not answer(authz, "user:bob@EX.COM", "namespace.get", "namespace:ns1")
    assert [str(e) for e in authz.visible_entities("user:alice@EX.COM", "namespace")] == ["namespace:ns1"]


def test_a_wildcard_matching_an_argument_that_does_not_exist() -> None:
    """cdap: a deploy with a new artifact needs ADMIN on it; a wildcard grant
    (`artifact:ns1.*`) matches the artifact before it exists.

    Kills decide-patterns: decide() running the plan without the `matches` rows of the
    request's arguments.
    """
    world = {
        "entities": ["application:ns1.app"],
        "grants": [[ALICE, "ADMIN", "application:ns1.app"], [ALICE, "ADMIN", "artifact:ns1.*"]],
    }
    authz = privilog.load("cdap", world)
    new = {"artifact": "artifact:ns1.new", "new_artifact": "true"}
    assert answer(authz, ALICE, "application.deploy", "application:ns1.app", new)
    assert not answer(authz, ALICE, "application.deploy", "application:ns1.app", {**new, "artifact": "artifact:ns2.a"})
