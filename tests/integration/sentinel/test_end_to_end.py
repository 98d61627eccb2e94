"""Area of concern: the whole loop on the shared `dsx sim` cluster, through the real CLI process.

`dsx sim inject --fault xid79` on two nodes → the kernel-log monitor sees the lines → events are
stored → quarantine cordons and taints both → drain evicts their pods through the Eviction API,
a PodDisruptionBudget holding one pod back until the budget allows it → remediation reboots them
through the sim provider (NotReady, then Ready) → re-certification runs nccl-loopback and a short
training job on the certify engine's local executor → the healthy node is uncordoned only after
its certification passed; the other, whose certification fails (an injected crash), stays
cordoned with the reason. Both nodes are restored afterwards (the cluster is shared)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsx.health.decisions import nodes
from dsx.health.decisions.eventstore import ValidationStatus
from dsx.kube.client import KubeClient
from dsx.model.health import NODE_REMEDIATED_CHECK, NodeState
from dsx.store import open_store

from .harness import SentinelProcess, gpu_fault_rule, policy_file, restore, wait_for

pytestmark = pytest.mark.integration


def guarded_pod(namespace: str, name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "guarded"}},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "train", "image": "trainer:1", "resources": {"limits": {"nvidia.com/gpu": "8"}}}],
        },
    }


def ready_pod(client: KubeClient, namespace: str, name: str) -> None:
    client.wait_for(
        lambda: client.get_pod(namespace, name),
        lambda p: any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in p.get("status", {}).get("conditions") or []
        ),
        what=f"pod {name} Ready",
        timeout_seconds=60,
    )


@pytest.fixture
def cluster_nodes(sim_cluster: Any, kube_client: KubeClient) -> Iterator[tuple[str, str, str]]:
    """(node that recovers, node whose re-certification fails, a bystander node); restored afterwards."""
    healed, failing, bystander = sim_cluster.node_names[3], sim_cluster.node_names[4], sim_cluster.node_names[5]
    try:
        yield healed, failing, bystander
    finally:
        for name in (healed, failing):
            restore(kube_client, name)


def test_xid79_to_recertified_release_and_a_failed_recertification_kept_out(
    sim_cluster: Any, kube_client: KubeClient, sim_namespace: str, cluster_nodes: tuple[str, str, str], tmp_path: Path
) -> None:
    healed, failing, bystander = cluster_nodes
    namespace = sim_namespace
    for name in ("guarded-a", "guarded-b"):
        kube_client.create(guarded_pod(namespace, name, healed))
    kube_client.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guarded", "namespace": namespace},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
        }
    )
    for name in ("guarded-a", "guarded-b"):
        ready_pod(kube_client, namespace, name)
    kube_client.wait_for(
        lambda: kube_client.get("policy/v1", "PodDisruptionBudget", "guarded", namespace),
        lambda b: b.get("status", {}).get("disruptionsAllowed") == 1,
        what="the budget to allow one disruption",
        timeout_seconds=60,
    )
    policy = policy_file(
        tmp_path,
        {
            "stages": {s: {"enabled": True} for s in ("quarantine", "drain", "remediation", "recertify")},
            "breaker": {"maxQuarantinedPercent": 50},
            "quarantine": {"ruleSets": [gpu_fault_rule(f"node.metadata.name in ['{healed}', '{failing}']")]},
            "drain": {"pollSeconds": 0.5, "backoffSeconds": 0.5, "maxBackoffSeconds": 2},
            "certification": {
                "categories": ["nccl-loopback", {"name": "training", "scale": "intra-node"}],
                "ranksPerNode": 2,
                "inject": {failing: "crash"},
                "stallTimeoutSeconds": 60,
            },
            "monitors": {"startAtEnd": True},
        },
    )
    store_url = f"sqlite:///{tmp_path / 'events.db'}"
    sentinel = SentinelProcess(tmp_path, policy, store_url, "--sim", sim_cluster.name)
    sentinel.start()
    store = open_store(store_url)
    try:
        for node in (healed, failing):
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "dsx",
                    "sim",
                    "inject",
                    "--name",
                    sim_cluster.name,
                    "--node",
                    node,
                    "--fault",
                    "xid79",
                ],
                check=True,
                capture_output=True,
            )

        # quarantine: cordoned and tainted, the reason and the event on the node
        for node in (healed, failing):
            wait_for(lambda n=node: nodes.unschedulable(kube_client.get_node(n)), 30, f"{node} cordoned", sentinel)
            marks = nodes.annotations_of(kube_client.get_node(node))
            assert marks["sentinel.dsx.run/reason"].startswith("fatal-gpu-fault: KernelLogXid 79")
            assert nodes.has_taint(kube_client.get_node(node), "sentinel.dsx.run/quarantined")
        (stored,) = [s for s in store.events(node_name=healed) if s.event.check_name == "KernelLogXid"]
        assert stored.event.error_codes == ("79",) and stored.event.agent == "kernel-log-monitor"

        # drain: one guarded pod goes, the budget holds the other until a replacement runs elsewhere
        wait_for(
            lambda: (
                "PodDisruptionBudget"
                in nodes.annotations_of(kube_client.get_node(healed)).get("sentinel.dsx.run/drain", "")
            ),
            60,
            "the drain to report the budget",
            sentinel,
        )

        def one_left() -> list[str] | None:
            left = [nodes.name(p) for p in kube_client.list_pods(namespace)]
            return left if len(left) == 1 else None

        remaining = wait_for(one_left, 30, "the first guarded pod to be gone", sentinel)
        assert remaining[0] in ("guarded-a", "guarded-b")
        assert store.node_state(healed).state is NodeState.DRAINING
        assert sentinel.metric("dsx_sentinel_actions_total", '{action="eviction-refused",stage="drain"}') >= 1
        kube_client.create(guarded_pod(namespace, "guarded-c", bystander))
        ready_pod(kube_client, namespace, "guarded-c")

        # remediation through the sim provider, then re-certification: released only after it passed
        def settled() -> bool:
            states = {n: store.node_state(n).state for n in (healed, failing)}
            if not nodes.unschedulable(kube_client.get_node(healed)):
                passed = [r for r in store.validation_requests() if r.node_name == healed]
                assert passed and passed[-1].status is ValidationStatus.PASSED, "uncordoned before certification passed"
            return states == {healed: NodeState.HEALTHY, failing: NodeState.FAILED}

        wait_for(settled, 240, "re-certification of both nodes", sentinel)

        assert [nodes.name(p) for p in kube_client.list_pods(namespace, node_name=healed)] == []
        moves = [m.to_state.value for m in store.node_history(healed)]
        assert moves == ["quarantined", "draining", "drained", "remediating", "recertifying", "healthy"]
        requests = {r.node_name: r for r in store.validation_requests()}
        assert requests[healed].status is ValidationStatus.PASSED
        assert store.node_history(healed)[-1].at >= requests[healed].updated_at
        node = kube_client.get_node(healed)
        assert not nodes.unschedulable(node) and nodes.ready(node) is True
        assert not [t for t in nodes.taints(node) if t["key"].startswith("sentinel.dsx.run/")]
        assert not any(
            k.startswith("sentinel.dsx.run/") for k in {**nodes.labels_of(node), **nodes.annotations_of(node)}
        )
        remediated = [s.event for s in store.events(node_name=healed) if s.event.check_name == NODE_REMEDIATED_CHECK]
        assert len(remediated) == 1 and remediated[0].message.startswith("reboot-node done for incident")
        assert "rebooted (simulated) and Ready again" in store.node_history(healed)[4].reason

        kept = kube_client.get_node(failing)
        assert nodes.unschedulable(kept)
        assert nodes.labels_of(kept)["sentinel.dsx.run/recertification-failed"] == "true"
        assert "WorkloadFailed" in nodes.annotations_of(kept)["sentinel.dsx.run/reason"]
        assert "WorkloadFailed" in store.node_state(failing).reason
        assert requests[failing].status is ValidationStatus.FAILED

        assert sentinel.metric("dsx_sentinel_fault_to_cordon_seconds_count") == 2
        assert sentinel.metric("dsx_sentinel_actions_total", '{action="released",stage="recertify"}') == 1
        status, body = sentinel.get("/v1/status", token=True)
        assert status == 200 and b'"state": "failed"' in body
    finally:
        sentinel.stop()
        store.close()
