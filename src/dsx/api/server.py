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
import json
import logging
import queue
import socket
import socketserver
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Mapping, MutableMapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, ClassVar
from urllib.parse import unquote

import h11

from dsx import interrupts
from dsx.api import security
from dsx.errors import DeadlineExceededError, UnavailableError

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


EVICTION_WAIT_SECONDS = 0.5
"""How long a newcomer waits for the slot of the connection it evicted (its thread ends at once)."""
DRAIN_SECONDS = 10.0
"""On stop (SIGTERM), how long answers in flight may take to finish (under the kubelet's 30 s grace)."""
HEADER_BLOCK_BYTES = 32 * 1024
"""The request line and headers together (h11's `max_incomplete_event_size`): beyond it, 431 and close."""
RECEIVE_BYTES = 65536


class HardenedHTTPServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    """A thread per connection, at most `limits.max_connections` of them."""

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(
        self, address: tuple[str, int], handler: type[socketserver.BaseRequestHandler], limits: ServerLimits
    ) -> None:
        self.limits = limits
        self._slots = threading.BoundedSemaphore(limits.max_connections)
        self._waiting: OrderedDict[int, socket.socket] = OrderedDict()
        """Connections waiting for a request's headers (new or kept alive) or trickling a body, oldest first:
        evictable."""
        self._waiting_lock = threading.Lock()
        self._active = 0
        self._active_changed = threading.Condition()
        self.draining = False
        """Set by `stop`: answers in flight finish, with `Connection: close`; nothing new is read."""
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
        with self._active_changed:
            self._active += 1
        try:
            super().process_request_thread(request, client_address)  # type: ignore[misc]
        finally:
            self.serving(request)
            self._slots.release()
            with self._active_changed:
                self._active -= 1
                self._active_changed.notify_all()

    def waiting(self, request: socket.socket) -> None:
        """The connection waits for the client (headers, or a body): it may be evicted for a newcomer."""
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
        log.debug("at the connection bound: closed the connection that waited longest for its client")
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

    def stop(self, *, drain_seconds: float = DRAIN_SECONDS) -> int:
        """Stop accepting, close the connections that only wait, let answers in flight finish within
        `drain_seconds`; returns how many connections were still open at the bound (then abandoned)."""
        self.draining = True
        self.shutdown()
        self.server_close()
        with self._waiting_lock:
            idle = list(self._waiting.values())
            self._waiting.clear()
        for connection in idle:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + drain_seconds
        with self._active_changed:
            while self._active and time.monotonic() < deadline:
                self._active_changed.wait(max(0.0, deadline - time.monotonic()))
            return self._active


class Headers:
    """A request's headers as h11 parsed them: names lower-cased, order and repeats kept."""

    def __init__(self, pairs: list[tuple[bytes, bytes]]) -> None:
        self._pairs = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in pairs]

    def get(self, name: str, default: str | None = None) -> str | None:
        wanted = name.lower()
        return next((value for key, value in self._pairs if key == wanted), default)

    def items(self) -> list[tuple[str, str]]:
        return list(self._pairs)


class _Evicted(Exception):
    """The connection was closed for a newcomer while its headers came in: not served."""


class HardenedHandler(socketserver.BaseRequestHandler):
    """HTTP/1.1 framed by h11 (RFC 9112 as uvicorn's parser reads it), with deadlines on every read
    and write, JSON errors, and the shared token rule.

    What h11 refuses (a header line that is not `token: value`, a bare CR, conflicting or malformed
    Content-Length, a missing or repeated Host, a header block over `HEADER_BLOCK_BYTES`) is answered
    with the JSON error envelope and the status h11 suggests, and the connection is closed. A
    Transfer-Encoding body is refused with 411 before the token is checked, an unread body closes the
    connection after the answer (it is never read as the next request), and `100 Continue` is sent
    only when the handler reads the body: after the token and size checks.
    """

    server: HardenedHTTPServer
    server_version = "dsx"
    authenticator: ClassVar[security.Authenticator]

    def setup(self) -> None:
        self.connection: socket.socket = self.request
        with contextlib.suppress(OSError):  # one segment per answer, sent at once (no Nagle delay)
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=HEADER_BLOCK_BYTES)
        self._deadline = time.monotonic() + self.server.limits.header_timeout_seconds
        self._requests = 0
        self.close_connection = False
        self.command = ""
        self.path = ""
        self.request_version = "HTTP/1.1"
        self.headers = Headers([])
        self._responded = False

    # -- the connection -------------------------------------------------------------------------

    def handle(self) -> None:
        while True:
            try:
                if not self._one_request():
                    return
            except h11.RemoteProtocolError as exc:
                self._framing_error(exc)
                return
            except _Evicted:
                return
            except (TimeoutError, OSError):
                return
            done = self._h11.our_state is h11.DONE and self._h11.their_state is h11.DONE
            if self.close_connection or not done or self.server.draining:
                self._drain()
                return
            self._h11.start_next_cycle()
            self.server.waiting(self.connection)

    def _one_request(self) -> bool:
        limits = self.server.limits
        if self._requests and not self._h11.trailing_data[0]:
            # a kept-alive connection: the next request may take its time to begin
            self._deadline = time.monotonic() + limits.idle_timeout_seconds
            first = self._receive()
            self._h11.receive_data(first)
            if not first:
                return False
        self._deadline = time.monotonic() + limits.header_timeout_seconds
        event = self._next_event()
        if isinstance(event, h11.ConnectionClosed):
            return False
        if not isinstance(event, h11.Request):
            raise h11.RemoteProtocolError(f"expected a request, got {type(event).__name__}", error_status_hint=400)
        if not self.server.serving(self.connection):
            raise _Evicted
        self._requests += 1
        self._deadline = time.monotonic() + limits.body_timeout_seconds
        self.command = event.method.decode("ascii")
        self.path = event.target.decode("latin-1")
        self.request_version = "HTTP/" + event.http_version.decode("ascii")
        self.headers = Headers(list(event.headers))
        self._responded = False
        if self.headers.get("transfer-encoding") is None and self.headers.get("content-length") in (None, "0"):
            self._next_event()  # no body: h11's EndOfMessage, at once (nothing is read)
        log.debug("%s %s %s", self.client_address[0], self.command, self.path)
        if self.headers.get("transfer-encoding") is not None:  # framing first, then the token
            self.close_connection = True
            self.send_error_json(HTTPStatus.LENGTH_REQUIRED, "INVALID_REQUEST", "Content-Length is required")
            return True
        method = getattr(self, f"do_{self.command}", None)
        if method is None:
            self.close_connection = True
            self.send_error_json(HTTPStatus.NOT_IMPLEMENTED, "INVALID_REQUEST", f"method {self.command} is not served")
            return True
        method()
        if not self._responded:
            self.send_error_json(HTTPStatus.INTERNAL_SERVER_ERROR, "INTERNAL", "the handler sent no response")
        return True

    def _receive(self) -> bytes:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the client missed its deadline")
        self.connection.settimeout(left)
        return self.connection.recv(RECEIVE_BYTES)

    def _next_event(self) -> Any:
        while True:
            event = self._h11.next_event()
            if event is not h11.NEED_DATA:
                return event
            self._h11.receive_data(self._receive())

    def _send(self, data: bytes) -> None:
        """One write per call, within the body deadline."""
        if data:
            self.connection.settimeout(self.server.limits.body_timeout_seconds)
            self.connection.sendall(data)

    def _drain(self) -> None:
        """Read a refused body (up to a bound, within the body deadline) so the client sees the answer, not a reset."""
        if self._h11.their_state is not h11.SEND_BODY:
            return
        left = DISCARD_LIMIT_FACTOR * self.server.limits.max_body_bytes
        self._deadline = time.monotonic() + self.server.limits.body_timeout_seconds
        try:
            while left > 0:
                chunk = self._receive()
                if not chunk:
                    return
                left -= len(chunk)
        except OSError:
            return

    def _framing_error(self, exc: h11.RemoteProtocolError) -> None:
        """The JSON envelope for a request h11 refused, written by hand: the parser is in its error state."""
        status = HTTPStatus(exc.error_status_hint if 400 <= exc.error_status_hint < 600 else 400)
        body = json.dumps({"error": {"code": "INVALID_REQUEST", "message": f"malformed request: {exc}"}}).encode()
        head = (
            f"HTTP/1.1 {status.value} {status.phrase}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\nServer: {self.server_version}\r\n\r\n"
        ).encode("latin-1")
        with contextlib.suppress(OSError):
            self._send(head + body)

    # -- the token rule -----------------------------------------------------------------------

    def authorized(self) -> bool:
        """True when the path is open or a valid bearer token came; otherwise answer 401."""
        path = self.path.split("?", 1)[0]
        if not security.needs_token(path):
            return True
        if self.authenticator.identify(self.headers.get("authorization")) is not None:
            return True
        self.send_error_json(HTTPStatus.UNAUTHORIZED, "UNAUTHORIZED", "missing or invalid bearer token", bearer=True)
        return False

    # -- bodies -------------------------------------------------------------------------------

    def read_body(self) -> bytes | None:
        """The declared body, or None after answering 411/413 (an oversized body is not read)."""
        declared = self.headers.get("content-length")
        if declared is None:
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
        return self.body()

    def body(self) -> bytes:
        """Read the whole body (h11 holds it to its Content-Length); `100 Continue` first when asked.

        While it trickles in, the connection is evictable like one waiting for its headers."""
        if self._h11.they_are_waiting_for_100_continue:
            self._send(self._h11.send(h11.InformationalResponse(status_code=100, headers=[])))
        chunks: list[bytes] = []
        self.server.waiting(self.connection)
        try:
            while True:
                event = self._next_event()
                if isinstance(event, h11.Data):
                    chunks.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage):
                    return b"".join(chunks)
                else:
                    raise h11.RemoteProtocolError("the body ended early", error_status_hint=400)
        finally:
            if not self.server.serving(self.connection):
                self.close_connection = True  # evicted while the body came in

    # -- answers ------------------------------------------------------------------------------

    def send_error_json(self, status: HTTPStatus, code: str, message: str, *, bearer: bool = False) -> None:
        body = json.dumps({"error": {"code": code, "message": message}}).encode()
        self.send_body(status, body, "application/json", {"WWW-Authenticate": "Bearer"} if bearer else {})

    def send_body(
        self, status: HTTPStatus, body: bytes, content_type: str, headers: Mapping[str, str] | None = None
    ) -> None:
        """The whole answer in one write."""
        pairs = [("Content-Type", content_type), ("Content-Length", str(len(body))), *(headers or {}).items()]
        head = self.start_response(int(status), pairs, send=False)
        data = b"" if self.command == "HEAD" else self._h11.send(h11.Data(data=body))
        self._send(head + data + self._h11.send(h11.EndOfMessage()))

    def start_response(self, status: int, headers: list[tuple[str, str]], *, send: bool = True) -> bytes:
        """The status line and headers (sent unless `send` is False, then returned). A body left unread
        closes the connection: it must never be parsed as the next request."""
        if self._h11.their_state is not h11.DONE or self.server.draining:
            self.close_connection = True
        pairs = [(k, v) for k, v in headers if k.lower() not in ("connection", "server")]
        pairs.append(("Server", self.server_version))
        if self.close_connection:
            pairs.append(("Connection", "close"))
        self._responded = True
        head = self._h11.send(h11.Response(status_code=status, headers=pairs))
        if send:
            self._send(head)
            return b""
        return head

    def write(self, body: bytes) -> None:
        if body and self.command != "HEAD":
            self._send(self._h11.send(h11.Data(data=body)))

    def end_response(self) -> None:
        self._send(self._h11.send(h11.EndOfMessage()))


# -- ASGI ----------------------------------------------------------------------------------------

Message = MutableMapping[str, Any]
AsgiApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]
]


LIFESPAN_SECONDS = 10.0
"""How long the application's lifespan startup (and again its shutdown) may take."""


class AsgiLoop:
    """The event loop the application runs on, in a thread of its own, with the ASGI lifespan
    protocol around it: `startup` before the first request is served, `shutdown` after the last
    one drained. An application that does not speak lifespan (it raises before answering the
    startup message) is served without it, as uvicorn's `lifespan="auto"` does."""

    def __init__(self, app: AsgiApp) -> None:
        self.app = app
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="asgi-loop", daemon=True)
        self._thread.start()
        self._lifespan: asyncio.Queue[Message] | None = None
        self._answers: asyncio.Queue[Message] | None = None
        self.lifespan_supported = False

    def _call(self, work: Coroutine[Any, Any, Any], timeout_seconds: float) -> Any:
        try:
            return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout_seconds)
        except TimeoutError as exc:
            raise DeadlineExceededError(f"the application's lifespan took over {timeout_seconds:g} s") from exc

    def startup(self, *, timeout_seconds: float = LIFESPAN_SECONDS) -> None:
        """Run the application's startup; its failure is an `UnavailableError` naming its message."""
        self._call(self._start_lifespan(), timeout_seconds)
        answer = self._call(self._answer(), timeout_seconds)
        if answer is None:
            return
        self.lifespan_supported = True
        if answer["type"] == "lifespan.startup.failed":
            told = str(answer.get("message") or "").strip()
            last = told.splitlines()[-1] if told else "no message"  # Starlette sends the whole traceback
            raise UnavailableError(f"the application failed to start: {last}", details={"message": told})

    def close(self, *, timeout_seconds: float = LIFESPAN_SECONDS) -> None:
        """Run the application's shutdown (when it speaks lifespan), then stop the loop."""
        if self.lifespan_supported and self._lifespan is not None:
            with contextlib.suppress(Exception):
                self._call(self._lifespan.put({"type": "lifespan.shutdown"}), timeout_seconds)
                answer = self._call(self._answer(), timeout_seconds)
                if answer is not None and answer["type"] == "lifespan.shutdown.failed":
                    log.warning("the application failed to shut down: %s", answer.get("message") or "no message")
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)

    async def _start_lifespan(self) -> None:
        self._lifespan, self._answers = asyncio.Queue(), asyncio.Queue()
        incoming, answers = self._lifespan, self._answers
        await incoming.put({"type": "lifespan.startup"})

        async def send(message: Message) -> None:
            await answers.put(message)

        async def run() -> None:
            scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}
            try:
                await self.app(scope, incoming.get, send)
            except Exception:  # an application without lifespan raises on the scope type
                if not self.lifespan_supported:
                    log.debug("the application does not speak ASGI lifespan", exc_info=True)
                else:
                    log.warning("the application's lifespan raised", exc_info=True)
            await answers.put({"type": "lifespan.ended"})

        self.loop.create_task(run())

    async def _answer(self) -> Message | None:
        assert self._answers is not None
        answer = await self._answers.get()
        return None if answer["type"] == "lifespan.ended" else answer


class AsgiHandler(HardenedHandler):
    """Hands each request to the ASGI application; socket I/O stays on this connection's thread."""

    asgi: ClassVar[AsgiLoop]

    def _dispatch(self) -> None:
        if not self.authorized():
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
            declared = int(self.headers.get("content-length") or 0)
            if declared > self.server.limits.max_body_bytes:
                raise security.BodyTooLargeError(self.server.limits.max_body_bytes)
            body = self.body()
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
            last = not message.get("more_body", False)
            if self._streaming:
                self._write(body)
                if last:
                    self.handler.end_response()
            else:
                self._buffered.append(body)
                if last:
                    whole = b"".join(self._buffered)
                    self._headers.append(("Content-Length", str(len(whole))))
                    self._head()
                    self._write(whole)
                    self.handler.end_response()

    def _head(self) -> None:
        self.handler.start_response(self._status, self._headers)
        self.started = True

    def _write(self, body: bytes) -> None:
        self.handler.write(body)


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
    running.startup()
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
    server.start("dsx-serve")
    try:
        interrupts.wait_for_stop(threading.Event())
    finally:
        server.stop()
        running.close()
