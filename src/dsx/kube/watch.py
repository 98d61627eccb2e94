"""List-then-watch that survives 410 Gone without losing an update.

An apiserver forgets old resource versions when etcd compacts; a watcher that reconnects
with such a version gets 410 Gone. Starting over from "now" would silently drop whatever
changed while it was away, so on 410 we relist and emit the difference between what we
knew and what the list says (ADDED / MODIFIED / DELETED, marked `relisted`), then watch on
from the list's resource version. Each connection is bounded by the caller's deadline, so
`events(timeout_seconds=...)` always returns.
"""

from __future__ import annotations

import contextlib
import enum
import json
import math
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx2

from dsx import errors, retry
from dsx.kube import translation

RELIST_AFTER_FAILURES = 3
PAGE_SIZE = 500
"""Objects per list request (`limit` and `continue`): at 10,000 nodes one unpaged list is a
~230 MB answer held whole while it decodes; pages bound that to one page at a time."""
_RECONNECT = retry.Backoff(0.1, factor=2.0, max_seconds=2.0)
"""Wait before reconnecting after an error event in the stream: 0.1 s × 2^(failures so far), at most 2 s."""
_PERSISTENT = (401, 403, 404)


class EventType(enum.StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


@dataclass(frozen=True)
class WatchEvent:
    """One change to one object, as the apiserver sent it (or as a relist revealed it)."""

    type: EventType
    object: dict[str, Any]
    relisted: bool = False
    """True when the event was synthesized from a relist after 410 Gone."""

    @property
    def name(self) -> str:
        return str(self.object.get("metadata", {}).get("name", ""))

    @property
    def namespace(self) -> str:
        return str(self.object.get("metadata", {}).get("namespace", ""))


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata", {})
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def list_pages(
    http: httpx2.Client,
    path: str,
    selectors: Mapping[str, str],
    server: str,
    *,
    headers: Mapping[str, str] | None = None,
    page_size: int | None = None,
    action: str = "",
) -> tuple[list[dict[str, Any]], str]:
    """Every object of a collection, `page_size` at a time, and the list's resourceVersion.

    A continue token that expired while paging (410) starts the list again once from the top,
    as client-go's pager does; the pages of one pass are one consistent snapshot."""
    action = action or f"list {path}"
    for attempt in (1, 2):
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            params = {**selectors, "limit": str(page_size or PAGE_SIZE), **({"continue": token} if token else {})}
            with translation.translated(action, server):
                response = http.get(path, params=params, headers=dict(headers or {}))
                if response.status_code == 410 and token and attempt == 1:
                    break  # the token expired: list again from the top
                response.raise_for_status()
                body = response.json()
            items.extend(body.get("items") or [])
            metadata = body.get("metadata") or {}
            token = str(metadata.get("continue") or "")
            if not token:
                return items, str(metadata.get("resourceVersion", ""))
    raise errors.UnavailableError(f"{action}: the list changed faster than it could be paged")  # pragma: no cover


def _version(obj: Mapping[str, Any]) -> str:
    return str(obj.get("metadata", {}).get("resourceVersion", ""))


class ResourceWatch:
    """A resumable watch over one collection path (e.g. `/api/v1/nodes`).

    `objects` is the watcher's current view; `resource_version` is where the next
    connection resumes; `relists` counts the relists it recovered by, `expirations` the 410s
    among their causes (the others: a server error repeating at the same resume point).
    """

    def __init__(
        self,
        http: httpx2.Client,
        path: str,
        *,
        label_selector: str = "",
        field_selector: str = "",
        server: str = "",
        keep: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        """`keep` projects each object before the view holds it (it must keep metadata.name,
        namespace and resourceVersion); events still carry whole objects."""
        self._http = http
        self._keep = keep or (lambda obj: obj)
        self._path = path
        self._selectors = {k: v for k, v in (("labelSelector", label_selector), ("fieldSelector", field_selector)) if v}
        self._server = server
        self.resource_version: str | None = None
        self.objects: dict[str, dict[str, Any]] = {}
        self.relists = 0
        self.expirations = 0
        self._failures = 0

    def get(self, name: str, namespace: str = "") -> dict[str, Any] | None:
        """The view's copy of one object (None: not in the view)."""
        return self.objects.get(f"{namespace}/{name}")

    def sync(self) -> list[dict[str, Any]]:
        """List the collection now; the view and the resume point start from this list."""
        items, version = self._list()
        self.objects = {_key(o): self._keep(o) for o in items}
        self.resource_version = version
        return items

    def events(self, timeout_seconds: float | None = None) -> Iterator[WatchEvent]:
        """Changes from the resume point on, until the deadline (None: forever).

        Without a prior `sync()`, the first list is reported as ADDED events.
        """
        deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
        if self.resource_version is None:
            for obj in self.sync():
                yield WatchEvent(EventType.ADDED, obj)
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return
            gone = False
            with contextlib.closing(self._connection(remaining)) as connection:
                for event in connection:
                    if event is None:
                        gone = True
                        break
                    yield event
                    if deadline is not None and time.monotonic() >= deadline:
                        return
            if gone:
                yield from self._recover()

    def _recover(self) -> Iterator[WatchEvent]:
        """The resume point is unusable: relist and report the difference from the view."""
        self.relists += 1
        self._failures = 0
        before = self.objects
        items, version = self._list()
        after = {_key(o): o for o in items}
        self.objects = {key: self._keep(o) for key, o in after.items()}
        self.resource_version = version
        for key, obj in after.items():
            old = before.get(key)
            if old is None:
                yield WatchEvent(EventType.ADDED, obj, relisted=True)
            elif _version(old) != _version(obj):
                yield WatchEvent(EventType.MODIFIED, obj, relisted=True)
        for key, obj in before.items():
            if key not in after:
                yield WatchEvent(EventType.DELETED, obj, relisted=True)

    def _list(self) -> tuple[list[dict[str, Any]], str]:
        items, version = list_pages(self._http, self._path, self._selectors, self._server)
        return items, version

    def _connection(self, remaining_seconds: float | None) -> Generator[WatchEvent | None, None, None]:
        """One watch request; yields events, or None once when the resume point is gone (410)."""
        server_timeout = 300 if remaining_seconds is None else max(1, math.ceil(remaining_seconds))
        params = {
            **self._selectors,
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": self.resource_version or "",
            "timeoutSeconds": str(server_timeout),
        }
        timeout = httpx2.Timeout(10.0, read=server_timeout + 10.0)
        action = f"watch {self._path}"
        try:
            with self._http.stream("GET", self._path, params=params, timeout=timeout) as response:
                if response.status_code == 410:
                    self.expirations += 1
                    yield None
                    return
                if response.is_error:
                    response.read()
                    raise translation.error_for_status(
                        action, response.status_code, response.reason_phrase, response.text.strip()[:200]
                    )
                for line in response.iter_lines():
                    if not line.strip():
                        continue
                    event = self._decode(line, action)
                    if event is None:
                        yield None
                        return
                    if event is True:
                        time.sleep(_RECONNECT.delay(self._failures + 1))
                        return
                    if isinstance(event, WatchEvent):
                        yield event
        except (httpx2.ReadTimeout, httpx2.RemoteProtocolError, httpx2.ReadError):
            # the stream went quiet or dropped: the caller reconnects from resource_version
            return
        except errors.DsxError:
            raise
        except httpx2.HTTPError as exc:
            mapped = translation.translate(action, exc, self._server)
            raise (mapped or errors.UnavailableError(f"{action}: {exc}")) from exc

    def _decode(self, line: str, action: str) -> WatchEvent | bool | None:
        """A watch line as an event; None to relist (410 Gone, or an error that keeps coming back);
        False for a bookmark; True to reconnect from the same point."""
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise errors.UnavailableError(f"{action}: malformed watch event: {line[:120]!r}") from exc
        kind = raw.get("type")
        obj = raw.get("object") or {}
        if kind == "ERROR":
            code = int(obj.get("code") or 0)
            if code == 410:
                self.expirations += 1
                return None
            error = translation.error_for_status(action, code, str(obj.get("reason", "")), str(obj.get("message", "")))
            if code in _PERSISTENT:
                raise error
            # anything else (e.g. a 500 "PrevKv=nil" when etcd compacted exactly at the next
            # event) ends this connection; the next resumes from the same point, as client-go's
            # reflector does, and if the error repeats there the watch relists instead
            self._failures += 1
            return None if self._failures >= RELIST_AFTER_FAILURES else True
        version = _version(obj)
        if version:
            self.resource_version = version
        self._failures = 0
        if kind == "BOOKMARK":
            return False
        event = WatchEvent(EventType(kind), obj)
        if event.type is EventType.DELETED:
            self.objects.pop(_key(obj), None)
        else:
            self.objects[_key(obj)] = self._keep(obj)
        return event
