"""The monitor port and the loop that feeds a monitor into the event store.

A `HealthSource` hands out what it observed since its last commit (`poll`) and persists its
position only when told the events are stored (`commit`). `pump` does one round: poll →
append → commit. A crash between append and commit re-delivers the same events on restart;
monitors build them deterministically, so their idempotency keys match and the store keeps
one copy. Nothing is lost and nothing is stored twice.
"""

from __future__ import annotations

import threading
from typing import Protocol

from dsx.health.decisions.eventstore import EventStore
from dsx.model.health import HealthEvent


class HealthSource(Protocol):
    """A producer of HealthEvents with an at-least-once, commit-after-store position."""

    agent: str
    """Name written into every event's `agent` field."""

    def poll(self) -> list[HealthEvent]:
        """Events observed since the last commit (the same ones again if not committed)."""
        ...

    def commit(self) -> None:
        """The events of the last poll are stored: move the position past them."""
        ...

    def close(self) -> None: ...


def pump(source: HealthSource, store: EventStore) -> int:
    """One round; returns how many events were new to the store."""
    events = source.poll()
    created = sum(1 for appended in store.append(events) if appended.created) if events else 0
    source.commit()
    return created


def run(source: HealthSource, store: EventStore, *, interval_seconds: float, stop: threading.Event) -> None:
    """Pump until `stop` is set, waiting `interval_seconds` between rounds that found nothing."""
    while not stop.is_set():
        if pump(source, store) == 0:
            stop.wait(interval_seconds)
