"""Area of concern: node policies (shipped and hand-written) turn Node objects into events only
when a verdict changes, send a baseline per node, survive odd nodes, and refuse bad files."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest

from dsx.errors import BadInputError
from dsx.health.parsing import kube_objects
from dsx.health.parsing.kube_objects import KubeObjectMonitor
from dsx.model.health import ComponentClass, RecommendedAction

NOW = 1_796_000_000.0


def gpu_node(name: str = "n1", *, ready: str = "True", allocatable_gpus: str | None = "8") -> dict[str, Any]:
    allocatable = {"cpu": "96", "memory": "2Ti"}
    if allocatable_gpus is not None:
        allocatable["nvidia.com/gpu"] = allocatable_gpus
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.count": "8", "nvidia.com/gpu.present": "true"}},
        "status": {
            "allocatable": allocatable,
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": ready, "lastHeartbeatTime": "2026-11-29T12:00:00Z"},
            ],
        },
    }


@pytest.fixture
def monitor() -> KubeObjectMonitor:
    return KubeObjectMonitor(kube_objects.shipped_policies(), clock=lambda: NOW)


def test_the_first_look_is_a_healthy_baseline(monitor: KubeObjectMonitor) -> None:
    events = monitor.observe(gpu_node())
    assert [e.check_name for e in events] == [
        "NodeNotReady",
        "NodeGpuCapacityLost",
        "NodeKernelDeadlock",
        "NodeXfsShutdown",
        "NodeReadonlyFilesystem",
    ]
    assert all(e.is_healthy and not e.is_fatal and e.node_name == "n1" for e in events)
    assert all(e.recommended_action is RecommendedAction.NONE for e in events)
    assert monitor.observe(gpu_node()) == []


def test_a_lost_gpu_is_fatal_and_its_return_is_healthy(monitor: KubeObjectMonitor) -> None:
    monitor.observe(gpu_node())
    (lost,) = monitor.observe(gpu_node(allocatable_gpus="7"))
    assert (lost.check_name, lost.is_fatal, lost.recommended_action, lost.error_codes) == (
        "NodeGpuCapacityLost",
        True,
        RecommendedAction.RESTART_BM,
        ("GPU_COUNT_MISMATCH",),
    )
    assert lost.component_class is ComponentClass.GPU
    assert lost.metadata == {"policy": "gpu-capacity-lost"}
    assert lost.generated_at.timestamp() == NOW
    assert monitor.observe(gpu_node(allocatable_gpus=None)) == []  # still short: no new event
    (back,) = monitor.observe(gpu_node())
    assert back.check_name == "NodeGpuCapacityLost" and back.is_healthy
    assert back.message == "policy gpu-capacity-lost no longer matches"


def test_not_ready_is_recorded_for_analysis(monitor: KubeObjectMonitor) -> None:
    monitor.observe(gpu_node())
    (not_ready,) = monitor.observe(gpu_node(ready="Unknown"))
    assert (not_ready.check_name, not_ready.is_fatal, not_ready.processing_strategy.value) == (
        "NodeNotReady",
        False,
        "STORE_AND_ANALYSE",
    )


def test_nodes_are_tracked_separately_and_forgotten(monitor: KubeObjectMonitor) -> None:
    monitor.observe(gpu_node("n1"))
    assert len(monitor.observe(gpu_node("n2"))) == 5
    monitor.forget("n1")
    assert len(monitor.observe(gpu_node("n1"))) == 5
    assert monitor.observe(gpu_node("n2")) == []


def test_a_node_without_status_is_handled_and_errors_are_kept() -> None:
    policies = kube_objects.policies_from_dict(
        {
            "apiVersion": "dsx.health/v1alpha1",
            "kind": "NodePolicies",
            "policies": [
                {
                    "name": "careless",
                    "predicate": "node.status.conditions.size() > 100",
                    "event": {"checkName": "Careless", "componentClass": "NODE", "isFatal": True},
                },
                {
                    "name": "stale-heartbeat",
                    "predicate": (
                        "node.status.conditions.exists(c, c.type == 'Ready'"
                        " && now_seconds - double(int(timestamp(c.lastHeartbeatTime))) > 300.0)"
                    ),
                    "event": {"checkName": "StaleHeartbeat", "componentClass": "NODE", "isFatal": True},
                },
            ],
        },
        source="policies.yaml",
    )
    monitor = KubeObjectMonitor(policies, clock=lambda: NOW)
    bare = {"metadata": {"name": "n9"}}
    assert monitor.observe(bare) == []
    assert len(monitor.errors) == 2 and monitor.errors[0].startswith("node n9: policy careless: ")
    (stale,) = [e for e in monitor.observe(gpu_node("n8")) if e.check_name == "StaleHeartbeat"]
    assert not stale.is_healthy  # the heartbeat is from 2026-11-29T12:00Z, NOW is later
    with pytest.raises(BadInputError, match=r"Node object: metadata\.name: missing"):
        monitor.observe({"kind": "Node"})


def minimal(**changes: Any) -> dict[str, Any]:
    policy: dict[str, Any] = {
        "name": "p",
        "predicate": "true",
        "event": {"checkName": "P", "componentClass": "NODE", "isFatal": True},
    }
    policy.update(changes)
    return {"apiVersion": "dsx.health/v1alpha1", "kind": "NodePolicies", "policies": [policy]}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (minimal(predicate="node.status =="), "policies.yaml: policies[0].predicate: invalid CEL"),
        (
            minimal(event={"checkName": "P", "componentClass": "POD", "isFatal": True}),
            "policies[0].event: componentClass: 'POD' is not allowed; allowed values: GPU, NVSWITCH, NIC, NODE",
        ),
        (minimal(enabled="yes"), "policies[0].enabled: expected true or false"),
        (minimal(when="always"), "policies[0]: field: 'when' is not allowed"),
        (
            minimal(event={"checkName": "P", "componentClass": "NODE", "isFatal": True, "metadata": [1]}),
            "policies[0].event.metadata: expected a mapping",
        ),
        ({"kind": "NodePolicies", "policies": []}, "expected apiVersion dsx.health/v1alpha1 and kind NodePolicies"),
    ],
)
def test_bad_policy_files_are_refused(document: dict[str, Any], message: str) -> None:
    with pytest.raises(BadInputError) as info:
        kube_objects.policies_from_dict(document, source="policies.yaml")
    assert message in str(info.value)


def test_old_snake_case_policies_read_the_same_with_one_warning_per_old_key(caplog: pytest.LogCaptureFixture) -> None:
    current = kube_objects.policies_from_dict(minimal(), source="p.yaml")
    old_event = {"check_name": "P", "component_class": "NODE", "is_fatal": True}
    with caplog.at_level(logging.WARNING, logger="dsx.health.parsing.kube_objects"):
        old = kube_objects.policies_from_dict(minimal(event=old_event), source="p.yaml")
    assert [p.event for p in old] == [p.event for p in current]
    assert sorted(r.getMessage() for r in caplog.records) == [
        f"p.yaml: policies[0].event: {key}: old snake_case key, read as {new}; rename it (keys are camelCase)"
        for key, new in (("check_name", "checkName"), ("component_class", "componentClass"), ("is_fatal", "isFatal"))
    ]


def test_disabled_policies_are_checked_but_left_out() -> None:
    document = minimal(enabled=False)
    assert kube_objects.policies_from_dict(document, source="p.yaml") == []
    broken = copy.deepcopy(document)
    broken["policies"][0]["predicate"] = "(("
    with pytest.raises(BadInputError, match="invalid CEL"):
        kube_objects.policies_from_dict(broken, source="p.yaml")
