"""Area of concern: how far each consumer is behind, in events and in seconds the oldest waiting
event has waited, reads the same from every store; a consumer past the newest event (events
deleted under it) is reported as lost history, never as zero lag."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dsx.health.decisions import pipeline_status
from dsx.health.decisions.eventstore import EventStore, StageOutcome
from dsx.model.health import HealthEvent
from dsx.store import open_store

from .conftest import FakeClock


def now_of(clock: FakeClock) -> datetime:
    return datetime.fromtimestamp(clock(), UTC)


def test_lag_in_events_and_in_seconds_of_the_oldest_waiting_event(
    store: EventStore, clock: FakeClock, make_event: Callable[..., HealthEvent]
) -> None:
    store.append([make_event(i) for i in range(3)])
    clock.advance(60)
    store.append([make_event(i) for i in range(3, 5)])
    claimed = store.claim("quarantine", "w1", limit=2)
    store.ack("quarantine", "w1", [StageOutcome(s.sequence) for s in claimed])
    store.claim("drain", "w1", limit=5)  # claimed, none finished: all 5 wait
    clock.advance(30)
    lag = {c.consumer: c for c in pipeline_status.consumer_lag(store, now_of(clock))}
    assert (lag["quarantine"].cursor, lag["quarantine"].behind_events) == (2, 3)
    assert lag["quarantine"].behind_seconds == pytest.approx(90, abs=1)  # event 3 was stored at t0
    assert not lag["quarantine"].history_lost and lag["quarantine"].problem is None
    drain = lag.get("drain")
    if drain is not None:  # a consumer that has only claimed may not have a cursor row yet
        assert (drain.cursor, drain.behind_events) == (0, 5)
    claimed = store.claim("quarantine", "w1", limit=10)
    store.ack("quarantine", "w1", [StageOutcome(s.sequence) for s in claimed])
    caught_up = {c.consumer: c for c in pipeline_status.consumer_lag(store, now_of(clock))}["quarantine"]
    assert (caught_up.behind_events, caught_up.behind_seconds) == (0, 0.0)
    document = pipeline_status.document(store, None, now=now_of(clock))
    assert {"consumer": "quarantine", "cursor": 5, "behindEvents": 0, "behindSeconds": 0.0, "historyLost": False} in (
        document["consumers"]
    )


def test_a_cursor_past_the_newest_event_is_lost_history(
    tmp_path: Path, clock: FakeClock, make_event: Callable[..., HealthEvent]
) -> None:
    path = tmp_path / "events.db"
    store = open_store(f"sqlite:///{path}", clock=clock)
    try:
        store.append([make_event(i) for i in range(5)])
        claimed = store.claim("quarantine", "w1", limit=5)
        store.ack("quarantine", "w1", [StageOutcome(s.sequence) for s in claimed])
    finally:
        store.close()
    with sqlite3.connect(path) as raw:  # what a partial restore or an operator's cleanup leaves
        raw.execute("DELETE FROM events WHERE sequence > 2")
    store = open_store(f"sqlite:///{path}", clock=clock)
    try:
        (lost,) = pipeline_status.consumer_lag(store, now_of(clock))
    finally:
        store.close()
    assert (lost.cursor, lost.behind_events, lost.history_lost) == (5, -3, True)
    assert lost.problem is not None
    assert "consumer quarantine is at sequence 5 but the store's newest event is 2" in lost.problem
