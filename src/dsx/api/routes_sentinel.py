"""/v1/sentinel: the operate pipeline's store over HTTP — node states, events, ingestion.

Always registered, so the OpenAPI document is complete; without a store (`dsx serve --store`)
each route answers 404 naming the flag. Reads and writes go
to the same event store a `dsx sentinel run` uses, so a portal can show node states and an
external monitor can post events without reaching the sentinel process itself. Posted events
are validated by `dsx.health.parsing.ingest` (all-or-nothing) and deduplicated by idempotency key; a
body with the old snake_case keys is accepted with `Deprecation` and `Warning` headers.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
from fastapi import Depends, FastAPI, Query
from fastapi.responses import Response

from dsx.api import schemas, wire
from dsx.errors import NotFoundError
from dsx.health.decisions import breaker, pipeline_status
from dsx.health.decisions import policy as policy_module
from dsx.health.decisions.eventstore import EventStore
from dsx.health.parsing import ingest
from dsx.store import open_store

if TYPE_CHECKING:
    from dsx.api.app import ApiSettings

_stores: dict[str, EventStore] = {}
_lock = threading.Lock()


def _store(settings: ApiSettings) -> EventStore:
    if not settings.store_url:
        raise NotFoundError("this server has no event store: start dsx serve with --store URL")
    url = settings.store_url
    with _lock:
        found = _stores.get(url)
        if found is None:
            found = _stores[url] = open_store(url)
        return found


class EventsBody(schemas.Model, forbid_unknown_fields=True, kw_only=True):
    """HealthEvents (the JSON form of `dsx.model.health.HealthEvent`), at most 1000 per request."""

    events: Annotated[list[dict[str, Any]], msgspec.Meta(min_length=1, max_length=ingest.MAX_EVENTS_PER_REQUEST)]


def register(api: FastAPI, settings: ApiSettings) -> None:
    answers = schemas.errors(404, 503)

    @api.get("/v1/sentinel/nodes", tags=["operate"], responses={**wire.answers(schemas.SentinelStatus), **answers})
    def get_nodes() -> Response:
        """Nodes that left service (state, reason, history), validation requests, breaker, cursors."""
        store = _store(settings)
        gate = breaker.CircuitBreaker(store, policy_module.BreakerSettings(), lambda: 0)
        return wire.respond(pipeline_status.document(store, gate, now=datetime.now(UTC)))

    @api.get("/v1/sentinel/events", tags=["operate"], responses={**wire.answers(schemas.EventsPage), **answers})
    def get_events(
        node: str | None = Query(default=None, max_length=253),
        since: datetime | None = Query(default=None, description="Only events generated at or after this time."),
        after: int = Query(default=0, ge=0, description="Only events past this sequence."),
        limit: int = Query(default=100, ge=1, le=1000),
    ) -> Response:
        """Stored events, oldest first."""
        found = _store(settings).events(after_sequence=after, limit=limit, node_name=node, since=since)
        page = schemas.EventsPage(
            events=[
                schemas.StoredEvent(sequence=s.sequence, stored_at=s.stored_at.isoformat(), event=s.event.to_dict())
                for s in found
            ]
        )
        return wire.respond(page)

    @api.post(
        "/v1/sentinel/events",
        tags=["operate"],
        status_code=202,
        responses={**wire.answers(schemas.EventsAccepted, 202), **answers},
        openapi_extra=wire.request(EventsBody),
    )
    def post_events(body: Annotated[EventsBody, Depends(wire.body(EventsBody))]) -> Response:
        """Store events from an external monitor; a re-sent event is stored once."""
        events = ingest.parse_document({"events": body.events})
        appended = _store(settings).append(events)
        answer = schemas.EventsAccepted(
            accepted=len(appended),
            created=sum(1 for a in appended if a.created),
            sequences=[a.sequence for a in appended],
        )
        return wire.respond(answer, status=202, headers=ingest.deprecation_headers(body.events))


def check_ready(settings: ApiSettings) -> None:
    """The store answers (raises a dsx error otherwise)."""
    _store(settings).last_sequence()
