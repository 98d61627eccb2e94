"""What the pipeline looks like now, as one JSON document (CLI `status`, `/v1/status`, the API).

Nodes that ever left service with their state, reason and full history; validation requests;
the circuit breaker; the dead letters (events a stage gave up on); each consumer's cursor and
the last stored sequence (their difference is the stage lag).
"""

from __future__ import annotations

from typing import Any

from dsx.health import breaker, dead_letters
from dsx.health.eventstore import EventStore


def document(store: EventStore, gate: breaker.CircuitBreaker | None) -> dict[str, Any]:
    """Node states with history, open validation requests, breaker, cursors: what `status` shows."""
    nodes_out = []
    for status in store.node_states():
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
                    for move in store.node_history(status.node_name)
                ],
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
    }
