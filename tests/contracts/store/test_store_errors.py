"""Area of concern: the SQL stores tell retryable errors from defects. A locked or unreachable
database is unavailable (exit 6, 503, retried); a missing column or a syntax error is internal
(exit 8, 500, not retried forever) and keeps the driver's exception as its cause, so the log
shows the traceback; a store written by a newer schema is refused naming both versions."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dsx.errors import BadInputError, InternalError, UnavailableError, exit_code_for, http_status_for
from dsx.store import open_store, sql
from dsx.store.sqlite import SqliteEventStore

from .conftest import Backend


def test_a_schema_or_programming_error_is_internal_with_the_drivers_traceback(durable_backend: Backend) -> None:
    store = durable_backend.open()
    assert isinstance(store, sql.SqlEventStore)
    with pytest.raises(InternalError) as raised, store.transaction(write=False) as cur:
        cur.execute("SELECT no_such_column FROM events")
    assert "no_such_column" in str(raised.value) and "a bug in dsx or a damaged store" in str(raised.value)
    assert raised.value.__cause__ is not None and raised.value.__cause__.__traceback__ is not None
    assert (exit_code_for(raised.value), http_status_for(raised.value)) == (8, 500)
    assert store.last_sequence() == 0  # the store is still usable afterwards


def test_a_store_written_by_a_newer_schema_is_refused_naming_both_versions(durable_backend: Backend) -> None:
    store = durable_backend.open()
    assert isinstance(store, sql.SqlEventStore)
    with store.transaction(write=True) as cur:
        cur.execute("UPDATE dsx_schema SET version = ? WHERE name = ?", (sql.SCHEMA_VERSION + 1, "events"))
    with pytest.raises(BadInputError) as raised:
        durable_backend.open()
    message = str(raised.value)
    assert f"schema version {sql.SCHEMA_VERSION + 1} was written by a newer dsx" in message
    assert f"this dsx reads schema version {sql.SCHEMA_VERSION}" in message
    assert exit_code_for(raised.value) == 2


def test_a_locked_sqlite_database_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    store = SqliteEventStore(path, busy_timeout_seconds=0.05)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock
    try:
        with pytest.raises(UnavailableError, match="database is locked") as raised:
            store.save_breaker("quarantine", {"state": "closed"})
        assert (exit_code_for(raised.value), http_status_for(raised.value)) == (6, 503)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    store.save_breaker("quarantine", {"state": "closed"})  # and it works once the lock is gone
    store.close()


def test_a_file_that_is_not_a_database_is_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    path.write_bytes(b"this is not SQLite " * 100)
    with pytest.raises(BadInputError, match="not a database"):
        open_store(f"sqlite:///{path}")


@pytest.mark.integration
def test_an_unreachable_postgres_server_is_unavailable() -> None:
    from dsx.store.postgres import PostgresEventStore

    with pytest.raises(UnavailableError, match=r"127\.0\.0\.1"):
        PostgresEventStore("postgresql://dsx@127.0.0.1:1/none", connect_timeout_seconds=1)


def test_only_bookkeeping_skips_waiting_for_the_disk_and_only_in_its_own_transaction(
    durable_backend: Backend,
) -> None:
    """PostgreSQL: claims, acknowledgements and cursor follows commit without waiting for the WAL
    flush (a lost one only offers events again); appends and everything after them wait as before.
    SQLite's WAL with synchronous=NORMAL already treats every commit alike: the hook does nothing."""
    store = durable_backend.open()
    assert isinstance(store, sql.SqlEventStore)
    setting = "SHOW synchronous_commit" if durable_backend.name == "postgres" else "PRAGMA synchronous"
    with store.transaction(write=True) as cur:
        cur.execute(setting)
        before = cur.fetchone()[0]
        store.bookkeeping(cur)
        cur.execute(setting)
        during = cur.fetchone()[0]
    with store.transaction(write=True) as cur:
        cur.execute(setting)
        after = cur.fetchone()[0]
    if durable_backend.name == "postgres":
        assert (before, during, after) == ("on", "off", "on")
    else:
        assert before == during == after
