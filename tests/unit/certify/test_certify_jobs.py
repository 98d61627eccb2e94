"""Area of concern: a Node object reads into the facts certification groups and renders by —
labels, cordon, allocatable GPUs and network devices, never quantities that are not counts."""

from __future__ import annotations

from dsx.kube import certify_jobs


def test_a_node_object_becomes_a_candidate_with_gpus_and_network_devices() -> None:
    node = {
        "metadata": {"name": "gpu-node-05", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
        "spec": {"unschedulable": True},
        "status": {
            "allocatable": {
                "cpu": "191450m",
                "memory": "2061584302Ki",
                "hugepages-2Mi": "0",
                "nvidia.com/gpu": "8",
                "vpc.amazonaws.com/efa": "32",
                "example.com/hugepages": "2Gi",
            }
        },
    }
    candidate = certify_jobs.candidate(node)
    assert candidate.name == "gpu-node-05"
    assert candidate.unschedulable
    assert candidate.allocatable_gpus == 8
    assert candidate.gpu_product == "NVIDIA-H100-80GB-HBM3"
    assert candidate.network_devices == {"vpc.amazonaws.com/efa": 32}


def test_a_node_without_gpus_reports_them_unknown() -> None:
    candidate = certify_jobs.candidate({"metadata": {"name": "cpu-1"}, "status": {}})
    assert candidate.allocatable_gpus is None
    assert candidate.network_devices == {}
    assert not candidate.unschedulable
