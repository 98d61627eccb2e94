"""Area of concern: node-problem-detector interop — NPD's temporary problems, posted as Kubernetes
Events on the Node the way its problem client does, become health events by the shipped
policies (every temporary reason of NPD's own kernel-monitor.json covered, or named as ignored);
its permanent problems are NodeConditions the node policies read (every condition type covered);
an Event seen again is the same health event, a repeat (higher count) a new one; old Events
from the watch's first list and Events about other kinds are left alone."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dsx import errors
from dsx.health.parsing import kube_objects, node_events
from dsx.model.health import ProcessingStrategy

NPD = json.loads((Path(__file__).resolve().parents[2] / "data" / "npd" / "kernel-monitor.json").read_text())
IGNORED = {"Ext4Warning"}
"""A warning, not an error: recording every one would be noise."""
SINCE = datetime(2026, 12, 4, 12, 0, tzinfo=UTC).timestamp()


def npd_event(reason: str, message: str, *, node: str = "gpu-07", count: int = 1, last: str = "2026-12-04T12:05:00Z"):
    """An Event as NPD's problem client records it (client-go EventRecorder, namespace default)."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{node}.18a3b2c1d0e4f5a6", "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": node, "uid": node},
        "reason": reason,
        "message": message,
        "source": {"component": NPD["source"], "host": node},
        "firstTimestamp": "2026-12-04T12:04:00Z",
        "lastTimestamp": last,
        "count": count,
        "type": "Warning",
    }


@pytest.fixture(scope="module")
def monitor() -> node_events.NodeEventMonitor:
    return node_events.NodeEventMonitor(node_events.shipped_policies(), since_epoch_seconds=SINCE)


@pytest.mark.parametrize("reason", sorted({r["reason"] for r in NPD["rules"] if r["type"] == "temporary"}))
def test_every_temporary_problem_npd_posts_is_read_or_deliberately_ignored(monitor, reason: str) -> None:
    found = monitor.observe(npd_event(reason, "task python3:4242 blocked for more than 120 seconds."))
    if reason in IGNORED:
        assert found == []
        return
    (event,) = found
    assert event.node_name == "gpu-07" and not event.is_fatal and not event.is_healthy
    assert event.processing_strategy is ProcessingStrategy.STORE_AND_ANALYSE  # temporary: correlated, not acted on
    assert event.message.startswith(f"{reason}: ")
    assert event.metadata["eventReason"] == reason and event.metadata["eventSource"] == "kernel-monitor"
    assert event.generated_at == datetime(2026, 12, 4, 12, 5, tzinfo=UTC)


def test_every_condition_npd_sets_is_read_by_a_node_policy() -> None:
    policies = kube_objects.shipped_policies()
    types = {c["type"] for c in NPD["conditions"]} | {r["condition"] for r in NPD["rules"] if r["type"] == "permanent"}
    for condition in sorted(types):
        node = {"metadata": {"name": "n1"}, "status": {"conditions": [{"type": condition, "status": "True"}]}}
        healthy = {"metadata": {"name": "n1"}, "status": {"conditions": [{"type": condition, "status": "False"}]}}
        matched = [p.name for p in policies if p.predicate.test({"node": node, "now_seconds": 0.0})]
        assert matched, f"no node policy reads NPD's condition {condition}"
        assert not [p.name for p in policies if p.predicate.test({"node": healthy, "now_seconds": 0.0})]


def test_an_event_seen_again_is_one_health_event_and_a_repeat_is_another(monitor) -> None:
    first = monitor.observe(npd_event("KernelOops", "BUG: unable to handle kernel NULL pointer dereference at 0x10"))
    again = monitor.observe(npd_event("KernelOops", "BUG: unable to handle kernel NULL pointer dereference at 0x10"))
    repeat = monitor.observe(
        npd_event(
            "KernelOops",
            "BUG: unable to handle kernel NULL pointer dereference at 0x10",
            count=2,
            last="2026-12-04T12:06:00Z",
        )
    )
    assert first[0].idempotency_key == again[0].idempotency_key
    assert repeat[0].idempotency_key != first[0].idempotency_key
    assert repeat[0].metadata["eventCount"] == "2"


def test_old_events_other_kinds_and_normal_events_are_left_alone(monitor) -> None:
    assert monitor.observe(npd_event("TaskHung", "task x:1 blocked", last="2026-12-04T11:59:59Z")) == []
    pod = npd_event("TaskHung", "task x:1 blocked")
    pod["involvedObject"] = {"kind": "Pod", "name": "p", "namespace": "default"}
    assert monitor.observe(pod) == []
    normal = npd_event("TaskHung", "task x:1 blocked")
    normal["type"] = "Normal"
    assert monitor.observe(normal) == []
    assert monitor.observe({**npd_event("TaskHung", "x"), "lastTimestamp": None, "firstTimestamp": None}) == []


def test_a_policy_file_with_a_bad_expression_names_the_field() -> None:
    document: dict[str, Any] = {
        "apiVersion": node_events.API_VERSION,
        "kind": node_events.KIND,
        "policies": [
            {
                "name": "p",
                "predicate": "event.reason ==",
                "event": {"checkName": "X", "componentClass": "NODE", "isFatal": False},
            }
        ],
    }
    with pytest.raises(errors.DsxError, match=r"policies\[0\]\.predicate"):
        node_events.policies_from_dict(document, source="rules.yaml")
