"""Health asserts: parsing rules, and verdicts on plain object dicts as the API server returns them."""

from __future__ import annotations

from typing import Any

import pytest

from dsx.errors import BadInputError
from dsx.model import health_asserts
from dsx.model.health_asserts import AssertKind, AssertStatus, HealthCheckAssert


def _parse(raw: dict[str, Any]) -> HealthCheckAssert:
    return HealthCheckAssert.from_dict(raw, source="c.yaml")


def _deployment(name: str, replicas: int, available: int, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels or {"app": name}}},
        "status": {"availableReplicas": available},
    }


def _pod(name: str, phase: str, labels: dict[str, str], **status: Any) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "labels": labels},
        "status": {"phase": phase, **status},
    }


def _ready(name: str = "main") -> dict[str, Any]:
    return {"name": name, "ready": True, "state": {"running": {}}}


def _waiting(reason: str, name: str = "main") -> dict[str, Any]:
    return {"name": name, "ready": False, "state": {"waiting": {"reason": reason}}}


def _node(name: str, labels: dict[str, str], taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": {"taints": taints or []}}


def _daemon_set(desired: int, ready: int, **template: Any) -> dict[str, Any]:
    return {
        "kind": "DaemonSet",
        "metadata": {"name": "plugin", "namespace": "ns"},
        "spec": {"selector": {"matchLabels": {"app": "plugin"}}, "template": {"spec": template}},
        "status": {"desiredNumberScheduled": desired, "numberReady": ready},
    }


# --- parsing ---------------------------------------------------------------------------------


def test_round_trip_through_dict() -> None:
    raw = {"kind": "Deployment", "name": "gpu-operator", "namespace": "gpu-operator", "minAvailableReplicas": 1}
    assert _parse(raw).to_dict() == raw


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"kind": "Service", "name": "x"}, "allowed values: Deployment, StatefulSet, DaemonSet"),
        ({"kind": "Deployment"}, "needs a name"),
        ({"kind": "Deployment", "name": "x", "selector": {"a": "b"}}, "selector applies to Pod asserts only"),
        ({"kind": "CustomResourceDefinition", "name": "widgets"}, "not <plural>.<group>"),
        ({"kind": "CustomResourceDefinition", "name": "a.b", "namespace": "x"}, "cluster-scoped"),
        ({"kind": "DaemonSet", "name": "x", "minAvailableReplicas": 1}, "Deployment and StatefulSet only"),
        (
            {"kind": "Deployment", "name": "x", "minAvailableReplicas": -1},
            "minAvailableReplicas: -1 is out of range; allowed: an integer at least 0",
        ),
        ({"kind": "Deployment", "name": "x", "minPods": 2}, "Pod asserts only"),
        (
            {"kind": "Deployment", "name": "x", "replicas": 2},
            "field: 'replicas' is not allowed; allowed values: kind, name",
        ),
        ({"kind": "Pod", "selector": {"app": 3}}, "selector.app: expected a string, got 3"),
    ],
)
def test_malformed_asserts_are_rejected(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(BadInputError) as info:
        _parse(raw)
    assert message in str(info.value)


def test_namespace_is_filled_for_namespaced_kinds_only() -> None:
    assert _parse({"kind": "Deployment", "name": "x"}).in_namespace("ns").namespace == "ns"
    assert _parse({"kind": "Deployment", "name": "x", "namespace": "own"}).in_namespace("ns").namespace == "own"
    assert _parse({"kind": "CustomResourceDefinition", "name": "a.b"}).in_namespace("ns").namespace == ""


# --- evaluation ------------------------------------------------------------------------------


def test_deployment_needs_all_desired_replicas_available_by_default() -> None:
    check = _parse({"kind": "Deployment", "name": "op", "namespace": "ns"})
    assert health_asserts.evaluate(check, [_deployment("op", 2, 2)]).status is AssertStatus.HEALTHY
    result = health_asserts.evaluate(check, [_deployment("op", 2, 1)])
    assert result.status is AssertStatus.UNHEALTHY
    assert "1/2 replicas available" in result.message


def test_min_available_replicas_overrides_spec_replicas() -> None:
    check = _parse({"kind": "Deployment", "name": "op", "namespace": "ns", "minAvailableReplicas": 1})
    assert health_asserts.evaluate(check, [_deployment("op", 3, 1)]).healthy


def test_missing_object_is_reported_missing() -> None:
    check = _parse({"kind": "StatefulSet", "name": "db", "namespace": "ns"})
    result = health_asserts.evaluate(check, [_deployment("db", 1, 1)])
    assert result.status is AssertStatus.MISSING
    assert "StatefulSet ns/db not found" in result.message


@pytest.mark.parametrize(
    "reason", ["CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError"]
)
def test_running_pod_with_a_waiting_container_makes_the_workload_unhealthy(reason: str) -> None:
    check = _parse({"kind": "Deployment", "name": "op", "namespace": "ns"})
    pod = _pod("op-1", "Running", {"app": "op"}, containerStatuses=[_ready("sidecar"), _waiting(reason)])
    result = health_asserts.evaluate(check, [_deployment("op", 1, 1), pod])
    assert result.status is AssertStatus.UNHEALTHY
    assert f"pod op-1: container main {reason}" in result.message


def test_pods_of_other_workloads_do_not_count() -> None:
    check = _parse({"kind": "Deployment", "name": "op", "namespace": "ns"})
    stranger = _pod("other-1", "Running", {"app": "other"}, containerStatuses=[_waiting("CrashLoopBackOff")])
    assert health_asserts.evaluate(check, [_deployment("op", 1, 1), stranger]).healthy


def test_pod_problem_covers_phases_init_containers_and_readiness() -> None:
    assert health_asserts.pod_problem(_pod("p", "Succeeded", {})) is None
    assert health_asserts.pod_problem(_pod("p", "Running", {}, containerStatuses=[_ready()])) is None
    assert health_asserts.pod_problem(_pod("p", "Pending", {})) == "phase Pending"
    waiting_init = _pod("p", "Pending", {}, initContainerStatuses=[_waiting("ErrImagePull", "init")])
    assert health_asserts.pod_problem(waiting_init) == "container init ErrImagePull"
    unready = _pod("p", "Running", {}, containerStatuses=[{"name": "main", "ready": False, "state": {"running": {}}}])
    assert health_asserts.pod_problem(unready) == "container main not ready"


def test_daemon_set_must_be_ready_on_every_node_it_should_cover() -> None:
    check = _parse({"kind": "DaemonSet", "name": "plugin", "namespace": "ns"})
    gpu = {"nvidia.com/gpu.present": "true"}
    nodes = [_node("gpu-1", gpu), _node("gpu-2", gpu), _node("cpu-1", {})]
    selector = {"nodeSelector": gpu}
    assert health_asserts.evaluate(check, [_daemon_set(2, 2, **selector), *nodes]).healthy
    not_ready = health_asserts.evaluate(check, [_daemon_set(2, 1, **selector), *nodes])
    assert "ready on 1 of 2 nodes" in not_ready.message
    under_scheduled = health_asserts.evaluate(check, [_daemon_set(1, 1, **selector), *nodes])
    assert under_scheduled.status is AssertStatus.UNHEALTHY
    assert "scheduled on 1 of 2 matching nodes" in under_scheduled.message


def test_daemon_set_does_not_owe_pods_to_nodes_whose_taints_it_does_not_tolerate() -> None:
    check = _parse({"kind": "DaemonSet", "name": "plugin", "namespace": "ns"})
    taint = {"key": "nvidia.com/gpu", "effect": "NoSchedule", "value": "present"}
    nodes = [_node("gpu-1", {}, [taint]), _node("cpu-1", {})]
    assert health_asserts.evaluate(check, [_daemon_set(1, 1), *nodes]).healthy
    tolerating = {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}
    result = health_asserts.evaluate(check, [_daemon_set(1, 1, **tolerating), *nodes])
    assert "scheduled on 1 of 2 matching nodes" in result.message


def test_crd_must_be_established() -> None:
    check = _parse({"kind": "CustomResourceDefinition", "name": "widgets.example.test"})

    def crd(status: str) -> dict[str, Any]:
        return {
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.test"},
            "status": {
                "conditions": [{"type": "NamesAccepted", "status": "True"}, {"type": "Established", "status": status}]
            },
        }

    assert health_asserts.evaluate(check, [crd("True")]).healthy
    assert health_asserts.evaluate(check, [crd("False")]).status is AssertStatus.UNHEALTHY


def test_pod_assert_without_selector_covers_the_namespace() -> None:
    check = _parse({"kind": "Pod"}).in_namespace("ns")
    healthy = _pod("a", "Running", {"x": "1"}, containerStatuses=[_ready()])
    stuck = _pod("b", "Running", {"x": "2"}, containerStatuses=[_waiting("ImagePullBackOff")])
    assert health_asserts.evaluate(check, [healthy]).healthy
    result = health_asserts.evaluate(check, [healthy, stuck])
    assert result.status is AssertStatus.UNHEALTHY
    assert "pod b: container main ImagePullBackOff" in result.message
    assert health_asserts.evaluate(check, []).status is AssertStatus.MISSING


def test_pod_assert_with_selector_and_minimum() -> None:
    check = _parse({"kind": "Pod", "namespace": "ns", "selector": {"app": "w"}, "minPods": 2})
    one = _pod("w-1", "Running", {"app": "w"}, containerStatuses=[_ready()])
    two = _pod("w-2", "Running", {"app": "w"}, containerStatuses=[_ready()])
    assert health_asserts.evaluate(check, [one]).status is AssertStatus.UNHEALTHY
    assert health_asserts.evaluate(check, [one, two]).healthy
    assert check.kind is AssertKind.POD
