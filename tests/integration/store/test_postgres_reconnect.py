"""Area of concern: a PostgreSQL store outlives a dropped connection (server restart, failover,
idle-connection reaper): the call that hits the dead connection fails with a one-line
UnavailableError, the next one reconnects, and nothing stored is lost."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest

from dsx.errors import UnavailableError
from dsx.model.health import ComponentClass, HealthEvent
from dsx.store.postgres import PostgresEventStore

pytestmark = pytest.mark.integration


def event(index: int) -> HealthEvent:
    return HealthEvent(
        agent="test",
        component_class=ComponentClass.NODE,
        check_name="Probe",
        node_name="n1",
        generated_at=datetime(2026, 11, 29, tzinfo=UTC),
        is_fatal=False,
        is_healthy=True,
        message=f"probe {index}",
    )


def drop_connections(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE pid <> pg_backend_pid() AND datname = current_database() AND backend_type = 'client backend'"
        ).fetchone()
    return int(row[0]) if row else 0


def test_a_dropped_connection_fails_once_then_reconnects(postgres_url: str) -> None:
    store = PostgresEventStore(postgres_url)
    store.append([event(0)])
    assert store.wait_for_events(1, 0.3) is False  # opens the LISTEN connection too
    assert drop_connections(postgres_url) >= 2
    with pytest.raises(UnavailableError) as info:
        store.last_sequence()
    assert str(info.value).startswith("postgresql://127.0.0.1:")
    assert "\n" not in str(info.value)
    assert store.append([event(0), event(1)])[1].sequence == 2
    assert store.last_sequence() == 2
    assert store.wait_for_events(2, 0.05) is False  # the dead listener is replaced, not raised
    assert store.wait_for_events(2, 0.05) is False
    store.append([event(2)])
    assert store.wait_for_events(2, 0.05) is True
    store.close()
