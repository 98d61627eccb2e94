"""Events posted by external monitors (`POST /v1/events`, `dsx sentinel monitor --url`).

One parser for every ingestion door: a body is one HealthEvent object, a list of them, or
`{"events": [...]}`. Every event is validated by `HealthEvent.from_dict` (unknown fields,
missing fields and a mismatched idempotency key are refused, naming the item), and a batch
is all-or-nothing: one bad event rejects the request, so a monitor never half-delivers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dsx import serialization
from dsx.errors import BadInputError, PayloadTooLargeError
from dsx.model.health import HealthEvent

MAX_EVENTS_PER_REQUEST = 1000
"""The one batch size end to end: lines a kernel-log monitor reads per poll (one event each at
most), events a sender posts at once, and events ingestion accepts per request."""


def parse_body(body: bytes, *, source: str = "request body") -> list[HealthEvent]:
    return parse_document(serialization.parse_json(body, source=source), source=source)


def parse_document(document: Any, *, source: str = "request body") -> list[HealthEvent]:
    items: Any
    if isinstance(document, Mapping) and set(document) == {"events"}:
        items = document["events"]
    elif isinstance(document, Mapping):
        items = [document]
    else:
        items = document
    if not isinstance(items, Sequence) or isinstance(items, str | bytes):
        raise BadInputError(f'{source}: expected a HealthEvent object, a list of them, or {{"events": [...]}}')
    if not items:
        raise BadInputError(f"{source}: no events")
    if len(items) > MAX_EVENTS_PER_REQUEST:
        raise PayloadTooLargeError(f"{source}: {len(items)} events; at most {MAX_EVENTS_PER_REQUEST} per request")
    return [HealthEvent.from_dict(item, source=f"{source}: events[{index}]") for index, item in enumerate(items)]


def to_document(events: Sequence[HealthEvent]) -> dict[str, Any]:
    """What an ingestion client sends."""
    return {"events": [event.to_dict() for event in events]}
