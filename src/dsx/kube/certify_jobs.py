"""Certification's view of a cluster: nodes as certify candidates, and cleanup by certification id.

The Kubernetes executor (`dsx.executors.kubernetes`) creates, awaits, reads and deletes its runs
through `dsx.kube.jobs.RunLauncher` (its `JobLauncher`). What only certification needs lives
here: reading nodes into the facts grouping and rendering use (labels, cordon, GPUs,
network devices), and deleting everything one certification created, by its id label,
whichever process created it — the way out after a killed `dsx certify run`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsx.executors import kubernetes
from dsx.kube import jobs
from dsx.kube.client import KubeClient
from dsx.model import certification as model

_CORE_RESOURCES = frozenset({"cpu", "memory", "pods", "ephemeral-storage"})


def candidate(node: Mapping[str, Any]) -> model.CandidateNode:
    """A Node object as certification sees it."""
    metadata, spec, status = node.get("metadata", {}), node.get("spec", {}), node.get("status", {})
    labels = dict(metadata.get("labels") or {})
    allocatable = status.get("allocatable") or {}
    gpus = _count(allocatable.get(kubernetes.GPU_RESOURCE))
    devices = {
        name: count
        for name, value in sorted(allocatable.items())
        if "/" in name and name != kubernetes.GPU_RESOURCE and name not in _CORE_RESOURCES and (count := _count(value))
    }
    return model.CandidateNode(
        name=str(metadata["name"]),
        labels=labels,
        unschedulable=bool(spec.get("unschedulable", False)),
        allocatable_gpus=gpus,
        gpu_product=labels.get("nvidia.com/gpu.product", ""),
        network_devices=devices,
    )


def candidate_nodes(client: KubeClient) -> list[model.CandidateNode]:
    return sorted((candidate(n) for n in client.list_nodes()), key=lambda n: n.name)


def delete_certification(
    client: KubeClient, namespace: str, certification_id: str, *, dry_run: bool = False
) -> list[str]:
    """Delete every object labelled with the certification id; returns `Kind/name` of each (idempotent)."""
    labels = {kubernetes.CERTIFICATION_LABEL: certification_id}
    found = []
    for api_version, kind in jobs.RUN_KINDS:
        for obj in client.list(api_version, kind, namespace, labels=labels):
            name = obj["metadata"]["name"]
            found.append(f"{kind}/{name}")
            if not dry_run:
                client.delete(api_version, kind, name, namespace)
    return found


def _count(value: Any) -> int | None:
    """A device-plugin quantity ("8") as an int; None for absent or non-integer quantities (e.g. "2Gi")."""
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None
