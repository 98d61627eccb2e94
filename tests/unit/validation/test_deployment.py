"""Area of concern: the deployment phase finds each component at its pinned version in its
namespace, holds its health asserts on live objects, and names the component or pod that fails."""

from __future__ import annotations

import types
from collections.abc import Callable

from dsx.model import recipe, snapshot
from dsx.testing.cluster_reader import FakeClusterReader
from dsx.validation import cluster_snapshot, deployment, reading, results


def run(target: recipe.Recipe, reader: FakeClusterReader, *, live: bool = True) -> dict[str, results.CheckResult]:
    snap = cluster_snapshot.collect(reader, generator="dsx/test")
    found = deployment.check(target, snap, reading.LiveObjects(reader) if live else None)
    return {r.name: r for r in found}


def statuses(found: dict[str, results.CheckResult]) -> dict[str, str]:
    return {name: r.status.value for name, r in found.items()}


def without(reader: FakeClusterReader, kind: str, name_part: str) -> FakeClusterReader:
    reader.objects = [o for o in reader.objects if not (o["kind"] == kind and name_part in o["metadata"]["name"])]
    return reader


def test_healthy_cluster_passes_every_check(cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader) -> None:
    found = run(cluster_recipe, healthy_cluster)
    assert statuses(found) == {
        "deployment/cert-manager/installed": "passed",
        "deployment/cert-manager/Deployment/cert-manager": "passed",
        "deployment/gpu-operator/installed": "passed",
        "deployment/gpu-operator/Deployment/gpu-operator": "passed",
        "deployment/gpu-operator/DaemonSet/nvidia-device-plugin-daemonset": "passed",
        "deployment/dynamo-crds/CustomResourceDefinition/dynamocomponentdeployments.nvidia.com": "passed",
        "deployment/namespace/cert-manager/pods": "passed",
        "deployment/namespace/dynamo-system/pods": "skipped",
        "deployment/namespace/gpu-operator/pods": "passed",
    }
    installed = found["deployment/gpu-operator/installed"]
    assert installed.evidence == {
        "release": "gpu-operator/gpu-operator",
        "chart": "gpu-operator",
        "version": "v25.10.1",
        "revision": 1,
        "status": "deployed",
    }


def test_absent_components_are_each_named(cluster_recipe: recipe.Recipe) -> None:
    empty = FakeClusterReader()
    found = run(cluster_recipe, empty)
    for name in ("cert-manager", "gpu-operator"):
        check = found[f"deployment/{name}/installed"]
        assert check.status is results.Status.FAILED
        assert check.message.startswith(f"{name}: not installed: no Helm release {name} in namespace {name}")
    crd = found["deployment/dynamo-crds/CustomResourceDefinition/dynamocomponentdeployments.nvidia.com"]
    assert crd.status is results.Status.FAILED and "not found" in crd.message


def test_wrong_chart_version_names_both_versions(
    cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader, objects: types.SimpleNamespace
) -> None:
    healthy_cluster.add(objects.release("gpu-operator", "gpu-operator", "v25.3.4", revision=2))
    check = run(cluster_recipe, healthy_cluster)["deployment/gpu-operator/installed"]
    assert check.status is results.Status.FAILED
    assert "chart gpu-operator v25.3.4" in check.message and "recipe pins v25.10.1" in check.message


def test_failed_release_status_fails(
    cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader, objects: types.SimpleNamespace
) -> None:
    healthy_cluster.add(objects.release("cert-manager", "cert-manager", "v1.17.2", revision=2, status="failed"))
    check = run(cluster_recipe, healthy_cluster)["deployment/cert-manager/installed"]
    assert check.status is results.Status.FAILED and "has status failed" in check.message


def test_release_in_another_namespace(
    cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader, objects: types.SimpleNamespace
) -> None:
    without(healthy_cluster, "Secret", "cert-manager")
    healthy_cluster.add(objects.release("cert-manager", "kube-system", "v1.17.2"))
    check = run(cluster_recipe, healthy_cluster)["deployment/cert-manager/installed"]
    assert check.status is results.Status.FAILED
    assert "installed in another namespace (kube-system/cert-manager v1.17.2)" in check.message


def test_crashloop_in_running_pod_names_the_pod(
    cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader, objects: types.SimpleNamespace
) -> None:
    without(healthy_cluster, "Pod", "nvidia-device-plugin-daemonset-1")
    healthy_cluster.add(
        objects.pod(
            "gpu-operator",
            "nvidia-device-plugin-daemonset-1",
            node="gpu-1",
            owner=("DaemonSet", "nvidia-device-plugin-daemonset"),
            waiting="CrashLoopBackOff",
            labels={"app": "nvidia-device-plugin-daemonset"},
        )
    )
    found = run(cluster_recipe, healthy_cluster)
    pods = found["deployment/namespace/gpu-operator/pods"]
    assert pods.status is results.Status.FAILED
    assert pods.message == "pod gpu-operator/nvidia-device-plugin-daemonset-1: container main CrashLoopBackOff"
    daemon = found["deployment/gpu-operator/DaemonSet/nvidia-device-plugin-daemonset"]
    assert daemon.status is results.Status.FAILED and "CrashLoopBackOff" in daemon.message
    assert found["deployment/gpu-operator/installed"].status is results.Status.PASSED


def test_job_pods_are_left_to_their_jobs(
    cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader, objects: types.SimpleNamespace
) -> None:
    healthy_cluster.add(objects.pod("cert-manager", "startupapicheck-x", owner=("Job", "x"), waiting="ErrImagePull"))
    assert (
        run(cluster_recipe, healthy_cluster)["deployment/namespace/cert-manager/pods"].status is results.Status.PASSED
    )


def test_image_tag_stands_in_for_a_release(
    recipe_factory: Callable[..., recipe.Recipe], objects: types.SimpleNamespace
) -> None:
    target = recipe_factory(
        components=[{"name": "kueue", "type": "Manifest", "namespace": "kueue-system", "version": "v0.13.4"}]
    )
    reader = FakeClusterReader().add(
        objects.deployment("kueue-system", "kueue-controller-manager", "registry.k8s.io/kueue/kueue:v0.13.4")
    )
    check = run(target, reader)["deployment/kueue/installed"]
    assert check.status is results.Status.PASSED
    assert check.evidence["image"] == "registry.k8s.io/kueue/kueue:v0.13.4"
    other = FakeClusterReader().add(
        objects.deployment("kueue-system", "kueue-controller-manager", "registry.k8s.io/kueue/kueue:v0.12.0")
    )
    check = run(target, other)["deployment/kueue/installed"]
    assert check.status is results.Status.FAILED
    assert check.evidence["images_in_namespace"] == ["registry.k8s.io/kueue/kueue:v0.12.0"]


def test_snapshot_file_uses_counters_and_skips_what_needs_live_objects(
    cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader
) -> None:
    found = run(cluster_recipe, healthy_cluster, live=False)
    assert found["deployment/gpu-operator/installed"].status is results.Status.PASSED
    daemon = found["deployment/gpu-operator/DaemonSet/nvidia-device-plugin-daemonset"]
    assert daemon.status is results.Status.PASSED
    assert daemon.evidence["source"] == "snapshot counters (pods not checked)"
    crd = found["deployment/dynamo-crds/CustomResourceDefinition/dynamocomponentdeployments.nvidia.com"]
    assert crd.status is results.Status.SKIPPED and "needs a live cluster" in crd.message
    assert found["deployment/namespace/gpu-operator/pods"].status is results.Status.SKIPPED


def test_counters_show_an_unready_daemonset_offline(
    cluster_recipe: recipe.Recipe, healthy_cluster: FakeClusterReader
) -> None:
    for obj in healthy_cluster.objects:
        if obj["kind"] == "DaemonSet":
            obj["status"]["numberReady"] = 1
    found = run(cluster_recipe, healthy_cluster, live=False)
    daemon = found["deployment/gpu-operator/DaemonSet/nvidia-device-plugin-daemonset"]
    assert daemon.status is results.Status.FAILED and "ready on 1 of 2 nodes" in daemon.message


def test_node_only_snapshot_skips_installation(cluster_recipe: recipe.Recipe) -> None:
    snap = snapshot.Snapshot(nodes=(snapshot.Node(name="n", host=snapshot.HostFacts()),))
    found = {r.name: r for r in deployment.check(cluster_recipe, snap, None)}
    assert found["deployment/gpu-operator/installed"].status is results.Status.SKIPPED


def test_versions_and_tags() -> None:
    assert deployment.same_version("v25.10.1", "25.10.1")
    assert not deployment.same_version("v25.10.1", "v25.10.2")
    assert deployment.image_tag("nvcr.io/nvidia/gpu-operator:v25.10.1") == "v25.10.1"
    assert deployment.image_tag("localhost:5000/kueue@sha256:abc") == ""
    assert deployment.image_tag("localhost:5000/kueue:v1@sha256:abc") == "v1"
    assert deployment.image_tag("busybox") == ""
