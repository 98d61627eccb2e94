"""Area of concern: conformance finds GPU nodes that do not advertise their GPUs, inconsistent
pools, GPU DaemonSets missing from GPU nodes or not tolerating their taints, and dsx service
accounts bound to cluster-admin — and says what it could not check without a live cluster."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from dsx.model import recipe
from dsx.testing.cluster_reader import FakeClusterReader
from dsx.validation import cluster_snapshot, conformance, reading, results


def run(target: recipe.Recipe, reader: FakeClusterReader, *, live: bool = True) -> dict[str, results.CheckResult]:
    snap = cluster_snapshot.collect(reader, generator="dsx/test")
    return {r.name: r for r in conformance.check(target, snap, reading.LiveObjects(reader) if live else None)}


def node_named(reader: FakeClusterReader, name: str) -> dict[str, Any]:
    return next(o for o in reader.objects if o["kind"] == "Node" and o["metadata"]["name"] == name)


def test_healthy_cluster_conforms(cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader) -> None:
    found = run(cluster_recipe, healthy_cluster)
    assert {n: r.status.value for n, r in found.items()} == {
        "conformance/gpu-advertised": "passed",
        "conformance/gpu-pool-consistency": "passed",
        "conformance/gpu-daemonsets-cover-gpu-nodes": "passed",
        "conformance/gpu-taints-tolerated": "passed",
        "conformance/dsx-not-cluster-admin": "passed",
    }


def test_node_advertising_fewer_gpus_than_it_has(
    cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader
) -> None:
    node_named(healthy_cluster, "gpu-1")["status"]["allocatable"]["nvidia.com/gpu"] = "7"
    node_named(healthy_cluster, "gpu-0")["status"]["allocatable"].pop("nvidia.com/gpu")
    check = run(cluster_recipe, healthy_cluster)["conformance/gpu-advertised"]
    assert check.status is results.Status.FAILED
    assert check.message == "gpu-0: allocatable nvidia.com/gpu is 0 or absent; gpu-1: advertises 7 of 8 GPUs"


def test_recipe_for_gpus_on_a_cluster_without_any(
    cluster_recipe: recipe.Recipe, recipe_factory: Callable[..., recipe.Recipe]
) -> None:
    reader = FakeClusterReader().add({"kind": "Node", "metadata": {"name": "cpu-0", "labels": {"a": "b"}}})
    assert run(cluster_recipe, reader)["conformance/gpu-advertised"].status is results.Status.FAILED
    generic = recipe_factory(criteria={"service": "eks"})
    assert run(generic, reader)["conformance/gpu-advertised"].status is results.Status.SKIPPED


def test_driver_drift_inside_a_pool_names_the_nodes(
    cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader, objects: types.SimpleNamespace
) -> None:
    healthy_cluster.add(objects.gpu_node("gpu-2", **{"nvidia.com/cuda.driver.minor": "82"}))
    check = run(cluster_recipe, healthy_cluster)["conformance/gpu-pool-consistency"]
    assert check.status is results.Status.FAILED
    assert check.message == (
        "pool node.kubernetes.io/instance-type=p5.48xlarge: driver differs: "
        "580.95.05 on gpu-0, gpu-1; 580.82.05 on gpu-2"
    )


def test_different_pools_may_differ(
    cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader, objects: types.SimpleNamespace
) -> None:
    healthy_cluster.add(
        objects.gpu_node(
            "gpu-9", **{"node.kubernetes.io/instance-type": "p4d.24xlarge", "nvidia.com/gpu.product": "NVIDIA-A100"}
        )
    )
    assert run(cluster_recipe, healthy_cluster)["conformance/gpu-pool-consistency"].status is results.Status.PASSED


def test_untainted_node_in_a_tainted_pool(cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader) -> None:
    node_named(healthy_cluster, "gpu-1")["spec"]["taints"] = []
    check = run(cluster_recipe, healthy_cluster)["conformance/gpu-pool-consistency"]
    assert check.status is results.Status.FAILED
    assert "taints differs" in check.message and "(no taints) on gpu-1" in check.message


def test_device_plugin_missing_from_a_node(
    cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader, objects: types.SimpleNamespace
) -> None:
    healthy_cluster.add(objects.gpu_node("gpu-2"))
    check = run(cluster_recipe, healthy_cluster)["conformance/gpu-daemonsets-cover-gpu-nodes"]
    assert check.status is results.Status.FAILED
    assert check.message == "DaemonSet gpu-operator/nvidia-device-plugin-daemonset has no ready pod on gpu-2"
    assert check.evidence["missing"] == {"gpu-operator/nvidia-device-plugin-daemonset": ["gpu-2"]}


def test_no_device_plugin_at_all(cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader) -> None:
    healthy_cluster.objects = [o for o in healthy_cluster.objects if o["kind"] != "DaemonSet"]
    check = run(cluster_recipe, healthy_cluster)["conformance/gpu-daemonsets-cover-gpu-nodes"]
    assert check.status is results.Status.FAILED and "no device-plugin DaemonSet" in check.message


def test_operator_daemonset_selecting_a_subset_is_held_to_that_subset(
    cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader, objects: types.SimpleNamespace
) -> None:
    node_named(healthy_cluster, "gpu-0")["metadata"]["labels"]["nvidia.com/mig.capable"] = "true"
    healthy_cluster.add(
        objects.daemon_set(
            "gpu-operator",
            "nvidia-mig-manager",
            "nvcr.io/nvidia/k8s-mig-manager:v0.12.0",
            1,
            node_selector={"nvidia.com/mig.capable": "true"},
        ),
        objects.pod("gpu-operator", "nvidia-mig-manager-a", node="gpu-0", owner=("DaemonSet", "nvidia-mig-manager")),
    )
    assert run(cluster_recipe, healthy_cluster)["conformance/gpu-daemonsets-cover-gpu-nodes"].status.value == "passed"


def test_daemonset_that_does_not_tolerate_the_gpu_taint(
    cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader, objects: types.SimpleNamespace
) -> None:
    healthy_cluster.add(
        objects.daemon_set(
            "gpu-operator", "nvidia-dcgm-exporter", "nvcr.io/nvidia/dcgm-exporter:4.2", 0, tolerate_gpu=False
        )
    )
    found = run(cluster_recipe, healthy_cluster)
    taints = found["conformance/gpu-taints-tolerated"]
    assert taints.status is results.Status.FAILED
    assert taints.message.startswith(
        "DaemonSet gpu-operator/nvidia-dcgm-exporter does not tolerate nvidia.com/gpu=present:NoSchedule on gpu-0"
    )
    assert found["conformance/gpu-daemonsets-cover-gpu-nodes"].status is results.Status.FAILED


def _binding(kind: str, name: str, role: str, namespace: str, account: str) -> dict[str, Any]:
    meta = {"name": name} if kind == "ClusterRoleBinding" else {"name": name, "namespace": namespace}
    return {
        "kind": kind,
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }


def test_dsx_service_account_with_cluster_admin_fails(
    cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader
) -> None:
    healthy_cluster.add(
        _binding("ClusterRoleBinding", "dsx-validator", "cluster-admin", "dsx-system", "dsx-validator"),
        _binding("ClusterRoleBinding", "kube-admin", "cluster-admin", "kube-system", "admin"),
        _binding("ClusterRoleBinding", "dsx-reader", "dsx-snapshot-reader", "dsx-system", "dsx-snapshot"),
    )
    check = run(cluster_recipe, healthy_cluster)["conformance/dsx-not-cluster-admin"]
    assert check.status is results.Status.FAILED
    assert check.message == "ClusterRoleBinding dsx-validator gives dsx-system/dsx-validator ClusterRole cluster-admin"


def test_wildcard_cluster_role_counts_as_admin(
    cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader
) -> None:
    healthy_cluster.add(
        {
            "kind": "ClusterRole",
            "metadata": {"name": "everything"},
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
        },
        {
            "kind": "ClusterRole",
            "metadata": {"name": "reader"},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}],
        },
        _binding("RoleBinding", "dsx-all", "everything", "dsx-system", "dsx-agent"),
        _binding("RoleBinding", "dsx-read", "reader", "dsx-system", "dsx-reader"),
    )
    check = run(cluster_recipe, healthy_cluster)["conformance/dsx-not-cluster-admin"]
    assert check.status is results.Status.FAILED
    assert check.message == "RoleBinding dsx-all gives dsx-system/dsx-agent ClusterRole everything"


def test_forbidden_rbac_read_is_skipped(cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader) -> None:
    healthy_cluster.forbidden_kinds.add("ClusterRole")
    check = run(cluster_recipe, healthy_cluster)["conformance/dsx-not-cluster-admin"]
    assert check.status is results.Status.SKIPPED and "forbidden" in check.message


def test_snapshot_file_alone(cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader) -> None:
    found = run(cluster_recipe, healthy_cluster, live=False)
    assert found["conformance/gpu-daemonsets-cover-gpu-nodes"].status is results.Status.PASSED
    assert "snapshot counters" in found["conformance/gpu-daemonsets-cover-gpu-nodes"].message
    assert found["conformance/gpu-taints-tolerated"].status is results.Status.SKIPPED
    assert found["conformance/dsx-not-cluster-admin"].status is results.Status.SKIPPED
    for obj in healthy_cluster.objects:
        if obj["kind"] == "DaemonSet":
            obj["status"]["numberReady"] = 1
    assert (
        run(cluster_recipe, healthy_cluster, live=False)["conformance/gpu-daemonsets-cover-gpu-nodes"].status.value
        == "failed"
    )
