"""What the pipeline looks like now, as one JSON document (CLI `status`, `/v1/status`, the API).

Nodes that ever left service with their state, reason and full history; validation requests;
the circuit breaker; the dead letters (events a stage gave up on); each consumer's cursor and
the last stored sequence, and how far each consumer is behind (`consumer_lag`).

A consumer is behind by events (stored past its cursor) and by seconds (how long the oldest of
them has waited): NVSentinel's users found an analyzer days and millions of events behind that
still looked healthy, because only a count was shown, and nobody alerted on it. A consumer whose
cursor is past the newest stored event has lost history: the store was restored from an older
backup or replaced, and the events that get those sequences next would be skipped silently. That
is reported as an error, never passed over.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dsx.health.decisions import breaker, dead_letters, repair_timing
from dsx.health.decisions.eventstore import EventStore


@dataclass(frozen=True)
class ConsumerLag:
    consumer: str
    cursor: int
    behind_events: int
    behind_seconds: float
    """Since the oldest event past the cursor was stored; 0 when none waits."""
    history_lost: bool

    @property
    def problem(self) -> str | None:
        if not self.history_lost:
            return None
        return (
            f"consumer {self.consumer} is at sequence {self.cursor} but the store's newest event is"
            f" {self.cursor + self.behind_events}: the store lost history (restored from an older backup, or"
            " replaced); events stored under those sequences would be skipped, so the stage claims nothing."
            " Check the store URL (docs/runbooks/history-lost.md)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "consumer": self.consumer,
            "cursor": self.cursor,
            "behindEvents": self.behind_events,
            "behindSeconds": round(self.behind_seconds, 3),
            "historyLost": self.history_lost,
        }


def consumer_lag(store: EventStore, now: datetime) -> list[ConsumerLag]:
    """Every consumer's distance from the newest event, by name (one read of the next event each)."""
    newest = store.last_sequence()
    out = []
    for consumer, cursor in sorted(store.cursors().items()):
        waiting = store.get(cursor + 1) if cursor < newest else None
        seconds = max(0.0, (now - waiting.stored_at).total_seconds()) if waiting is not None else 0.0
        out.append(ConsumerLag(consumer, cursor, newest - cursor, seconds, cursor > newest))
    return out


def document(store: EventStore, gate: breaker.CircuitBreaker | None, *, now: datetime) -> dict[str, Any]:
    """Node states with history, open validation requests, breaker, cursors and lag: what `status` shows."""
    nodes_out = []
    for status in store.node_states():
        history = store.node_history(status.node_name)
        incident = store.get(status.event_sequence) if status.event_sequence else None
        timing = repair_timing.segments(history, incident.event.generated_at if incident is not None else None)
        nodes_out.append(
            {
                "node": status.node_name,
                "state": status.state.value,
                "reason": status.reason,
                "since": status.since.isoformat(),
                "incident": status.event_sequence,
                "history": [
                    {
                        "from": move.from_state.value,
                        "to": move.to_state.value,
                        "at": move.at.isoformat(),
                        "reason": move.reason,
                    }
                    for move in history
                ],
                "repairSeconds": {name: round(seconds, 3) for name, seconds in timing.items()},
            }
        )
    requests = [
        {
            "id": r.request_id,
            "node": r.node_name,
            "reason": r.reason,
            "status": r.status.value,
            "requestedAt": r.requested_at.isoformat(),
            "detail": r.detail,
        }
        for r in store.validation_requests()
    ]
    return {
        "nodes": nodes_out,
        "validationRequests": requests,
        "breaker": gate.status() if gate is not None else None,
        "deadLetters": dead_letters.listed(store),
        "cursors": store.cursors(),
        "lastSequence": store.last_sequence(),
        "consumers": [lag.to_dict() for lag in consumer_lag(store, now)],
    }
