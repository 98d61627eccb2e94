"""Dead letters: events a stage gave up on after `dead_letter.max_attempts` failures.

Why parked rather than retried forever: one poison event (a handler bug, a malformed field)
re-offered every few seconds blocks its node's later events and floods the log; parked, the
pipeline moves on and the event waits, with its error and traceback, until someone has looked.
`dsx sentinel status` lists them; `dsx sentinel retry` re-opens them here: the stage that
parked the event gets it again, and so does every later stage that already went past it, so
the event walks the rest of the pipeline as if it had never failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dsx.errors import NotFoundError
from dsx.health.decisions.eventstore import EventStore, StageRecord, StageStatus


def listed(store: EventStore) -> list[dict[str, Any]]:
    """The dead letters as JSON-ready rows (status document, CLI)."""
    return [
        {
            "stage": record.stage,
            "sequence": record.sequence,
            "node": record.detail.get("node", ""),
            "attempts": record.detail.get("attempts", 0),
            "error": record.detail.get("error", ""),
            "traceback": record.detail.get("traceback", ""),
            "parkedAt": record.updated_at.isoformat(),
        }
        for record in store.dead_letters()
    ]


def retry(
    store: EventStore, stage_order: Sequence[str], *, stage: str | None = None, sequence: int | None = None
) -> list[tuple[str, int]]:
    """Re-open the chosen dead letters (all when no filter) and the later stages' records of them.

    `stage_order` is the pipeline's consumer order; returns the (stage, sequence) re-opened.
    """
    chosen: list[StageRecord] = [
        record
        for record in store.dead_letters()
        if (stage is None or record.stage == stage) and (sequence is None or record.sequence == sequence)
    ]
    if not chosen and (stage is not None or sequence is not None):
        wanted = ", ".join(f"{k} {v}" for k, v in (("stage", stage), ("event", sequence)) if v is not None)
        raise NotFoundError(f"no dead letter with {wanted}; `dsx sentinel status` lists them")
    out = []
    for record in chosen:
        store.reopen(record.stage, record.sequence)
        later = stage_order[stage_order.index(record.stage) + 1 :] if record.stage in stage_order else ()
        for name in later:
            found = store.stage_record(name, record.sequence)
            if found is not None and found.status is not StageStatus.IN_PROGRESS:
                store.reopen(name, record.sequence)
        out.append((record.stage, record.sequence))
    return out
