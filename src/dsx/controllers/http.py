"""The sentinel's HTTP endpoints: probes, metrics, and authenticated event ingestion.

Why the standard library and not the API's FastAPI app: the sentinel is a controller that
must start and answer probes with nothing but its own process, and these five routes need no
framework. Authentication reuses `dsx.api.security` (bearer tokens compared in constant time,
only their digests kept; the same token file format as `dsx serve`).

    GET  /healthz      200 "ok" while the process serves
    GET  /readyz       200 "ok" once the store and the cluster answer and the stages run; else 503 and why
    GET  /metrics      Prometheus exposition
    GET  /v1/status    node states, breaker, cursors (bearer token)
    POST /v1/events    one HealthEvent, a list, or {"events": [...]} (bearer token); 202 with sequences
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from dsx.api import security
from dsx.errors import DsxError, PayloadTooLargeError

log = logging.getLogger("dsx.sentinel.http")

MAX_BODY_BYTES = security.DEFAULT_MAX_BODY_BYTES
DISCARD_LIMIT_BYTES = 8 * MAX_BODY_BYTES
"""A refused body up to this size is read and dropped; a larger one just gets the connection closed."""


@dataclass(frozen=True)
class Routes:
    """What the endpoints call; each is the runtime's."""

    ready: Callable[[], str | None]
    """None when ready, else the reason it is not."""
    metrics: Callable[[], bytes]
    status: Callable[[], dict[str, Any]]
    ingest: Callable[[bytes], dict[str, Any]]
    authenticator: security.TokenAuthenticator


class SentinelHttpServer:
    """A threaded HTTP server on one port; `start` serves from a background thread."""

    def __init__(self, routes: Routes, *, host: str = "127.0.0.1", port: int = 9464) -> None:
        handler = type("SentinelRequestHandler", (_Handler,), {"routes": routes})
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread = threading.Thread(target=self._server.serve_forever, name="sentinel-http", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Handler(BaseHTTPRequestHandler):
    routes: Routes
    server_version = "dsx-sentinel"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/healthz":
            self._text(HTTPStatus.OK, "ok\n")
        elif path == "/readyz":
            why = self.routes.ready()
            self._text(HTTPStatus.OK if why is None else HTTPStatus.SERVICE_UNAVAILABLE, f"{why or 'ok'}\n")
        elif path == "/metrics":
            self._send(HTTPStatus.OK, self.routes.metrics(), "text/plain; version=0.0.4; charset=utf-8")
        elif path == "/v1/status":
            if self._authorized():
                self._json(HTTPStatus.OK, self.routes.status())
        else:
            self._error(HTTPStatus.NOT_FOUND, "NOT_FOUND", f"no route {path}")

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        if path != "/v1/events":
            self._error(HTTPStatus.NOT_FOUND, "NOT_FOUND", f"no route {path}")
            return
        if not self._authorized():
            return
        declared = self.headers.get("Content-Length", "")
        if not declared.isdigit():
            self._error(HTTPStatus.LENGTH_REQUIRED, "INVALID_REQUEST", "Content-Length is required")
            return
        if int(declared) > MAX_BODY_BYTES:
            self.close_connection = True
            self._discard(int(declared))
            self._error(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "PAYLOAD_TOO_LARGE", f"request body over {MAX_BODY_BYTES} bytes"
            )
            return
        body = self.rfile.read(int(declared))
        try:
            answer = self.routes.ingest(body)
        except PayloadTooLargeError as exc:
            self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, exc.code, exc.message)
        except DsxError as exc:
            self._error(HTTPStatus(exc.http_status), exc.code, exc.message)
        except Exception:
            log.exception("ingestion failed")
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, "INTERNAL", "internal error; see the sentinel log")
        else:
            self._json(HTTPStatus.ACCEPTED, answer)

    def _discard(self, length: int) -> None:
        """Read a refused body (up to a bound) so the client sees the 413 rather than a reset."""
        left = min(length, DISCARD_LIMIT_BYTES)
        while left > 0:
            chunk = self.rfile.read(min(left, 65536))
            if not chunk:
                return
            left -= len(chunk)

    def _authorized(self) -> bool:
        if self.routes.authenticator.identify(self.headers.get("Authorization")) is not None:
            return True
        self._error(HTTPStatus.UNAUTHORIZED, "UNAUTHORIZED", "missing or invalid bearer token", bearer=True)
        return False

    def _error(self, status: HTTPStatus, code: str, message: str, *, bearer: bool = False) -> None:
        body = json.dumps({"error": {"code": code, "message": message}}).encode()
        self._send(status, body, "application/json", {"WWW-Authenticate": "Bearer"} if bearer else {})

    def _json(self, status: HTTPStatus, document: Any) -> None:
        self._send(status, json.dumps(document, default=str).encode(), "application/json")

    def _text(self, status: HTTPStatus, text: str) -> None:
        self._send(status, text.encode(), "text/plain; charset=utf-8")

    def _send(self, status: HTTPStatus, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)
