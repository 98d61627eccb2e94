"""Events posted by external monitors (`POST /v1/events`, `dsx sentinel monitor --url`).

One parser for every ingestion door: a body is one HealthEvent object, a list of them, or
`{"events": [...]}`. Every event is validated by `HealthEvent.from_dict` (unknown fields,
missing fields and a mismatched idempotency key are refused, naming the item), and a batch
is all-or-nothing: one bad event rejects the request, so a monitor never half-delivers.
Keys are camelCase; a monitor still sending the old snake_case keys (`is_fatal`) is served and
warned about once per process and key, so the log names what to rename without flooding.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from dsx import serialization
from dsx.errors import BadInputError, PayloadTooLargeError
from dsx.model import health, schema
from dsx.model.health import HealthEvent

log = logging.getLogger("dsx.health.ingest")
_warned: set[str] = set()
_warned_lock = threading.Lock()

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
    events = [HealthEvent.from_dict(item, source=f"{source}: events[{index}]") for index, item in enumerate(items)]
    _warn_old_keys(items, source)
    return events


def deprecation_headers(document: Any) -> dict[str, str] | None:
    """HTTP headers telling a sender of old snake_case keys to rename them (None when it sent none)."""
    items = document.get("events", [document]) if isinstance(document, Mapping) else document
    if not isinstance(items, Sequence) or isinstance(items, str | bytes):
        return None
    old = sorted({old for item in items for old, _ in health.old_keys(item)})
    if not old:
        return None
    return {
        "Deprecation": "true",
        "Warning": f'299 dsx "old snake_case HealthEvent keys {", ".join(old)}; send camelCase"',
    }


def _warn_old_keys(items: Sequence[Any], source: str) -> None:
    """One warning per old snake_case key a sender uses, the first time this process sees it."""
    found = {old: new for item in items for old, new in health.old_keys(item)}
    with _warned_lock:
        fresh = sorted((old, new) for old, new in found.items() if old not in _warned)
        _warned.update(old for old, _ in fresh)
    schema.warn_renamed(log, source, fresh)


def to_document(events: Sequence[HealthEvent]) -> dict[str, Any]:
    """What an ingestion client sends."""
    return {"events": [event.to_dict() for event in events]}
