"""The one HTTP server of dsx: `dsx serve` (its ASGI app) and the sentinel both run on it.

Why one server, and why not `http.server.ThreadingHTTPServer` or uvicorn as they come: the
first gives every connection a thread for as long as the client likes (a client sending its
headers one byte a minute holds a thread forever, and a few hundred of them hold the process),
and the second has no deadline for a request's headers at all. Both must be safe without a
proxy in front. This server adds, per connection (`ServerLimits`):

- **header deadline** `header_timeout_seconds`: from accepting the connection (or from the
  first byte of a kept-alive connection's next request) to the end of the headers, in total —
  not per read, so trickling bytes does not extend it;
- **body deadline** `body_timeout_seconds`: reading the whole body, and again writing the
  whole response;
- **idle deadline** `idle_timeout_seconds`: a kept-alive connection waiting for its next request;
- **bound** `max_connections`: open connections, each served by one thread. A connection over
  the bound takes the slot of the connection that has waited longest for its headers (or, kept
  alive, for its next request), which is closed: clients that trickle or idle can hold slots
  only until someone else needs one, so 300 of them never stop `/healthz` answering. When every
  slot is serving a request, the newcomer is answered `503` at once and closed, without a thread;
- **body size** `max_body_bytes`: a declared body over it is refused before it is read.

A connection past a deadline is closed. An error while serving one connection (a reset, a bug)
is logged as one record with its traceback inside (`log.warning(..., exc_info=True)`, JSON in the
sentinel), never printed raw to stderr. The token rule is `dsx.api.security.needs_token`, the
same on both servers: the probes and the API docs are open, every other path needs a bearer token.

`serve_asgi` runs an ASGI application (the FastAPI app of `dsx serve`): one event loop thread
runs the application, the connection threads do all socket I/O, so a slow client never blocks
the loop; the body is read only when the application asks for it (after its authentication
and size checks), and responses may stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import math
import queue
import signal
import socket
import socketserver
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, ClassVar
from urllib.parse import unquote

from dsx.api import security

log = logging.getLogger("dsx.http")


@dataclass(frozen=True)
class ServerLimits:
    header_timeout_seconds: float = 10.0
    body_timeout_seconds: float = 30.0
    idle_timeout_seconds: float = 30.0
    max_connections: int = 128
    max_body_bytes: int = security.DEFAULT_MAX_BODY_BYTES


DISCARD_LIMIT_FACTOR = 8
"""A refused body up to this many times `max_body_bytes` is read and dropped; a larger one is not read."""

_BUSY = json.dumps({"error": {"code": "UNAVAILABLE", "message": "too many open connections; retry"}}).encode()
_BUSY_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
    b"Connection: close\r\nContent-Length: " + str(len(_BUSY)).encode() + b"\r\n\r\n" + _BUSY
)


class _DeadlineReader(socket.SocketIO):
    """Reads that fail once `deadline` (time.monotonic) has passed, however the bytes trickle in."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(sock, "rb")
        self.deadline = math.inf

    def readinto(self, b: Any) -> int | None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the client missed its deadline")
        self._sock.settimeout(left)  # type: ignore[attr-defined]
        return super().readinto(b)

    def close(self) -> None:
        """The socket is the server's to close (after the handler's last write)."""
        io.RawIOBase.close(self)


EVICTION_WAIT_SECONDS = 0.5
"""How long a newcomer waits for the slot of the connection it evicted (its thread ends at once)."""


class HardenedHTTPServer(socketserver.ThreadingMixIn, HTTPServer):
    """A thread per connection, at most `limits.max_connections` of them."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], limits: ServerLimits) -> None:
        self.limits = limits
        self._slots = threading.BoundedSemaphore(limits.max_connections)
        self._waiting: OrderedDict[int, socket.socket] = OrderedDict()
        """Connections waiting for a request's headers (new or kept alive), oldest first: evictable."""
        self._waiting_lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False) and not self._evict_for_slot():
            self._refuse(request)
            return
        self.waiting(request)
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.serving(request)
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)  # type: ignore[misc]
        finally:
            self.serving(request)
            self._slots.release()

    def waiting(self, request: socket.socket) -> None:
        """The connection waits for a request's headers: it may be evicted for a newcomer."""
        with self._waiting_lock:
            self._waiting[id(request)] = request
            self._waiting.move_to_end(id(request))

    def serving(self, request: socket.socket) -> bool:
        """The connection is serving a request (or gone): never evicted. False when it was evicted."""
        with self._waiting_lock:
            return self._waiting.pop(id(request), None) is not None

    def _evict_for_slot(self) -> bool:
        """Close the longest-waiting connection and take its slot; False when none waits."""
        with self._waiting_lock:
            if not self._waiting:
                return False
            _, victim = self._waiting.popitem(last=False)
        with contextlib.suppress(OSError):
            victim.shutdown(socket.SHUT_RDWR)  # its thread's read returns at once, and the thread ends
        log.debug("at the connection bound: closed the connection that waited longest for its request")
        return self._slots.acquire(timeout=EVICTION_WAIT_SECONDS)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One log record with the traceback inside, not socketserver's print to stderr; a client
        that went away (reset, broken pipe, eviction) is routine and logged at debug level."""
        failure = sys.exc_info()[1]
        level = logging.DEBUG if isinstance(failure, OSError) else logging.WARNING
        log.log(level, "error serving a connection from %s", client_address[0], exc_info=True)

    def _refuse(self, request: socket.socket) -> None:
        try:
            request.settimeout(1.0)
            request.sendall(_BUSY_RESPONSE)
        except OSError:
            pass
        self.shutdown_request(request)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def start(self, name: str) -> threading.Thread:
        """Serve from a daemon thread."""
        thread = threading.Thread(target=self.serve_forever, name=name, daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class HardenedHandler(BaseHTTPRequestHandler):
    """Deadlines on every read and write, JSON errors, the shared token rule."""

    server: HardenedHTTPServer
    protocol_version = "HTTP/1.1"
    server_version = "dsx"

    def version_string(self) -> str:
        """The Server header names no Python version."""
        return self.server_version

    authenticator: ClassVar[security.TokenAuthenticator]

    def setup(self) -> None:
        super().setup()
        self.rfile.close()
        self._reader = _DeadlineReader(self.connection)
        self._reader.deadline = time.monotonic() + self.server.limits.header_timeout_seconds
        self._buffered = io.BufferedReader(self._reader)
        self.rfile = self._buffered
        self._requests = 0
        self._body_left = 0

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def handle_one_request(self) -> None:
        limits = self.server.limits
        if self._requests:  # a kept-alive connection: the next request may take its time to begin
            self._reader.deadline = time.monotonic() + limits.idle_timeout_seconds
            try:
                if not self._buffered.peek(1):
                    self.close_connection = True
                    return
            except OSError:
                self.close_connection = True
                return
            self._reader.deadline = time.monotonic() + limits.header_timeout_seconds
        self._requests += 1
        super().handle_one_request()
        self.server.waiting(self.connection)
        if self._body_left:
            self.close_connection = True  # an unread body would be parsed as the next request
            self._discard()

    def _discard(self) -> None:
        """Read a refused body (up to a bound, within the body deadline) so the client sees the answer, not a reset."""
        left = self._body_left if self._body_left <= DISCARD_LIMIT_FACTOR * self.server.limits.max_body_bytes else 0
        self._body_left = 0
        try:
            while left > 0:
                chunk = self._buffered.read1(min(left, 65536))
                if not chunk:
                    return
                left -= len(chunk)
        except OSError:
            return

    def parse_request(self) -> bool:
        parsed = super().parse_request()  # reads the headers
        if parsed and not self.server.serving(self.connection):
            self.close_connection = True  # evicted while its headers came in: not served
            return False
        self._reader.deadline = time.monotonic() + self.server.limits.body_timeout_seconds
        declared = self.headers.get("Content-Length", "") if parsed else ""
        self._body_left = int(declared) if declared.isdigit() else 0
        return parsed

    def end_headers(self) -> None:
        """Writing the response gets a body deadline of its own."""
        self.connection.settimeout(self.server.limits.body_timeout_seconds)
        super().end_headers()

    # -- the token rule -----------------------------------------------------------------------

    def authorized(self) -> bool:
        """True when the path is open or a valid bearer token came; otherwise answer 401."""
        path = self.path.split("?", 1)[0]
        if not security.needs_token(path):
            return True
        if self.authenticator.identify(self.headers.get("Authorization")) is not None:
            return True
        self.send_error_json(HTTPStatus.UNAUTHORIZED, "UNAUTHORIZED", "missing or invalid bearer token", bearer=True)
        return False

    # -- bodies -------------------------------------------------------------------------------

    def read_body(self) -> bytes | None:
        """The declared body, or None after answering 411/413 (an oversized body is not read)."""
        declared = self.headers.get("Content-Length", "")
        if self.headers.get("Transfer-Encoding") or not declared.isdigit():
            self.close_connection = True
            self.send_error_json(HTTPStatus.LENGTH_REQUIRED, "INVALID_REQUEST", "Content-Length is required")
            return None
        limit = self.server.limits.max_body_bytes
        if int(declared) > limit:
            self.close_connection = True
            self.send_error_json(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "PAYLOAD_TOO_LARGE", f"request body over {limit} bytes"
            )
            return None
        body = self.rfile.read(int(declared))
        self._body_left = 0
        return body

    # -- answers ------------------------------------------------------------------------------

    def send_error_json(self, status: HTTPStatus, code: str, message: str, *, bearer: bool = False) -> None:
        body = json.dumps({"error": {"code": code, "message": message}}).encode()
        self.send_body(status, body, "application/json", {"WWW-Authenticate": "Bearer"} if bearer else {})

    def send_body(
        self, status: HTTPStatus, body: bytes, content_type: str, headers: Mapping[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


# -- ASGI ----------------------------------------------------------------------------------------

Message = MutableMapping[str, Any]
AsgiApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]
]


class AsgiLoop:
    """The event loop the application runs on, in a thread of its own."""

    def __init__(self, app: AsgiApp) -> None:
        self.app = app
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="asgi-loop", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


class AsgiHandler(HardenedHandler):
    """Hands each request to the ASGI application; socket I/O stays on this connection's thread."""

    asgi: ClassVar[AsgiLoop]

    def _dispatch(self) -> None:
        if not self.authorized():
            return
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            self.send_error_json(HTTPStatus.LENGTH_REQUIRED, "INVALID_REQUEST", "Content-Length is required")
            return
        outbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        loop = self.asgi.loop
        scope = self._scope()

        async def run() -> None:
            answered = asyncio.Event()
            delivered = False

            async def receive() -> Message:
                nonlocal delivered
                if delivered:  # like uvicorn: the client "disconnects" once the response is out
                    await answered.wait()
                    return {"type": "http.disconnect"}
                wanted: asyncio.Future[bytes] = loop.create_future()
                outbox.put(("receive", wanted))
                body = await wanted
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}

            async def send(message: Message) -> None:
                if message["type"] == "http.response.body" and not message.get("more_body", False):
                    answered.set()
                outbox.put(("send", dict(message)))

            try:
                await self.asgi.app(scope, receive, send)
            finally:
                answered.set()
                outbox.put(("done", None))

        finished = asyncio.run_coroutine_threadsafe(run(), loop)
        response = _Response(self)
        while True:
            kind, item = outbox.get()
            if kind == "receive":
                self._deliver_body(loop, item)
            elif kind == "send":
                response.take(item)
            else:
                break
        try:
            finished.result()
        except Exception:
            log.exception("internal error on %s %s", self.command, scope["path"])
            if not response.started:
                self.send_error_json(HTTPStatus.INTERNAL_SERVER_ERROR, "INTERNAL", "internal error; see the server log")
                return
            self.close_connection = True
        if not response.started:
            self.send_error_json(HTTPStatus.INTERNAL_SERVER_ERROR, "INTERNAL", "the application sent no response")

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _dispatch

    def _deliver_body(self, loop: asyncio.AbstractEventLoop, wanted: asyncio.Future[bytes]) -> None:
        try:
            if self._body_left > self.server.limits.max_body_bytes:
                raise security.BodyTooLargeError(self.server.limits.max_body_bytes)
            body = self.rfile.read(self._body_left) if self._body_left else b""
            self._body_left = 0
        except Exception as exc:  # a missed deadline or a reset: the application sees it and ends
            self.close_connection = True
            loop.call_soon_threadsafe(_settle, wanted, None, exc)
            return
        loop.call_soon_threadsafe(_settle, wanted, body, None)

    def _scope(self) -> dict[str, Any]:
        raw_path, _, query = self.path.partition("?")
        host, port = self.server.server_address[:2]
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": self.request_version.removeprefix("HTTP/"),
            "method": self.command,
            "scheme": "http",
            "path": unquote(raw_path),
            "raw_path": raw_path.encode("latin-1"),
            "query_string": query.encode("latin-1"),
            "root_path": "",
            "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in self.headers.items()],
            "client": self.client_address[:2],
            "server": (str(host), int(port)),
        }


def _settle(future: asyncio.Future[bytes], value: bytes | None, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value or b"")


class _Response:
    """Writes an ASGI response: streamed when it declares its length, else buffered to learn it."""

    def __init__(self, handler: AsgiHandler) -> None:
        self.handler = handler
        self.started = False
        self._status = 500
        self._headers: list[tuple[str, str]] = []
        self._buffered: list[bytes] = []
        self._streaming = False

    def take(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self._status = int(message["status"])
            self._headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in message.get("headers", [])]
            self._streaming = any(k.lower() == "content-length" for k, _ in self._headers)
            if self._streaming:
                self._head()
        elif message["type"] == "http.response.body":
            body = bytes(message.get("body", b""))
            if self._streaming:
                self._write(body)
            else:
                self._buffered.append(body)
                if not message.get("more_body", False):
                    whole = b"".join(self._buffered)
                    self._headers.append(("Content-Length", str(len(whole))))
                    self._head()
                    self._write(whole)

    def _head(self) -> None:
        handler = self.handler
        handler.send_response(self._status)
        for name, value in self._headers:
            handler.send_header(name, value)
        if handler.close_connection:
            handler.send_header("Connection", "close")
        handler.end_headers()
        self.started = True

    def _write(self, body: bytes) -> None:
        if body and self.handler.command != "HEAD":
            self.handler.wfile.write(body)


def asgi_server(
    app: AsgiApp,
    authenticator: security.TokenAuthenticator,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    limits: ServerLimits = ServerLimits(),
) -> tuple[HardenedHTTPServer, AsgiLoop]:
    """A bound server for `app` (not serving yet) and the loop it runs on."""
    running = AsgiLoop(app)
    handler = type("AsgiRequestHandler", (AsgiHandler,), {"asgi": running, "authenticator": authenticator})
    return HardenedHTTPServer((host, port), handler, limits), running


def serve_asgi(
    app: AsgiApp,
    authenticator: security.TokenAuthenticator,
    *,
    host: str,
    port: int,
    limits: ServerLimits = ServerLimits(),
) -> None:
    """Serve `app` until SIGTERM or Ctrl-C."""
    server, running = asgi_server(app, authenticator, host=host, port=port, limits=limits)
    stop = threading.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: stop.set())
    server.start("dsx-serve")
    try:
        stop.wait()
    finally:
        server.stop()
        running.close()
