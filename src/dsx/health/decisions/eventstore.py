"""The event store port: what the operate pipeline needs from a database, and nothing more.

Why a port: NVSentinel's datastore could not be swapped (MongoDB change streams leaked into
every consumer, and the PostgreSQL port re-implemented Mongo semantics in ~4,600 lines). Here
the domain states the contract and `dsx.store` implements it twice (SQLite, PostgreSQL);
`dsx.testing.inmemory.InMemoryEventStore` is the fake for unit tests. One contract suite
(tests/contracts/store) runs against all three.

The contract:
- **Append-only events**, each with a gap-free `sequence` (1, 2, 3, …) in commit order.
  Appending an event whose idempotency key is already stored returns the stored sequence
  with `created=False`; nothing is duplicated.
- **Consumers** (one per pipeline stage) read with a durable cursor. `claim` leases a batch
  of events past the cursor to an `owner`; `ack` records each event's outcome for that stage
  and moves the cursor over every acknowledged prefix. A claim that is never acked (the
  owner crashed) is handed out again: at once to the same owner, after `lease_seconds` to any.
  Two owners of one consumer never hold the same event at the same time.
- **Dead letters**: an event a stage acknowledged as DEAD_LETTER is listed by `dead_letters`;
  `reopen` drops the stage's record and offers the event to that consumer again (even behind
  its cursor), and the next `ack` of it records the new outcome.
- **Stage records** keyed by (stage, sequence) make effects safe to replay: a stage calls
  `begin` before it touches the cluster and `ack` after. After a crash, a claim re-delivers
  the event and `stage_record` says IN_PROGRESS, telling the stage to check whether the
  effect already happened (is the node cordoned?) instead of doing it blindly again.
- **Projections** the stages share: node state with its history, remediation counts,
  validation requests (with an atomic "start at most M" step), circuit-breaker documents
  (`update_breaker` reads, decides and writes one in a single transaction, so sentinel
  replicas sharing a store cannot both take the last free place in a breaker's window).
- **Wake-ups**: `wait_for_events` returns as soon as a newer event may exist. It is a hint
  only (PostgreSQL NOTIFY is not durable); consumers always re-read by cursor.

Times are UTC datetimes; stores take a `clock` returning epoch seconds so tests can move
time (lease expiry, windows) without sleeping.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeVar

from dsx.errors import ConflictError
from dsx.model.health import HealthEvent, NodeState, require_transition


class StageStatus(enum.Enum):
    """Outcome of one stage for one event."""

    IN_PROGRESS = "in_progress"
    """Intent recorded before the effect; seen after a crash, it means: check, then finish."""
    DONE = "done"
    SKIPPED = "skipped"
    """Not for this stage (a healthy event for the drainer, STORE_ONLY for quarantine, …)."""
    FAILED = "failed"
    DEAD_LETTER = "dead_letter"
    """The stage gave up after repeated errors (detail: error, attempts, traceback); later stages go on.
    `reopen` offers the event to the stage again."""


class ValidationStatus(enum.Enum):
    PENDING = "pending"
    RUNNING = "running"
    PASSED = "passed"
    FAILED = "failed"


OPEN_VALIDATION = (ValidationStatus.PENDING, ValidationStatus.RUNNING)


@dataclass(frozen=True)
class StoredEvent:
    sequence: int
    stored_at: datetime
    event: HealthEvent


@dataclass(frozen=True)
class Appended:
    """Result of appending one event."""

    sequence: int
    idempotency_key: str
    created: bool
    """False when an event with this key was already stored (the sequence is the stored one)."""


@dataclass(frozen=True)
class StageOutcome:
    """What a consumer acknowledges for one event."""

    sequence: int
    status: StageStatus = StageStatus.DONE
    detail: Mapping[str, Any] = field(default_factory=dict)
    """JSON-ready result of the action (what was cordoned, which request was created, …)."""


@dataclass(frozen=True)
class StageRecord:
    stage: str
    sequence: int
    status: StageStatus
    detail: Mapping[str, Any]
    updated_at: datetime


@dataclass(frozen=True)
class NodeStatus:
    """The current projection of one node; nodes never seen are HEALTHY with no event."""

    node_name: str
    state: NodeState
    reason: str
    since: datetime
    event_sequence: int | None


@dataclass(frozen=True)
class NodeTransition:
    node_name: str
    from_state: NodeState
    to_state: NodeState
    reason: str
    event_sequence: int | None
    at: datetime


@dataclass(frozen=True)
class ValidationRequest:
    request_id: int
    node_name: str
    reason: str
    status: ValidationStatus
    requested_at: datetime
    updated_at: datetime
    detail: str


T = TypeVar("T")

BreakerChange = Callable[[dict[str, Any] | None], tuple[Mapping[str, Any] | None, T]]
"""A decision on a breaker document: (the document to store or None to keep it, the result)."""


class EventStore(Protocol):
    """Durable home of health events and the pipeline's shared state (see the module docstring)."""

    # events
    def append(self, events: Sequence[HealthEvent]) -> list[Appended]:
        """Store events in order in one transaction; duplicates (by idempotency key) are not re-stored."""
        ...

    def get(self, sequence: int) -> StoredEvent | None: ...

    def find(self, idempotency_key: str) -> StoredEvent | None: ...

    def events(
        self,
        *,
        after_sequence: int = 0,
        limit: int = 1000,
        node_name: str | None = None,
        since: datetime | None = None,
    ) -> list[StoredEvent]:
        """Events past `after_sequence` in order; `since` filters on the monitor's `generated_at`."""
        ...

    def last_sequence(self) -> int:
        """The highest stored sequence, 0 when empty."""
        ...

    def wait_for_events(self, after_sequence: int, timeout_seconds: float) -> bool:
        """Block until an event past `after_sequence` may exist or the timeout passes; True if one does."""
        ...

    # consumers
    def claim(self, consumer: str, owner: str, *, limit: int = 100, lease_seconds: float = 30.0) -> list[StoredEvent]:
        """Lease up to `limit` unacknowledged events past the consumer's cursor to `owner`, in order."""
        ...

    def claim_these(
        self, consumer: str, owner: str, sequences: Sequence[int], *, lease_seconds: float = 30.0
    ) -> list[StoredEvent]:
        """Lease exactly these events (those past the cursor, unacknowledged, not leased to another
        owner), in order: the ones that need action, ahead of the routine traffic before them."""
        ...

    def begin(self, consumer: str, sequence: int, detail: Mapping[str, Any]) -> StageRecord | None:
        """Record IN_PROGRESS intent for (consumer, sequence); returns the record that was there before."""
        ...

    def ack(self, consumer: str, owner: str, outcomes: Sequence[StageOutcome]) -> int:
        """Record outcomes and release the leases; returns how many events were newly acknowledged.

        An event acknowledged before (by any owner) keeps its first outcome.
        """
        ...

    def stage_record(self, consumer: str, sequence: int) -> StageRecord | None: ...

    def dead_letters(self) -> list[StageRecord]:
        """Every DEAD_LETTER record, by sequence then stage."""
        ...

    def reopen(self, consumer: str, sequence: int) -> None:
        """Drop the consumer's record for the event and offer the event to the consumer again."""
        ...

    def stage_records(self, sequence: int) -> list[StageRecord]:
        """Every stage's record for one event, by stage name."""
        ...

    def cursor(self, consumer: str) -> int:
        """Every event up to this sequence is acknowledged by the consumer (0 for a new consumer)."""
        ...

    def follow(self, consumer: str, upstream: str | None) -> int:
        """Move the consumer's cursor up to `upstream`'s (None: the newest event) without a record per
        event, dropping its open leases behind it; returns how far it moved (0: already there).

        For a stage that is switched off: it does nothing with any event, so it writes nothing per
        event, while the stages after it still wait for it in order."""
        ...

    def cursors(self) -> dict[str, int]: ...

    # node state projection
    def node_state(self, node_name: str) -> NodeStatus: ...

    def node_states(self) -> list[NodeStatus]:
        """Every node that ever left HEALTHY, by name."""
        ...

    def node_states_of(self, node_names: Collection[str]) -> dict[str, NodeStatus]:
        """The state of each named node (HEALTHY when never seen), in one read: a stage settles a
        round's routine events with it instead of one read per event."""
        ...

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
        """Move a node along dsx.model.health.TRANSITIONS and record the move.

        Staying in the same state is a no-op (no history row). Raises ConflictError for a move
        the table does not allow, or when `expected` is given and the node is elsewhere.

        `intent` (consumer, detail): the move also records IN_PROGRESS for (consumer,
        `event_sequence`), as `begin` would, in the same transaction: one write per cordon, and
        never an intent without its move (a refused move records nothing).
        """
        ...

    def node_history(self, node_name: str) -> list[NodeTransition]: ...

    # remediations
    def record_remediation(self, node_name: str, action: str, event_sequence: int) -> bool:
        """Count one remediation; False when (node, action, event) was already recorded."""
        ...

    def count_remediations(self, node_name: str, since: datetime) -> int: ...

    # validation requests
    def request_validation(self, node_name: str, reason: str) -> ValidationRequest:
        """Open a request, or return the node's open (pending or running) one."""
        ...

    def start_validations(self, max_running: int) -> list[ValidationRequest]:
        """Atomically move the oldest pending requests to RUNNING while fewer than `max_running` run."""
        ...

    def finish_validation(self, request_id: int, *, passed: bool, detail: str) -> ValidationRequest: ...

    def validation_requests(self, status: ValidationStatus | None = None) -> list[ValidationRequest]: ...

    # circuit breakers
    def load_breaker(self, name: str) -> dict[str, Any] | None: ...

    def save_breaker(self, name: str, document: Mapping[str, Any]) -> None: ...

    def update_breaker(self, name: str, change: BreakerChange[T]) -> T:
        """Atomically: read the document (None when there is none), call `change` on it, and
        store what it returns unless that is None; returns `change`'s result.

        Other writers of the same breaker, in this process or another, wait until it commits.
        `change` runs inside the transaction: it must be quick and touch nothing outside."""
        ...

    def close(self) -> None: ...


def move_needed(node_name: str, current: NodeState, target: NodeState, expected: NodeState | None) -> bool:
    """The rule every `EventStore.transition` applies before writing, in one place.

    Raises ConflictError when `expected` is given and the node is elsewhere, or when the table
    does not allow `current → target`; False when the node is already in `target` (no-op).
    """
    if expected is not None and current is not expected:
        raise ConflictError(
            f"node {node_name}: expected state {expected.value}, found {current.value}; re-read and retry"
        )
    require_transition(node_name, current, target)
    return current is not target
