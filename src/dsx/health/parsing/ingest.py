"""Events posted by external monitors (`POST /v1/events`, `dsx sentinel monitor --url`).

One parser for every ingestion door: a body is one HealthEvent object, a list of them, or
`{"events": [...]}`. Every event is validated by `HealthEvent.from_dict` (unknown fields,
missing fields and a mismatched idempotency key are refused, naming the item), and a batch
is all-or-nothing: one bad event rejects the request, so a monitor never half-delivers.
Identifiers are held to what Kubernetes and the model allow (`_check_identifiers`) before anything
is stored, so a hostile name never reaches the store, the log or a node annotation.
Keys are camelCase; a monitor still sending the old snake_case keys (`is_fatal`) is served and
warned about once per process and key, so the log names what to rename without flooding.
"""

from __future__ import annotations

import functools
import itertools
import logging
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from dsx import serialization
from dsx.errors import BadInputError, PayloadTooLargeError
from dsx.model import health, schema
from dsx.model.health import HealthEvent

log = logging.getLogger("dsx.health.parsing.ingest")
_warned: set[str] = set()

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
    events = []
    for index, item in enumerate(items):
        where = f"{source}: events[{index}]"
        event = HealthEvent.from_dict(item, source=where)
        _check_identifiers(event, where)
        events.append(event)
    _warn_old_keys(items, source)
    return events


_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_ALLOWED_CONTROLS = frozenset("\t\n")


def _check_identifiers(event: HealthEvent, where: str) -> None:
    """Refuse what a monitor never sends and what would be carried on into the store, log lines,
    node annotations and reports: a node name that is not a Kubernetes one, control and bidi
    characters (U+202E turns a log line around), and strings or lists past the model's bounds."""
    if len(event.node_name) > health.MAX_NODE_NAME_CHARS or not _DNS_SUBDOMAIN.fullmatch(event.node_name):
        raise BadInputError(
            f"{where}: nodeName {event.node_name[:80]!r}: must be a Kubernetes node name (a DNS-1123 subdomain:"
            f" lower-case letters, digits, '-' and '.', at most {health.MAX_NODE_NAME_CHARS} characters)"
        )
    names = [("agent", event.agent), ("checkName", event.check_name)]
    names.append(("customRecommendedAction", event.custom_recommended_action))
    names += [(f"errorCodes[{i}]", code) for i, code in enumerate(event.error_codes)]
    for i, entity in enumerate(event.entities):
        names += [(f"entities[{i}].type", entity.type.value), (f"entities[{i}].value", entity.value)]
    names += [(f"metadata key {key[:40]!r}", key) for key in event.metadata]
    for field_name, value in names:
        _check_text(where, field_name, value, health.MAX_NAME_CHARS, newlines=False)
    _check_text(where, "message", event.message, health.MAX_MESSAGE_CHARS, newlines=True)
    for key, value in event.metadata.items():
        _check_text(where, f"metadata[{key!r}]", value, health.MAX_METADATA_VALUE_CHARS, newlines=True)
    for field_name, count in (
        ("errorCodes", len(event.error_codes)),
        ("entities", len(event.entities)),
        ("metadata", len(event.metadata)),
    ):
        if count > health.MAX_ITEMS:
            raise BadInputError(f"{where}: {field_name}: {count} items; at most {health.MAX_ITEMS}")


def _check_text(where: str, field_name: str, value: str, limit: int, *, newlines: bool) -> None:
    if len(value) > limit:
        raise BadInputError(f"{where}: {field_name}: {len(value)} characters; at most {limit}")
    found = _refused_characters(newlines=newlines).search(value)
    if found is not None:
        raise BadInputError(
            f"{where}: {field_name}: control or formatting character U+{ord(found.group()):04X} at {found.start()}"
            " (bidi overrides, NUL and other control characters are refused)"
        )


@functools.cache
def _refused_characters(*, newlines: bool) -> re.Pattern[str]:
    """One character class of Unicode's control, format, surrogate and line/paragraph separator
    code points (tab and newline allowed in free text): a regex scan, not a loop per character."""
    allowed = _ALLOWED_CONTROLS if newlines else frozenset()
    ranges: list[str] = []
    start = previous = -2
    for point in itertools.chain(range(0x20000), range(0xE0000, 0xE1000)):  # no such character elsewhere
        char = chr(point)
        if char in allowed or unicodedata.category(char) not in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            continue
        if point != previous + 1:
            if start >= 0:
                ranges.append(_range(start, previous))
            start = point
        previous = point
    ranges.append(_range(start, previous))
    return re.compile("[" + "".join(ranges) + "]")


def _range(first: int, last: int) -> str:
    return f"\\U{first:08x}" if first == last else f"\\U{first:08x}-\\U{last:08x}"


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
    """One warning per old snake_case key a sender uses, the first time this process sees it (two
    requests at the same moment may each warn once: a repeated line, never a lost one)."""
    found = {old: new for item in items for old, new in health.old_keys(item)}
    fresh = sorted((old, new) for old, new in found.items() if old not in _warned)
    _warned.update(old for old, _ in fresh)
    schema.warn_renamed(log, source, fresh)


def to_document(events: Sequence[HealthEvent]) -> dict[str, Any]:
    """What an ingestion client sends."""
    return {"events": [event.to_dict() for event in events]}
