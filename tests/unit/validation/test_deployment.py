"""Area of concern: the deployment phase finds each component at its pinned version in its
namespace, holds its health asserts on live objects, and names the component or pod that fails."""

from __future__ import annotations

import types
from collections.abc import Callable

from dsx.model import recipe, snapshot
from dsx.testing.cluster_reader import FakeClusterReader
from dsx.validation import cluster_snapshot, deployment, reading, results

from .conftest import deployment_object, make_recipe, pod


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
        "deployment/cert-manager/Deployment/cert-manager/references": "passed",
        "deployment/gpu-operator/installed": "passed",
        "deployment/gpu-operator/Deployment/gpu-operator": "passed",
        "deployment/gpu-operator/Deployment/gpu-operator/references": "passed",
        "deployment/gpu-operator/DaemonSet/nvidia-device-plugin-daemonset": "passed",
        "deployment/gpu-operator/DaemonSet/nvidia-device-plugin-daemonset/references": "passed",
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


# ---- what readiness alone cannot show: a held Lease, the Secrets a new pod needs -----------------

CAPTURED_AT = "2026-12-03T10:00:30Z"
SENTINEL = {
    "name": "dsx-sentinel",
    "type": "Manifest",
    "namespace": "dsx-system",
    "version": "0.1.0",
    "manifests": {"deployment.yaml": "kind: Deployment\n"},
    "healthCheckAsserts": [{"kind": "Deployment", "name": "dsx-sentinel"}, {"kind": "Lease", "name": "dsx-sentinel"}],
}


def sentinel_cluster(
    lease_spec: dict[str, object] | None, secrets: tuple[str, ...], *, optional_tokens: bool = False
) -> FakeClusterReader:
    """A sentinel Deployment (ready, as kwok would mark it) whose pods need a store URL and tokens Secret."""
    workload = deployment_object("dsx-system", "dsx-sentinel", "ghcr.io/dsx/dsx:0.1.0")
    template = workload["spec"]["template"]["spec"]
    template["containers"][0]["env"] = [
        {"name": "DSX_STORE_URL", "valueFrom": {"secretKeyRef": {"name": "dsx-sentinel-store", "key": "url"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    tokens: dict[str, object] = {"secretName": "dsx-sentinel-tokens"}
    if optional_tokens:
        tokens["optional"] = True
    template["volumes"] = [
        {"name": "tokens", "secret": tokens},
        {"name": "policy", "configMap": {"name": "dsx-sentinel-policy"}},
    ]
    reader = FakeClusterReader(version="v1.34.1").add(
        workload, pod("dsx-system", "dsx-sentinel-abc", labels={"app": "dsx-sentinel"})
    )
    reader.add({"kind": "ConfigMap", "metadata": {"name": "dsx-sentinel-policy", "namespace": "dsx-system"}})
    for name in secrets:
        reader.add({"kind": "Secret", "metadata": {"name": name, "namespace": "dsx-system"}})
    if lease_spec is not None:
        reader.add(
            {"kind": "Lease", "metadata": {"name": "dsx-sentinel", "namespace": "dsx-system"}, "spec": lease_spec}
        )
    return reader


def sentinel_recipe() -> recipe.Recipe:
    return make_recipe(components=[SENTINEL])


def sentinel_checks(reader: FakeClusterReader, *, captured_at: str = CAPTURED_AT) -> dict[str, results.CheckResult]:
    snap = cluster_snapshot.collect(reader, generator="dsx/test", captured_at=captured_at)
    return {r.name: r for r in deployment.check(sentinel_recipe(), snap, reading.LiveObjects(reader))}


HELD = {"holderIdentity": "dsx-sentinel-abc", "leaseDurationSeconds": 15, "renewTime": "2026-12-03T10:00:28.000000Z"}
LEASE = "deployment/dsx-sentinel/Lease/dsx-sentinel"
REFERENCES = "deployment/dsx-sentinel/Deployment/dsx-sentinel/references"
BOTH_SECRETS = ("dsx-sentinel-store", "dsx-sentinel-tokens")


def test_a_renewed_lease_and_its_secrets_pass() -> None:
    found = sentinel_checks(sentinel_cluster(HELD, BOTH_SECRETS))
    assert found[LEASE].status is results.Status.PASSED
    assert found[LEASE].message == "Lease dsx-system/dsx-sentinel: held by dsx-sentinel-abc, renewed 2 s ago"
    assert found[REFERENCES].status is results.Status.PASSED
    assert found["deployment/dsx-sentinel/Deployment/dsx-sentinel"].status is results.Status.PASSED


def test_ready_pods_without_a_lease_are_not_a_running_sentinel() -> None:
    found = sentinel_checks(sentinel_cluster(None, BOTH_SECRETS))
    assert found["deployment/dsx-sentinel/Deployment/dsx-sentinel"].status is results.Status.PASSED  # kwok's view
    assert found[LEASE].status is results.Status.FAILED
    assert found[LEASE].message == "Lease dsx-system/dsx-sentinel not found"


def test_a_released_lease_fails() -> None:
    released = {**HELD, "holderIdentity": ""}
    check = sentinel_checks(sentinel_cluster(released, BOTH_SECRETS))[LEASE]
    assert check.status is results.Status.FAILED and "not held" in check.message


def test_a_lease_unrenewed_past_its_duration_and_the_grace_fails() -> None:
    # renewed at 10:00:28; lease 15 s + 15 s grace: fresh at 10:00:58, stale at 10:00:59
    assert (
        sentinel_checks(sentinel_cluster(HELD, BOTH_SECRETS), captured_at="2026-12-03T10:00:58Z")[LEASE].status
        is results.Status.PASSED
    )
    stale = sentinel_checks(sentinel_cluster(HELD, BOTH_SECRETS), captured_at="2026-12-03T10:00:59Z")[LEASE]
    assert stale.status is results.Status.FAILED
    assert stale.message == (
        "Lease dsx-system/dsx-sentinel: held by dsx-sentinel-abc but last renewed 31 s ago (lease 15 s):"
        " its holder stopped"
    )


def test_a_lease_is_not_judged_without_a_capture_time() -> None:
    check = sentinel_checks(sentinel_cluster(HELD, BOTH_SECRETS), captured_at="")[LEASE]
    assert check.status is results.Status.SKIPPED and "no capture time" in check.message


def test_missing_secrets_are_named_and_fail() -> None:
    check = sentinel_checks(sentinel_cluster(HELD, ()))[REFERENCES]
    assert check.status is results.Status.FAILED
    assert check.evidence["missing"] == ["Secret dsx-sentinel-store", "Secret dsx-sentinel-tokens"]
    assert "not found in dsx-system: a new pod will not start" in check.message


def test_an_optional_secret_may_be_absent() -> None:
    check = sentinel_checks(sentinel_cluster(HELD, ("dsx-sentinel-store",), optional_tokens=True))[REFERENCES]
    assert check.status is results.Status.PASSED


def test_a_lease_needs_a_live_cluster() -> None:
    found = run(sentinel_recipe(), sentinel_cluster(HELD, BOTH_SECRETS), live=False)
    assert found[LEASE].status is results.Status.SKIPPED and "needs a live cluster" in found[LEASE].message
    assert REFERENCES not in found
