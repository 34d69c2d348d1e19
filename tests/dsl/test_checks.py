"""The language's static checks, one broken policy each, and the lowering they guard.

Each test asserts what a user reads: the message, the ``file:line:col`` of the
error and the hint. Policies are parsed without the prelude unless the check
needs it, so each error is the only one.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from privilog.dsl.check import strata
from privilog.dsl.errors import PolicyError, PolicyErrors, PrivilogError
from privilog.dsl.ir import Condition, Option, Requirement, Scope, Target

from privilog import dsl

ROOT = Path(__file__).resolve().parents[2]
FILE = "checks.policy"

# Seven lines: the text a test adds starts on line 8.
VOCABULARY = """\
actions READ, WRITE, EXECUTE, ADMIN
set any = READ | WRITE | EXECUTE | ADMIN
entity namespace
entity application in namespace
entity program in application
entity dataset in namespace
entity kerberosprincipal
"""


def errors_in(text: str) -> list[PolicyError]:
    with pytest.raises(PrivilogError) as raised:
        dsl.parse_policy(text, FILE, include_prelude=False)
    error = raised.value
    if isinstance(error, PolicyErrors):
        return error.errors
    assert isinstance(error, PolicyError), repr(error)
    return [error]


def the_error(text: str) -> PolicyError:
    errors = errors_in(text)
    assert len(errors) == 1, "\n".join(e.render() for e in errors)
    return errors[0]


def at(line: int, column: int) -> str:
    return f"{FILE}:{line}:{column}"


def reported(error: PolicyError) -> tuple[str, str, str]:
    """Where, what and the hint: the three things a user reads."""
    return str(error.span), error.message, error.hint


# -- names ---------------------------------------------------------------------


def test_unknown_action_suggests_the_closest() -> None:
    error = the_error(VOCABULARY + "namespace:\n  create requires ADMN\n")
    assert reported(error) == (at(9, 19), "unknown action `ADMN`", "did you mean `ADMIN`?")


def test_unknown_action_without_a_close_one_lists_the_actions() -> None:
    error = the_error(VOCABULARY + "namespace:\n  create requires OWN\n")
    assert reported(error) == (
        at(9, 19),
        "unknown action `OWN`",
        "actions are READ, WRITE, EXECUTE, ADMIN, any",
    )


def test_unknown_entity_type_of_a_block() -> None:
    error = the_error(VOCABULARY + "namespce:\n  create requires ADMIN\n")
    assert reported(error) == (
        at(9, 3),
        "unknown entity type `namespce` for operation `create`",
        "did you mean `namespace`?",
    )


def test_unknown_entity_type_as_a_parent() -> None:
    error = the_error(VOCABULARY + "entity stream in namespce\n")
    assert reported(error) == (
        at(8, 1),
        "unknown entity type `namespce` as the parent of `stream`",
        "did you mean `namespace`?",
    )


def test_unknown_relation_suggests_the_closest() -> None:
    error = the_error("relation grant(principal, action, entity)\nholds(P, A, E) :- grnt(P, A, E).\n")
    assert reported(error) == (at(2, 19), "unknown relation `grnt`", "did you mean `grant`?")


def test_unknown_request_argument_as_a_target() -> None:
    error = the_error(VOCABULARY + "namespace:\n  create($owner: kerberosprincipal) requires ADMIN on $ownr\n")
    assert reported(error) == (
        at(9, 55),
        "unknown request argument `$ownr` of `namespace.create`",
        "did you mean `$owner`?",
    )


def test_unknown_request_argument_without_a_close_one_says_how_to_declare_it() -> None:
    error = the_error(VOCABULARY + "namespace:\n  create requires ADMIN on $owner\n")
    assert reported(error) == (
        at(9, 28),
        "unknown request argument `$owner` of `namespace.create`",
        "declare it: `create($owner: TYPE) requires ...`",
    )


def test_unknown_request_argument_in_a_condition() -> None:
    error = the_error(VOCABULARY + "namespace:\n  create($owner: kerberosprincipal) requires ADMIN on $owner if $ownr\n")
    assert reported(error) == (
        at(9, 65),
        "unknown request argument `$ownr` of `namespace.create`",
        "did you mean `$owner`?",
    )


def test_a_bool_argument_is_not_a_target() -> None:
    error = the_error(VOCABULARY + "application:\n  deploy($new_artifact: bool) requires ADMIN on $new_artifact\n")
    assert reported(error) == (
        at(9, 49),
        "`$new_artifact` is a bool, not an entity",
        "use it as a condition: `... if $new_artifact`",
    )


def test_a_list_argument_is_asked_of_with_every() -> None:
    error = the_error(VOCABULARY + "application:\n  deploy($datasets: [dataset]) requires ADMIN on $datasets\n")
    assert reported(error) == (
        at(9, 50),
        "`$datasets` is a list of entities, not one",
        "ask of each with `every $datasets`",
    )


def test_every_of_an_argument_needs_a_list() -> None:
    error = the_error(VOCABULARY + "application:\n  deploy($artifact: dataset) requires ADMIN on every $artifact\n")
    assert reported(error) == (
        at(9, 48),
        "`$artifact` is not a list of entities",
        "declare it as one, `$artifact: [TYPE]`, or ask of it as `$artifact`",
    )
    error = the_error(VOCABULARY + "application:\n  deploy($datasets: [dataset]) requires ADMIN on every $dataset\n")
    assert reported(error)[:2] == (at(9, 50), "unknown request argument `$dataset` of `application.deploy`")
    assert "$datasets" in error.hint


def test_a_list_names_entities_not_bools() -> None:
    error = the_error(VOCABULARY + "application:\n  deploy($flags: [bool]) requires ADMIN\n")
    assert reported(error)[:2] == (at(9, 10), "`$flags` is a list of bools")


def test_a_list_argument_lowers_to_every_argument_and_formats_back() -> None:
    text = VOCABULARY + (
        "application:\n  deploy($datasets: [dataset], $artifact: dataset) requires ADMIN on every $datasets if $datasets\n"
    )
    policy = dsl.parse_policy(text, FILE, include_prelude=False)
    (op,) = policy.operations
    assert [(p.name, p.type, p.many) for p in op.params] == [("datasets", "dataset", True), ("artifact", "dataset", False)]
    (requirement,) = op.requirements
    assert requirement.options[0].targets == (Target(Scope.EVERY_ARGUMENT, "datasets"),)
    assert requirement.options[0].targets[0].every
    formatted = dsl.format_policy(policy)
    assert "deploy($datasets: [dataset], $artifact: dataset) requires ADMIN on every $datasets if $datasets" in formatted
    assert dsl.format_policy(dsl.parse_policy(formatted, FILE, include_prelude=False)) == formatted


# -- tables --------------------------------------------------------------------


def test_duplicate_operation_points_at_the_first() -> None:
    error = the_error(VOCABULARY + "namespace:\n  get requires READ\n  get requires WRITE\n")
    assert reported(error) == (
        at(10, 3),
        "operation `namespace.get` is defined twice",
        f"the first is at {at(9, 3)}; merge their requirements with `,`",
    )


def test_operation_outside_a_block() -> None:
    error = the_error(VOCABULARY + "  get requires READ\n")
    assert reported(error) == (
        at(8, 3),
        "operation `get` is not inside an entity block",
        "start the block with its entity type, e.g. `namespace:` on a line of its own",
    )
    assert str(error).splitlines()[1:3] == ["      get requires READ", "      ^^^"]


def test_every_names_a_type_inside_the_entity() -> None:
    error = the_error(VOCABULARY + "application:\n  delete requires ADMIN on every dataset\n")
    assert reported(error) == (
        at(9, 28),
        "`dataset` is not a type inside `application`",
        "types inside are: program",
    )


def test_every_suggests_the_closest_type_inside() -> None:
    error = the_error(VOCABULARY + "namespace:\n  delete requires ADMIN on every progam\n")
    assert reported(error) == (
        at(9, 28),
        "`progam` is not a type inside `namespace`",
        "did you mean `program`?",
    )


def test_an_ancestor_target_must_enclose_the_entity() -> None:
    error = the_error(VOCABULARY + "application:\n  get requires READ on dataset\n")
    assert reported(error) == (
        at(9, 24),
        "`dataset` does not enclose `application`",
        "the enclosing types are: namespace",
    )


def test_parent_of_a_top_level_type() -> None:
    error = the_error(VOCABULARY + "namespace:\n  get requires READ on parent\n")
    assert reported(error) == (at(9, 24), "`namespace` has no parent", "declare it with `entity X in PARENT`")


# -- Datalog -------------------------------------------------------------------


def test_unsafe_variable_in_the_head() -> None:
    error = the_error("relation edge(a, b)\npath(X, Y) :- edge(X, X).\n")
    assert reported(error) == (
        at(2, 9),
        "unsafe variable `Y`: it is in the head but in no positive literal of the body",
        "bind `Y` with a relation in the body",
    )


def test_unsafe_variable_in_a_negation() -> None:
    error = the_error("relation edge(a, b)\nlonely(X) :- edge(X, X), not edge(X, Y).\n")
    assert reported(error) == (
        at(2, 26),
        "unsafe variable `Y`: it appears in a negation but in no positive literal",
        "bind `Y` with a positive literal, or write `_` for 'any'",
    )


def test_unsafe_variable_in_a_comparison() -> None:
    error = the_error("relation edge(a, b)\nother(X) :- edge(X, X), X != Y.\n")
    assert reported(error) == (
        at(2, 25),
        "unsafe variable `Y`: it appears in a comparison but in no positive literal",
        "bind `Y` with a positive literal, or write `_` for 'any'",
    )


def test_a_relation_that_negates_itself_cannot_be_stratified() -> None:
    error = the_error("relation node(n)\nodd(X) :- node(X), not odd(X).\n")
    assert reported(error) == (
        at(2, 20),
        "`odd` depends on its own negation through `odd`: the rules cannot be stratified",
        "a relation may negate only relations that do not depend on it",
    )


def test_negation_through_a_cycle_cannot_be_stratified() -> None:
    error = the_error("relation node(n)\nwin(X) :- node(X), not lose(X).\nlose(X) :- node(X), not win(X).\n")
    assert error.message.endswith("depends on its own negation through `win`: the rules cannot be stratified") or (
        error.message.endswith("depends on its own negation through `lose`: the rules cannot be stratified")
    )
    assert str(error.span) in (at(2, 20), at(3, 21))


def test_arity_mismatch() -> None:
    error = the_error("relation edge(a, b)\nstart(X) :- edge(X).\n")
    assert reported(error) == (at(2, 13), "`edge` takes 2 arguments, not 1", "")


def test_variable_in_a_fact() -> None:
    error = the_error("relation edge(a, b)\nedge(a, X).\n")
    assert reported(error) == (
        at(2, 9),
        "a fact cannot hold the variable `X`",
        "quote it to make it a constant, or write a rule with a body",
    )


def test_every_error_is_reported_at_once() -> None:
    errors = errors_in(VOCABULARY + "namespace:\n  create requires ADMN\n  get requires READ on parent\n")
    assert [str(e.span) for e in errors] == [at(9, 19), at(10, 24)]


# -- syntax --------------------------------------------------------------------


def test_missing_dot_at_the_end_of_a_rule() -> None:
    error = the_error("relation edge(a, b)\nloop(X) :- edge(X, X)\ntwice(X) :- edge(X, X).\n")
    assert str(error.span) == at(2, 22)
    assert error.message.startswith("unexpected end of line, expected `,`")
    assert error.hint == "a Datalog rule or fact ends with `.`"
    assert str(error).splitlines()[1:3] == ["    loop(X) :- edge(X, X)", "    " + " " * 21 + "^"]


def test_unexpected_character() -> None:
    error = the_error("relation edge(a, b)\nboth(X) :- edge(X, X) & edge(X, X).\n")
    assert reported(error) == (
        at(2, 23),
        "unexpected character `&`",
        "names are letters, digits and `_`; comments start with `#`",
    )
    assert str(error).splitlines()[1:3] == ["    both(X) :- edge(X, X) & edge(X, X).", "    " + " " * 22 + "^"]


def test_unexpected_end_of_file() -> None:
    # The newline after `,` continues the statement, so the file ends inside it.
    error = the_error("actions READ,\n")
    assert reported(error) == (at(1, 14), "unexpected end of file, expected a name", "")


def test_a_newline_ends_a_statement_unless_the_line_asks_for_more() -> None:
    error = the_error(VOCABULARY + "namespace:\n  get requires READ\n      | WRITE\n")
    assert str(error.span) == at(10, 7)
    assert error.message.startswith("unexpected `|`")


# -- what the checks let through -----------------------------------------------


def self_option(*actions: str) -> Option:
    return Option(actions, (Target(Scope.SELF),))


def argument_option(name: str, *actions: str) -> Option:
    return Option(actions, (Target(Scope.ARGUMENT, name),))


ANY = ("READ", "WRITE", "EXECUTE", "ADMIN")


def test_if_else_lowers_into_two_guarded_requirements() -> None:
    policy = dsl.parse_policy(
        VOCABULARY
        + "entity artifact in namespace\n"
        + "application:\n"
        + "  deploy($artifact: artifact, $new_artifact: bool) requires ADMIN,\n"
        + "      ADMIN on $artifact if $new_artifact else any on $artifact\n",
        FILE,
        include_prelude=False,
    )
    deploy = policy.operation("application.deploy")
    assert deploy is not None
    assert deploy.requirements == (
        Requirement((self_option("ADMIN"),)),
        Requirement((argument_option("artifact", "ADMIN"),), Condition("new_artifact", present=True)),
        Requirement((argument_option("artifact", *ANY),), Condition("new_artifact", present=False)),
    )


def test_if_not_else_lowers_into_the_opposite_guards() -> None:
    policy = dsl.parse_unchecked(VOCABULARY + "namespace:\n  create($quick: bool) requires READ if not $quick else WRITE\n")
    (create,) = policy.operations
    assert [r.condition for r in create.requirements] == [
        Condition("quick", present=False),
        Condition("quick", present=True),
    ]
    assert [r.options for r in create.requirements] == [(self_option("READ"),), (self_option("WRITE"),)]


def test_a_line_continues_after_comma_bar_or_and_parenthesis() -> None:
    one_line = VOCABULARY + (
        "application:\n"
        "  get requires READ | WRITE on self or ADMIN on namespace, EXECUTE or (READ on parent)\n"
        "reach(X, Y) :- child(X, Y), not blocked(X), X != Y.\n"
        "relation child(c, p)\n"
        "relation blocked(e)\n"
    )
    wrapped = VOCABULARY + (
        "application:\n"
        "  get requires READ |\n"
        "      WRITE on self or\n"
        "      ADMIN on namespace,\n"
        "      EXECUTE or (\n"
        "          READ on parent\n"
        "      )\n"
        "reach(X, Y) :-\n"
        "    child(X, Y),\n"
        "    not\n"
        "    blocked(X), X != Y.\n"
        "relation child(c,\n"
        "    p)\n"
        "relation blocked(e)\n"
    )
    assert dsl.parse_policy(wrapped, FILE, include_prelude=False) == dsl.parse_policy(
        one_line, FILE, include_prelude=False
    )


def test_format_text_keeps_comments_in_place() -> None:
    text = (
        "# The head comment.\n"
        "policy demo  # trailing the policy line\n"
        "\n"
        "actions READ, ADMIN\n"
        "entity namespace\n"
        "\n"
        "namespace:\n"
        "  # before the operation\n"
        "  get   requires   READ  # trailing the operation\n"
        "holds(P) :- grant(P).  # trailing the rule\n"
        "relation grant(p)\n"
        "# the last word\n"
    )
    canonical = dsl.format_text(text)
    assert canonical == (
        "# The head comment.\n"
        "policy demo  # trailing the policy line\n"
        "\n"
        "actions READ, ADMIN\n"
        "entity namespace\n"
        "\n"
        "namespace:\n"
        "  # before the operation\n"
        "  get requires READ  # trailing the operation\n"
        "holds(P) :-\n"
        "    grant(P).  # trailing the rule\n"
        "relation grant(p)\n"
        "# the last word\n"
    )
    assert dsl.format_text(canonical) == canonical


def test_strata_put_a_negated_relation_below_its_user() -> None:
    policy = dsl.parse_unchecked(
        "relation node(n)\n"
        "safe(X) :- node(X), not unreached(X).\n"
        "unreached(X) :- node(X), not reached(X).\n"
        "reached(X) :- node(X).\n"
    )
    assert strata(policy.rules) == [["reached"], ["unreached"], ["safe"]]


def test_strata_of_the_prelude_evaluate_each_negation_first() -> None:
    levels = {name: level for level, names in enumerate(strata(dsl.load_policy("cdap").rules)) for name in names}
    for negated, user in [
        ("covered_held", "lacking"),
        ("some_lacking", "every_met"),
        ("guarded", "applies"),
        ("satisfied", "unmet"),
        ("denied", "allowed"),
    ]:
        assert levels[negated] < levels[user], (negated, user)


# -- bugs ----------------------------------------------------------------------


def test_a_check_error_in_text_shows_its_source_line() -> None:
    text = VOCABULARY + "namespace:\n  create requires ADMN\n"
    with pytest.raises(PrivilogError) as raised:
        dsl.parse_policy(text, include_prelude=False)
    assert str(raised.value).splitlines()[1:3] == ["      create requires ADMN", "                      ^^^^"]


def test_missing_dot_expects_only_what_can_follow() -> None:
    error = the_error("relation edge(a, b)\nloop(X) :- edge(X, X)\n")
    assert error.message == "unexpected end of line, expected `,` or `.`"


def test_missing_dot_at_the_end_of_the_file_has_the_hint() -> None:
    error = the_error("relation edge(a, b)\nloop(X) :- edge(X, X)")
    assert error.hint == "a Datalog rule or fact ends with `.`"


_STRATIFY = """\
from privilog import dsl
try:
    dsl.parse_policy("relation node(n)\\nwin(X) :- node(X), not lose(X).\\nlose(X) :- node(X), not win(X).\\n",
                     include_prelude=False)
except dsl.PrivilogError as error:
    print(error)
"""


def test_the_unstratifiable_cycle_is_reported_the_same_in_every_run() -> None:
    def run(seed: str) -> str:
        env = {"PYTHONHASHSEED": seed, "PATH": ""}
        done = subprocess.run([sys.executable, "-c", _STRATIFY], cwd=ROOT, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert run("1") == run("2")


def test_a_rule_joins_at_most_sixteen_relations() -> None:
    # each joined literal is a nested loop in the compiled plan, and Python nests at most 20
    def chain(n: int) -> str:
        body = ", ".join(f"edge(X{i}, X{i + 1})" for i in range(n))
        return VOCABULARY + f"relation edge(a, b)\nfar(X0, X{n}) :- {body}.\n"

    dsl.parse_policy(chain(16), FILE, include_prelude=False)
    error = the_error(chain(17))
    assert error.message == "this rule joins 17 relations; a rule joins at most 16"
    assert error.hint.startswith("split it")


def test_a_rule_of_sixteen_joins_compiles_and_answers() -> None:
    from privilog.engine.authorizer import Authorizer
    from privilog.engine.world import World

    n = 16
    body = ", ".join(f"member_of(X{i}, X{i + 1})" for i in range(n))
    cdap = (Path(dsl.__file__).resolve().parents[1] / "rules" / "cdap.policy").read_text(encoding="utf-8")
    policy = dsl.parse_policy(cdap + f"\nfar(X0, X{n}) :- {body}.\n")
    members = {(f"group:g{i}", f"group:g{i + 1}") for i in range(n)}
    authz = Authorizer(policy, World(members=members))
    assert authz.backend.query("far") == {("group:g0", f"group:g{n}")}
