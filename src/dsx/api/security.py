"""Bearer-token authentication, request size limits and rate limiting for the API.

Why here rather than in a proxy: `dsx serve` is meant to run as-is next to CI runners and
portals, so it must be safe without an ingress in front. Tokens are compared in constant
time and only their SHA-256 digests are kept in memory.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from dsx import serialization, settings
from dsx.errors import BadInputError
from dsx.ratelimit import TokenBucket

log = logging.getLogger("dsx.api.security")

PROBE_PATHS = frozenset({"/healthz", "/readyz"})
"""Liveness and readiness probes: the kubelet calls them without a token."""

DOCS_PATHS = frozenset(
    {"/openapi.json", "/docs", "/docs/swagger-ui-bundle.js", "/docs/swagger-ui.css", "/docs/favicon.png"}
)
"""The API's description and its Swagger UI page: the same text as `dsx serve --print-openapi`
and docs/api.md, no data. Open so a person can read them and press Authorize to add a token."""

OPEN_PATHS = PROBE_PATHS | DOCS_PATHS
"""Paths served without a token; exact paths, never prefixes."""


def needs_token(path: str) -> bool:
    """The one token rule of `dsx serve` and the sentinel: every path but the probes and the API docs needs one.

    /metrics included: it names nodes, stages and failure counts. A server without configured
    tokens therefore serves only the probes and the docs.
    """
    return path not in OPEN_PATHS


DEFAULT_MAX_BODY_BYTES = settings.API_MAX_BODY_BYTES
DEFAULT_RATE_PER_SECOND = settings.API_RATE_PER_SECOND
DEFAULT_BURST = settings.API_BURST


MIN_TOKEN_CHARS = 16


def load_tokens(token_file: str | None, env_var: str = "DSX_API_TOKENS") -> frozenset[str]:
    """Token digests from a file (one token a line, `#` comments) and/or an env var (comma-separated)."""
    raw: list[tuple[str, str]] = []
    """(where it was written, token): a refusal names the file and line, or the variable and item."""
    if token_file:
        path = Path(token_file)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise BadInputError(f"{path}: cannot read token file: {exc.strerror}") from exc
        except UnicodeDecodeError as exc:
            raise BadInputError(f"{path}: byte {exc.start}: not UTF-8; a token file is UTF-8 text") from exc
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip() and not line.lstrip().startswith("#"):
                raw.append((f"{path}: line {number}", line.strip()))
    items = [t.strip() for t in os.environ.get(env_var, "").split(",")]
    raw += [(f"{env_var}: item {index}", token) for index, token in enumerate(items, start=1) if token]
    for where, token in raw:
        if len(token) < MIN_TOKEN_CHARS:
            raise BadInputError(
                f"{where}: a token of {len(token)} characters; tokens must be at least {MIN_TOKEN_CHARS}"
            )
    return frozenset(_digest(token) for _, token in raw)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass
class TokenAuthenticator:
    """Checks `Authorization: Bearer <token>` against known digests in constant time."""

    token_digests: frozenset[str]

    def identify(self, authorization: str | None) -> str | None:
        """The token's digest prefix (a client id for rate limiting and logs), or None."""
        presented = _bearer(authorization)
        if presented is None:
            return None
        digest = _digest(presented)
        match = None
        for known in self.token_digests:
            if hmac.compare_digest(digest, known):
                match = known
        return match[:12] if match else None

    def caller(self, authorization: str | None) -> Caller | None:
        """Who is calling: a shared token is bound to no node."""
        client = self.identify(authorization)
        return Caller(client) if client is not None else None


def _bearer(authorization: str | None) -> str | None:
    scheme, _, credentials = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not credentials.strip():  # RFC 9110: the scheme is case-insensitive
        return None
    return credentials.strip()


@dataclass(frozen=True)
class Caller:
    """An authenticated client: `client_id` for logs and limits; `node`, `pod` when its token is a
    service-account token bound to a pod (the node the pod runs on)."""

    client_id: str
    node: str | None = None
    pod: str | None = None


NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
"""What a TokenReview of a pod-bound service-account token says about its pod (Kubernetes >= 1.32)."""


class TokenReviewer(Protocol):
    def review_token(self, token: str, audiences: tuple[str, ...]) -> dict[str, Any]:
        """The TokenReview `status` for `token` (dsx.kube.client.KubeClient.review_token)."""
        ...


class NodeBoundAuthenticator:
    """Shared tokens, plus Kubernetes service-account tokens bound to a pod, checked by TokenReview.

    Why: every GPU node's monitor holding one shared token means any of them (or anything that
    reads a node's disk) can post a fatal event for any node and cordon it. A projected
    service-account token (audience `audience`) is bound to its pod and, through the pod, to its
    node; the apiserver's TokenReview says which, and the sentinel takes events from that caller
    for that node only (dsx.controllers.http). Only tokens of `service_accounts`
    (`system:serviceaccount:NS:NAME`) are accepted, so a pod of another workload cannot post.

    Verdicts are kept for `ttl_seconds` per token digest (a monitor posts every poll; the
    apiserver is asked about a token about once a minute); refusals for less, and only
    JWT-shaped tokens are sent to the apiserver at all.
    """

    def __init__(
        self,
        shared: TokenAuthenticator,
        reviewer: TokenReviewer,
        *,
        audience: str,
        service_accounts: Collection[str],
        ttl_seconds: float = 60.0,
        refused_ttl_seconds: float = 5.0,
        max_cached: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.shared = shared
        self.reviewer = reviewer
        self.audience = audience
        self.service_accounts = frozenset(service_accounts)
        self.ttl_seconds = ttl_seconds
        self.refused_ttl_seconds = refused_ttl_seconds
        self.max_cached = max_cached
        self._clock = clock
        self._cache: OrderedDict[str, tuple[float, Caller | None]] = OrderedDict()
        self._lock = threading.Lock()

    def identify(self, authorization: str | None) -> str | None:
        caller = self.caller(authorization)
        return caller.client_id if caller is not None else None

    def caller(self, authorization: str | None) -> Caller | None:
        shared = self.shared.caller(authorization)
        if shared is not None:
            return shared
        token = _bearer(authorization)
        if token is None or token.count(".") != 2:
            return None
        digest = _digest(token)
        now = self._clock()
        with self._lock:
            cached = self._cache.get(digest)
            if cached is not None and cached[0] > now:
                self._cache.move_to_end(digest)
                return cached[1]
        found = self._review(token, digest)
        with self._lock:
            self._cache[digest] = (now + (self.ttl_seconds if found else self.refused_ttl_seconds), found)
            self._cache.move_to_end(digest)
            while len(self._cache) > self.max_cached:
                self._cache.popitem(last=False)
        return found

    def _review(self, token: str, digest: str) -> Caller | None:
        try:
            status = self.reviewer.review_token(token, (self.audience,))
        except Exception as exc:  # the apiserver is away: refuse now, ask again soon
            log.warning("token review failed: %s", exc)
            return None
        user = status.get("user") or {}
        username = str(user.get("username") or "")
        if not status.get("authenticated") or username not in self.service_accounts:
            return None
        if self.audience not in (status.get("audiences") or [self.audience]):
            return None
        extra = user.get("extra") or {}
        node = next(iter(extra.get(NODE_NAME_EXTRA) or []), None)
        pod = next(iter(extra.get(POD_NAME_EXTRA) or []), None)
        if not node:
            return None  # not bound to a pod on a node: it could speak for any node
        return Caller(f"sa:{digest[:12]}", node=str(node), pod=str(pod) if pod else None)


Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class GuardMiddleware:
    """ASGI middleware: authentication, rate limit and body size limit, before any routing; a
    JSON body is then read once by the one safe loader (`serialization.parse_json`: finite
    numbers, unique keys, bounded depth), so a NaN, a duplicate key or a body nested 100,000
    deep is a 400 naming the problem before the framework sees it.

    Rejections are JSON bodies in the same shape as every other API error.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        authenticator: TokenAuthenticator,
        limiter: TokenBucket,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self.app = app
        self.authenticator = authenticator
        self.limiter = limiter
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        path = scope.get("path", "")
        client = None
        if needs_token(path):
            client = self.authenticator.identify(headers.get("authorization"))
            if client is None:
                await _reject(
                    send,
                    401,
                    "UNAUTHORIZED",
                    "missing or invalid bearer token",
                    extra_headers=[(b"www-authenticate", b"Bearer")],
                )
                return
            wait = self.limiter.wait(client)
            if wait > 0:
                await _reject(
                    send,
                    429,
                    "RATE_LIMITED",
                    "too many requests",
                    extra_headers=[(b"retry-after", str(max(1, round(wait))).encode())],
                )
                return
        declared = headers.get("content-length")
        if declared is not None:
            if not declared.isdigit():
                await _reject(send, 400, "INVALID_REQUEST", "malformed Content-Length")
                return
            if int(declared) > self.max_body_bytes:
                await _reject(send, 413, "PAYLOAD_TOO_LARGE", f"request body over {self.max_body_bytes} bytes")
                return
        limited = self._limited(receive, send)
        if scope.get("method") in BODY_METHODS and _json_content(headers.get("content-type")):
            try:
                body, more = await _read_body(limited)
            except BodyTooLargeError as exc:
                await _reject(send, 413, "PAYLOAD_TOO_LARGE", str(exc))
                return
            if body:
                try:
                    serialization.parse_json(body, source="request body")
                except BadInputError as exc:
                    await _reject(send, 400, "INVALID_REQUEST", exc.message)
                    return
            await self.app(scope, _replay(body, more, limited), send)
            return
        await self.app(scope, limited, send)

    def _limited(self, receive: Receive, send: Send) -> Receive:
        """Count streamed (chunked) bodies too; the first byte over the limit ends the request."""
        seen = 0
        limit = self.max_body_bytes

        async def wrapped() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLargeError(limit)
            return message

        return wrapped


BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def _json_content(content_type: str | None) -> bool:
    """A JSON body, or one without a type (which the framework reads as JSON)."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return not media or media == "application/json" or media.endswith("+json")


async def _read_body(receive: Receive) -> tuple[bytes, bool]:
    """The whole request body (already bounded by the size limit); False when the client left."""
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(parts), False
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(parts), True


def _replay(body: bytes, complete: bool, receive: Receive) -> Receive:
    """Hand the body read for checking to the application, then the rest of the channel."""
    delivered = False

    async def replayed() -> Message:
        nonlocal delivered
        if not delivered and complete:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


class BodyTooLargeError(Exception):
    """Raised inside the receive channel when a streamed body passes the limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"request body over {limit} bytes")
        self.limit = limit


async def _reject(
    send: Send, status: int, code: str, message: str, extra_headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    import json

    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra_headers or [])})
    await send({"type": "http.response.body", "body": body})


Authenticator = TokenAuthenticator | NodeBoundAuthenticator
"""What the servers ask `identify` (and the sentinel `caller`)."""
