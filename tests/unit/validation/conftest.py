"""Fixtures for the validation unit tests: recorded API objects served by the in-memory reader."""

from __future__ import annotations

import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsx.files import documents
from dsx.host import snapshot as host_snapshot
from dsx.model import recipe, snapshot
from dsx.testing.cluster_reader import FakeClusterReader
from dsx.validation import cluster_snapshot, helm_storage

DATA = Path(__file__).resolve().parents[2] / "data" / "validation"


def load_items(relative: str) -> list[dict[str, Any]]:
    """The `items` of a recorded `kubectl get -o yaml` List."""
    doc = documents.load_mapping_file(DATA / relative)
    items: list[dict[str, Any]] = doc["items"]
    return items


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def recorded_items() -> Callable[[str], list[dict[str, Any]]]:
    return load_items


@pytest.fixture
def recorded_cluster() -> FakeClusterReader:
    """An EKS cluster with one H100 node, one CPU node and Helm release Secrets, as recorded."""
    reader = FakeClusterReader(version="v1.33.5-eks-3025e55")
    reader.add(*load_items("cluster/nodes.yaml"), *load_items("helm/release-secrets.yaml"))
    return reader


def make_recipe(
    *,
    constraints: list[str] | None = None,
    components: list[dict[str, Any]] | None = None,
    criteria: dict[str, Any] | None = None,
    certification: dict[str, Any] | None = None,
) -> recipe.Recipe:
    """A resolved recipe document with just the parts a test cares about."""
    refs = [
        {"type": "Helm", "values": {}, "dependencyRefs": [], "healthCheckAsserts": [], "manifests": {}, **c}
        for c in components or []
    ]
    doc: dict[str, Any] = {
        "apiVersion": "dsx.run/v1alpha1",
        "kind": "Recipe",
        "metadata": {
            "name": "test",
            "generator": "dsx/test",
            "criteria": criteria or {"service": "eks", "accelerator": "h100"},
            "overlays": ["base"],
            "unvalidatedCriteria": [],
        },
        "constraints": constraints or [],
        "componentRefs": refs,
        "deploymentOrder": [c["name"] for c in refs],
    }
    if certification is not None:
        doc["certification"] = certification
    return recipe.Recipe.from_dict(doc, source="recipe.yaml").with_digest()


RecipeFactory = Callable[..., recipe.Recipe]


@pytest.fixture
def recipe_factory() -> RecipeFactory:
    return make_recipe


@pytest.fixture
def recorded_snapshot(recorded_cluster: FakeClusterReader) -> snapshot.Snapshot:
    return cluster_snapshot.collect(recorded_cluster, generator="dsx/test", captured_at="2026-02-02T15:00:00Z")


@pytest.fixture
def merged_snapshot(recorded_snapshot: snapshot.Snapshot) -> snapshot.Snapshot:
    """The recorded cluster plus the node snapshot of its H100 host."""
    root = DATA / "hosts" / "h100-ubuntu"
    xml = (DATA / "hosts" / "h100-ubuntu.nvidia-smi.xml").read_text()
    node = host_snapshot.collect(
        root, node_name="ip-10-0-12-34.ec2.internal", generator="dsx/test", nvidia_smi=lambda: xml
    )
    return snapshot.merge([recorded_snapshot, node])


# ---- a small healthy GPU cluster and the recipe it was installed from -----------------------

GPU_OPERATOR_VALUES = {"driver": {"version": "580.95.05"}, "cdi": {"enabled": True}}
CERT_MANAGER_VALUES = {"crds": {"enabled": True}}


def gpu_node(name: str, **labels: str) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "node.kubernetes.io/instance-type": "p5.48xlarge",
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "nvidia.com/gpu.count": "8",
                "nvidia.com/cuda.driver.major": "580",
                "nvidia.com/cuda.driver.minor": "95",
                "nvidia.com/cuda.driver.rev": "05",
                "nvidia.com/cuda.runtime.major": "13",
                "nvidia.com/cuda.runtime.minor": "0",
                "topology.dsx.run/rack": f"rack-{name[-1]}",
                "kubernetes.io/hostname": name,
                **labels,
            },
        },
        "spec": {
            "providerID": f"aws:///us-east-1a/{name}",
            "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        },
        "status": {
            "capacity": {"nvidia.com/gpu": "8"},
            "allocatable": {"nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": "True"}],
            "nodeInfo": {
                "osImage": "Ubuntu 24.04.3 LTS",
                "kernelVersion": "6.8.0-1028-aws",
                "kubeletVersion": "v1.34.1",
            },
        },
    }


def pod(
    namespace: str,
    name: str,
    *,
    node: str = "",
    owner: tuple[str, str] | None = None,
    waiting: str = "",
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    state: dict[str, Any] = {"waiting": {"reason": waiting}} if waiting else {"running": {}}
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1]}]
    return {
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node},
        "status": {"phase": "Running", "containerStatuses": [{"name": "main", "ready": not waiting, "state": state}]},
    }


def daemon_set(
    namespace: str,
    name: str,
    image: str,
    nodes: int,
    *,
    tolerate_gpu: bool = True,
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    tolerations = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}] if tolerate_gpu else []
    return {
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": node_selector or {"nvidia.com/gpu.present": "true"},
                    "tolerations": tolerations,
                    "containers": [{"name": "main", "image": image}],
                },
            },
        },
        "status": {"desiredNumberScheduled": nodes, "numberReady": nodes},
    }


def deployment_object(namespace: str, name: str, image: str) -> dict[str, Any]:
    return {
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {"spec": {"containers": [{"name": "main", "image": image}]}},
        },
        "status": {"readyReplicas": 1, "availableReplicas": 1},
    }


def release(
    name: str,
    namespace: str,
    version: str,
    values: dict[str, Any] | None = None,
    *,
    chart: str = "",
    revision: int = 1,
    status: str = "deployed",
) -> dict[str, Any]:
    """A Helm release Secret exactly as Helm stores it."""
    record = helm_storage.build_release(
        name=name,
        namespace=namespace,
        chart=chart or name,
        version=version,
        values=values or {},
        revision=revision,
        status=status,
    )
    return helm_storage.encode_secret(record)


def healthy_cluster_objects(node_names: tuple[str, ...] = ("gpu-0", "gpu-1")) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [gpu_node(n) for n in node_names]
    objects.append(release("gpu-operator", "gpu-operator", "v25.10.1", GPU_OPERATOR_VALUES))
    objects.append(release("cert-manager", "cert-manager", "v1.17.2", CERT_MANAGER_VALUES))
    objects.append(deployment_object("gpu-operator", "gpu-operator", "nvcr.io/nvidia/gpu-operator:v25.10.1"))
    objects.append(pod("gpu-operator", "gpu-operator-7d9f8b6c5-x2x8k", labels={"app": "gpu-operator"}))
    ds = "nvidia-device-plugin-daemonset"
    objects.append(daemon_set("gpu-operator", ds, "nvcr.io/nvidia/k8s-device-plugin:v0.18.0", len(node_names)))
    for i, node in enumerate(node_names):
        objects.append(pod("gpu-operator", f"{ds}-{i}", node=node, owner=("DaemonSet", ds), labels={"app": ds}))
    objects.append(
        deployment_object("cert-manager", "cert-manager", "quay.io/jetstack/cert-manager-controller:v1.17.2")
    )
    objects.append(pod("cert-manager", "cert-manager-5c6f7d8b9-abcde", labels={"app": "cert-manager"}))
    objects.append(
        {
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "dynamocomponentdeployments.nvidia.com"},
            "status": {"conditions": [{"type": "Established", "status": "True"}]},
        }
    )
    return objects


CLUSTER_COMPONENTS = [
    {
        "name": "cert-manager",
        "chart": "cert-manager",
        "source": "https://charts.jetstack.io",
        "namespace": "cert-manager",
        "version": "v1.17.2",
        "values": CERT_MANAGER_VALUES,
        "healthCheckAsserts": [{"kind": "Deployment", "name": "cert-manager"}],
    },
    {
        "name": "gpu-operator",
        "chart": "gpu-operator",
        "source": "https://helm.ngc.nvidia.com/nvidia",
        "namespace": "gpu-operator",
        "version": "v25.10.1",
        "values": GPU_OPERATOR_VALUES,
        "dependencyRefs": ["cert-manager"],
        "healthCheckAsserts": [
            {"kind": "Deployment", "name": "gpu-operator"},
            {"kind": "DaemonSet", "name": "nvidia-device-plugin-daemonset"},
        ],
    },
    {
        "name": "dynamo-crds",
        "type": "Manifest",
        "namespace": "dynamo-system",
        "version": "v0.7.1",
        "manifests": {"crds.yaml": "kind: CustomResourceDefinition\n"},
        "healthCheckAsserts": [{"kind": "CustomResourceDefinition", "name": "dynamocomponentdeployments.nvidia.com"}],
    },
]


@pytest.fixture
def healthy_cluster() -> FakeClusterReader:
    return FakeClusterReader(version="v1.34.1").add(*healthy_cluster_objects())


@pytest.fixture
def cluster_recipe() -> recipe.Recipe:
    return make_recipe(
        constraints=["K8s.server.version >= 1.30", "GPU.driver.version >= 580"], components=CLUSTER_COMPONENTS
    )


@pytest.fixture
def objects() -> types.SimpleNamespace:
    """Builders for API objects: objects.pod(...), objects.daemon_set(...), …"""
    return types.SimpleNamespace(
        gpu_node=gpu_node,
        pod=pod,
        daemon_set=daemon_set,
        deployment=deployment_object,
        release=release,
        healthy=healthy_cluster_objects,
    )
