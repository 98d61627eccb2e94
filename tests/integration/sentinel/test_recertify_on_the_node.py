"""Area of concern: on a cluster given by `--kubeconfig` (the shared `dsx sim` used as a real
cluster: no `--sim`), re-certification runs on the repaired node itself.

`dsx sim inject --fault xid79` on two nodes → quarantine (cordon, taint) → drain → remediation
(the policy names the sim provider: NotReady, then Ready) → the certify engine's Kubernetes
executor creates a TrainJob pinned to each node (the sim runs the real Trainer and JobSet
controllers), asking for all 8 GPUs and tolerating the sentinel's own cordon and taints → the pod
runs bound to the node while it is still cordoned → its log is
read back through the apiserver and judged by the policy's threshold → the node whose log
passes is uncordoned only then; the node whose pod printed an NCCL failure stays cordoned with
the reason. kwok runs no containers: `WorkloadContainers` gives each certification pod the log
its container would print the moment the pod appears (`dsx.sim.pod_logs`, as the certify
integration tests do), so the TrainJobs, JobSets, Jobs, the scheduler, the pod logs and the
judging are the real code path. Both nodes are restored afterwards (the cluster is shared).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dsx.executors import kubernetes
from dsx.health.decisions import nodes
from dsx.health.decisions.eventstore import ValidationStatus
from dsx.kube.client import KubeClient
from dsx.model.health import NodeState
from dsx.sim import pod_logs
from dsx.sim.cluster import SimCluster
from dsx.store import open_store

from .harness import SentinelProcess, policy_file, restore, wait_for

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[2] / "data" / "certify"
IMAGE = "registry.example/dsx-workload:integration"


def sample(name: str) -> str:
    """A collected nccl-tests log without the collection's `# source:` first line."""
    return (DATA / name).read_text(encoding="utf-8").split("\n", 1)[1]


@dataclass
class SeenPod:
    name: str
    pinned_to: str
    node_name: str = ""
    node_cordoned_while_running: bool | None = None
    phases: list[tuple[float, str]] = field(default_factory=list)


class WorkloadContainers:
    """Seeds what each certification pod's container would print, per node, as soon as the pod appears."""

    def __init__(self, cluster: SimCluster, kubeconfig: Path, namespace: str, logs: Mapping[str, str]) -> None:
        self.cluster, self.kubeconfig, self.namespace, self.logs = cluster, kubeconfig, namespace, logs
        self.seen: dict[str, SeenPod] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="workload-containers", daemon=True)
        self.errors: list[BaseException] = []

    def __enter__(self) -> WorkloadContainers:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _loop(self) -> None:
        with KubeClient(self.kubeconfig) as kube:
            while not self._stop.is_set():
                try:
                    self._look(kube)
                except Exception as exc:  # reported by the test, never swallowed
                    self.errors.append(exc)
                    return
                self._stop.wait(0.05)

    def _look(self, kube: KubeClient) -> None:
        pods = kube.list_pods(self.namespace)
        for pod in pods:
            if kubernetes.CERTIFICATION_LABEL not in (pod["metadata"].get("labels") or {}):
                continue
            name, spec = pod["metadata"]["name"], pod["spec"]
            seen = self.seen.get(name)
            if seen is None:  # one node per re-certification run: its affinity names it
                terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                (pinned,) = terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
                pod_logs.seed(self.cluster, kube, self.namespace, name, self.logs[pinned])
                seen = self.seen[name] = SeenPod(name, pinned)
            seen.node_name = spec.get("nodeName") or seen.node_name
            phase = pod.get("status", {}).get("phase", "")
            if not seen.phases or seen.phases[-1][1] != phase:
                seen.phases.append((time.time(), phase))
                if phase == "Running" and seen.node_name:
                    seen.node_cordoned_while_running = nodes.unschedulable(kube.get_node(seen.node_name))

    def on(self, node: str) -> list[SeenPod]:
        return [p for p in self.seen.values() if p.node_name == node]


@pytest.fixture
def faulted(sim_cluster: Any, kube_client: KubeClient) -> Iterator[tuple[str, str]]:
    """(node that passes, node whose pod prints an NCCL failure); restored afterwards."""
    passing, failing = sim_cluster.node_names[1], sim_cluster.node_names[2]
    try:
        yield passing, failing
    finally:
        for name in (passing, failing):
            restore(kube_client, name)


def test_recertification_runs_in_a_pod_bound_to_the_node_before_it_is_uncordoned(
    sim_cluster: Any, kube_client: KubeClient, sim_namespace: str, faulted: tuple[str, str], tmp_path: Path
) -> None:
    passing, failing = faulted
    policy = policy_file(
        tmp_path,
        {
            "breaker": {"maxQuarantinedPercent": 50},
            "remediation": {"provider": {"kind": "sim", "timeoutSeconds": 120}},
            "certification": {
                "categories": ["nccl-loopback"],
                "image": IMAGE,
                "namespace": sim_namespace,
                "thresholds": {"busBandwidthGBps": "value >= 300.0"},  # the seeded H100 table: 338.82 GB/s
                "runTimeoutSeconds": 60,
            },
            "monitors": {
                "kernelLogs": [{"node": n, "path": str(sim_cluster.kernel_log(n))} for n in (passing, failing)],
                "startAtEnd": True,
            },
        },
    )
    store_url = f"sqlite:///{tmp_path / 'events.db'}"
    enable = ("--enable", "quarantine,drain,remediation,recertify")
    sentinel = SentinelProcess(tmp_path, policy, store_url, "--kubeconfig", str(sim_cluster.kubeconfig), *enable)
    logs = {
        passing: sample("01-allreduce-h100-2node-gcp-a3mega.log"),
        failing: sample("08-allreduce-h100-2node-init-failure-WARN.log"),
    }
    with WorkloadContainers(sim_cluster.cluster, sim_cluster.kubeconfig, sim_namespace, logs) as containers:
        sentinel.start()
        store = open_store(store_url)
        try:
            for node in (passing, failing):
                subprocess.run(
                    [sys.executable, "-m", "dsx", "sim", "inject", "--name", sim_cluster.name, "--node", node,
                     "--fault", "xid79"],
                    check=True, capture_output=True,
                )  # fmt: skip

            def settled() -> bool:
                assert not containers.errors, containers.errors
                if not nodes.unschedulable(kube_client.get_node(passing)):
                    assert containers.on(passing), f"{passing} uncordoned before any certification pod ran on it"
                states = {n: store.node_state(n).state for n in (passing, failing)}
                return states == {passing: NodeState.HEALTHY, failing: NodeState.FAILED}

            wait_for(settled, 300, "re-certification of both nodes on the nodes themselves", sentinel)
        finally:
            sentinel.stop()

    history = store.node_history(passing)
    for node in (passing, failing):  # the timeline, for whoever reads the test's output
        print(f"\n{node}: " + " → ".join(f"{m.to_state.value}@{m.at.isoformat()}" for m in store.node_history(node)))
    store_requests = {r.node_name: r for r in store.validation_requests()}
    store.close()
    for seen in containers.seen.values():
        print(f"pod {seen.name}: pinned to {seen.pinned_to}, nodeName {seen.node_name}, phases {seen.phases}")

    # the passing node: one pod, bound to it, ran while it was cordoned, finished before the release
    (pod,) = containers.on(passing)
    assert pod.pinned_to == passing and pod.node_cordoned_while_running is True
    assert [phase for _, phase in pod.phases][-1] == "Succeeded"
    released = history[-1]
    assert [m.to_state.value for m in history] == [
        "quarantined", "draining", "drained", "remediating", "recertifying", "healthy",
    ]  # fmt: skip
    assert released.at.timestamp() >= pod.phases[-1][0] - 1.0  # 1 s: the store's clock and ours, same host
    assert store_requests[passing].status is ValidationStatus.PASSED
    node = kube_client.get_node(passing)
    assert not nodes.unschedulable(node)
    assert not [t for t in nodes.taints(node) if t["key"].startswith("sentinel.dsx.run/")]

    # the failing node: its own pod printed an NCCL failure; it stays cordoned with the reason
    (bad,) = containers.on(failing)
    assert bad.pinned_to == failing
    kept = kube_client.get_node(failing)
    assert nodes.unschedulable(kept)
    assert nodes.labels_of(kept)["sentinel.dsx.run/recertification-failed"] == "true"
    reason = nodes.annotations_of(kept)["sentinel.dsx.run/reason"]
    assert reason.startswith("re-certification failed: nccl-loopback:"), reason
    assert store_requests[failing].status is ValidationStatus.FAILED

    # everything the certification created is gone
    def left() -> list[str]:
        return [
            f"{kind}/{o['metadata']['name']}"
            for api_version, kind in (
                ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
                ("trainer.kubeflow.org/v1alpha1", "TrainingRuntime"),
                ("batch/v1", "Job"),
                ("v1", "Service"),
            )
            for o in kube_client.list(api_version, kind, sim_namespace)
        ]

    kube_client.wait_for(lambda: {"left": left()}, lambda d: d["left"] == [], what="certification objects deleted")
