"""Area of concern: opening a PostgreSQL store that is already current takes no table locks.

A sentinel opens a store per part (each stage, the analyzer, the accounting loop) while the parts
opened first already write. Every opening used to run the schema's DDL again, and PostgreSQL's
`CREATE INDEX IF NOT EXISTS` takes a SHARE lock on its table before it finds the index there: a
stage's write and the opening's DDL each waited on a lock the other held, and the restarted
sentinel of test_crash_safety exited 6 with "deadlock detected".
"""

from __future__ import annotations

import threading

import psycopg
import pytest

from dsx.store.postgres import PostgresEventStore

pytestmark = pytest.mark.integration


def test_a_second_opening_does_not_wait_for_a_writer_of_the_events_table(postgres_url: str) -> None:
    first = PostgresEventStore(postgres_url)
    opened = threading.Event()
    failures: list[BaseException] = []

    def open_again() -> None:
        try:
            PostgresEventStore(postgres_url, pool_size=2).close()  # a pool of its own: no wait for a connection
            opened.set()
        except BaseException as exc:  # surfaced below
            failures.append(exc)

    with psycopg.connect(postgres_url) as writer:
        writer.execute("LOCK TABLE events IN ROW EXCLUSIVE MODE")  # what every INSERT into events holds
        thread = threading.Thread(target=open_again)
        thread.start()
        opened_while_writing = opened.wait(10)
        writer.rollback()
    thread.join(30)
    first.close()
    assert not failures
    assert opened_while_writing, "the second opening waited for the writer's transaction (DDL ran again)"


def test_a_store_short_of_a_table_still_gets_it(postgres_url: str) -> None:
    PostgresEventStore(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("DROP TABLE breakers")
    store = PostgresEventStore(postgres_url)
    try:
        assert store.update_breaker("probe", lambda current: ({"seen": current}, True)) is True
        assert store.load_breaker("probe") == {"seen": None}
    finally:
        store.close()
