"""Pipeline stages as event-store consumers: in order, per node, concurrently, resumable.

Every stage (quarantine, drain, remediation, re-certification) is a consumer with its own
durable cursor. It sees every event, after the stage before it has finished with that event,
and reconciles the event's node: "this node is quarantined, so drain it". Because stage k+1
handles an event only after stage k recorded its outcome for it, whatever stage k did to the
node while handling the event is visible to stage k+1 — no status relay fields, no lost hand-off.

Why concurrent: NVSentinel's fault-quarantine handled one event at a time (~370 ms each, so
~2.5 nodes/s when hundreds of nodes fail together). Here a claimed batch is split by node;
each node's events go, in order, to a worker thread, and different nodes proceed in parallel.
A node's next events wait until its current ones are done.

A handler may finish only a prefix of the events it is given (a drain still waiting on pods,
a re-certification still running): the rest stay unacknowledged and are offered again after
`retry_seconds`. Unacknowledged events keep their lease because every claim by the same
owner renews it; after a crash a new owner gets them once the lease runs out, and the
handler finds the node mid-way (IN_PROGRESS record, node state) and finishes the job.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from dsx.health.eventstore import EventStore, StageOutcome, StageStatus, StoredEvent

log = logging.getLogger("dsx.sentinel")

MAX_UPSTREAM_LOOKUPS = 200
"""Per lookup round, events past the upstream cursor whose upstream record is looked up one by one."""


class StageHandler(Protocol):
    name: str
    """The consumer name (also the stage name in stage records)."""
    upstream: str | None
    """The consumer that must be done with an event first (None: the first stage)."""
    retry_seconds: float
    """How long events a handler left unfinished wait before they are offered again."""

    def handle(self, node_name: str, events: Sequence[StoredEvent]) -> list[StageOutcome]:
        """Outcomes for a prefix of `events` (one node's, in order); the rest are offered again later."""
        ...


class Waker:
    """Wakes idle stage loops: on appends in this process, on acknowledgements, on finished work."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._generation = 0

    @property
    def generation(self) -> int:
        with self._condition:
            return self._generation

    def poke(self) -> None:
        with self._condition:
            self._generation += 1
            self._condition.notify_all()

    def wait(self, seen: int, timeout_seconds: float) -> bool:
        """Return when poked after generation `seen` (True), or after the timeout (False)."""
        with self._condition:
            return self._condition.wait_for(lambda: self._generation != seen, timeout=max(timeout_seconds, 0.0))


@dataclass
class _Dispatch:
    node: str
    sequences: list[int]
    future: Future[list[StageOutcome]] | None
    outcomes: list[StageOutcome] | None = None
    error: BaseException | None = None


class StageRunner:
    """Drives one StageHandler over the store. `workers=0` runs handlers inline (replay, tests)."""

    def __init__(
        self,
        store: EventStore,
        handler: StageHandler,
        *,
        owner: str,
        workers: int = 16,
        batch_size: int = 500,
        lease_seconds: float = 60.0,
        waker: Waker | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.handler = handler
        self.owner = owner
        self.batch_size = batch_size
        self.lease_seconds = lease_seconds
        self.waker = waker or Waker()
        self._clock = clock
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix=f"stage-{handler.name}") if workers else None
        self._running: dict[str, _Dispatch] = {}
        self._held: set[int] = set()
        self._known: dict[int, StoredEvent] = {}
        """Claimed and not yet acknowledged (running, or waiting for upstream or a retry)."""
        self._seen = 0
        self._claimed_at = -float("inf")
        self._lookups_due = 0.0
        self._not_before: dict[str, float] = {}
        self.errors = 0

    @property
    def name(self) -> str:
        return self.handler.name

    @property
    def busy_nodes(self) -> int:
        return len(self._running)

    def step(self) -> int:
        """Acknowledge finished work, then dispatch what is ready.

        Returns how many events were acknowledged or handed to a worker (0: nothing to do now).
        """
        progressed = self._collect()
        now = self._clock()
        if self.store.last_sequence() > self._seen or now - self._claimed_at > self.lease_seconds / 3:
            self._claim(now)
        fresh = [stored for sequence, stored in sorted(self._known.items()) if sequence not in self._held]
        for node, events in self._ready_by_node(fresh, now).items():
            if node in self._running or self._not_before.get(node, 0.0) > now:
                continue
            sequences = [stored.sequence for stored in events]
            self._held.update(sequences)
            if self._pool is None:
                dispatch = _Dispatch(node, sequences, None)
                try:
                    dispatch.outcomes = self.handler.handle(node, events)
                except Exception as exc:  # a failed node must not stop the others
                    dispatch.error = exc
                progressed += self._finish(dispatch)
            else:
                progressed += len(events)
                future = self._pool.submit(self.handler.handle, node, events)
                self._running[node] = _Dispatch(node, sequences, future)
                future.add_done_callback(lambda _: self.waker.poke())
        return progressed

    def _claim(self, now: float) -> None:
        """Claim new events, and renew the leases of those already held (a claim by the same owner does both).

        Claims happen only when the store holds something newer than what was claimed, or when the
        leases need renewing: re-reading events already in hand on every wake-up would cost a
        parse per held event per wake-up (quadratic in a mass failure).
        """
        batch = self.store.claim(
            self.handler.name, self.owner, limit=self.batch_size + len(self._known), lease_seconds=self.lease_seconds
        )
        self._claimed_at = now
        for stored in batch:
            self._known.setdefault(stored.sequence, stored)
            self._seen = max(self._seen, stored.sequence)

    def _ready_by_node(self, fresh: Sequence[StoredEvent], now: float) -> dict[str, list[StoredEvent]]:
        """Per node, the leading events the upstream stage is done with.

        Events past the upstream cursor are looked up one by one (so one node stuck upstream does
        not hold back the others), at most once a second: a moving cursor soon covers them anyway.
        """
        upstream = self.handler.upstream
        cursor = self.store.cursor(upstream) if upstream else 0
        lookups = 0 if now >= self._lookups_due else MAX_UPSTREAM_LOOKUPS
        if upstream and any(s.sequence > cursor for s in fresh) and lookups == 0:
            self._lookups_due = now + 1.0
        blocked: set[str] = set()
        out: dict[str, list[StoredEvent]] = {}
        for stored in sorted(fresh, key=lambda s: s.sequence):
            node = stored.event.node_name
            if node in blocked:
                continue
            ready = upstream is None or stored.sequence <= cursor
            if not ready and lookups < MAX_UPSTREAM_LOOKUPS:
                lookups += 1
                record = self.store.stage_record(upstream or "", stored.sequence)
                ready = record is not None and record.status is not StageStatus.IN_PROGRESS
            if ready:
                out.setdefault(node, []).append(stored)
            else:
                blocked.add(node)
        return out

    def _collect(self) -> int:
        acked = 0
        for node in [n for n, d in self._running.items() if d.future is not None and d.future.done()]:
            dispatch = self._running.pop(node)
            assert dispatch.future is not None
            try:
                dispatch.outcomes = dispatch.future.result()
            except Exception as exc:
                dispatch.error = exc
            acked += self._finish(dispatch)
        return acked

    def _finish(self, dispatch: _Dispatch) -> int:
        self._held.difference_update(dispatch.sequences)
        outcomes = dispatch.outcomes or []
        for result in outcomes:
            self._known.pop(result.sequence, None)
        if dispatch.error is not None:
            self.errors += 1
            log.warning(
                "stage %s: node %s: %s (will retry)",
                self.handler.name,
                dispatch.node,
                dispatch.error,
                extra={"stage": self.handler.name, "node": dispatch.node, "error": str(dispatch.error)},
            )
        if len(outcomes) < len(dispatch.sequences) and self._pool is not None:
            self._not_before[dispatch.node] = self._clock() + self.handler.retry_seconds
        else:
            self._not_before.pop(dispatch.node, None)
        if not outcomes:
            return 0
        done = self.store.ack(self.handler.name, self.owner, outcomes)
        self.waker.poke()
        return max(done, 1)

    def idle_seconds(self, default: float) -> float:
        """How long an idle loop may sleep before something it holds is due again."""
        if not self._not_before:
            return default
        return max(0.0, min(default, min(self._not_before.values()) - self._clock()))

    def close(self, *, wait: bool = True) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=wait, cancel_futures=True)


def outcome(stored: StoredEvent, status: StageStatus, **detail: object) -> StageOutcome:
    """A stage outcome with a JSON detail naming the node (every stage records its node)."""
    return StageOutcome(stored.sequence, status, {"node": stored.event.node_name, **detail})


def same_outcome(events: Sequence[StoredEvent], status: StageStatus, **detail: object) -> list[StageOutcome]:
    """One outcome for all of a node's events: the first carries `status`, the rest follow it."""
    first, rest = events[0], events[1:]
    tail = StageStatus.SKIPPED if status is StageStatus.DONE else status
    return [outcome(first, status, **detail)] + [outcome(s, tail, **detail, with_event=first.sequence) for s in rest]
