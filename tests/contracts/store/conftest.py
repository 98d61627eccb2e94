"""Fixtures for the EventStore contract suite: one `backend` per implementation.

A backend opens any number of handles onto the same data (separate connections for the SQL
stores), so restart and concurrency tests use the real thing. Time comes from `clock`, which
tests move by hand instead of sleeping.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dsx.health.decisions.eventstore import EventStore
from dsx.model.health import ComponentClass, Entity, EntityType, HealthEvent, RecommendedAction
from dsx.store import open_store
from dsx.testing.inmemory import InMemoryEventStore

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


class FakeClock:
    """Epoch seconds that move only when a test says so."""

    def __init__(self) -> None:
        self.now = T0.timestamp()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Backend:
    name: str
    durable: bool
    _open: Callable[[], EventStore]
    _opened: list[EventStore] = field(default_factory=list)

    def open(self) -> EventStore:
        """A new handle onto the same data (the same object for the in-memory fake)."""
        store = self._open()
        self._opened.append(store)
        return store

    def close_all(self) -> None:
        for store in self._opened:
            store.close()


def _memory(clock: FakeClock) -> Callable[[], EventStore]:
    store = InMemoryEventStore(clock=clock)
    return lambda: store


def _make_backend(name: str, request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> Backend:
    if name == "memory":
        return Backend(name, False, _memory(clock))
    if name == "sqlite":
        url = f"sqlite:///{tmp_path / 'events.db'}"
        return Backend(name, True, lambda: open_store(url, clock=clock))
    url = request.getfixturevalue("postgres_url")
    return Backend(name, True, lambda: open_store(url, clock=clock))


ALL = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.integration)]
DURABLE = ["sqlite", pytest.param("postgres", marks=pytest.mark.integration)]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=ALL)
def backend(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> Iterator[Backend]:
    made = _make_backend(request.param, request, tmp_path, clock)
    yield made
    made.close_all()


@pytest.fixture(params=DURABLE)
def durable_backend(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> Iterator[Backend]:
    made = _make_backend(request.param, request, tmp_path, clock)
    yield made
    made.close_all()


@pytest.fixture
def store(backend: Backend) -> EventStore:
    return backend.open()


@pytest.fixture(name="make_event")
def make_event_fixture() -> Callable[..., HealthEvent]:
    return make_event


def make_event(index: int, *, node: str = "n1", minutes: float = 0, healthy: bool = False) -> HealthEvent:
    """A distinct Xid event per index (the index is in the metadata, so keys differ)."""
    return HealthEvent(
        agent="kernel-log-monitor",
        component_class=ComponentClass.GPU,
        check_name="KernelLogXid",
        node_name=node,
        generated_at=T0 + timedelta(minutes=minutes),
        is_fatal=not healthy,
        is_healthy=healthy,
        message=f"NVRM: Xid (PCI:0000:3b:00): 79, event {index}",
        recommended_action=RecommendedAction.NONE if healthy else RecommendedAction.RESTART_BM,
        error_codes=("79",),
        entities=(Entity(EntityType.PCI, "0000:3b:00.0"),),
        metadata={"index": str(index)},
    )
