"""Area of concern: a named run of Jobs is created, awaited, read and deleted by its name alone."""

from __future__ import annotations

from typing import Any

import pytest

from dsx.kube.client import KubeClient
from dsx.kube.jobs import RUN_LABEL, RunLauncher
from dsx.sim import pod_logs

pytestmark = pytest.mark.integration


def _job(name: str, node: str, exit_code: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {"sim.dsx.run/exit-code": str(exit_code)}},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeName": node,
                    "containers": [{"name": "worker", "image": "nccl-tests"}],
                },
            },
        },
    }


def test_run_reports_exit_codes_per_node_and_logs(
    kube_client: KubeClient, sim_namespace: str, sim_cluster: Any
) -> None:
    good, bad = sim_cluster.node_names[0], sim_cluster.node_names[1]
    launcher = RunLauncher(kube_client, namespace=sim_namespace, poll_seconds=0.2)
    launcher.create("run-a", [_job("run-a-0", good, 0), _job("run-a-1", bad, 7)])
    launcher.create("run-a", [_job("run-a-0", good, 0), _job("run-a-1", bad, 7)])  # resumable: converges
    status = launcher.wait("run-a", deadline_seconds=60)
    assert status.exit_codes == {good: 0, bad: 7} and status.finished and not status.not_started
    pods = launcher.pods("run-a")
    assert {p["metadata"]["labels"][RUN_LABEL] for p in pods} == {"run-a"}
    on_good = next(p for p in pods if p["spec"]["nodeName"] == good)
    pod_logs.seed(
        sim_cluster.cluster, kube_client, sim_namespace, on_good["metadata"]["name"], "# Avg bus bandwidth : 42"
    )
    text = kube_client.wait_for(
        lambda: {"log": launcher.logs("run-a", good)}, lambda d: "Avg bus bandwidth" in d["log"], what="run log"
    )["log"]
    assert text.split(" ", 1)[0].startswith("20")  # kubelet timestamp first
    launcher.delete("run-a")
    launcher.delete("run-a")
    gone = kube_client.wait_for(
        lambda: {"left": len(launcher.pods("run-a")) + len(kube_client.list("batch/v1", "Job", sim_namespace))},
        lambda d: d["left"] == 0,
        what="run deleted",
    )
    assert gone["left"] == 0


def test_wait_returns_none_for_pods_still_running_at_the_deadline(
    kube_client: KubeClient, sim_namespace: str, sim_cluster: Any
) -> None:
    node = sim_cluster.node_names[2]
    slow = _job("slow-0", node, 0)
    slow["spec"]["template"]["metadata"]["annotations"]["sim.dsx.run/run-duration"] = "10m"
    launcher = RunLauncher(kube_client, namespace=sim_namespace, poll_seconds=0.2)
    launcher.create("slow", [slow])
    kube_client.wait_for(
        lambda: {"pods": launcher.pods("slow")},
        lambda d: any(p.get("status", {}).get("phase") == "Running" for p in d["pods"]),
        what="slow pod running",
    )
    status = launcher.wait("slow", deadline_seconds=1)
    assert status.exit_codes == {node: None} and not status.finished
    launcher.delete("slow")
