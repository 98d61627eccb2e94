"""Area of concern: the snapshot document reads back what it writes, names bad fields, and merges
cluster and node snapshots without dropping or inventing facts."""

from __future__ import annotations

from typing import Any

import pytest

from dsx import serialization
from dsx.errors import BadInputError
from dsx.files import documents
from dsx.model import snapshot

H100_LABELS = {
    "nvidia.com/gpu.present": "true",
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/gpu.count": "8",
    "nvidia.com/gpu.memory": "81559",
    "nvidia.com/cuda.driver.major": "580",
    "nvidia.com/cuda.driver.minor": "95",
    "nvidia.com/cuda.driver.rev": "05",
    "nvidia.com/cuda.runtime.major": "13",
    "nvidia.com/cuda.runtime.minor": "0",
}


def cluster_node(name: str, **labels: str) -> snapshot.Node:
    return snapshot.Node(
        name=name,
        provider_id=f"aws:///us-east-1a/{name}",
        labels={**H100_LABELS, **labels},
        taints=(snapshot.Taint("nvidia.com/gpu", "NoSchedule", "present"),),
        capacity={"nvidia.com/gpu": "8", "cpu": "192"},
        allocatable={"nvidia.com/gpu": "8", "cpu": "190"},
        node_info={"osImage": "Ubuntu 24.04.3 LTS", "kernelVersion": "6.8.0-1028-aws"},
        ready=True,
    )


def host_only(name: str) -> snapshot.Node:
    return snapshot.Node(
        name=name,
        host=snapshot.HostFacts(
            gpus=(snapshot.HostGpu(0, "NVIDIA H100 80GB HBM3", uuid="GPU-1"),),
            driver_version="580.95.05",
            pci_devices=(snapshot.PciDevice("0000:1b:00.0", "2330", "030200", "NVIDIA H100 80GB HBM3", "h100"),),
            os_release={"ID": "ubuntu", "VERSION_ID": "24.04"},
            unreadable=(snapshot.Unreadable("sysctl vm.max_map_count", "permission denied"),),
        ),
    )


def full_snapshot() -> snapshot.Snapshot:
    release = snapshot.HelmRelease(
        "gpu-operator", "gpu-operator", 2, "gpu-operator", "v25.10.1", "deployed", "v25.10.1", {"driver": {"x": 1}}
    )
    cluster = snapshot.ClusterFacts(
        server_version="v1.34.1",
        provider="eks",
        helm_releases=(release,),
        workloads=(snapshot.Workload("DaemonSet", "gpu-operator", "nvidia-device-plugin", ("nvcr.io/x:v1",), 2, 2),),
        cluster_policy={"name": "cluster-policy", "state": "ready", "spec": {"driver": {"enabled": True}}},
    )
    return snapshot.Snapshot(
        nodes=(cluster_node("gpu-0"), cluster_node("gpu-1")),
        cluster=cluster,
        generator="dsx/0.1.0",
        captured_at="2026-01-01T00:00:00Z",
        sources=("cluster",),
    )


def test_round_trip_is_byte_identical() -> None:
    first = serialization.dump_yaml(full_snapshot().to_dict())
    again = snapshot.Snapshot.from_dict(serialization.parse_yaml(first, source="s.yaml"), source="s.yaml")
    assert serialization.dump_yaml(again.to_dict()) == first


def test_gpu_facts_come_from_gfd_labels() -> None:
    gpu = cluster_node("n").gpu
    assert gpu is not None
    assert (gpu.product, gpu.count, gpu.memory_mib) == ("NVIDIA-H100-80GB-HBM3", 8, 81559)
    assert gpu.driver_version == "580.95.05"
    assert gpu.cuda_version == "13.0"


def test_new_gfd_label_spelling_wins_over_deprecated() -> None:
    labels = {
        **H100_LABELS,
        "nvidia.com/cuda.driver-version.major": "575",
        "nvidia.com/cuda.driver-version.minor": "57",
        "nvidia.com/cuda.driver-version.revision": "08",
    }
    gpu = snapshot.GpuLabels.from_labels(labels)
    assert gpu is not None and gpu.driver_version == "575.57.08"


def test_node_without_nvidia_labels_has_no_gpu_facts() -> None:
    node = snapshot.Node(name="cpu", labels={"kubernetes.io/os": "linux"}, node_info={"osImage": "x"})
    assert node.gpu is None
    assert not node.is_gpu_node
    assert node.gpu_product is None


def test_gpu_product_falls_back_to_host_facts_in_label_form() -> None:
    node = host_only("n")
    assert node.is_gpu_node
    assert node.gpu_product == "NVIDIA-H100-80GB-HBM3"
    assert node.gpu_driver_version == "580.95.05"


def test_gpu_product_from_pci_table_when_nvidia_smi_is_absent() -> None:
    host = snapshot.HostFacts(pci_devices=(snapshot.PciDevice("0000:1b:00.0", "2335", "030200", "NVIDIA H200"),))
    assert snapshot.Node(name="n", host=host).gpu_product == "NVIDIA-H200"


def test_nvswitch_is_not_a_gpu() -> None:
    switch = snapshot.PciDevice("0000:05:00.0", "22a3", "068000", "NVSwitch")
    assert not switch.is_gpu
    assert not snapshot.Node(name="n", host=snapshot.HostFacts(pci_devices=(switch,))).is_gpu_node


def test_merge_joins_host_facts_to_cluster_nodes_by_name() -> None:
    node_doc = snapshot.Snapshot(nodes=(host_only("gpu-1"),), sources=("node/gpu-1",), source="n.yaml")
    merged = snapshot.merge([full_snapshot(), node_doc])
    node = merged.node("gpu-1")
    assert node is not None and node.host is not None and node.labels == cluster_node("gpu-1").labels
    other = merged.node("gpu-0")
    assert other is not None and other.host is None
    assert merged.sources == ("cluster", "node/gpu-1")
    assert merged.cluster == full_snapshot().cluster


def test_merge_is_order_independent() -> None:
    node_doc = snapshot.Snapshot(nodes=(host_only("gpu-0"),), sources=("node/gpu-0",))
    assert (
        snapshot.merge([node_doc, full_snapshot()]).to_dict() == snapshot.merge([full_snapshot(), node_doc]).to_dict()
    )


def test_merge_refuses_two_cluster_snapshots() -> None:
    with pytest.raises(BadInputError, match="more than one cluster snapshot"):
        snapshot.merge([full_snapshot(), full_snapshot()])


def test_merge_refuses_two_host_records_for_one_node() -> None:
    a = snapshot.Snapshot(nodes=(host_only("gpu-0"),), source="a.yaml")
    b = snapshot.Snapshot(nodes=(host_only("gpu-0"),), source="b.yaml")
    with pytest.raises(BadInputError, match=r"gpu-0 has host facts in both a\.yaml and b\.yaml"):
        snapshot.merge([a, b])


@pytest.mark.parametrize(
    ("provider_id", "service"),
    [
        ("aws:///us-east-1a/i-0abc", "eks"),
        ("gce://proj/us-central1-a/gke-node", "gke"),
        ("azure:///subscriptions/x/virtualMachines/y", "aks"),
        ("oci://ocid1.instance.oc1", "oke"),
        ("kind://docker/kind/kind-worker", "kind"),
        ("kwok://fake-node", "kwok"),
        ("", ""),
    ],
)
def test_service_from_provider_id(provider_id: str, service: str) -> None:
    assert snapshot.service_from_provider_id(provider_id) == service


def _doc(**changes: Any) -> dict[str, Any]:
    doc = full_snapshot().to_dict()
    doc.update(changes)
    return doc


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"apiVersion": "v1", "kind": "ConfigMap"}, "not a dsx snapshot"),
        (_doc(nodes="gpu-0"), "s.yaml: nodes: expected a list"),
        (_doc(nodes=[{"labels": {}}]), r"^s.yaml: nodes\[0\]\.name: required$"),
        (
            _doc(nodes=[{"name": "a", "ready": "yes"}]),
            r"^s.yaml: nodes\[0\]\.ready: expected true or false, got 'yes'$",
        ),
        (_doc(nodes=[{"name": "a"}, {"name": "a"}]), "node 'a' appears twice"),
        (
            _doc(cluster={"helmReleases": [{"name": "x", "namespace": "y", "revision": "2"}]}),
            r"cluster\.helmReleases\[0\]\.revision: expected an integer, got '2'$",
        ),
        (
            _doc(nodes=[{"name": "a", "host": {"gpus": [{"index": 0}]}}]),
            r"nodes\[0\]\.host\.gpus\[0\]\.product: required$",
        ),
        (
            _doc(nodes=[{"name": "a", "labels": ["x"]}]),
            r"^s.yaml: nodes\[0\]\.labels: expected a mapping, got \['x'\]$",
        ),
        (
            _doc(nodes=[{"name": True}]),
            r"^s.yaml: nodes\[0\]\.name: expected an integer or a number or a string, got True$",
        ),
    ],
)
def test_malformed_snapshot_names_file_and_field(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        snapshot.Snapshot.from_dict(doc, source="s.yaml")


def test_what_live_hosts_write_is_read_leniently() -> None:
    """Numbers where text is meant, values of any kind in string maps and keys a newer dsx adds are
    read, not refused: snapshots come from live clusters and from other dsx versions."""
    doc = _doc(
        nodes=[
            {
                "name": "a",
                "labels": {"nvidia.com/gpu.count": 8, "empty": None},
                "host": {"cudaVersion": 12.4, "gpus": [{"product": "H100", "index": 1}], "addedLater": {"x": 1}},
                "addedLater": True,
            }
        ]
    )
    node = snapshot.Snapshot.from_dict(doc, source="s.yaml").nodes[0]
    assert node.labels == {"nvidia.com/gpu.count": "8", "empty": ""}
    assert node.host is not None and node.host.cuda_version == "12.4" and node.host.gpus[0].index == 1


def test_load_reads_file(tmp_path: Any) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(serialization.dump_yaml(full_snapshot().to_dict()))
    loaded = documents.snapshot_file(str(path))
    assert loaded.source == str(path)
    assert len(loaded.gpu_nodes) == 2
