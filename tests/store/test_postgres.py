"""What only the PostgreSQL store does: errors without passwords, reconnecting, following after a lost connection."""

from __future__ import annotations

import time

import psycopg
import pytest

from privilog import dsl
from privilog.store import StoreError, open_store
from privilog.store.deployment import Deployment
from privilog.store.postgres import PostgresStore, redact
from tests.pg import TemporaryPostgres, free_port


def test_an_unreachable_server_is_one_line_without_the_password() -> None:
    with pytest.raises(StoreError) as caught:
        open_store(f"postgresql://bob:hunter2@127.0.0.1:{free_port()}/authz?password=hunter3")
    message = str(caught.value)
    assert "hunter2" not in message and "hunter3" not in message and "\n" not in message
    assert message.startswith("postgresql://bob:***@127.0.0.1:") and "Connection refused" in message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_a_wrong_user_or_database_is_one_line(postgres_server: TemporaryPostgres) -> None:
    with pytest.raises(StoreError, match=r'^postgresql://nobody:\*\*\*@127.0.0.1:\d+/privilog: .*role "nobody"'):
        open_store(f"postgresql://nobody:pw@127.0.0.1:{postgres_server.port}/privilog")
    with pytest.raises(StoreError, match='database "missing" does not exist'):
        open_store(postgres_server.url("missing"))


@pytest.mark.parametrize("url", ["postgresql://bob:hunter2@127.0.0.1:notaport/db", "postgresql://bob:hunter2@[::1/db"])
def test_a_malformed_url_is_one_line_without_the_password(url: str) -> None:
    with pytest.raises(StoreError) as caught:
        open_store(url)
    assert "hunter2" not in str(caught.value) and "\n" not in str(caught.value)


def test_redact_keeps_what_is_not_a_password() -> None:
    assert redact("postgresql://u@h:1/db?sslmode=require") == "postgresql://u@h:1/db?sslmode=require"
    assert redact("postgres://u:p@h/db") == "postgres://u:***@h/db"


def kill_connections(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = 'privilog' AND datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


def test_a_lost_connection_is_a_store_error_and_the_next_call_reconnects(fresh_postgres_url: str) -> None:
    with open_store(fresh_postgres_url) as store:
        store.change("local:ops", "admin.add", ["user:root"], trusted=True)
        assert kill_connections(fresh_postgres_url) == 1
        time.sleep(0.1)
        with pytest.raises(StoreError, match=r"^postgresql://postgres@127.0.0.1:\d+/test_\d+: "):
            store.change("user:root", "grant", [["user:a", "READ", "namespace:ns1"]])
        assert store.change("user:root", "grant", [["user:a", "READ", "namespace:ns1"]]).items  # not applied before
        assert store.last_seq() == 2


def test_a_follower_outlives_a_lost_connection(fresh_postgres_url: str, capfd: pytest.CaptureFixture[str]) -> None:
    policy = dsl.load_policy("cdap")
    with open_store(fresh_postgres_url) as writer, open_store(fresh_postgres_url) as store:
        writer.change("local:ops", "admin.add", ["user:root"], trusted=True)
        deployment = Deployment(store, policy)
        deployment.start_following(interval=0.2)
        try:
            deadline = time.monotonic() + 10
            while deployment.seq < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            kill_connections(fresh_postgres_url)  # the writer's, the store's and the listener's
            time.sleep(0.1)
            with pytest.raises(StoreError):
                writer.change("user:root", "entity.add", ["namespace:ns1"])
            entry = writer.change("user:root", "entity.add", ["namespace:ns1"])
            while deployment.seq < entry.seq and time.monotonic() < deadline:
                time.sleep(0.01)
            assert deployment.seq == entry.seq
        finally:
            deployment.stop_following()
    assert "Traceback" not in capfd.readouterr().err


def test_waiting_on_a_closed_store_is_an_error_not_a_new_connection(fresh_postgres_url: str) -> None:
    store = open_store(fresh_postgres_url)
    assert isinstance(store, PostgresStore)
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.wait_for_change(0, timeout=0)
