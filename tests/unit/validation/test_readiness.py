"""Area of concern: readiness holds each recipe constraint against snapshot facts, names the
nodes that break it, and reports an unreadable or unknown fact as skipped — never as passed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from dsx.model import constraints, recipe, snapshot
from dsx.validation import facts, readiness, results


def verdict(expression: str, snap: snapshot.Snapshot) -> results.CheckResult:
    return readiness.check_constraint(constraints.parse_constraint(expression, source="t"), snap)


@pytest.mark.parametrize(
    ("expression", "status", "message"),
    [
        ("K8s.server.version >= 1.30", "passed", "got v1.33.5-eks-3025e55"),
        ("K8s.server.version >= 1.34", "failed", "got v1.33.5-eks-3025e55"),
        ("K8s.server.provider == eks", "passed", "got eks"),
        ("OS.release.version == 24.04", "passed", "got 24.04.3 on 1 node"),
        ("OS.release.ID == ubuntu", "passed", "got ubuntu on 1 node"),
        ("OS.kernel.version >= 6.8", "passed", "got 6.8.0-1028-aws on 1 node"),
        ("GPU.driver.version >= 580", "passed", "580.95.05 on 1 node"),
        ("GPU.driver.version >= 590", "failed", "580.95.05 on 1 node"),
        ("GPU.cuda.version >= 12.8", "passed", "13.0"),
        ("GPU.node.count >= 1", "passed", "got 1"),
        ("K8s.kubelet.version >= 1.33", "passed", "on 2 nodes"),
    ],
)
def test_cluster_snapshot_facts(
    recorded_snapshot: snapshot.Snapshot, expression: str, status: str, message: str
) -> None:
    result = verdict(expression, recorded_snapshot)
    assert (result.status.value, result.phase) == (status, results.Phase.READINESS)
    assert message in result.message
    assert result.name == f"readiness/{expression.split()[0]}"


@pytest.mark.parametrize(
    "expression",
    ["OS.sysctl.vm.max_map_count >= 262144", "OS.kmod.nvidia_peermem == true", "SystemD.containerd.active == true"],
)
def test_host_facts_without_node_snapshot_are_skipped_with_reason(
    recorded_snapshot: snapshot.Snapshot, expression: str
) -> None:
    result = verdict(expression, recorded_snapshot)
    assert result.status is results.Status.SKIPPED
    assert "no node snapshot for ip-10-0-12-34.ec2.internal" in result.message


@pytest.mark.parametrize(
    ("expression", "status"),
    [
        ("OS.sysctl.vm.max_map_count >= 262144", "passed"),
        ("OS.sysctl./proc/sys/vm/max_map_count >= 2000000", "failed"),
        ("OS.kmod.nvidia_peermem == true", "passed"),
        ("OS.kmod.nv_peer_mem == true", "failed"),
        ("SystemD.containerd.active == true", "passed"),
        ("SystemD.kubelet.service.enabled == true", "passed"),
        ("OS.release.VERSION_ID == 24.04", "passed"),
        ("OS.sysctl./proc/sys/kernel/osrelease >= 6.8", "passed"),
        ("GPU.smi.driver == 580.95.05", "passed"),
        ("GPU.gpu.count == 8", "passed"),
    ],
)
def test_host_facts_from_merged_snapshot(merged_snapshot: snapshot.Snapshot, expression: str, status: str) -> None:
    assert verdict(expression, merged_snapshot).status.value == status


def test_unreadable_host_fact_is_skipped_with_the_hosts_reason(merged_snapshot: snapshot.Snapshot) -> None:
    result = verdict("OS.sysctl.net.bridge.bridge-nf-call-iptables == 1", merged_snapshot)
    assert result.status is results.Status.SKIPPED
    assert "/proc/sys/net/bridge/bridge-nf-call-iptables: no such file" in result.message
    assert result.evidence["missing"] == {
        "ip-10-0-12-34.ec2.internal": "sysctl net.bridge.bridge-nf-call-iptables: "
        "/proc/sys/net/bridge/bridge-nf-call-iptables: no such file"
    }


def test_unknown_fact_is_skipped(recorded_snapshot: snapshot.Snapshot) -> None:
    result = verdict("K8s.etcd.version >= 3.5", recorded_snapshot)
    assert result.status is results.Status.SKIPPED
    assert "dsx does not measure K8s.etcd.version" in result.message


def test_cluster_fact_on_node_only_snapshot_is_skipped(merged_snapshot: snapshot.Snapshot) -> None:
    node_only = replace(merged_snapshot, cluster=None)
    result = verdict("K8s.server.version >= 1.30", node_only)
    assert result.status is results.Status.SKIPPED
    assert "no cluster facts" in result.message


def test_gpu_fact_without_gpu_nodes_is_skipped() -> None:
    cpu = snapshot.Node(name="cpu-0", labels={"kubernetes.io/os": "linux"}, node_info={"osImage": "Ubuntu 22.04 LTS"})
    snap = snapshot.Snapshot(nodes=(cpu,), cluster=snapshot.ClusterFacts(server_version="v1.34.0"))
    assert verdict("GPU.driver.version >= 580", snap).status is results.Status.SKIPPED
    assert verdict("OS.release.version == 22.04", snap).status is results.Status.PASSED


def test_failure_names_the_odd_node(recorded_snapshot: snapshot.Snapshot) -> None:
    gpu = recorded_snapshot.gpu_nodes[0]
    labels = {**gpu.labels, "nvidia.com/cuda.driver-version.major": "570", "nvidia.com/cuda.driver-version.minor": "1"}
    odd = replace(gpu, name="gpu-odd", labels=labels)
    snap = replace(recorded_snapshot, nodes=(*recorded_snapshot.nodes, odd))
    result = verdict("GPU.driver.version >= 580", snap)
    assert result.status is results.Status.FAILED
    assert "570.1.05 on gpu-odd (1 of 2 nodes)" in result.message


def test_failures_beat_missing_values(recorded_snapshot: snapshot.Snapshot) -> None:
    gpu = recorded_snapshot.gpu_nodes[0]
    bare = replace(gpu, name="gpu-bare", node_info={})
    snap = replace(recorded_snapshot, nodes=(*recorded_snapshot.nodes, bare))
    assert verdict("K8s.kubelet.version >= 1.40", snap).status is results.Status.FAILED
    assert verdict("K8s.kubelet.version >= 1.30", snap).status is results.Status.SKIPPED


def test_check_runs_every_recipe_constraint(
    recorded_snapshot: snapshot.Snapshot, recipe_factory: Callable[..., recipe.Recipe]
) -> None:
    target = recipe_factory(constraints=["K8s.server.version >= 1.30", "GPU.driver.version >= 580"])
    assert [r.name for r in readiness.check(target, recorded_snapshot)] == [
        "readiness/K8s.server.version",
        "readiness/GPU.driver.version",
    ]


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("Ubuntu 24.04.3 LTS", ("ubuntu", "24.04.3")),
        ("Red Hat Enterprise Linux 9.4 (Plow)", ("rhel", "9.4")),
        ("Amazon Linux 2023.6.20250115", ("amzn", "2023.6.20250115")),
        ("Container-Optimized OS from Google", ("cos", "")),
        ("Red Hat Enterprise Linux CoreOS 418.94", None),
        ("Talos (v1.9.0)", None),
    ],
)
def test_os_from_image(image: str, expected: tuple[str, str] | None) -> None:
    assert facts.os_from_image(image) == expected
