"""What a pipeline stage is, to the stages that decide: the handler protocols and their outcomes.

The runner that feeds handlers (`dsx.pipeline.stages`) depends on this, never the reverse:
a stage decides from the events and the node it is given, and says so in `StageOutcome`s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from dsx.health.decisions.eventstore import StageOutcome, StageStatus, StoredEvent


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


class SettlesInBulk(Protocol):
    """A stage handler that can also decide many nodes' routine events at once (optional)."""

    def settle(self, ready: Mapping[str, Sequence[StoredEvent]]) -> dict[str, list[StageOutcome]]:
        """Outcomes for every event of the nodes it can decide from the store alone, in one read;
        the nodes it leaves out go to `handle`. At fleet traffic nearly every event is routine
        (a healthy check on a healthy node), and a worker and a store read per event kept a stage
        behind the fleet on PostgreSQL."""
        ...


def outcome(stored: StoredEvent, status: StageStatus, **detail: object) -> StageOutcome:
    """A stage outcome with a JSON detail naming the node (every stage records its node)."""
    return StageOutcome(stored.sequence, status, {"node": stored.event.node_name, **detail})


def same_outcome(events: Sequence[StoredEvent], status: StageStatus, **detail: object) -> list[StageOutcome]:
    """One outcome for all of a node's events: the first carries `status`, the rest follow it."""
    first, rest = events[0], events[1:]
    tail = StageStatus.SKIPPED if status is StageStatus.DONE else status
    return [outcome(first, status, **detail)] + [outcome(s, tail, **detail, with_event=first.sequence) for s in rest]
