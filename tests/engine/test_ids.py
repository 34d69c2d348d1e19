"""Entity and principal ids: parsing, validation, and the hierarchy they imply."""

from __future__ import annotations

import pytest
from privilog.engine.ids import EntityId, IdError, parse_principal


@pytest.mark.parametrize(
    ("text", "parent"),
    [
        ("namespace:ns1", "instance:cdap"),
        ("application:ns1.app", "namespace:ns1"),
        ("program:ns1.app.mapreduce.p", "application:ns1.app"),
        ("schedule:ns1.app.nightly", "application:ns1.app"),
        ("artifact:ns1.etl-lib", "namespace:ns1"),
        ("dataset:ns1.a.b.c", "namespace:ns1"),
        ("dataset_module:ns1.com.example.Mod", "namespace:ns1"),
        ("dataset_type:ns1.table", "namespace:ns1"),
        ("stream:ns1.clicks", "namespace:ns1"),
        ("securekey:ns1.pw", "namespace:ns1"),
    ],
)
def test_parent_comes_from_the_id(text: str, parent: str) -> None:
    entity = EntityId.parse(text)
    assert str(entity) == text
    assert str(entity.parent()) == parent


def test_top_level_entities_have_no_parent() -> None:
    assert EntityId.parse("kerberosprincipal:alice/host@EXAMPLE.COM").parent() is None
    assert EntityId.parse("instance:cdap").parent() is None


def test_dataset_names_split_at_the_first_dot_only() -> None:
    assert EntityId.parse("dataset:ns1.sales.2024").parts == ("ns1", "sales.2024")


def test_ancestors_nearest_first() -> None:
    chain = EntityId.parse("program:ns1.app.service.api").ancestors(instance="prod")
    assert [str(e) for e in chain] == ["application:ns1.app", "namespace:ns1", "instance:prod"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ns1", "expected TYPE:NAME"),
        ("namespce:ns1", "did you mean `namespace`?"),
        ("namespace:ns.1", "malformed namespace id"),
        ("program:ns1.app.api", "expected the form `program:ns1.app.service.api`"),
        ("program:ns1.app.job.p", "malformed program id"),
        ("application:ns1", "malformed application id"),
        ("dataset:ns1", "malformed dataset id"),
        ("dataset:", "malformed dataset id"),
        ("stream:ns1.a b", "malformed stream id"),
    ],
)
def test_malformed_ids_say_what_is_expected(text: str, message: str) -> None:
    with pytest.raises(IdError, match=message.replace("(", r"\(").replace(".", r"\.").replace("?", r"\?")):
        EntityId.parse(text)


def test_principals() -> None:
    assert parse_principal("group:eng") == "group:eng"
    with pytest.raises(IdError, match="did you mean `user:alice`"):
        parse_principal("alice")
    with pytest.raises(IdError, match="expected user:NAME"):
        parse_principal("team:eng")


# ---- CDAP 5.1's name rules (issue 16): every id CDAP accepts, and only those ------------------------

ACCEPTED_BY_CDAP = [
    "dataset_type:ns1.co.cask.cdap.test.app.DummyApp$CustomDummyDataset",  # a nested Java class
    "dataset_module:ns1.co.cask.cdap.test.app.DummyApp$Module",
    "dataset:ns1.$queue",
    "dataset:ns1..hidden",  # [$.a-zA-Z0-9_-]+ may start with a dot
    "artifact:ns1.my.artifact-1.0",  # [.a-zA-Z0-9_-]+
    "artifact:ns1..x",
    "securekey:ns1.db-password_2",  # [a-z0-9_-]+
    "kerberosprincipal:alice",  # not validated by CDAP
    "kerberosprincipal:hdfs/host.example.com@EXAMPLE.COM",
    "kerberosprincipal:svc+ci/h@R",
    "application:ns1.my-app_2",
    "stream:ns_1.clicks-2",
    "program:ns1.app.spark.p-1",
]
REJECTED_BY_CDAP = [
    "securekey:ns1.Password",  # upper case
    "securekey:ns1.db.password",
    "namespace:ns-1",  # [a-zA-Z0-9_]+
    "application:ns1.app.v2",  # an application name has no dot
    "stream:ns1.cl$cks",
    "artifact:ns1.a$b",
    "dataset:ns1.a b",
    "dataset:ns1.",
    "kerberosprincipal:alice smith",
    "kerberosprincipal:a:b",
    "kerberosprincipal:",
]


@pytest.mark.parametrize("text", ACCEPTED_BY_CDAP)
def test_every_id_cdap_accepts_is_accepted(text: str) -> None:
    entity = EntityId.parse(text)
    assert str(entity) == text and EntityId(entity.type, entity.name) == entity


@pytest.mark.parametrize("text", REJECTED_BY_CDAP)
def test_an_id_cdap_rejects_is_rejected_with_one_line(text: str) -> None:
    with pytest.raises(IdError) as raised:
        EntityId.parse(text)
    assert "\n" not in str(raised.value) and "expected the form" in str(raised.value)


def test_artifact_names_split_at_the_first_dot_as_dataset_names_do() -> None:
    artifact = EntityId.parse("artifact:ns1.my.artifact-1.0")
    assert artifact.parts == ("ns1", "my.artifact-1.0")
    assert str(artifact.parent()) == "namespace:ns1"
    assert str(EntityId.parse("dataset_type:ns1.a.B$C").parent()) == "namespace:ns1"


@pytest.mark.parametrize("text", ["kerberosprincipal:svc*@EXAMPLE.COM", "kerberosprincipal:svc?@EXAMPLE.COM"])
def test_a_kerberos_principal_with_a_wildcard_is_a_pattern_never_a_plain_id(text: str) -> None:
    """Issue 33, item 1: `*` and `?` are wildcards in every id, kerberos principals too."""
    from privilog.engine.patterns import is_pattern, matches, parse_pattern

    with pytest.raises(IdError, match="is a wildcard: only a grant may name one"):
        EntityId.parse(text)
    with pytest.raises(IdError):
        EntityId("kerberosprincipal", text.partition(":")[2])
    pattern = parse_pattern(text)
    assert is_pattern(pattern) and str(pattern) == text
    assert matches(pattern, EntityId.parse("kerberosprincipal:svcx@EXAMPLE.COM"))
