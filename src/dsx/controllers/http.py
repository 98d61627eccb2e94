"""The sentinel's HTTP endpoints: probes, metrics, status and authenticated event ingestion.

Why not the API's FastAPI app: the sentinel is a controller that must start and answer probes
with nothing but its own process, and these five routes need no framework. It runs on the same
hardened server as `dsx serve` (`dsx.api.server`: header, body and idle deadlines, a bound on
open connections) with the same token rule (`dsx.api.security.needs_token`): /healthz and
/readyz are open (and the API docs paths, which the sentinel does not serve), everything else
needs a bearer token from the token file.

    GET  /healthz      200 "ok" while the process serves
    GET  /readyz       200 "ok" once the store and the cluster answer and the stages run; else 503 and why
    GET  /metrics      Prometheus exposition (bearer token)
    GET  /v1/status    node states, breaker, cursors (bearer token)
    POST /v1/events    one HealthEvent, a list, or {"events": [...]} (bearer token); 202 with sequences

A body is parsed here (`dsx.health.parsing.ingest`, the one parser of every ingestion door) so the answer
to a sender of old snake_case keys carries the same `Deprecation` and `Warning` headers the
API's `POST /v1/sentinel/events` sends.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from dsx import serialization
from dsx.api import security, server
from dsx.errors import DsxError, ForbiddenError, PayloadTooLargeError
from dsx.health.parsing import ingest
from dsx.model.health import HealthEvent

log = logging.getLogger("dsx.sentinel.http")

MAX_BODY_BYTES = security.DEFAULT_MAX_BODY_BYTES
BULK_BODY_BYTES = 64 << 10
"""A post larger than this (hundreds of events: a backlog or a flood) is parsed and stored by one
request at a time (`_BULK`); smaller ones (a monitor's poll, a fault) never wait for it. Parsing is
CPU in one interpreter: four 1,000-event posts parsed at once took 61% of the sentinel's samples
and left the quarantine stage 8%, so it fell 21,000 events behind and a fault waited seconds."""
_BULK = threading.Semaphore(1)


@dataclass(frozen=True)
class Routes:
    """What the endpoints call; each is the runtime's."""

    ready: Callable[[], str | None]
    """None when ready, else the reason it is not."""
    metrics: Callable[[], bytes]
    status: Callable[[], dict[str, Any]]
    ingest: Callable[[Sequence[HealthEvent]], dict[str, Any]]
    """Appends parsed events; answers accepted, created and sequences."""
    authenticator: security.Authenticator
    before_bulk: Callable[[], object] = lambda: None
    """Called before a bulk post is parsed (holding `_BULK`): the runtime waits there, bounded, while
    an event that needs action is on its way to a cordon."""


class SentinelHttpServer:
    """The hardened threaded server on one port; `start` serves from a background thread."""

    def __init__(
        self,
        routes: Routes,
        *,
        host: str = "127.0.0.1",
        port: int = 9464,
        limits: server.ServerLimits = server.ServerLimits(max_body_bytes=MAX_BODY_BYTES),
    ) -> None:
        handler = type("SentinelRequestHandler", (_Handler,), {"routes": routes, "authenticator": routes.authenticator})
        self._server = server.HardenedHTTPServer((host, port), handler, limits)

    @property
    def port(self) -> int:
        return self._server.port

    def start(self) -> None:
        self._server.start("sentinel-http")

    def stop(self) -> None:
        self._server.stop()


def _bound_to_its_node(caller: security.Caller | None, events: Sequence[HealthEvent]) -> None:
    """A caller whose token is bound to a node posts events for that node only (ForbiddenError)."""
    if caller is None or caller.node is None:
        return
    for index, event in enumerate(events):
        if event.node_name != caller.node:
            raise ForbiddenError(
                f"events[{index}]: node {event.node_name!r}: this token belongs to pod {caller.pod or '?'} on node"
                f" {caller.node!r} and may post events for that node only"
            )


class _Handler(server.HardenedHandler):
    routes: Routes
    server_version = "dsx-sentinel"

    def do_GET(self) -> None:
        if not self.authorized():
            return
        path = self.path.split("?", 1)[0]
        try:
            self._get(path)
        except Exception:  # one record with the traceback inside; the client gets the error envelope
            log.exception("GET %s failed", path)
            self.close_connection = True
            self.send_error_json(HTTPStatus.INTERNAL_SERVER_ERROR, "INTERNAL", "internal error; see the sentinel log")

    def _get(self, path: str) -> None:
        if path == "/healthz":
            self._text(HTTPStatus.OK, "ok\n")
        elif path == "/readyz":
            why = self.routes.ready()
            self._text(HTTPStatus.OK if why is None else HTTPStatus.SERVICE_UNAVAILABLE, f"{why or 'ok'}\n")
        elif path == "/metrics":
            self.send_body(HTTPStatus.OK, self.routes.metrics(), "text/plain; version=0.0.4; charset=utf-8")
        elif path == "/v1/status":
            self._json(HTTPStatus.OK, self.routes.status())
        else:
            self.send_error_json(HTTPStatus.NOT_FOUND, "NOT_FOUND", f"no route {path}")

    def do_POST(self) -> None:
        if not self.authorized():
            return
        path = self.path.split("?", 1)[0]
        if path != "/v1/events":
            self.send_error_json(HTTPStatus.NOT_FOUND, "NOT_FOUND", f"no route {path}")
            return
        body = self.read_body()
        if body is None:
            return
        try:
            bulk = len(body) > BULK_BODY_BYTES
            with _BULK if bulk else contextlib.nullcontext():
                if bulk:
                    self.routes.before_bulk()
                document = serialization.parse_json(body, source="request body")
                events = ingest.parse_document(document)
                _bound_to_its_node(self.routes.authenticator.caller(self.headers.get("authorization")), events)
                answer = self.routes.ingest(events)
        except PayloadTooLargeError as exc:
            self.send_error_json(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, exc.code, exc.message)
        except DsxError as exc:
            self.send_error_json(HTTPStatus(exc.http_status), exc.code, exc.message)
        except Exception:
            log.exception("ingestion failed")
            self.send_error_json(HTTPStatus.INTERNAL_SERVER_ERROR, "INTERNAL", "internal error; see the sentinel log")
        else:
            self._json(HTTPStatus.ACCEPTED, answer, ingest.deprecation_headers(document))

    def _json(self, status: HTTPStatus, document: Any, headers: dict[str, str] | None = None) -> None:
        self.send_body(status, json.dumps(document, default=str).encode(), "application/json", headers)

    def _text(self, status: HTTPStatus, text: str) -> None:
        self.send_body(status, text.encode(), "text/plain; charset=utf-8")
