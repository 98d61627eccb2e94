"""One monitor as its own process (`dsx sentinel monitor KIND`), sending to a store or a sentinel.

On a node, the kernel-log or NVML monitor runs beside the workloads and either writes the
shared store directly (PostgreSQL) or posts to the sentinel's authenticated `/v1/events`.
Either way the monitor commits its position only after the events were accepted, and a
re-sent event carries the same idempotency key, so a crash or a failed post never loses or
doubles an event.

Only what may succeed later is retried: an unreachable sentinel, 5xx, 408 and 429. A batch the
sentinel refuses as bad (400, 413, any other 4xx) is split in halves until the refused events
are alone; those are logged whole at ERROR and dropped, the rest is delivered. Batches are at
most `ingest.MAX_EVENTS_PER_REQUEST` events, the limit the sentinel's ingest accepts.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from dsx import errors, httpclient
from dsx.health.decisions.eventstore import EventStore
from dsx.health.parsing import ingest, kube_objects, xid
from dsx.host.kernel_log import AGENT, FileFollower, JournalReader, KernelLogMonitor, LineReader
from dsx.kube import incluster
from dsx.kube.client import KubeClient
from dsx.model.health import HealthEvent
from dsx.pipeline.source import HealthSource

log = logging.getLogger("dsx.sentinel.monitor")


class Sink(Protocol):
    def send(self, events: list[HealthEvent]) -> int:
        """Deliver events; returns how many were new. Raises when they were not accepted."""
        ...


class StoreSink:
    def __init__(self, store: EventStore) -> None:
        self.store = store

    def send(self, events: list[HealthEvent]) -> int:
        return sum(1 for a in self.store.append(events) if a.created)


class HttpSink:
    """POSTs to a sentinel's /v1/events with a bearer token, over one kept-alive connection
    (`httpclient.KeptConnection`: a post is safe to send twice, the store drops a repeated key)."""

    def __init__(self, url: str, token: str | Callable[[], str], *, timeout_seconds: float = 30.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise errors.BadInputError(f"--url: {url!r} is not an http(s) URL")
        self.url = url.rstrip("/") + ("" if url.rstrip("/").endswith("/v1/events") else "/v1/events")
        self._token = token if callable(token) else (lambda: token)
        self.timeout_seconds = timeout_seconds
        self._connection = httpclient.KeptConnection(self.url, timeout_seconds=timeout_seconds)

    @property
    def connections_opened(self) -> int:
        return self._connection.connections_opened

    def send(self, events: list[HealthEvent]) -> int:
        size = ingest.MAX_EVENTS_PER_REQUEST
        return sum(self._post(events[start : start + size]) for start in range(0, len(events), size))

    def _post(self, events: list[HealthEvent]) -> int:
        try:
            response = self._connection.request(
                "POST", json_body=ingest.to_document(events), headers={"Authorization": f"Bearer {self._token()}"}
            )
        except httpclient.TransportError as exc:
            raise errors.UnavailableError(str(exc)) from exc
        if not response.ok:
            raise _refusal(self.url, response.status, response.text(2000))
        return int(response.json().get("created", 0))

    def close(self) -> None:
        self._connection.close()


def _refusal(url: str, status: int, detail: str) -> errors.DsxError:
    """The dsx error for an HTTP answer: only 408, 429 and 5xx are worth sending again."""
    message = f"{url}: {status}: {detail}"
    if status in (401, 403):
        return errors.UnauthorizedError(message)
    if status == 413:
        return errors.PayloadTooLargeError(message)
    if status == 404:
        return errors.NotFoundError(message)
    if 400 <= status < 500 and status not in (408, 429):
        return errors.BadInputError(message)
    return errors.UnavailableError(message)


def deliver(sink: Sink, events: list[HealthEvent]) -> int:
    """Send; a batch refused as bad is split until the refused events are alone, logged and dropped."""
    try:
        return sink.send(events)
    except (errors.BadInputError, errors.PayloadTooLargeError) as exc:
        if len(events) == 1:
            log.error(
                "event refused, dropped: %s",
                exc,
                extra={"event": events[0].to_dict(), "idempotency_key": events[0].idempotency_key},
            )
            return 0
        half = len(events) // 2
        return deliver(sink, events[:half]) + deliver(sink, events[half:])


class TokenFile:
    """The first token of a file, read again whenever the file changes: kubelet rewrites a projected
    service-account token before it expires (at 80 % of its life), and a monitor runs for weeks."""

    def __init__(self, path: str | None) -> None:
        self._token = read_token(path)  # no path, a missing or an empty file is refused at start, naming it
        assert path is not None
        self.path = path
        self._seen: tuple[int, int] | None = None

    def __call__(self) -> str:
        try:
            stat = Path(self.path).stat()
        except OSError:
            return self._token or read_token(self.path)  # gone for a moment while kubelet swaps it
        seen = (stat.st_mtime_ns, stat.st_size)
        if seen != self._seen:
            self._token = read_token(self.path)
            self._seen = seen
        return self._token


def read_token(path: str | None) -> str:
    """The first token of a token file in the sentinel's format (one a line, `#` comments), so the
    monitors can mount the same Secret the sentinel reads all its tokens from."""
    if not path:
        raise errors.BadInputError("--url needs --token-file with the sentinel's bearer token")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise errors.BadInputError(f"{path}: cannot read the token: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise errors.BadInputError(f"{path}: byte {exc.start}: not UTF-8; a token file is UTF-8 text") from exc
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            return line.strip()
    raise errors.BadInputError(f"{path}: no token in the file (one a line; `#` starts a comment)")


def node_source(
    kind: str,
    *,
    node_name: str | None,
    log_path: str | None,
    journal: bool,
    state_file: str | None,
    driver_version: str | None = None,
) -> HealthSource:
    if not node_name:
        raise errors.BadInputError(f"monitor {kind}: --node is required (the node this monitor watches)")
    if kind == "nvml":
        from dsx.host.nvml import NvmlMonitor

        try:
            return NvmlMonitor(node_name)
        except Exception as exc:  # the NVML library raises its own error types when no driver is present
            raise errors.UnavailableError(f"monitor nvml: NVML is not usable here: {exc}") from exc
    if bool(log_path) == journal:
        raise errors.BadInputError("monitor kernel-log: give --path FILE or --journal")
    reader: LineReader = JournalReader() if journal else FileFollower(str(log_path))
    state = Path(state_file) if state_file else Path(f"kernel-log-{node_name}.state.json")
    return KernelLogMonitor(
        node_name, reader, state, driver=xid.resolve_driver_version(driver_version, where="--driver-version")
    )


RESTORE_LOOKBACK_EVENTS = 5000
"""Stored events read back (the newest, of every node) to restore a kernel-log monitor's burst windows."""


def restore_burst_windows(monitor: KernelLogMonitor, store: EventStore) -> int:
    """Reopen the duplicate windows a restarted monitor had, from the events it stored before.

    Why: the windows are kept in memory, so 300 identical lines over three restarts gave four
    events instead of one. The store already holds what was admitted, so no second copy of the
    windows is kept anywhere. Returns how many stored events were replayed into the windows."""
    last = store.last_sequence()
    recent = store.events(
        after_sequence=max(0, last - RESTORE_LOOKBACK_EVENTS),
        limit=RESTORE_LOOKBACK_EVENTS,
        node_name=monitor.node_name,
    )
    admitted = [(s.event.message, s.event.generated_at.timestamp()) for s in recent if s.event.agent == AGENT]
    # the monitor's deduplicator has no public door yet (kernel_log.py is being changed elsewhere)
    return monitor._dedup.replay(monitor.node_name, admitted, xid.KernelLogReader)


def run_source(
    source: HealthSource, sink: Sink, *, interval_seconds: float, once: bool, stop: threading.Event | None = None
) -> int:
    """Poll → send → commit until stopped; a failed send is retried with the same events."""
    stop = stop or threading.Event()
    if isinstance(source, KernelLogMonitor) and isinstance(sink, StoreSink):
        restore_burst_windows(source, sink.store)
    sent = 0
    try:
        while not stop.is_set():
            events = source.poll()
            if events:
                try:
                    sent += deliver(sink, events)
                except errors.UnavailableError as exc:
                    if once:
                        raise
                    log.warning("send failed, retrying: %s", exc)
                    stop.wait(interval_seconds)
                    continue
            source.commit()
            if once:
                break
            if not events:
                stop.wait(interval_seconds)
    finally:
        source.close()
    return sent


def run_kube_monitor(kubeconfig: str | None, sink: Sink, *, once: bool, stop: threading.Event | None = None) -> int:
    """Node policies over a node watch (the first pass reports every node's baseline)."""
    stop = stop or threading.Event()
    monitor = kube_objects.KubeObjectMonitor(kube_objects.shipped_policies())
    sent = 0
    with KubeClient(incluster.require(kubeconfig, "monitor kube", os.environ)) as client:
        if once:
            for node in client.list_nodes():
                found = monitor.observe(node)
                sent += sink.send(found) if found else 0
            return sent
        watch = client.watch_nodes()
        while not stop.is_set():
            for change in watch.events(timeout_seconds=5.0):
                if change.type.value == "DELETED":
                    monitor.forget(change.name)
                    continue
                found = monitor.observe(change.object)
                if found:
                    sent += sink.send(found)
            time.sleep(0)
    return sent
