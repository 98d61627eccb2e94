"""InMemoryEventStore: the EventStore fake for unit tests of pipeline logic.

It keeps the whole contract (tests/contracts/store runs it beside SQLite and PostgreSQL)
but nothing survives the process. A lock makes it safe for threads, like the real stores.
"""

from __future__ import annotations

import copy
import itertools
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from dsx.errors import BadInputError, ConflictError, NotFoundError
from dsx.health.decisions import eventstore
from dsx.health.decisions.eventstore import (
    Appended,
    BreakerChange,
    NodeStatus,
    NodeTransition,
    StageOutcome,
    StageRecord,
    StageStatus,
    StoredEvent,
    ValidationRequest,
    ValidationStatus,
)
from dsx.model.health import HealthEvent, NodeState

T = TypeVar("T")

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class _Lease:
    owner: str
    until: float


class InMemoryEventStore:
    """A process-local EventStore; `clock` returns epoch seconds."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Condition()
        self._events: list[StoredEvent] = []
        self._by_key: dict[str, int] = {}
        self._cursors: dict[str, int] = {}
        self._leases: dict[tuple[str, int], _Lease] = {}
        self._acked: dict[str, set[int]] = {}
        self._reopened: dict[str, set[int]] = {}
        """Per consumer, events behind its cursor offered again (`reopen`)."""
        self._records: dict[tuple[str, int], StageRecord] = {}
        self._nodes: dict[str, NodeStatus] = {}
        self._history: list[NodeTransition] = []
        self._remediations: dict[tuple[str, str, int], float] = {}
        self._validations: list[ValidationRequest] = []
        self._breakers: dict[str, dict[str, Any]] = {}

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock(), UTC)

    # events
    def append(self, events: Sequence[HealthEvent]) -> list[Appended]:
        with self._lock:
            stored_at = self._now()
            out: list[Appended] = []
            for event in events:
                key = event.idempotency_key
                existing = self._by_key.get(key)
                if existing is not None:
                    out.append(Appended(existing, key, created=False))
                    continue
                sequence = len(self._events) + 1
                self._events.append(StoredEvent(sequence, stored_at, event))
                self._by_key[key] = sequence
                out.append(Appended(sequence, key, created=True))
            self._lock.notify_all()
            return out

    def get(self, sequence: int) -> StoredEvent | None:
        with self._lock:
            return self._events[sequence - 1] if 1 <= sequence <= len(self._events) else None

    def find(self, idempotency_key: str) -> StoredEvent | None:
        with self._lock:
            sequence = self._by_key.get(idempotency_key)
            return None if sequence is None else self._events[sequence - 1]

    def events(
        self,
        *,
        after_sequence: int = 0,
        limit: int = 1000,
        node_name: str | None = None,
        since: datetime | None = None,
    ) -> list[StoredEvent]:
        with self._lock:
            out: list[StoredEvent] = []
            for stored in self._events[max(after_sequence, 0) :]:
                if len(out) >= limit:
                    break
                if node_name is not None and stored.event.node_name != node_name:
                    continue
                if since is not None and stored.event.generated_at < since:
                    continue
                out.append(stored)
            return out

    def last_sequence(self) -> int:
        with self._lock:
            return len(self._events)

    def wait_for_events(self, after_sequence: int, timeout_seconds: float) -> bool:
        with self._lock:
            return self._lock.wait_for(lambda: len(self._events) > after_sequence, timeout=timeout_seconds)

    # consumers
    def claim(self, consumer: str, owner: str, *, limit: int = 100, lease_seconds: float = 30.0) -> list[StoredEvent]:
        with self._lock:
            now = self._clock()
            acked = self._acked.setdefault(consumer, set())
            out: list[StoredEvent] = []
            cursor = self._cursors.setdefault(consumer, 0)
            behind = [self._events[s - 1] for s in sorted(self._reopened.get(consumer, ())) if s <= cursor]
            for stored in itertools.chain(behind, itertools.islice(self._events, cursor, None)):
                if len(out) >= limit:
                    break
                if stored.sequence in acked:
                    continue
                lease = self._leases.get((consumer, stored.sequence))
                if lease is not None and lease.owner != owner and lease.until > now:
                    continue
                self._leases[(consumer, stored.sequence)] = _Lease(owner, now + lease_seconds)
                out.append(stored)
            return out

    def claim_these(
        self, consumer: str, owner: str, sequences: Sequence[int], *, lease_seconds: float = 30.0
    ) -> list[StoredEvent]:
        with self._lock:
            now = self._clock()
            acked = self._acked.setdefault(consumer, set())
            cursor = self._cursors.setdefault(consumer, 0)
            out: list[StoredEvent] = []
            for sequence in sorted(set(sequences)):
                if not cursor < sequence <= len(self._events) or sequence in acked:
                    continue
                lease = self._leases.get((consumer, sequence))
                if lease is not None and lease.owner != owner and lease.until > now:
                    continue
                self._leases[(consumer, sequence)] = _Lease(owner, now + lease_seconds)
                out.append(self._events[sequence - 1])
            return out

    def begin(self, consumer: str, sequence: int, detail: Mapping[str, Any]) -> StageRecord | None:
        with self._lock:
            self._require_event(sequence)
            previous = self._records.get((consumer, sequence))
            self._records[(consumer, sequence)] = StageRecord(
                consumer, sequence, StageStatus.IN_PROGRESS, copy.deepcopy(dict(detail)), self._now()
            )
            return previous

    def ack(self, consumer: str, owner: str, outcomes: Sequence[StageOutcome]) -> int:
        with self._lock:
            acked = self._acked.setdefault(consumer, set())
            cursor = self._cursors.get(consumer, 0)
            now = self._now()
            newly = 0
            reopened = self._reopened.setdefault(consumer, set())
            for outcome in outcomes:
                self._require_event(outcome.sequence)
                self._leases.pop((consumer, outcome.sequence), None)
                if outcome.sequence in reopened:
                    reopened.discard(outcome.sequence)
                    if outcome.sequence > cursor:
                        acked.add(outcome.sequence)
                elif outcome.sequence in acked or outcome.sequence <= cursor:
                    continue
                else:
                    acked.add(outcome.sequence)
                self._records[(consumer, outcome.sequence)] = StageRecord(
                    consumer, outcome.sequence, outcome.status, copy.deepcopy(dict(outcome.detail)), now
                )
                newly += 1
            while cursor + 1 in acked:
                cursor += 1
                acked.discard(cursor)
            self._cursors[consumer] = cursor
            return newly

    def _require_event(self, sequence: int) -> None:
        if not 1 <= sequence <= len(self._events):
            raise NotFoundError(f"event {sequence}: no such event in the store")

    def stage_record(self, consumer: str, sequence: int) -> StageRecord | None:
        with self._lock:
            return self._records.get((consumer, sequence))

    def dead_letters(self) -> list[StageRecord]:
        with self._lock:
            parked = [r for r in self._records.values() if r.status is StageStatus.DEAD_LETTER]
        return sorted(parked, key=lambda r: (r.sequence, r.stage))

    def reopen(self, consumer: str, sequence: int) -> None:
        with self._lock:
            self._require_event(sequence)
            self._records.pop((consumer, sequence), None)
            self._acked.setdefault(consumer, set()).discard(sequence)
            self._leases.pop((consumer, sequence), None)
            self._reopened.setdefault(consumer, set()).add(sequence)

    def stage_records(self, sequence: int) -> list[StageRecord]:
        with self._lock:
            return sorted((r for (_, s), r in self._records.items() if s == sequence), key=lambda r: r.stage)

    def cursor(self, consumer: str) -> int:
        with self._lock:
            return self._cursors.get(consumer, 0)

    def follow(self, consumer: str, upstream: str | None) -> int:
        with self._lock:
            target = len(self._events) if upstream is None else self._cursors.get(upstream, 0)
            position = self._cursors.get(consumer, 0)
            if target <= position:
                return 0
            self._cursors[consumer] = target
            self._acked.setdefault(consumer, set()).difference_update(range(position + 1, target + 1))
            reopened = self._reopened.setdefault(consumer, set())
            reopened.difference_update({s for s in reopened if s <= target})
            for sequence in range(position + 1, target + 1):
                self._leases.pop((consumer, sequence), None)
            return target - position

    def cursors(self) -> dict[str, int]:
        with self._lock:
            return dict(sorted(self._cursors.items()))

    # node state projection
    def node_state(self, node_name: str) -> NodeStatus:
        with self._lock:
            return self._nodes.get(node_name) or NodeStatus(node_name, NodeState.HEALTHY, "", EPOCH, None)

    def node_states(self) -> list[NodeStatus]:
        with self._lock:
            return [self._nodes[name] for name in sorted(self._nodes)]

    def node_states_of(self, node_names: Collection[str]) -> dict[str, NodeStatus]:
        with self._lock:
            return {
                name: self._nodes.get(name) or NodeStatus(name, NodeState.HEALTHY, "", EPOCH, None)
                for name in node_names
            }

    def transition(
        self,
        node_name: str,
        target: NodeState,
        *,
        reason: str,
        event_sequence: int | None = None,
        expected: NodeState | None = None,
        intent: tuple[str, Mapping[str, Any]] | None = None,
    ) -> NodeStatus:
        with self._lock:
            current = self.node_state(node_name)
            if not eventstore.move_needed(node_name, current.state, target, expected):
                return current
            now = self._now()
            if intent is not None:
                if event_sequence is None:
                    raise BadInputError("transition: an intent needs the event's sequence")
                self._require_event(event_sequence)
                consumer, detail = intent
                self._records[(consumer, event_sequence)] = StageRecord(
                    consumer, event_sequence, StageStatus.IN_PROGRESS, copy.deepcopy(dict(detail)), now
                )
            status = NodeStatus(node_name, target, reason, now, event_sequence)
            self._nodes[node_name] = status
            self._history.append(NodeTransition(node_name, current.state, target, reason, event_sequence, now))
            return status

    def node_history(self, node_name: str) -> list[NodeTransition]:
        with self._lock:
            return [t for t in self._history if t.node_name == node_name]

    # remediations
    def record_remediation(self, node_name: str, action: str, event_sequence: int) -> bool:
        with self._lock:
            key = (node_name, action, event_sequence)
            if key in self._remediations:
                return False
            self._remediations[key] = self._clock()
            return True

    def count_remediations(self, node_name: str, since: datetime) -> int:
        with self._lock:
            floor = since.timestamp()
            return sum(1 for (node, _, _), at in self._remediations.items() if node == node_name and at >= floor)

    # validation requests
    def request_validation(self, node_name: str, reason: str) -> ValidationRequest:
        with self._lock:
            for request in self._validations:
                if request.node_name == node_name and request.status in eventstore.OPEN_VALIDATION:
                    return request
            now = self._now()
            request = ValidationRequest(
                len(self._validations) + 1, node_name, reason, ValidationStatus.PENDING, now, now, ""
            )
            self._validations.append(request)
            return request

    def start_validations(self, max_running: int) -> list[ValidationRequest]:
        with self._lock:
            running = sum(1 for r in self._validations if r.status is ValidationStatus.RUNNING)
            started: list[ValidationRequest] = []
            now = self._now()
            for index, request in enumerate(self._validations):
                if running >= max_running:
                    break
                if request.status is ValidationStatus.PENDING:
                    moved = _replace_request(request, ValidationStatus.RUNNING, now, request.detail)
                    self._validations[index] = moved
                    started.append(moved)
                    running += 1
            return started

    def finish_validation(self, request_id: int, *, passed: bool, detail: str) -> ValidationRequest:
        with self._lock:
            if not 1 <= request_id <= len(self._validations):
                raise NotFoundError(f"validation request {request_id}: not found")
            request = self._validations[request_id - 1]
            if request.status is not ValidationStatus.RUNNING:
                raise ConflictError(
                    f"validation request {request_id}: is {request.status.value}, only a running request can finish"
                )
            status = ValidationStatus.PASSED if passed else ValidationStatus.FAILED
            finished = _replace_request(request, status, self._now(), detail)
            self._validations[request_id - 1] = finished
            return finished

    def validation_requests(self, status: ValidationStatus | None = None) -> list[ValidationRequest]:
        with self._lock:
            return [r for r in self._validations if status is None or r.status is status]

    # circuit breakers
    def load_breaker(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            document = self._breakers.get(name)
            return None if document is None else copy.deepcopy(document)

    def save_breaker(self, name: str, document: Mapping[str, Any]) -> None:
        with self._lock:
            self._breakers[name] = copy.deepcopy(dict(document))

    def update_breaker(self, name: str, change: BreakerChange[T]) -> T:
        with self._lock:
            document, result = change(self.load_breaker(name))
            if document is not None:
                self.save_breaker(name, document)
            return result

    def close(self) -> None:
        """Nothing to release."""


def _replace_request(
    request: ValidationRequest, status: ValidationStatus, now: datetime, detail: str
) -> ValidationRequest:
    return ValidationRequest(
        request.request_id, request.node_name, request.reason, status, request.requested_at, now, detail
    )
