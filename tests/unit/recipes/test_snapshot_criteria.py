"""Criteria derived from node facts: providerID, nvidia.com/gpu.product and the OS image."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsx.errors import BadInputError
from dsx.files import documents
from dsx.recipes import snapshot_criteria

SNAPSHOTS = Path(__file__).resolve().parents[2] / "data" / "recipes" / "snapshots"


def _derive(name: str) -> snapshot_criteria.Derived:
    return snapshot_criteria.derive(documents.load_mapping_file(SNAPSHOTS / name), source=name)


def test_eks_h100_ubuntu_from_gpu_nodes_only() -> None:
    derived = _derive("eks-h100-ubuntu.yaml")
    # the Amazon Linux system nodes do not decide the OS of the GPU fleet
    assert derived.criteria == {"service": "eks", "accelerator": "h100", "os": "ubuntu", "nodes": 4}
    assert derived.warnings == ()


def test_kubectl_node_list_is_accepted() -> None:
    derived = _derive("gke-gb200-cos-list.yaml")
    assert derived.criteria == {"service": "gke", "accelerator": "gb200", "os": "cos", "nodes": 2}


def test_unknown_hardware_is_left_out_with_a_warning() -> None:
    derived = _derive("aks-unknown-gpu.yaml")
    assert derived.criteria == {"service": "aks", "os": "ubuntu", "nodes": 3}
    assert any("'Tesla-T4'" in w for w in derived.warnings)
    assert any("accelerator left out of the criteria (unknown hardware)" in w for w in derived.warnings)


def test_mixed_accelerators_are_not_guessed() -> None:
    derived = _derive("mixed-accelerators.yaml")
    assert "accelerator" not in derived.criteria
    assert any("nodes disagree on accelerator: a100 (2 nodes), h100 (1 nodes)" in w for w in derived.warnings)


def test_cluster_without_gpu_labels() -> None:
    derived = _derive("no-gpu-labels.yaml")
    assert derived.criteria == {"service": "kind"}
    assert any("os left out" in w for w in derived.warnings)
    assert any("no node carries nvidia.com/gpu.product" in w for w in derived.warnings)


@pytest.mark.parametrize(
    ("product", "accelerator"),
    [
        ("NVIDIA-H100-80GB-HBM3", "h100"),
        ("NVIDIA-H100-NVL", "h100"),
        ("NVIDIA-H200", "h200"),
        ("NVIDIA-B200", "b200"),
        ("NVIDIA-GB200", "gb200"),
        ("NVIDIA-A100-SXM4-40GB", "a100"),
        ("NVIDIA-L40S", "l40s"),
        ("NVIDIA-L40", None),
        ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "rtx-pro-6000"),
        ("Tesla-V100-SXM2-16GB", None),
    ],
)
def test_accelerator_for_product(product: str, accelerator: str | None) -> None:
    assert snapshot_criteria.accelerator_for_product(product) == accelerator


@pytest.mark.parametrize(
    ("image", "system"),
    [
        ("Ubuntu 22.04.4 LTS", "ubuntu"),
        ("Red Hat Enterprise Linux CoreOS 418.94.202501221327-0", "rhel"),
        ("Red Hat Enterprise Linux 9.4 (Plow)", "rhel"),
        ("Container-Optimized OS from Google", "cos"),
        ("Amazon Linux 2023.6.20250115", "amazonlinux"),
        ("Amazon Linux 2", "amazonlinux"),
        ("Debian GNU/Linux 12 (bookworm)", None),
    ],
)
def test_os_for_image(image: str, system: str | None) -> None:
    assert snapshot_criteria.os_for_image(image) == system


def test_openshift_label_wins_over_the_cloud_provider() -> None:
    node = {
        "metadata": {"name": "n", "labels": {"node.openshift.io/os_id": "rhcos"}},
        "spec": {"providerID": "aws:///us-east-1a/i-1"},
    }
    assert snapshot_criteria.derive({"nodes": [node]}, source="s").criteria["service"] == "openshift"


def test_document_without_nodes_is_bad_input() -> None:
    with pytest.raises(BadInputError, match="no nodes found"):
        snapshot_criteria.derive({"kind": "Snapshot"}, source="s.yaml")


def test_unknown_hardware_on_many_nodes_is_one_warning() -> None:
    nodes = [
        {
            "metadata": {"name": f"n{i}", "labels": {"nvidia.com/gpu.product": "NVIDIA-X9000"}},
            "spec": {"providerID": "aws:///us-east-1a/i-0"},
            "status": {"nodeInfo": {"osImage": "Ubuntu 24.04.1 LTS"}},
        }
        for i in range(50)
    ]
    derived = snapshot_criteria.derive({"items": nodes}, source="s.yaml")
    product_warnings = [w for w in derived.warnings if "NVIDIA-X9000" in w]
    assert len(product_warnings) == 1
    assert "50 nodes (n0, n1, n2 and 47 more)" in product_warnings[0]
    assert "accelerator" not in derived.criteria
