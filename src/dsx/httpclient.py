"""The one HTTP client for plain requests: the sentinel's event sink, the remediation webhook,
the chart fetcher and the simulator's etcd calls.

Why the standard library and not httpx: these are single requests to a configured URL, and the
`dsx[kube]` extra (which brings httpx2 for lightkube) is not installed everywhere they run.
An HTTP error status is an answer, returned like a success, so each caller decides what it
means; only a failure to get an answer raises, as `TransportError`, which says whether the
network is absent or the peer was too slow. Bodies are read up to `max_bytes`.
"""

from __future__ import annotations

import contextlib
import errno
import http.client
import json
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from email.message import Message
from typing import Any

DEFAULT_MAX_BYTES = 16 << 20
"""16 MiB: an answer larger than this from a sink, webhook or registry is not one dsx expects."""


class TransportError(Exception):
    """No HTTP answer: the name did not resolve, the connection failed or the peer was too slow."""

    def __init__(self, url: str, reason: str, *, offline: bool = False, timed_out: bool = False) -> None:
        super().__init__(f"{url}: {reason}")
        self.url, self.reason, self.offline, self.timed_out = url, reason, offline, timed_out


@dataclass(frozen=True)
class Response:
    url: str
    status: int
    headers: Message
    body: bytes
    truncated: bool = False
    """The body was longer than `max_bytes`; `body` holds the first `max_bytes`."""

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def text(self, limit: int | None = None) -> str:
        return self.body[:limit].decode(errors="replace")

    def json(self) -> Any:
        return json.loads(self.body)


def request(
    method: str,
    url: str,
    *,
    body: bytes | None = None,
    json_body: Any = None,
    headers: Mapping[str, str] | None = None,
    timeout_seconds: float,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Response:
    """One request to an http(s) URL; `json_body` is sent as application/json."""
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise TransportError(url, "only http(s) URLs are fetched")
    sent = dict(headers or {})
    if json_body is not None:
        body = json.dumps(json_body).encode()
        sent.setdefault("Content-Type", "application/json")
    call = urllib.request.Request(url, data=body, headers=sent, method=method)  # noqa: S310 - scheme checked above
    try:
        with urllib.request.urlopen(call, timeout=timeout_seconds) as reply:  # noqa: S310
            data, cut = _read(reply, max_bytes)
            return Response(url, reply.status, reply.headers, data, cut)
    except urllib.error.HTTPError as exc:
        data, cut = _read(exc, max_bytes) if exc.fp is not None else (b"", False)
        return Response(url, exc.code, exc.headers, data, cut)
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            raise TransportError(url, f"no answer within {timeout_seconds:g} s", timed_out=True) from exc
        raise TransportError(url, f"cannot connect: {exc.reason}", offline=_no_network(exc.reason)) from exc
    except TimeoutError as exc:
        raise TransportError(url, f"no answer within {timeout_seconds:g} s", timed_out=True) from exc
    except (OSError, http.client.HTTPException) as exc:
        raise TransportError(url, f"connection failed: {exc!r}") from exc


_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError, ConnectionAbortedError)
"""What a kept-alive connection the peer has closed meanwhile raises on its next request."""


class KeptConnection:
    """Requests to one http(s) origin over one kept-alive connection, opened again when needed.

    Why: a node's monitor posts every poll; a new TCP connection per post is a handshake, a
    thread on the sentinel's side and a slot in its connection bound each time, for a request of
    a few hundred bytes. A connection the server closed while idle (its idle deadline, or an
    eviction for a newcomer) fails on the next request before any answer; that request is sent
    once more on a fresh connection, so callers must only send requests that are safe to repeat
    (event posts are: the store drops a repeated idempotency key). One request at a time.
    """

    def __init__(self, url: str, *, timeout_seconds: float, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise TransportError(url, "only http(s) URLs are fetched")
        self.url = url
        self._parts = parts
        self._timeout = timeout_seconds
        self._max_bytes = max_bytes
        self._connection: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()
        self.connections_opened = 0

    def _open(self) -> http.client.HTTPConnection:
        kind = http.client.HTTPSConnection if self._parts.scheme == "https" else http.client.HTTPConnection
        connection = kind(self._parts.hostname or "", self._parts.port, timeout=self._timeout)
        connection.connect()
        with contextlib.suppress(OSError):  # a post is one small segment: send it now (no Nagle delay)
            connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.connections_opened += 1
        return connection

    def request(self, method: str, *, json_body: Any = None, headers: Mapping[str, str] | None = None) -> Response:
        """One request to the URL given at construction; `json_body` is sent as application/json."""
        body = json.dumps(json_body).encode() if json_body is not None else None
        sent = {"Content-Type": "application/json", **(headers or {})} if body is not None else dict(headers or {})
        target = self._parts.path or "/"
        if self._parts.query:
            target += "?" + self._parts.query
        with self._lock:
            for attempt in (1, 2):
                fresh = self._connection is None
                try:
                    if self._connection is None:
                        self._connection = self._open()
                    self._connection.request(method, target, body=body, headers=sent)
                    reply = self._connection.getresponse()
                    data, cut = _read(reply, self._max_bytes)
                    if cut or reply.will_close:
                        self._close_locked()
                    return Response(self.url, reply.status, reply.headers, data, cut)
                except _STALE as exc:
                    self._close_locked()
                    if fresh or attempt == 2:
                        raise TransportError(self.url, f"connection failed: {exc!r}") from exc
                except TimeoutError as exc:
                    self._close_locked()
                    raise TransportError(self.url, f"no answer within {self._timeout:g} s", timed_out=True) from exc
                except (OSError, http.client.HTTPException) as exc:
                    self._close_locked()
                    reason = exc if isinstance(exc, OSError) else None
                    raise TransportError(self.url, f"connection failed: {exc!r}", offline=_no_network(reason)) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _close_locked(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def close(self) -> None:
        with self._lock:
            self._close_locked()


def _read(stream: Any, max_bytes: int) -> tuple[bytes, bool]:
    data: bytes = stream.read(max_bytes + 1)
    return (data[:max_bytes], True) if len(data) > max_bytes else (data, False)


def _no_network(reason: object) -> bool:
    """A name that does not resolve or a network that is unreachable: nothing there will answer."""
    if isinstance(reason, socket.gaierror):
        return True
    return isinstance(reason, OSError) and reason.errno in (errno.ENETUNREACH, errno.ENETDOWN)
