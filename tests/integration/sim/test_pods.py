"""Area of concern: simulated pods move through the lifecycle the stage annotations ask for, and
`kubectl logs` returns what was seeded for them."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from dsx.kube.client import KubeClient
from dsx.sim import pod_logs

pytestmark = pytest.mark.integration


def _pod(name: str, namespace: str, node: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "registry.example/trainer:1"}],
        },
    }


def _settled(client: KubeClient, namespace: str, name: str, phase: str) -> dict[str, Any]:
    return client.wait_for(
        lambda: client.get_pod(namespace, name),
        lambda p: p.get("status", {}).get("phase") == phase and bool(p["status"].get("containerStatuses")),
        what=f"{name} {phase}",
        timeout_seconds=30,
    )


def test_annotations_drive_completion_and_container_failures(
    kube_client: KubeClient, sim_namespace: str, sim_cluster: Any
) -> None:
    node = sim_cluster.node_names[0]
    kube_client.create_pod(_pod("ok", sim_namespace, node, {"sim.dsx.run/exit-code": "0"}))
    kube_client.create_pod(
        _pod(
            "fails",
            sim_namespace,
            node,
            {"sim.dsx.run/exit-code": "3", "sim.dsx.run/termination-message": "NCCL error: remote process exited"},
        )
    )
    kube_client.create_pod(
        _pod(
            "crashes",
            sim_namespace,
            node,
            {"sim.dsx.run/waiting-reason": "CrashLoopBackOff", "sim.dsx.run/restart-count": "4"},
        )
    )
    kube_client.create_pod(_pod("no-image", sim_namespace, node, {"sim.dsx.run/waiting-reason": "ImagePullBackOff"}))
    kube_client.create_pod(_pod("serves", sim_namespace, node, {}))

    ok = _settled(kube_client, sim_namespace, "ok", "Succeeded")["status"]["containerStatuses"][0]
    assert ok["state"]["terminated"]["exitCode"] == 0
    assert ok["state"]["terminated"]["reason"] == "Completed"

    fails = _settled(kube_client, sim_namespace, "fails", "Failed")["status"]["containerStatuses"][0]
    assert fails["state"]["terminated"]["exitCode"] == 3
    assert fails["state"]["terminated"]["reason"] == "Error"
    assert fails["state"]["terminated"]["message"] == "NCCL error: remote process exited"

    crash = _settled(kube_client, sim_namespace, "crashes", "Running")
    status = crash["status"]["containerStatuses"][0]
    assert status["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert status["restartCount"] == 4
    assert status["lastState"]["terminated"]["exitCode"] == 1
    assert {c["type"]: c["status"] for c in crash["status"]["conditions"]}["Ready"] == "False"

    pull = _settled(kube_client, sim_namespace, "no-image", "Pending")["status"]["containerStatuses"][0]
    assert pull["state"]["waiting"] == {
        "reason": "ImagePullBackOff",
        "message": 'Back-off pulling image "registry.example/trainer:1"',
    }

    serving = _settled(kube_client, sim_namespace, "serves", "Running")
    assert serving["status"]["containerStatuses"][0]["ready"] is True
    assert serving["status"]["podIP"].startswith("10.244.")
    # a pod without the completion annotation (and no Job owner) keeps running
    assert kube_client.get_pod(sim_namespace, "serves")["status"]["phase"] == "Running"


def test_seeded_pod_log_is_served_to_client_and_kubectl(
    kube_client: KubeClient, sim_namespace: str, sim_cluster: Any
) -> None:
    kube_client.create_pod(_pod("talker", sim_namespace, sim_cluster.node_names[1], {}))
    _settled(kube_client, sim_namespace, "talker", "Running")
    assert kube_client.pod_logs(sim_namespace, "talker") == ""

    path = pod_logs.seed(sim_cluster.cluster, kube_client, sim_namespace, "talker", "step 1\nstep 2")
    assert path.is_file()
    text = kube_client.wait_for(
        lambda: {"log": kube_client.pod_logs(sim_namespace, "talker")},
        lambda d: d["log"] != "",
        what="seeded log served",
        timeout_seconds=15,
    )["log"]
    assert text == "step 1\nstep 2\n"
    pod_logs.seed(sim_cluster.cluster, kube_client, sim_namespace, "talker", "step 3", append=True)
    assert kube_client.pod_logs(sim_namespace, "talker", tail_lines=1) == "step 3\n"

    kubectl = sim_cluster.cluster.load_state().binaries["kubectl"]
    shown = subprocess.run(
        [kubectl, "--kubeconfig", str(sim_cluster.kubeconfig), "-n", sim_namespace, "logs", "talker"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    assert shown == "step 1\nstep 2\nstep 3\n"
