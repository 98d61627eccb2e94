"""The analyzer as an event-store consumer: claim, derive with `Analyzer`'s rules, append, acknowledge.

The rules and their windows are decisions (`dsx.health.decisions.analyzer`); this is the loop
that feeds them from the store and writes back what they derive, resumable after a crash.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from dsx.health.decisions.analyzer import Analyzer
from dsx.health.decisions.eventstore import EventStore, StageOutcome, StageStatus
from dsx.model.health import HealthEvent

# -- the pipeline stage -------------------------------------------------------------------------

CONSUMER = "analyzer"


class AnalyzerStage:
    """The analyzer as an event-store consumer: claim → derive → append → ack."""

    def __init__(
        self,
        store: EventStore,
        analyzer: Analyzer,
        *,
        owner: str,
        batch_size: int = 500,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.analyzer = analyzer
        self.owner = owner
        self.batch_size = batch_size
        self._clock = clock
        self._counted: dict[int, list[HealthEvent]] = {}
        """Events counted into the windows but not yet acknowledged, with the events they fired."""

    def warm(self) -> int:
        """Count the stored events the consumer already acknowledged and that are still inside a window."""
        longest = max((rule.window_seconds for rule in self.analyzer.rules), default=0.0)
        cursor = self.store.cursor(CONSUMER)
        since = datetime.fromtimestamp(self._clock(), UTC) - timedelta(seconds=longest)
        after, counted = 0, 0
        while after < cursor:
            page = self.store.events(after_sequence=after, limit=self.batch_size, since=since)
            page = [stored for stored in page if stored.sequence <= cursor]
            if not page:
                break
            self.analyzer.warm(stored.event for stored in page)
            counted += len(page)
            after = page[-1].sequence
        return counted

    def step(self) -> int:
        """Process one claimed batch; returns how many events it handled (0: nothing waiting)."""
        batch = self.store.claim(CONSUMER, self.owner, limit=self.batch_size)
        if not batch:
            return 0
        derived: list[HealthEvent] = []
        outcomes: list[StageOutcome] = []
        for stored in batch:
            fired = self._counted.get(stored.sequence)
            if fired is None:  # a retried batch is not counted again
                fired = self._counted[stored.sequence] = self.analyzer.observe(stored.event)
            derived.extend(fired)
            if fired:
                detail = {"derived": [event.idempotency_key for event in fired]}
                outcomes.append(StageOutcome(stored.sequence, StageStatus.DONE, detail))
            else:
                outcomes.append(StageOutcome(stored.sequence, StageStatus.SKIPPED))
        if derived:
            self.store.append(derived)  # before the ack: a crash in between re-derives the same keys
        self.store.ack(CONSUMER, self.owner, outcomes)
        for stored in batch:
            del self._counted[stored.sequence]
        if self._counted:  # held by another owner meanwhile: forget what was acknowledged anyway
            cursor = self.store.cursor(CONSUMER)
            self._counted = {s: fired for s, fired in self._counted.items() if s > cursor}
        return len(batch)

    def run(self, stop: threading.Event, *, idle_wait_seconds: float = 1.0) -> None:
        self.warm()
        while not stop.is_set():
            if self.step() == 0:
                # nothing claimable: sleep until something newer than what exists now is appended
                self.store.wait_for_events(self.store.last_sequence(), idle_wait_seconds)
