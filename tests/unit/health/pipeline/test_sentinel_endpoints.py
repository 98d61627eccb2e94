"""Area of concern: the sentinel's own endpoints and outputs — probes open; metrics, ingestion and
status behind a bearer token (the rule `dsx serve` follows too), bad or oversized posts refused
with one-line JSON errors, re-sent events stored once; Prometheus names and JSON log lines; and
the one merge patch per node change (guarded by resourceVersion, taints recomputed, nothing
written when nothing changes)."""

from __future__ import annotations

import io
import json
import logging
import re
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from dsx import logs
from dsx.api import security
from dsx.controllers import http, kube_nodes, telemetry
from dsx.health.decisions import pipeline_status
from dsx.health.decisions.ports import NodeChange, Taint, TaintEffect
from dsx.health.parsing import ingest
from dsx.model.health import HealthEvent
from dsx.testing.inmemory import InMemoryEventStore

from .builders import gpu_node, xid

TOKEN = "sentinel-test-token-0123456789"


@pytest.fixture
def server() -> Iterator[tuple[str, InMemoryEventStore, telemetry.SentinelTelemetry]]:
    store = InMemoryEventStore()
    metrics = telemetry.SentinelTelemetry()
    state = {"ready": "starting"}

    def accept(events: Sequence[HealthEvent]) -> dict[str, Any]:
        appended = store.append(events)
        created = sum(1 for a in appended if a.created)
        metrics.events_ingested.labels("http").inc(created)
        return {"accepted": len(appended), "created": created, "sequences": [a.sequence for a in appended]}

    routes = http.Routes(
        ready=lambda: state["ready"] or None,
        metrics=metrics.exposition,
        status=lambda: pipeline_status.document(store, None, now=datetime.now(UTC)),
        ingest=accept,
        authenticator=security.TokenAuthenticator(frozenset({security._digest(TOKEN)})),
    )
    running = http.SentinelHttpServer(routes, port=0)
    running.start()
    base = f"http://127.0.0.1:{running.port}"
    try:
        yield base, store, metrics
        state["ready"] = ""
    finally:
        running.stop()


def call(url: str, *, body: bytes | None = None, token: str | None = TOKEN) -> tuple[int, bytes]:
    status, answer, _ = call_with_headers(url, body=body, token=token)
    return status, answer


def call_with_headers(
    url: str, *, body: bytes | None = None, token: str | None = TOKEN
) -> tuple[int, bytes, dict[str, str]]:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=body, headers=headers, method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


def test_probes_need_no_token_and_metrics_need_one(server) -> None:
    base, _, _ = server
    assert call(f"{base}/healthz", token=None) == (200, b"ok\n")
    assert call(f"{base}/readyz", token=None) == (503, b"starting\n")
    assert call(f"{base}/metrics", token=None)[0] == 401
    status, text = call(f"{base}/metrics")
    assert status == 200 and b"dsx_sentinel_fleet_goodput_ratio" in text


def test_ingestion_needs_a_valid_token(server) -> None:
    base, store, _ = server
    body = json.dumps(xid().to_dict()).encode()
    for token in (None, "wrong-token-0123456789"):
        status, answer = call(f"{base}/v1/events", body=body, token=token)
        assert status == 401 and json.loads(answer)["error"]["code"] == "UNAUTHORIZED"
    assert store.last_sequence() == 0
    assert call(f"{base}/v1/status", token=None)[0] == 401


def test_posted_events_are_stored_once_and_counted(server) -> None:
    base, store, metrics = server
    body = json.dumps(ingest.to_document([xid("a"), xid("b")])).encode()
    status, answer = call(f"{base}/v1/events", body=body)
    assert status == 202 and json.loads(answer) == {"accepted": 2, "created": 2, "sequences": [1, 2]}
    status, answer = call(f"{base}/v1/events", body=body)
    assert json.loads(answer)["created"] == 0
    assert store.last_sequence() == 2
    assert b'dsx_sentinel_events_ingested_total{source="http"} 2.0' in metrics.exposition()
    status, answer = call(f"{base}/v1/status")
    assert status == 200 and json.loads(answer)["lastSequence"] == 2


def test_old_snake_case_keys_are_stored_and_answered_with_the_api_deprecation_headers(server) -> None:
    base, store, _ = server
    event = xid("a").to_dict()
    status, _, headers = call_with_headers(f"{base}/v1/events", body=json.dumps([event]).encode())
    assert status == 202 and "Deprecation" not in headers and "Warning" not in headers
    old = {re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), k): v for k, v in event.items()}
    status, answer, headers = call_with_headers(f"{base}/v1/events", body=json.dumps({"events": [old]}).encode())
    assert status == 202 and json.loads(answer) == {"accepted": 1, "created": 0, "sequences": [1]}
    assert headers["Deprecation"] == "true"
    warning = headers["Warning"]
    assert ingest.deprecation_headers([old]) == {"Deprecation": "true", "Warning": warning}  # the API's words
    assert warning.startswith('299 dsx "old snake_case HealthEvent keys ') and "is_fatal" in warning
    assert store.last_sequence() == 1


def test_bad_and_oversized_posts_are_refused_with_one_line_errors(server) -> None:
    base, store, _ = server
    status, answer = call(f"{base}/v1/events", body=b'{"agent": 1}')
    error = json.loads(answer)["error"]
    assert status == 400 and error["code"] == "INVALID_REQUEST", error
    assert error["message"] == "request body: events[0]: agent: expected a string, got 1"
    status, answer = call(f"{base}/v1/events", body=b"x" * (http.MAX_BODY_BYTES + 1))
    assert status == 413
    assert call(f"{base}/v1/nothing")[0] == 404
    assert store.last_sequence() == 0


def test_log_lines_are_json_with_their_extra_fields() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.JsonFormatter())
    logger = logging.getLogger("dsx.sentinel.test-json")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("node %s cordoned", "n1", extra={"node": "n1", "stage": "quarantine"})
    finally:
        logger.removeHandler(handler)
    line = json.loads(stream.getvalue())
    assert line["message"] == "node n1 cordoned" and line["level"] == "warning"
    assert line["node"] == "n1" and line["stage"] == "quarantine" and line["time"].endswith("Z")


def test_the_observer_feeds_the_metrics() -> None:
    metrics = telemetry.SentinelTelemetry()
    metrics.action("quarantine", "quarantine", "n1", {})
    metrics.fault_to_cordon(0.12)
    metrics.breaker("tripped", {})
    metrics.lag(
        [
            pipeline_status.ConsumerLag("quarantine", 7, 3, 1.5, history_lost=False),
            pipeline_status.ConsumerLag("drain", 3, 7, 42.0, history_lost=False),
            pipeline_status.ConsumerLag("remediation", 12, -2, 0.0, history_lost=True),
        ]
    )
    text = metrics.exposition().decode()
    assert 'dsx_sentinel_actions_total{action="quarantine",stage="quarantine"} 1.0' in text
    assert 'dsx_sentinel_fault_to_cordon_seconds_bucket{le="0.15"} 1.0' in text
    assert "dsx_sentinel_breaker_tripped 1.0" in text
    assert 'dsx_sentinel_stage_lag_events{stage="drain"} 7.0' in text
    assert 'dsx_sentinel_stage_lag_seconds{stage="drain"} 42.0' in text
    assert 'dsx_sentinel_stage_history_lost{stage="remediation"} 1.0' in text
    assert 'dsx_sentinel_stage_history_lost{stage="drain"} 0.0' in text


def test_one_merge_patch_per_change_guarded_by_resource_version() -> None:
    node = gpu_node("n1", taints=[{"key": "other.io/x", "effect": "NoSchedule"}])
    node["metadata"]["resourceVersion"] = "42"
    change = NodeChange(
        unschedulable=True,
        labels={"sentinel.dsx.run/state": "quarantined"},
        annotations={"sentinel.dsx.run/incident": "7", "gone": None},
        add_taints=(Taint("sentinel.dsx.run/quarantined", TaintEffect.NO_SCHEDULE, "gpu"),),
    )
    assert kube_nodes.merge_patch(node, change) == {
        "metadata": {
            "resourceVersion": "42",
            "labels": {"sentinel.dsx.run/state": "quarantined"},
            "annotations": {"sentinel.dsx.run/incident": "7", "gone": None},
        },
        "spec": {
            "unschedulable": True,
            "taints": [
                {"key": "other.io/x", "effect": "NoSchedule"},
                {"key": "sentinel.dsx.run/quarantined", "effect": "NoSchedule", "value": "gpu"},
            ],
        },
    }
    after = change.apply_to(node)
    assert not change.changes(after)
    release = NodeChange(unschedulable=False, remove_taints=("sentinel.dsx.run/quarantined",))
    assert kube_nodes.merge_patch(after, release)["spec"] == {
        "unschedulable": None,
        "taints": [{"key": "other.io/x", "effect": "NoSchedule"}],
    }


def test_errors_are_json_records_never_raw_tracebacks(capfd: pytest.CaptureFixture[str]) -> None:
    """A failing route answers 500 in the error envelope; the failure, a connection error and an
    exception escaping a thread are each one JSON log line with the traceback inside."""
    import socket
    import threading

    root = logging.getLogger("dsx")
    saved = (root.handlers[:], root.level, root.propagate, threading.excepthook)
    root.handlers = []
    try:
        logs.configure("json")

        def broken() -> dict[str, Any]:
            raise RuntimeError("status is broken")

        routes = http.Routes(
            ready=lambda: None,
            metrics=lambda: b"",
            status=broken,
            ingest=lambda body: {},
            authenticator=security.TokenAuthenticator(frozenset({security._digest(TOKEN)})),
        )
        running = http.SentinelHttpServer(routes, port=0)
        running.start()
        try:
            status, body = call(f"http://127.0.0.1:{running.port}/v1/status")
            assert status == 500 and json.loads(body)["error"]["code"] == "INTERNAL"
            with socket.create_connection(("127.0.0.1", running.port)) as sock:  # reset mid-request
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            thread = threading.Thread(target=lambda: 1 / 0, name="doomed")
            thread.start()
            thread.join()
        finally:
            running.stop()
    finally:
        root.handlers, root.level, root.propagate, threading.excepthook = saved
    err = capfd.readouterr().err
    records = [json.loads(line) for line in err.splitlines() if line.strip()]  # every line is JSON
    failed = next(r for r in records if r["message"] == "GET /v1/status failed")
    assert "RuntimeError: status is broken" in failed["exception"]
    doomed = next(r for r in records if r["message"] == "uncaught exception in thread doomed")
    assert "ZeroDivisionError" in doomed["exception"]


def test_only_a_bulk_post_waits_for_the_urgent_work_before_it_is_parsed() -> None:
    """`Routes.before_bulk` runs for a post over `BULK_BODY_BYTES` (before its parse), never for a
    monitor's small poll: the runtime makes bulk routine traffic wait there while a fault is cordoned."""
    store = InMemoryEventStore()
    calls: list[int] = []

    def accept(events: Sequence[HealthEvent]) -> dict[str, Any]:
        appended = store.append(events)
        return {"accepted": len(appended), "created": len(appended), "sequences": [a.sequence for a in appended]}

    routes = http.Routes(
        ready=lambda: None,
        metrics=lambda: b"",
        status=lambda: {},
        ingest=accept,
        authenticator=security.TokenAuthenticator(frozenset({security._digest(TOKEN)})),
        before_bulk=lambda: calls.append(len(store.events(limit=100_000))),
    )
    running = http.SentinelHttpServer(routes, port=0)
    running.start()
    try:
        small = json.dumps(ingest.to_document([xid(node="n0")])).encode()
        big = json.dumps(ingest.to_document([xid(node=f"n{i}") for i in range(1, 400)])).encode()
        assert len(small) < http.BULK_BODY_BYTES < len(big)
        assert call(f"http://127.0.0.1:{running.port}/v1/events", body=small)[0] == 202
        assert calls == []
        assert call(f"http://127.0.0.1:{running.port}/v1/events", body=big)[0] == 202
        assert calls == [1]  # called once, before the bulk post's events were stored
    finally:
        running.stop()
