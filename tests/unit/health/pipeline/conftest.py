"""Fixtures of the pipeline unit tests (builders live in builders.py)."""

from __future__ import annotations

import pytest

from dsx.testing.inmemory import InMemoryEventStore

from .builders import Clock, RecordingObserver


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(clock: Clock) -> InMemoryEventStore:
    return InMemoryEventStore(clock=clock)


@pytest.fixture
def observer() -> RecordingObserver:
    return RecordingObserver()
