"""Appends from many threads committed together: one store transaction per round, not per caller.

The sentinel's `POST /v1/events` serves each request on its own thread, and at fleet size most
requests carry one or two events (each node's monitor posts what it read since its last poll).
One transaction per request spends the store's time on BEGIN, the sequence lookup and COMMIT
(an fsync on PostgreSQL) rather than on events. Here the first caller to find no write in
progress becomes the writer: it takes every queued request (up to `max_events_per_round`),
appends them in one `EventStore.append`, hands each caller its own slice of the result, and
repeats until its own request is done; callers arriving meanwhile queue behind it. Each caller
still returns only after its events are committed, so the ingestion contract (202 means
stored) is unchanged. The queue is bounded: past `max_pending_events` callers wait for room.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from dsx.health.decisions.eventstore import Appended, EventStore
from dsx.model.health import HealthEvent

MAX_EVENTS_PER_ROUND = 2000
MAX_PENDING_EVENTS = 50_000


@dataclass(eq=False)
class _Request:
    events: Sequence[HealthEvent]
    result: list[Appended] = field(default_factory=list)
    error: BaseException | None = None
    done: bool = False
    writer: bool = False
    """This caller writes the next rounds (it was first, or the last writer handed it the role)."""
    wake: threading.Event = field(default_factory=threading.Event)
    """Set once: when the request is committed, or when it becomes the writer."""
    urgent: bool = False
    """Carries an event that needs action: the next round takes it ahead of the queue."""


class GroupCommit:
    """`append` for many threads over one store; see the module docstring.

    Each caller sleeps on its own event: a commit wakes the callers it committed, and a writer
    that is done hands the role to the oldest queued caller, waking that one alone (not every
    queued thread per round, which at a few hundred concurrent posts was most of the wake-ups)."""

    def __init__(
        self,
        store: EventStore,
        *,
        max_events_per_round: int = MAX_EVENTS_PER_ROUND,
        max_pending_events: int = MAX_PENDING_EVENTS,
    ) -> None:
        self._store = store
        self._max_round = max_events_per_round
        self._max_pending = max_pending_events
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self._queue: deque[_Request] = deque()
        self._pending_events = 0
        self._writing = False
        self.rounds = 0
        """Transactions committed (requests / rounds is the batching achieved)."""

    def append(self, events: Sequence[HealthEvent], *, urgent: bool = False) -> list[Appended]:
        """Store `events` (returns once committed); `urgent` ones go in the next round, ahead of the queue."""
        if not events:
            return []
        request = _Request(events, urgent=urgent)
        with self._room:
            # bounded: wait for room, unless nothing is queued (a single oversized request still goes)
            self._room.wait_for(lambda: self._pending_events + len(events) <= self._max_pending or not self._queue)
            self._queue.append(request)
            self._pending_events += len(events)
            if not self._writing:
                self._writing = request.writer = True
        if not request.writer:
            request.wake.wait()
        if not request.done:
            self._write_until(request)
        if request.error is not None:
            raise request.error
        return request.result

    def _write_until(self, mine: _Request) -> None:
        try:
            while not mine.done:
                with self._lock:
                    batch = self._next_round()
                self._commit(batch)
        finally:
            with self._lock:
                if self._queue:  # the oldest waiting caller writes next
                    successor = self._queue[0]
                    successor.writer = True
                    successor.wake.set()
                else:
                    self._writing = False

    def _next_round(self) -> list[_Request]:
        """Urgent requests alone when any wait (a small, quick round), else the queue in order."""
        urgent = [r for r in self._queue if r.urgent]
        if urgent:
            for request in urgent:
                self._queue.remove(request)
            return urgent
        batch = [self._queue.popleft()]
        size = len(batch[0].events)
        while self._queue and size + len(self._queue[0].events) <= self._max_round:
            size += len(self._queue[0].events)
            batch.append(self._queue.popleft())
        return batch

    def _commit(self, batch: list[_Request]) -> None:
        try:
            appended = self._store.append([event for request in batch for event in request.events])
        except BaseException as exc:  # every caller in the round sees the store's error, as it would alone
            for request in batch:
                request.error = exc
        else:
            start = 0
            for request in batch:
                request.result = appended[start : start + len(request.events)]
                start += len(request.events)
        with self._room:
            self.rounds += 1
            for request in batch:
                request.done = True
                self._pending_events -= len(request.events)
            self._room.notify_all()  # only callers waiting for room sleep here
        for request in batch:
            request.wake.set()
