"""Area of concern: MaintenanceRequests on a live sentinel and a real kube-apiserver (dsx sim), with
the chart's own CRD: the apiserver refuses a request without a start time (the CRD's schema); a
request is held by the sentinel's finalizer, stays Pending until `startTime - leadSeconds`, then
its node is cordoned and drained through the Eviction API (Ready before the start time); a
delete waits on the finalizer until the node is uncordoned, then the object is gone. The node is
an extra Node object with a label of its own, deleted afterwards."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dsx import errors
from dsx.files import documents
from dsx.health.decisions import nodes
from dsx.health.decisions.maintenance import API_VERSION, FINALIZER, KIND
from dsx.kube.client import KubeClient
from dsx.sim.nodes import NODE_ANNOTATION

from .harness import SentinelProcess, policy_file, wait_for

pytestmark = pytest.mark.integration

CRD = Path(__file__).resolve().parents[3] / "deploy" / "helm" / "dsx-sentinel" / "crds" / "maintenancerequests.yaml"
LEAD_SECONDS = 20


def request(name: str, node: str, start: datetime | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeName": node, "reason": "swap a PSU"}
    if start is not None:
        spec["startTime"] = start.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name}, "spec": spec}


@pytest.fixture
def node_with_work(kube_client: KubeClient, sim_namespace: str) -> Iterator[tuple[str, str]]:
    label = f"maint-{uuid.uuid4().hex[:6]}"
    name = f"{label}-0"
    kube_client.create_crd(documents.load_mapping_file(CRD))
    kube_client.create(
        {
            "apiVersion": "v1",
            "kind": "Node",  # kwok plays its kubelet: an evicted pod terminates and goes
            "metadata": {"name": name, "labels": {"dsx-test/fleet": label}, "annotations": {NODE_ANNOTATION: "fake"}},
        }
    )
    kube_client.create_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"work-{name}", "namespace": sim_namespace},
            "spec": {
                "nodeName": name,
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "main", "image": "trainer:1"}],
            },
        }
    )
    try:
        yield label, name
    finally:
        kube_client.delete("v1", "Node", name)


def test_a_maintenance_request_drains_its_node_before_the_start_and_releases_it_on_delete(
    sim_cluster: Any, kube_client: KubeClient, node_with_work: tuple[str, str], sim_namespace: str, tmp_path: Path
) -> None:
    label, node = node_with_work
    name = f"mr-{node}"
    with pytest.raises(errors.DsxError, match="startTime"):
        kube_client.create(request(f"{name}-bad", node, None))  # the CRD's schema, enforced by the apiserver

    policy = policy_file(
        tmp_path,
        {
            "stages": {"maintenance": {"enabled": True}},
            "gpuNodeSelector": {"dsx-test/fleet": label},
            "maintenance": {"leadSeconds": LEAD_SECONDS, "pollSeconds": 0.5},
            "drain": {"pollSeconds": 0.5},
            "monitors": {"kubeObjects": False},
        },
    )
    sentinel = SentinelProcess(tmp_path, policy, f"sqlite:///{tmp_path / 'events.db'}", "--sim", sim_cluster.name)
    sentinel.start()
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=LEAD_SECONDS + 6)
    try:
        kube_client.create(request(name, node, start))

        def read() -> dict[str, Any]:
            return kube_client.get(API_VERSION, KIND, name)

        pending = wait_for(lambda: (read().get("status") or {}).get("phase") == "Pending" and read(), 20, "Pending")
        assert FINALIZER in pending["metadata"]["finalizers"]
        assert not nodes.unschedulable(kube_client.get_node(node)), "cordoned before startTime - leadSeconds"

        ready = wait_for(lambda: (read().get("status") or {}).get("phase") == "Ready" and read(), 40, "Ready", sentinel)
        drained_at = datetime.fromisoformat(ready["status"]["drainedAt"].replace("Z", "+00:00"))
        assert drained_at <= start, "drained before the maintenance starts"
        held = kube_client.get_node(node)
        assert nodes.unschedulable(held) and nodes.under_maintenance(held) == name
        assert kube_client.list_pods(sim_namespace, node_name=node) == []
        events = kube_client.list("v1", "Event", "default")
        assert {"MaintenanceStarted", "MaintenanceReady"} <= {
            e.get("reason") for e in events if e["involvedObject"]["name"] == node
        }

        kube_client.delete(API_VERSION, KIND, name)

        def gone() -> bool:
            try:
                read()
            except errors.NotFoundError:
                return True
            return False

        wait_for(gone, 20, "the request to be released and gone", sentinel)
        released = kube_client.get_node(node)
        assert not nodes.unschedulable(released)
        assert nodes.under_maintenance(released) == ""
    finally:
        sentinel.stop()
        for leftover in (name, f"{name}-bad"):
            with contextlib.suppress(errors.NotFoundError):
                kube_client.patch(API_VERSION, KIND, leftover, {"metadata": {"finalizers": []}})
            kube_client.delete(API_VERSION, KIND, leftover)
