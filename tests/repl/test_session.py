"""The REPL's logic, one line at a time through Session.one_shot: every command, its refusals and errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

import privilog.render.query
from privilog.repl import session as repl
from privilog.repl.session import COMMANDS, Session

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "privilog" / "samples" / "world.yaml"

TINY = """policy tiny "two operations"
actions READ, ADMIN
entity instance
entity namespace in instance
entity dataset in namespace
dataset:
  read requires READ
  list shows READ
"""


@pytest.fixture
def world_file(tmp_path: Path) -> Path:
    """A copy of the sample world, so `save world` never touches the shipped one."""
    path = tmp_path / "world.yaml"
    shutil.copy(SAMPLE, path)
    return path


@pytest.fixture
def session(world_file: Path) -> Session:
    return Session("cdap", str(world_file))


def lines(text: str) -> list[str]:
    return text.splitlines()


# ---- the "done when" scenario ----------------------------------------------------------


def test_a_new_user_follows_the_suggested_grant_and_sees_it_allowed(session: Session) -> None:
    request = "user:bob dataset.read dataset:marketing.campaigns"
    assert session.one_shot(f"check {request}").startswith(f"DENY {request}")
    out = session.one_shot(f"whynot {request}")
    assert "READ: UNMET" in out
    suggested = "grant user:bob READ dataset:marketing.campaigns as user:root"
    assert f"  1. {suggested}" in lines(out)
    assert session.one_shot(suggested) == "granted READ on dataset:marketing.campaigns to user:bob"
    assert session.one_shot(f"check {request}") == f"ALLOW {request}"
    assert "user:bob holds READ on dataset:marketing.campaigns" in session.one_shot(f"why {request}")


# ---- check, why, whynot -----------------------------------------------------------------


def test_check_allows_and_denies_in_one_line(session: Session) -> None:
    assert session.one_shot("check user:bob dataset.read dataset:sales.orders") == (
        "ALLOW user:bob dataset.read dataset:sales.orders"
    )
    assert session.one_shot("check user:bob dataset.write dataset:sales.orders") == (
        "DENY user:bob dataset.write dataset:sales.orders: unmet: WRITE"
    )


def test_check_takes_request_arguments_either_way(session: Session) -> None:
    plain = "check user:carol application.deploy application:sales.reports artifact=artifact:sales.etl-lib"
    flagged = "check user:carol application.deploy application:sales.reports --arg artifact=artifact:sales.etl-lib"
    assert session.one_shot(plain).startswith("ALLOW")
    assert session.one_shot(flagged).startswith("ALLOW")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("check user:bob dataset.read", "usage: check PRINCIPAL OPERATION ENTITY"),
        ("check user:bob dataset.reed dataset:sales.orders", "did you mean `dataset.read`?"),
        ("check bob dataset.read dataset:sales.orders", "bob"),
        ("check user:bob dataset.read foo:bar", "unknown entity type `foo`"),
        ("check user:bob dataset.read namespace:sales", "`dataset.read` acts on a dataset"),
        ("check user:bob dataset.read dataset:sales.orders owner", "request arguments are NAME=VALUE"),
        ("check user:bob dataset.read dataset:sales.orders --arg", "--arg takes NAME=VALUE"),
        ("check user:bob dataset.read dataset:sales.orders colour=red", "takes no arguments; not `$colour`"),
    ],
)
def test_a_bad_request_says_what_is_wrong(session: Session, line: str, message: str) -> None:
    reply = session.run(line)
    assert reply.error and not reply.internal
    assert message in reply.text


def test_a_probable_typo_gets_a_note(session: Session) -> None:
    out = lines(session.one_shot("check user:bbo dataset.read dataset:sales.order"))
    assert out[1] == "note: user:bbo appears nowhere in the world; did you mean `user:bob`?"
    assert out[2] == "note: dataset:sales.order does not exist in the world; did you mean `dataset:sales.orders`?"


def test_why_prints_the_proof_through_a_group_and_a_descendant(session: Session) -> None:
    assert lines(session.one_shot("why user:dave namespace.get namespace:marketing")) == [
        "ALLOW user:dave namespace.get namespace:marketing  (policy cdap)",
        "└─ any on self or within: met",
        "   └─ user:dave is in group:analysts, which holds READ on dataset:marketing.campaigns, "
        "which is in namespace:marketing",
    ]


def test_why_for_a_denial_prints_the_whole_tree_and_the_fixes(session: Session) -> None:
    out = session.one_shot("why user:alice namespace.delete namespace:sales")
    assert "├─ ADMIN: met" in out
    assert "└─ ADMIN on every descendant: UNMET" in out
    assert "Would allow it:" in out


def test_whynot_says_joining_a_group_that_holds_it_is_enough(session: Session) -> None:
    assert lines(session.one_shot("whynot user:bob dataset.read dataset:marketing.campaigns")) == [
        "DENY user:bob dataset.read dataset:marketing.campaigns  (policy cdap)",
        "└─ READ: UNMET",
        "   └─ no grant to user:bob or its groups meets it",
        "Would allow it (any one of these 2):",
        "  1. grant READ on dataset:marketing.campaigns to user:bob",
        "  2. add user:bob to group:analysts, which already holds what is needed",
        "To follow a suggestion in this session (as an authorization admin):",
        "  1. grant user:bob READ dataset:marketing.campaigns as user:root",
        "  2. member add user:bob group:analysts as user:root",
    ]
    # and following the second suggestion allows it
    assert session.one_shot("member add user:bob group:analysts as user:root") == "added user:bob to group:analysts"
    assert session.one_shot("check user:bob dataset.read dataset:marketing.campaigns").startswith("ALLOW")
    assert session.one_shot("member add user:bob group:analysts as user:root") == "user:bob is already in group:analysts"
    assert session.run("member add user:bob group:admins as user:bob").error
    assert session.one_shot("member remove user:bob group:analysts as user:root") == "removed user:bob from group:analysts"
    assert session.one_shot("check user:bob dataset.read dataset:marketing.campaigns").startswith("DENY")


def test_whynot_shows_only_what_is_unmet_and_what_a_partial_delete_leaves(session: Session) -> None:
    out = session.one_shot("whynot user:alice namespace.delete namespace:sales")
    assert "ADMIN: met" not in out
    assert "└─ ADMIN on every descendant: UNMET" in out
    assert "A partial delete would leave 9 entities:" in out
    command = next(line for line in lines(out) if line.startswith("  1. grant user:alice ADMIN "))
    assert session.one_shot(command.removeprefix("  1. ")).startswith("granted ADMIN")
    assert session.one_shot("check user:alice namespace.delete namespace:sales").startswith("ALLOW")


def test_whynot_for_an_allowed_request_says_nothing_is_missing(session: Session) -> None:
    assert session.one_shot("whynot user:bob dataset.read dataset:sales.orders") == (
        "ALLOW user:bob dataset.read dataset:sales.orders: nothing is missing (`why` shows the proof)"
    )


def test_whynot_names_a_missing_argument(session: Session) -> None:
    out = session.one_shot("whynot user:carol application.deploy application:sales.reports")
    assert "the request gives no $artifact" in out
    assert "No change of grants allows it" in out
    assert "To follow" not in out


def test_whynot_in_a_world_without_admins_says_who_may_grant() -> None:
    out = Session("cdap").one_shot("whynot user:bob dataset.read dataset:ns1.ds")
    assert "  1. grant user:bob READ dataset:ns1.ds as ADMIN" in lines(out)
    assert "the world lists no admins" in out


# ---- list, who --------------------------------------------------------------------------


def test_list_shows_every_type_with_the_grant_behind_each(session: Session) -> None:
    assert lines(session.one_shot("list user:dave")) == [
        "namespace:marketing  (because user:dave is in group:analysts, which holds READ on "
        "dataset:marketing.campaigns, which is in namespace:marketing)",
        "dataset:marketing.campaigns  (because user:dave is in group:analysts, which holds READ on "
        "dataset:marketing.campaigns)",
    ]


def test_list_by_type_and_within_a_parent(session: Session) -> None:
    assert session.one_shot("list user:alice dataset --in namespace:sales") == "dataset:sales.orders  (ADMIN on it)"
    assert (
        session.one_shot("list user:alice --in namespace:marketing") == "user:alice sees nothing in namespace:marketing"
    )
    assert session.one_shot("list user:dave stream") == "user:dave sees no stream"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("list", "usage: list PRINCIPAL [TYPE] [--in PARENT]"),
        ("list user:dave dataset --in", "usage: list"),
        ("list user:dave datset", "did you mean `dataset`?"),
        ("list user:dave dataset --in application:sales.etl", "never inside"),
    ],
)
def test_list_refuses_what_it_cannot_list(session: Session, line: str, message: str) -> None:
    reply = session.run(line)
    assert reply.error
    assert message in reply.text


def test_who_names_each_principal_that_may_and_why(session: Session) -> None:
    out = lines(session.one_shot("who namespace.get namespace:sales"))
    assert out[0] == "4 of 7 principals in the world may namespace.get namespace:sales:"
    assert out[3] == "  user:carol  (user:carol holds ADMIN on application:sales.reports, which is in namespace:sales)"


def test_who_says_when_nobody_may(session: Session) -> None:
    assert session.one_shot("who securekey.read securekey:sales.db-password") == (
        "nobody in the world may securekey.read securekey:sales.db-password (7 principals checked)"
    )
    assert Session("cdap").one_shot("who dataset.read dataset:ns1.ds") == "the world names no principals"


def test_who_refuses_a_bad_request(session: Session) -> None:
    assert "usage: who OPERATION ENTITY" in session.one_shot("who dataset.read")
    assert "did you mean `dataset.read`?" in session.one_shot("who dataset.raed dataset:sales.orders")


# ---- Datalog queries --------------------------------------------------------------------


def test_a_query_prints_a_table_of_bindings(session: Session) -> None:
    assert lines(session.one_shot('?- descendant(namespace:sales, D), is_a(D, "dataset").')) == [
        "D",
        "-" * len("dataset:sales.orders.archive"),
        "dataset:sales.orders",
        "dataset:sales.orders.archive",
        "(2 rows)",
    ]


def test_a_query_joins_negates_and_compares(session: Session) -> None:
    out = lines(session.one_shot('?- grant(P, "READ", E), not member_of(P, _), P != "user:alice".'))
    assert out[0].split() == ["P", "E"]
    assert out[-1] == "(3 rows)"
    assert not any("user:alice" in line for line in out)


def test_a_query_without_variables_answers_yes_or_no(session: Session) -> None:
    assert session.one_shot("?- descendant(namespace:sales, dataset:sales.orders).") == "yes"
    assert session.one_shot("?- descendant(namespace:marketing, dataset:sales.orders)") == "no"
    assert session.one_shot("?- grant(user:nobody, A, E).") == "no rows"


def test_a_query_may_span_lines_and_notes_an_action_written_as_a_variable(session: Session) -> None:
    assert session.needs_more("?- grant(P, READ, E),")
    out = session.one_shot("?- grant(P, READ, E),\n   member_of(M, P).")
    assert out.splitlines()[-2] == "(2 rows)"
    assert out.splitlines()[-1] == 'note: READ is a variable here (upper-case names are); write "READ" for the action'


def test_a_large_answer_is_cut(session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVILOG_QUERY_ANSWER_ROWS", "3")
    monkeypatch.setattr(privilog.render.query, "MAX_ROWS_SHOWN", 2)
    assert session.one_shot("?- grant(P, A, E).").splitlines()[-1] == (
        "(stopped after 3 rows, the first 2 shown; set PRIVILOG_QUERY_ANSWER_ROWS for more)")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("?- descendnt(E, D).", "unknown relation `descendnt`: did you mean `descendant`?"),
        ("?- descendant(E).", "`descendant` takes 2 arguments, not 1"),
        ("?- descendant(E, D", "<query>:1:16: error: unexpected `.`"),
        ("?- not grant(P, A, E).", "at least one literal that is not negated"),
        ("?- grant(P, A, E), X != P.", "unsafe variable `X`"),
        ("?-", "a query is `?- LITERAL, ... .`"),
        ("?- grant(P, A, E).\ngrant(q, a, e).", "a query is one list of literals"),
        ("?- grant(P, A, E). grant(Q, A, E).", "<query>:1:17: error: unexpected `grant`"),
    ],
)
def test_a_bad_query_says_what_is_wrong(session: Session, line: str, message: str) -> None:
    reply = session.run(line)
    assert reply.error and not reply.internal
    assert message in reply.text


# ---- grant, revoke ----------------------------------------------------------------------


def test_grant_and_revoke_as_an_admin_change_decisions(session: Session) -> None:
    check = "check user:bob dataset.write dataset:sales.orders"
    assert session.one_shot("grant user:bob READ,WRITE dataset:sales.orders as user:root") == "\n".join(
        [
            "granted WRITE on dataset:sales.orders to user:bob",
            "user:bob already holds READ on dataset:sales.orders",
        ]
    )
    assert session.one_shot(check).startswith("ALLOW")
    assert session.one_shot("revoke user:bob WRITE dataset:sales.orders as user:root") == (
        "revoked WRITE on dataset:sales.orders from user:bob"
    )
    assert session.one_shot(check).startswith("DENY")
    assert session.one_shot("revoke user:bob WRITE dataset:sales.orders as user:root") == (
        "user:bob holds no WRITE on dataset:sales.orders: nothing to revoke"
    )


def test_grant_all_and_a_pre_grant(session: Session) -> None:
    out = lines(session.one_shot("grant user:erin ALL dataset:sales.new as user:root"))
    assert out[:4] == [f"granted {a} on dataset:sales.new to user:erin" for a in ("ADMIN", "EXECUTE", "READ", "WRITE")]
    assert out[4] == "note: dataset:sales.new does not exist yet; the grant applies once it is created"


def test_an_admin_through_a_group_may_grant(world_file: Path) -> None:
    data = yaml.safe_load(world_file.read_text())
    data["admins"] = ["group:security"]
    data["members"].append(["user:sam", "group:security"])
    world_file.write_text(yaml.safe_dump(data))
    session = Session("cdap", str(world_file))
    assert session.one_shot("grant user:bob WRITE dataset:sales.orders as user:sam").startswith("granted")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "grant user:bob READ dataset:sales.x as user:bob",
            "user:bob is not an authorization admin, so cannot change grants (admins: user:root",
        ),
        ("revoke user:bob READ dataset:sales.orders as user:alice", "user:alice is not an authorization admin"),
        ("grant user:bob READ dataset:sales.x", "grant needs `as ADMIN`: only an authorization admin may change"),
        ("grant user:bob RAED dataset:sales.x as user:root", "unknown action `RAED`: did you mean `READ`?"),
        ("grant user:bob READ as user:root", "usage: grant PRINCIPAL"),
        ("grant user:bob READ dataset:sales.x as", "usage: grant"),
        ("grant user:bob READ dataset:sales.x as root", "root"),
        ("grant user:bob READ dataset:sales as user:root", "dataset:sales"),
    ],
)
def test_grants_are_refused_with_a_clear_message(session: Session, line: str, message: str) -> None:
    before = set(session.world.grants)
    reply = session.run(line)
    assert reply.error and not reply.internal
    assert message in reply.text
    assert session.world.grants == before


# ---- entities ---------------------------------------------------------------------------


def test_grants_survive_an_entity_deleted_and_recreated(session: Session) -> None:
    listed = "list user:bob dataset --in namespace:sales"
    assert session.one_shot(listed) == "dataset:sales.orders  (READ on it)"
    assert lines(session.one_shot("entity delete dataset:sales.orders as user:root")) == [
        "deleted 1 entity: dataset:sales.orders",
        "  kept 2 grants on it: grants survive a delete and apply again",
    ]
    assert session.one_shot(listed) == "user:bob sees no dataset in namespace:sales"
    assert session.one_shot('?- grant(user:bob, "READ", dataset:sales.orders).') == "yes"
    assert (
        session.one_shot("entity add dataset:sales.orders as user:root") == "added dataset:sales.orders; 2 grants on it apply again"
    )
    assert session.one_shot(listed) == "dataset:sales.orders  (READ on it)"


def test_deleting_an_entity_deletes_what_is_inside(session: Session) -> None:
    out = session.one_shot("entity delete application:sales.etl as user:root")
    assert out.startswith(
        "deleted 4 entities: application:sales.etl, program:sales.etl.service.api, "
        "program:sales.etl.workflow.nightly, schedule:sales.etl.hourly"
    )
    assert (
        session.one_shot("entity add application:sales.etl as user:root")
        == "added application:sales.etl; 1 grant on it applies again"
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("entity", "usage: entity add ENTITY... as ADMIN | entity delete ENTITY... as ADMIN"),
        ("entity remove dataset:sales.orders", "usage: entity"),
        ("entity delete dataset:sales.ordrs as user:root", "no entity dataset:sales.ordrs in the world; did you mean"),
        ("entity add foo:bar as user:root", "unknown entity type `foo`"),
    ],
)
def test_entity_refusals(session: Session, line: str, message: str) -> None:
    reply = session.run(line)
    assert reply.error
    assert message in reply.text


def test_deleting_several_entities_is_all_or_nothing(session: Session) -> None:
    assert "no entity stream:sales.nope" in session.one_shot("entity delete stream:sales.clicks stream:sales.nope as user:root")
    assert "stream:sales.clicks" in session.one_shot('?- is_a(E, "stream").')


def test_adding_an_existing_entity_says_so(session: Session) -> None:
    assert session.one_shot("entity add dataset:sales.orders as user:root") == "dataset:sales.orders already exists"


# ---- load and save ----------------------------------------------------------------------


def test_load_policy_switches_and_drops_the_sessions_rules(session: Session) -> None:
    start = "check user:alice program.start program:sales.etl.service.api"
    assert session.one_shot(start).startswith("DENY")  # cdap: no hierarchical enforcement
    session.one_shot('rule reader(P, E) :- holds(P, "READ", E, _).')
    out = lines(session.one_shot("load policy cdap-4.2"))
    assert out[0].startswith("loaded policy cdap-4.2 (CDAP authorization, 4.2") and out[0].endswith(" operations")
    assert out[1] == "dropped the session's 1 rule"
    assert session.policy_name == "cdap-4.2"
    assert session.rules == []
    assert "unknown relation `reader`" in session.one_shot("?- reader(P, E).")
    assert session.one_shot(start).startswith("ALLOW")  # 4.2: ALL on the namespace serves its programs


def test_load_policy_refusals(session: Session, tmp_path: Path) -> None:
    assert "no policy `nosuch`" in session.one_shot("load policy nosuch")
    broken = tmp_path / "broken.policy"
    broken.write_text(TINY.replace("requires READ", "requires RAED"))
    out = session.one_shot(f"load policy {broken}")
    assert "error: unknown action `RAED`" in out and "^^^^" in out
    tiny = tmp_path / "tiny.policy"
    tiny.write_text(TINY)
    assert "policy tiny has no action EXECUTE, WRITE, which the world grants" in session.one_shot(f"load policy {tiny}")
    assert session.policy.name == "cdap"


def test_load_world_replaces_the_world(session: Session, tmp_path: Path) -> None:
    other = tmp_path / "other.yaml"
    other.write_text("entities: [dataset:ns1.ds]\ngrants: [[user:zoe, READ, dataset:ns1.ds]]\nadmins: [user:root]\n")
    assert session.one_shot(f"load world {other}") == (
        f"loaded world {other}: 1 entity, 1 grant, 0 memberships, admins: user:root"
    )
    assert session.one_shot("check user:zoe dataset.read dataset:ns1.ds").startswith("ALLOW")
    assert session.one_shot("check user:bob dataset.read dataset:sales.orders").startswith("DENY")


def test_load_world_refusals(session: Session, tmp_path: Path) -> None:
    assert session.one_shot("load world nosuch.yaml") == "nosuch.yaml: no such world file"
    bad = tmp_path / "bad.yaml"
    bad.write_text("grants:\n  - [user:bob, RAED, dataset:ns1.ds]\n")
    assert session.one_shot(f"load world {bad}") == f"{bad}:2:16: unknown action `RAED`: did you mean `READ`?"
    assert "usage: load policy POLICY | load world WORLD" in session.one_shot("load planet x")


def test_save_world_writes_the_changes_back(session: Session, world_file: Path, tmp_path: Path) -> None:
    session.one_shot("grant user:bob WRITE dataset:sales.orders as user:root")
    assert session.one_shot("save world").startswith(f"saved the world to {world_file}: ")
    assert ["user:bob", "WRITE", "dataset:sales.orders"] in yaml.safe_load(world_file.read_text())["grants"]
    elsewhere = tmp_path / "elsewhere.yaml"
    session.one_shot(f"save world {elsewhere}")
    assert (
        Session("cdap", str(elsewhere))
        .one_shot("check user:bob dataset.write dataset:sales.orders")
        .startswith("ALLOW")
    )
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary files left behind


def test_save_world_refusals(session: Session) -> None:
    assert "name one, as in `save world world.yaml`" in Session("cdap").one_shot("save world")
    assert "cannot save the world to /nonexistent/dir/w.yaml" in session.one_shot("save world /nonexistent/dir/w.yaml")
    assert "usage: save world [PATH]" in session.one_shot("save policy")


# ---- rules ------------------------------------------------------------------------------


def test_a_rule_takes_part_in_queries_and_decisions(session: Session) -> None:
    assert session.one_shot("rule") == "no rules added in this session (policy cdap as loaded)"
    assert session.one_shot("rule superuser(P) :- admin(P).") == (
        "added to the session's policy (rules added: 1); defines superuser"
    )
    assert session.one_shot("?- superuser(P).").splitlines()[2] == "user:root"
    assert session.one_shot("check user:root dataset.drop dataset:sales.orders").startswith("DENY")
    session.one_shot("rule dropper(P, E) :-\n    holds(P, \"ADMIN\", E, _),\n    superuser(P).")
    assert session.one_shot("?- dropper(P, E).") == "no rows"
    assert session.one_shot("rule") == "\n".join(
        ["1. superuser(P) :- admin(P).", '2. dropper(P, E) :-\n    holds(P, "ADMIN", E, _),\n    superuser(P).']
    )


def test_a_multi_line_rule_continues_until_a_dot(session: Session) -> None:
    assert session.needs_more("rule reader(P, E) :-")
    assert session.needs_more("rule reader(P, E) :-\n  holds(P, A, E, _),")
    assert not session.needs_more('rule reader(P, E) :-\n  holds(P, "READ", E, _).')
    assert not session.needs_more("rule reader(P, E) :-\n")  # an empty line ends it
    assert not session.needs_more("check user:bob dataset.read dataset:sales.orders")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("rule bad(P) :- holdz(P).", "<session rules>:1:11: error: unknown relation `holdz`"),
        ("rule bad(P) :- holdz(P).", "hint: did you mean `holds`?"),
        ("rule bad(P, Q) :- admin(P).", "unsafe variable `Q`"),
        ("rule bad(P) :- admin(P", "<rule>:1:"),
        ('rule grant(user:x, "READ", dataset:a.b).', "`grant` is a base relation"),
        ("rule grant(user:x, READ, dataset:a.b).", "a fact cannot hold the variable `READ`"),
        ("rule relation thing(a)\nthing_of(P) :- admin(P).", "`rule` takes Datalog rules and facts"),
        ("rule loop(X) :- admin(X), not loop(X).", "cannot be stratified"),
    ],
)
def test_a_bad_rule_is_refused_and_the_policy_is_unchanged(session: Session, line: str, message: str) -> None:
    reply = session.run(line)
    assert reply.error and not reply.internal
    assert message in reply.text
    assert session.rules == []
    assert session.one_shot("check user:bob dataset.read dataset:sales.orders").startswith("ALLOW")


# ---- diff -------------------------------------------------------------------------------


@pytest.fixture
def tiny_session(tmp_path: Path) -> tuple[Session, Path]:
    (tmp_path / "tiny.policy").write_text(TINY)
    (tmp_path / "looser.policy").write_text(TINY.replace("read requires READ", "read requires READ | ADMIN"))
    world = tmp_path / "w.yaml"
    world.write_text("entities: [dataset:ns1.ds]\ngrants: [[user:ann, ADMIN, dataset:ns1.ds]]\n")
    return Session(str(tmp_path / "tiny.policy"), str(world)), tmp_path


def test_diff_against_another_policy_shows_a_witness(tiny_session: tuple[Session, Path]) -> None:
    session, folder = tiny_session
    out = session.one_shot(f"diff {folder / 'looser.policy'}")
    assert out.splitlines()[0].endswith("1 of 2 shared operations decide differently")
    assert "allows, tiny denies: user:u dataset.read dataset:ns1.ds" in out


def test_diff_over_the_world_lists_decisions_that_change(tiny_session: tuple[Session, Path]) -> None:
    session, folder = tiny_session
    out = session.one_shot(f"diff {folder / 'looser.policy'} --world")
    assert "deny → allow  user:ann dataset.read dataset:ns1.ds" in out


def test_diff_names_the_sessions_rules(tiny_session: tuple[Session, Path]) -> None:
    session, folder = tiny_session
    session.one_shot("rule reader(P) :- grant(P, _, _).")
    assert session.one_shot(f"diff {folder / 'tiny.policy'}").startswith("tiny+1 rules vs ")


def test_diff_refusals(session: Session) -> None:
    assert "usage: diff POLICY [--world]" in session.one_shot("diff")
    assert "no policy `nosuch`" in session.one_shot("diff nosuch")


# ---- help, quit, robustness -------------------------------------------------------------


def test_help_lists_every_command() -> None:
    out = Session("cdap").one_shot("help")
    for command in COMMANDS.values():
        assert command.usage in out


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_for_each_command_has_an_example_that_runs(
    session: Session, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # `save world my-world.yaml` writes here
    out = session.one_shot(f"help {name}")
    assert out.splitlines()[0] == COMMANDS[name].usage
    assert f"  example: {COMMANDS[name].example}" in out.splitlines()
    if name not in ("diff", "quit", "as"):  # diff is slow on the full policy; quit would leave; as needs a store
        reply = session.run(COMMANDS[name].example)
        assert not reply.error, reply.text


def test_help_for_an_unknown_command(session: Session) -> None:
    assert session.one_shot("help chek") == "no command `chek`: did you mean `check`?"


def test_quit_leaves_and_warns_once_about_unsaved_changes(session: Session) -> None:
    session.one_shot("entity add dataset:sales.new as user:root")
    assert "unsaved changes" in session.one_shot("quit")
    assert not session.finished
    assert session.one_shot("quit") == ""
    assert session.finished


def test_quit_after_saving_leaves_at_once(session: Session) -> None:
    session.one_shot("entity add dataset:sales.new as user:root")
    session.one_shot("save world")
    session.one_shot("exit")
    assert session.finished


@pytest.mark.parametrize(
    ("line", "text"),
    [
        ("chek user:bob dataset.read dataset:sales.orders", "unknown command `chek`: did you mean `check`?"),
        ("frobnicate", "unknown command `frobnicate`: type `help` for the commands"),
        ('check "user:bob', "cannot read the line: No closing quotation"),
    ],
)
def test_a_mistyped_command_is_an_error_and_the_session_carries_on(session: Session, line: str, text: str) -> None:
    reply = session.run(line)
    assert reply == repl.Reply(text, error=True)
    assert session.one_shot("check user:bob dataset.read dataset:sales.orders").startswith("ALLOW")


def test_aliases(session: Session) -> None:
    assert session.one_shot("query child_of(dataset:sales.orders, P).").splitlines()[2] == "namespace:sales"
    assert session.one_shot("why-not user:bob dataset.read dataset:sales.orders").startswith("ALLOW")
    session.one_shot("exit")
    assert session.finished


def test_blank_lines_and_comments_do_nothing(session: Session) -> None:
    assert session.one_shot("") == ""
    assert session.one_shot("   # a comment") == ""


def test_ctrl_c_cancels_a_running_query_and_the_next_one_works(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(session.authorizer.backend, "query", interrupted)
    assert session.run("?- descendant(E, D).") == repl.Reply("cancelled", error=True)
    assert session.run("check user:bob dataset.read dataset:sales.orders") == repl.Reply(
        "ALLOW user:bob dataset.read dataset:sales.orders"
    )


def test_a_bug_is_reported_as_an_internal_error_and_the_session_carries_on(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(session.authorizer, "check", broken)
    reply = session.run("check user:bob dataset.read dataset:sales.orders")
    assert reply.internal and reply.error
    assert reply.text.startswith("internal error: RuntimeError: boom")
    monkeypatch.undo()
    assert session.one_shot("check user:bob dataset.read dataset:sales.orders").startswith("ALLOW")


def test_a_session_that_cannot_start_raises_a_privilog_error(tmp_path: Path) -> None:
    with pytest.raises(repl.PrivilogError, match="no such world file"):
        Session("cdap", str(tmp_path / "missing.yaml"))


# ---- completion -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("che", ["check"]),
        ("wh", ["who", "why", "whynot"]),
        ("check user:b", ["user:bob"]),
        ("why user:bob dataset.r", ["dataset.read"]),
        ("check user:bob dataset.read dataset:sales.", ["dataset:sales.orders", "dataset:sales.orders.archive"]),
        ("check user:carol application.deploy application:sales.etl ar", ["artifact="]),
        ("check user:carol application.deploy application:sales.etl artifact=", ["artifact=artifact:sales.etl-lib"]),
        ("check user:carol application.deploy application:sales.etl new_artifact=t", ["new_artifact=true"]),
        (
            "who stream.",
            [
                "stream.create",
                "stream.drop",
                "stream.get",
                "stream.list",
                "stream.read",
                "stream.truncate",
                "stream.update",
                "stream.write",
            ],
        ),
        ("who stream.read ", ["stream:sales.clicks"]),
        ("list user:dave data", ["dataset", "dataset_module", "dataset_type"]),
        ("list user:dave dataset --in namespace:m", ["namespace:marketing"]),
        ("grant user:bob RE", ["READ"]),
        (
            "grant user:bob READ dataset:marketing.campaigns a",
            ["application:sales.etl", "application:sales.reports", "artifact:sales.etl-lib", "as"],
        ),
        ("grant user:bob READ dataset:marketing.campaigns as ", ["user:root"]),
        ("entity ", ["add", "delete"]),
        ("entity delete stream", ["stream:sales.clicks"]),
        ("load ", ["policy", "world"]),
        ("load policy cdap-d", ["cdap-draft", "cdap-draft-revised"]),
        ("save ", ["world"]),
        ("help gr", ["grant"]),
        ("?- desc", ["descendant"]),
        ("?- descendant(namespace:m", ["namespace:marketing"]),
        ('?- grant(P, "A', ['"ADMIN"']),
        ("rule reader(P) :- hol", ["holds"]),
    ],
)
def test_completion_offers_commands_principals_operations_and_entities(
    session: Session, text: str, expected: list[str]
) -> None:
    assert session.completions(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", ""),
        ("check ", ""),
        ("check user:b", "user:b"),
        ("?- descendant(namespace:m", "namespace:m"),
        ("?- gr", "gr"),
    ],
)
def test_completion_replaces_the_fragment_being_typed(session: Session, text: str, fragment: str) -> None:
    assert session.fragment(text) == fragment


def test_completion_of_paths(session: Session, tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text("")
    assert session.completions(f"load world {tmp_path}/mi") == [f"{tmp_path}/mine.yaml"]


def test_a_name_given_again_is_a_list_argument() -> None:
    session = Session("cdap-5.1")
    session.one_shot("grant user:a ADMIN application:ns1.app as user:root")
    line = "why user:a application.deploy application:ns1.app artifact=artifact:ns1.a datasets=dataset:ns1.x"
    out = session.one_shot(line + " datasets=dataset:ns1.y$Inner")
    assert out.startswith("DENY user:a application.deploy application:ns1.app artifact=artifact:ns1.a")
    assert "user:a lacks it on 2 of 2 entities: dataset:ns1.x, dataset:ns1.y$Inner" in out
    assert session.one_shot(line.replace("datasets=", "artifact=")).endswith(
        "`$artifact` of `application.deploy` names one artifact, not a list"
    )
