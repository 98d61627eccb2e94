"""Area of concern: simulated node manifests — realistic GPU labels and capacity, deterministic
identifiers, NVLink cliques for GB200, and clear errors for impossible layouts."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsx import errors, serialization
from dsx.sim import nodes


def _manifest(options: nodes.SimOptions, index: int = 0, cluster: str = "c1") -> dict:
    resolved = options.resolved()
    node = nodes.layout(resolved)[index]
    return nodes.node_manifest(cluster, resolved, node, kubelet_version="v1.36.3", kernel_log=Path("/k"))


def test_h100_node_looks_like_gpu_feature_discovery_labelled_it() -> None:
    manifest = _manifest(nodes.SimOptions(nodes=2, accelerator="h100", service="eks"))
    labels = manifest["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["nvidia.com/gpu.count"] == "8"
    assert labels["nvidia.com/gpu.memory"] == "81559"
    assert labels["nvidia.com/gpu.present"] == "true"
    assert labels["nvidia.com/cuda.driver.major"] == "580"
    assert labels["node.kubernetes.io/instance-type"] == "p5.48xlarge"
    assert labels["topology.kubernetes.io/zone"] == "us-east-1a"
    assert nodes.CLIQUE_LABEL not in labels
    assert manifest["status"]["capacity"]["nvidia.com/gpu"] == "8"
    assert manifest["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert manifest["status"]["capacity"]["vpc.amazonaws.com/efa"] == "32"
    assert manifest["spec"]["providerID"].startswith("aws:///us-east-1a/i-")
    assert manifest["status"]["nodeInfo"]["osImage"] == "Ubuntu 24.04.3 LTS"
    assert manifest["status"]["nodeInfo"]["kernelVersion"] == "6.8.0-1040-aws"
    assert manifest["metadata"]["annotations"][nodes.NODE_ANNOTATION] == "fake"


@pytest.mark.parametrize(
    ("service", "prefix"),
    [
        ("eks", "aws:///"),
        ("gke", "gce://"),
        ("aks", "azure:///subscriptions/"),
        ("oke", "ocid1.instance."),
        ("kind", "kind://"),
    ],
)
def test_provider_id_matches_the_service(service: str, prefix: str) -> None:
    assert _manifest(nodes.SimOptions(nodes=1, service=service))["spec"]["providerID"].startswith(prefix)


def test_gke_gpu_nodes_carry_the_gpu_taint_and_accelerator_label() -> None:
    manifest = _manifest(nodes.SimOptions(nodes=1, accelerator="h200", service="gke"))
    assert manifest["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert manifest["metadata"]["labels"]["cloud.google.com/gke-accelerator"] == "nvidia-h200-141gb"


def test_same_options_give_byte_identical_manifests_and_names_differ_per_cluster() -> None:
    options = nodes.SimOptions(nodes=3, accelerator="b200", service="aks", os="rhel")
    first = serialization.dump_yaml(_manifest(options, 2))
    assert first == serialization.dump_yaml(_manifest(options, 2))
    other = _manifest(options, 2, cluster="c2")
    assert other["spec"]["providerID"] != _manifest(options, 2)["spec"]["providerID"]


def test_gb200_cliques_split_nodes_into_contiguous_nvlink_domains() -> None:
    options = nodes.SimOptions(nodes=7, accelerator="gb200", cliques=3).resolved()
    placed = nodes.layout(options)
    assert [n.clique for n in placed] == [0, 0, 0, 1, 1, 2, 2]
    assert options.gpus_per_node == 4
    manifest = nodes.node_manifest("c1", options, placed[3], kubelet_version="v1.36.3", kernel_log=Path("/k"))
    labels = manifest["metadata"]["labels"]
    assert labels[nodes.CLIQUE_LABEL] == f"{nodes.clique_id('c1', 0).split('.')[0]}.1"
    assert labels[nodes.RACK_LABEL] == "rack-01"
    assert labels["kubernetes.io/arch"] == "arm64"
    assert manifest["status"]["capacity"]["nvidia.com/gpu"] == "4"
    assert manifest["status"]["nodeInfo"]["kernelVersion"] == "6.8.0-1040-aws"


def test_gb200_without_cliques_uses_one_domain_per_rack_of_18() -> None:
    placed = nodes.layout(nodes.SimOptions(nodes=20, accelerator="gb200").resolved())
    assert [n.clique for n in placed].count(0) == 18
    assert placed[18].clique == 1


def test_racks_and_blocks_for_hgx_nodes() -> None:
    placed = nodes.layout(nodes.SimOptions(nodes=40).resolved())
    assert [n.rack for n in placed[:9]] == [0, 0, 0, 0, 1, 1, 1, 1, 2]
    assert placed[39].block == 1
    assert placed[0].name == "gpu-node-00"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (nodes.SimOptions(cliques=2), "--cliques applies to gb200 only"),
        (nodes.SimOptions(nodes=40, accelerator="gb200", cliques=2), "holds at most 18"),
        (nodes.SimOptions(nodes=2, accelerator="gb200", cliques=3), "out of range"),
        (nodes.SimOptions(nodes=0), "nodes: 0 is out of range"),
        (nodes.SimOptions(gpus_per_node=17), "gpus-per-node: 17"),
        (nodes.SimOptions(service="ibm"), "allowed values: eks, gke, aks, oke, kind"),
        (nodes.SimOptions(os="windows"), "allowed values: ubuntu, al2023, cos, rhel"),
    ],
)
def test_impossible_layouts_are_bad_input(options: nodes.SimOptions, message: str) -> None:
    with pytest.raises(errors.BadInputError, match=message):
        options.resolved()


def test_options_round_trip_through_state() -> None:
    options = nodes.SimOptions(nodes=5, accelerator="gb200", cliques=2, service="oke", os="al2023").resolved()
    assert nodes.SimOptions.from_dict(options.to_dict()) == options
