"""Area of concern: a cluster snapshot states what the API server says — nodes, GPU facts from
labels, provider, Helm releases, workloads, ClusterPolicy — and records what it could not read."""

from __future__ import annotations

from typing import Any

from dsx import serialization
from dsx.model import snapshot
from dsx.testing.cluster_reader import FakeClusterReader
from dsx.validation import cluster_snapshot


def deployment(namespace: str, name: str, image: str, replicas: int = 1, ready: int = 1) -> dict[str, Any]:
    return {
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "main", "image": image}]}}},
        "status": {"readyReplicas": ready},
    }


def test_nodes_and_gpu_facts(recorded_cluster: FakeClusterReader) -> None:
    snap = cluster_snapshot.collect(recorded_cluster, generator="dsx/test")
    assert [n.name for n in snap.nodes] == ["ip-10-0-1-10.ec2.internal", "ip-10-0-12-34.ec2.internal"]
    assert [n.name for n in snap.gpu_nodes] == ["ip-10-0-12-34.ec2.internal"]
    gpu_node = snap.gpu_nodes[0]
    assert gpu_node.gpu == snapshot.GpuLabels(
        product="NVIDIA-H100-80GB-HBM3",
        count=8,
        memory_mib=81559,
        driver_version="580.95.05",
        cuda_version="13.0",
        family="hopper",
    )
    assert gpu_node.taints == (snapshot.Taint("nvidia.com/gpu", "NoSchedule", "present"),)
    assert gpu_node.node_info["osImage"] == "Ubuntu 24.04.3 LTS"
    assert "bootID" not in gpu_node.node_info
    assert gpu_node.ready is True
    assert gpu_node.allocatable["nvidia.com/gpu"] == "8"


def test_cluster_facts(recorded_cluster: FakeClusterReader) -> None:
    recorded_cluster.add(deployment("gpu-operator", "gpu-operator", "nvcr.io/nvidia/gpu-operator:v25.10.1"))
    snap = cluster_snapshot.collect(recorded_cluster, generator="dsx/test", captured_at="2026-02-02T15:00:00Z")
    assert snap.cluster is not None
    assert snap.cluster.server_version == "v1.33.5-eks-3025e55"
    assert snap.cluster.provider == "eks"
    assert [r.name for r in snap.cluster.helm_releases] == ["cert-manager", "gpu-operator"]
    assert [u.fact for u in snap.cluster.unreadable] == ["helm release Secret default/sh.helm.release.v1.broken.v1"]
    assert snap.cluster.workloads == (
        snapshot.Workload(
            "Deployment", "gpu-operator", "gpu-operator", ("nvcr.io/nvidia/gpu-operator:v25.10.1",), 1, 1
        ),
    )
    assert snap.cluster.cluster_policy is None
    assert snap.captured_at == "2026-02-02T15:00:00Z"


def test_cluster_policy_is_recorded_when_present(recorded_cluster: FakeClusterReader) -> None:
    recorded_cluster.add(
        {
            "kind": "ClusterPolicy",
            "metadata": {"name": "cluster-policy"},
            "spec": {"driver": {"enabled": True, "version": "580.95.05"}},
            "status": {"state": "ready"},
        }
    )
    snap = cluster_snapshot.collect(recorded_cluster, generator="dsx/test")
    assert snap.cluster is not None
    assert snap.cluster.cluster_policy == {
        "name": "cluster-policy",
        "state": "ready",
        "spec": {"driver": {"enabled": True, "version": "580.95.05"}},
    }


def test_missing_clusterpolicy_kind_is_not_an_error(recorded_cluster: FakeClusterReader) -> None:
    recorded_cluster.missing_kinds.add("ClusterPolicy")
    snap = cluster_snapshot.collect(recorded_cluster, generator="dsx/test")
    assert snap.cluster is not None and snap.cluster.cluster_policy is None


def test_forbidden_kind_is_recorded_not_fatal(recorded_cluster: FakeClusterReader) -> None:
    recorded_cluster.forbidden_kinds.add("Secret")
    snap = cluster_snapshot.collect(recorded_cluster, generator="dsx/test")
    assert snap.cluster is not None
    assert snap.cluster.helm_releases == ()
    assert [u.fact for u in snap.cluster.unreadable] == ["Secret objects"]
    assert "forbidden" in snap.cluster.unreadable[0].reason
    assert len(snap.nodes) == 2


def test_snapshot_is_deterministic_and_round_trips(recorded_cluster: FakeClusterReader) -> None:
    first = serialization.dump_yaml(cluster_snapshot.collect(recorded_cluster, generator="dsx/test").to_dict())
    recorded_cluster.objects.reverse()
    second = serialization.dump_yaml(cluster_snapshot.collect(recorded_cluster, generator="dsx/test").to_dict())
    assert first == second
    parsed = snapshot.Snapshot.from_dict(serialization.parse_yaml(first, source="s"), source="s")
    assert serialization.dump_yaml(parsed.to_dict()) == first


def test_provider_falls_back_to_server_version_hint() -> None:
    node = snapshot.Node(name="n", labels={"a": "b"})
    assert cluster_snapshot.provider_of((node,), "v1.33.5-eks-3025e55") == "eks"
    assert cluster_snapshot.provider_of((node,), "v1.32.4-gke.1415000") == "gke"
    assert cluster_snapshot.provider_of((node,), "v1.34.1") == ""


def test_provider_is_the_majority_of_node_provider_ids() -> None:
    nodes = tuple(snapshot.Node(name=str(i), provider_id=p) for i, p in enumerate(["gce://a", "aws://b", "aws://c"]))
    assert cluster_snapshot.provider_of(nodes, "v1.34.1") == "eks"


def test_daemonset_counters_and_images() -> None:
    ds = {
        "kind": "DaemonSet",
        "metadata": {"name": "nvidia-device-plugin-daemonset", "namespace": "gpu-operator"},
        "spec": {
            "template": {
                "spec": {
                    "initContainers": [{"name": "toolkit-validation", "image": "nvcr.io/nvidia/gpu-operator:v25.10.1"}],
                    "containers": [{"name": "plugin", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.18.0"}],
                }
            }
        },
        "status": {"desiredNumberScheduled": 4, "numberReady": 3},
    }
    workload = cluster_snapshot.workload_from_object(ds, "DaemonSet")
    assert workload.images == ("nvcr.io/nvidia/gpu-operator:v25.10.1", "nvcr.io/nvidia/k8s-device-plugin:v0.18.0")
    assert (workload.desired, workload.ready) == (4, 3)
