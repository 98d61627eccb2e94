"""The one HTTP client for plain requests: the sentinel's event sink, the remediation webhook,
the chart fetcher and the simulator's etcd calls.

Why the standard library and not httpx: these are single requests to a configured URL, and the
`dsx[kube]` extra (which brings httpx2 for lightkube) is not installed everywhere they run.
An HTTP error status is an answer, returned like a success, so each caller decides what it
means; only a failure to get an answer raises, as `TransportError`, which says whether the
network is absent or the peer was too slow. Bodies are read up to `max_bytes`.
"""

from __future__ import annotations

import errno
import http.client
import json
import socket
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


def _read(stream: Any, max_bytes: int) -> tuple[bytes, bool]:
    data: bytes = stream.read(max_bytes + 1)
    return (data[:max_bytes], True) if len(data) > max_bytes else (data, False)


def _no_network(reason: object) -> bool:
    """A name that does not resolve or a network that is unreachable: nothing there will answer."""
    if isinstance(reason, socket.gaierror):
        return True
    return isinstance(reason, OSError) and reason.errno in (errno.ENETUNREACH, errno.ENETDOWN)
