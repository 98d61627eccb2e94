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

Errors end well. A step retried after a failure at any point gives the clean run's result:
outcomes are kept until the store acknowledged them (a failed `ack` is sent again, the handler
is not run again), and handlers make their effects idempotent through `begin` records and
node state. A handler that raises is retried; its node's events then go one at a time, so the
event that fails is known, and after `max_attempts` failures (policy `dead_letter`) that event
is acknowledged as DEAD_LETTER. Only errors retrying cannot cure count: an unreachable
apiserver or a locked store (UnavailableError, DeadlineExceededError) is retried for as long as
it lasts, or an outage would park every event in flight. A parked event is stored with the
error and traceback: the pipeline moves on, `dsx sentinel status` lists it and `dsx sentinel
retry` re-opens it (`dsx.health.decisions.dead_letters`). The traceback is logged once per node and
error, later attempts log one line.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from dsx.errors import DeadlineExceededError, UnavailableError
from dsx.health.decisions.eventstore import EventStore, StageOutcome, StageStatus, StoredEvent
from dsx.health.decisions.policy import DeadLetterSettings
from dsx.health.decisions.stage import SettlesInBulk, StageHandler

log = logging.getLogger("dsx.sentinel")

MAX_UPSTREAM_LOOKUPS = 200
"""Per lookup round, events past the upstream cursor whose upstream record is looked up one by one."""


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
        dead_letter: DeadLetterSettings | None = None,
        enabled: bool = True,
    ) -> None:
        self.store = store
        self.handler = handler
        self.enabled = enabled
        """Off: the handler never runs and the cursor follows the upstream stage's (`EventStore.follow`)."""
        self.owner = owner
        self.batch_size = batch_size
        self.lease_seconds = lease_seconds
        self.waker = waker or Waker()
        self._clock = clock
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix=f"stage-{handler.name}") if workers else None
        self._bulk: SettlesInBulk | None = handler if callable(getattr(handler, "settle", None)) else None  # type: ignore[assignment]
        self._settle_error = ""
        """The last bulk settle's error (logged once until a settle succeeds)."""
        self.halted: str | None = None
        """Why the stage claims nothing (its cursor is past the newest event: history lost), or None."""
        self._running: dict[str, _Dispatch] = {}
        self._held: set[int] = set()
        self._known: dict[int, StoredEvent] = {}
        """Claimed and not yet acknowledged (running, or waiting for upstream or a retry)."""
        self._seen = 0
        self._claimed_at = -float("inf")
        self._lookups_due = 0.0
        self._not_before: dict[str, float] = {}
        self._unacked: list[StageOutcome] = []
        """Outcomes the store has not confirmed yet (sent again before anything else)."""
        self._attempts: dict[int, int] = {}
        """Failed attempts per event still held."""
        self._one_at_a_time: set[str] = set()
        """Nodes whose handler raised: their events go singly until the node is caught up."""
        self._traced: dict[str, str] = {}
        """Per node, the error whose traceback was logged (logged once until the node catches up)."""
        self.max_attempts = (dead_letter or DeadLetterSettings()).max_attempts
        self.errors = 0
        self.dead_letters = 0
        self._urgent: set[int] = set()
        """Sequences to claim at the next step ahead of the events before them (`expedite`)."""
        self._urgent_lock = threading.Lock()
        self._urgent_in_hand: set[int] = set()
        """Expedited events claimed and not yet acknowledged (their handlers run)."""
        self._calm = threading.Event()
        """Set while no expedited event waits or runs (`yield_to_urgent`)."""
        self._calm.set()

    @property
    def name(self) -> str:
        return self.handler.name

    @property
    def busy_nodes(self) -> int:
        return len(self._running)

    def expedite(self, sequences: Iterable[int]) -> None:
        """Claim these events at the next step, ahead of the routine traffic stored before them.

        Why: the claim goes in sequence order, `batch_size` a step; behind a flood of 50,000
        routine events a fatal Xid would wait a hundred steps. The ingest path names the events
        that need action (thread-safe); the rest still go in order. A stage that is off claims
        nothing, so it keeps none."""
        if not self.enabled:
            return
        with self._urgent_lock:
            self._urgent.update(sequences)
            if self._urgent:
                self._calm.clear()
        self.waker.poke()

    def yield_to_urgent(self, timeout_seconds: float) -> bool:
        """Wait (at most `timeout_seconds`) until no expedited event waits or runs; False on timeout.

        For work that can wait (parsing a bulk post of routine events): it is CPU in the same
        interpreter as the cordon the expedited event is on its way to."""
        return self._calm.wait(timeout_seconds)

    def _settle_calm(self) -> None:
        with self._urgent_lock:
            if not self._urgent and not self._urgent_in_hand:
                self._calm.set()

    def step(self) -> int:
        """Acknowledge finished work, then dispatch what is ready.

        Returns how many events were acknowledged or handed to a worker (0: nothing to do now).
        A stage that is off only moves its cursor up to its upstream's: no claim, no record per
        event (at fleet traffic those writes were most of the store's load).
        """
        if self.halted is not None:
            return self._flush() + self._collect()  # finish what is in hand; claim nothing new
        if not self.enabled:
            return self.store.follow(self.handler.name, self.handler.upstream)
        progressed = self._flush() + self._collect()
        now = self._clock()
        urgent_nodes = self._claim_urgent()  # when any: this step dispatches only their nodes, the rest wait one step
        if not urgent_nodes and (
            self.store.last_sequence() > self._seen or now - self._claimed_at > self.lease_seconds / 3
        ):
            self._claim(now)
        fresh = [
            stored
            for sequence, stored in sorted(self._known.items())
            if sequence not in self._held and (not urgent_nodes or stored.event.node_name in urgent_nodes)
        ]
        ready = {
            node: events
            for node, events in self._ready_by_node(fresh, now).items()
            if node not in self._running and self._not_before.get(node, 0.0) <= now
        }
        settled = self._settle(ready)
        for node, events in ready.items():
            if node in self._one_at_a_time:
                events = events[:1]
            sequences = [stored.sequence for stored in events]
            self._held.update(sequences)
            if node in settled:
                progressed += self._finish(_Dispatch(node, sequences, None, settled[node]), flush=False)
            elif self._pool is None:
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
        if settled:
            progressed += self._flush()
        return progressed

    def _settle(self, ready: Mapping[str, Sequence[StoredEvent]]) -> dict[str, list[StageOutcome]]:
        """The handler's bulk outcomes for whole nodes; a node going one event at a time after an
        error is left to `handle`, and so is everything when the bulk read fails (the workers
        then meet the error with the usual retries)."""
        candidates = {node: events for node, events in ready.items() if node not in self._one_at_a_time}
        if self._bulk is None or not candidates:
            return {}
        try:
            settled = self._bulk.settle(candidates)
        except Exception as exc:
            text = f"{type(exc).__name__}: {exc}"
            if text != self._settle_error:  # once per error, not once per step of an outage
                log.warning("stage %s: bulk settle failed, handling node by node: %s", self.handler.name, text)
            self._settle_error = text
            return {}
        self._settle_error = ""
        return {n: outcomes for n, outcomes in settled.items() if len(outcomes) == len(candidates.get(n, ()))}

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
        waiting = {o.sequence for o in self._unacked}
        for stored in batch:
            if stored.sequence not in waiting:
                self._known.setdefault(stored.sequence, stored)
            self._seen = max(self._seen, stored.sequence)

    def _claim_urgent(self) -> set[str]:
        """Claim the expedited events; returns their nodes (empty when none was claimed)."""
        with self._urgent_lock:
            if not self._urgent:
                return set()
            ordered = sorted(self._urgent)
            wanted, rest = ordered[: self.batch_size], ordered[self.batch_size :]
            self._urgent = set(rest)
        waiting = {o.sequence for o in self._unacked}
        try:
            batch = self.store.claim_these(self.handler.name, self.owner, wanted, lease_seconds=self.lease_seconds)
        except Exception:
            with self._urgent_lock:  # the ordered claim still reaches them; tried again next step
                self._urgent.update(wanted)
            raise
        for stored in batch:  # `_seen` stays: the ordered claim still has everything before these to read
            if stored.sequence not in waiting:
                self._known.setdefault(stored.sequence, stored)
        self._urgent_in_hand.update(stored.sequence for stored in batch)
        self._settle_calm()  # those another owner holds are its to hurry
        return {stored.event.node_name for stored in batch}

    def _ready_by_node(self, fresh: Sequence[StoredEvent], now: float) -> dict[str, list[StoredEvent]]:
        """Per node, the leading events the upstream stage is done with.

        Events past the upstream cursor are looked up one by one (so one node stuck upstream does
        not hold back the others), at most once a second: a moving cursor soon covers them anyway.
        So are events behind this stage's own cursor: re-opened by `dsx sentinel retry`, they wait
        until the upstream stage (maybe re-opened too) has a record for them again.
        """
        upstream = self.handler.upstream
        cursor = self.store.cursor(upstream) if upstream else 0
        own = self.store.cursor(self.handler.name) if upstream and fresh else 0
        lookups = 0 if now >= self._lookups_due else MAX_UPSTREAM_LOOKUPS
        if upstream and any(not own < s.sequence <= cursor for s in fresh) and lookups == 0:
            self._lookups_due = now + 1.0
        blocked: set[str] = set()
        out: dict[str, list[StoredEvent]] = {}
        for stored in sorted(fresh, key=lambda s: s.sequence):
            node = stored.event.node_name
            if node in blocked:
                continue
            ready = upstream is None or own < stored.sequence <= cursor
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
        """Finish every dispatch that is done and acknowledge them together: one store write per
        round, not one per node (at fleet traffic most dispatches carry one routine event)."""
        finished = 0
        for node in [n for n, d in self._running.items() if d.future is not None and d.future.done()]:
            dispatch = self._running.pop(node)
            assert dispatch.future is not None
            try:
                dispatch.outcomes = dispatch.future.result()
            except Exception as exc:
                dispatch.error = exc
            finished += self._finish(dispatch, flush=False)
        return self._flush() if finished else 0

    def _finish(self, dispatch: _Dispatch, *, flush: bool = True) -> int:
        self._held.difference_update(dispatch.sequences)
        outcomes = list(dispatch.outcomes or [])
        if dispatch.error is not None:
            outcomes.extend(self._failed(dispatch, dispatch.error))
        for result in outcomes:
            self._known.pop(result.sequence, None)
            self._attempts.pop(result.sequence, None)
        if self._urgent_in_hand:
            self._urgent_in_hand.difference_update(result.sequence for result in outcomes)
            self._settle_calm()
        if dispatch.node in self._one_at_a_time and not any(
            stored.event.node_name == dispatch.node for stored in self._known.values()
        ):
            self._one_at_a_time.discard(dispatch.node)
            self._traced.pop(dispatch.node, None)
        if len(outcomes) < len(dispatch.sequences) and self._pool is not None:
            self._not_before[dispatch.node] = self._clock() + self.handler.retry_seconds
        else:
            self._not_before.pop(dispatch.node, None)
        self._unacked.extend(outcomes)
        return self._flush() if flush else 1

    def _flush(self) -> int:
        """Acknowledge what is waiting; on a store error it stays waiting (nothing is handled twice)."""
        if not self._unacked:
            return 0
        done = self.store.ack(self.handler.name, self.owner, self._unacked)
        self._unacked = []
        self.waker.poke()
        return max(done, 1)

    def _failed(self, dispatch: _Dispatch, error: BaseException) -> list[StageOutcome]:
        """Count a failed attempt of the node's first event; park it after `max_attempts`."""
        self.errors += 1
        sequence = dispatch.sequences[0]
        transient = isinstance(error, UnavailableError | DeadlineExceededError)
        attempts = self._attempts[sequence] = self._attempts.get(sequence, 0) + (0 if transient else 1)
        self._one_at_a_time.add(dispatch.node)
        stage, node = self.handler.name, dispatch.node
        text = f"{type(error).__name__}: {error}"
        extra = {"stage": stage, "node": node, "sequence": sequence, "attempt": attempts, "error": text}
        first = self._traced.get(node) != text
        self._traced[node] = text
        log.warning(
            "stage %s: node %s: event %d failed (%s): %s",
            stage,
            node,
            sequence,
            "transient, will retry" if transient else f"attempt {attempts} of {self.max_attempts}",
            text,
            exc_info=error if first else None,
            extra=extra,
        )
        if transient or attempts < self.max_attempts:
            return []
        self.dead_letters += 1
        log.error(
            "stage %s: node %s: event %d parked as a dead letter after %d attempts; `dsx sentinel retry` replays it",
            stage,
            node,
            sequence,
            attempts,
            extra=extra,
        )
        detail = {
            "node": node,
            "attempts": attempts,
            "error": text[:500],
            "traceback": "".join(traceback.format_exception(error))[-4000:],
        }
        return [StageOutcome(sequence, StageStatus.DEAD_LETTER, detail)]

    def idle_seconds(self, default: float) -> float:
        """How long an idle loop may sleep before something it holds is due again."""
        if not self._not_before:
            return default
        return max(0.0, min(default, min(self._not_before.values()) - self._clock()))

    def close(self, *, wait: bool = True) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=wait, cancel_futures=True)
