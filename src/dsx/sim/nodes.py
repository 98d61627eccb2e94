"""The fake GPU nodes of a simulated cluster, as Node manifests.

Labels follow what NVIDIA GPU Feature Discovery and the clouds put on real GPU nodes, so
snapshot, validation and scheduling code sees what it would see in production. Every
identifier (provider ID, machine ID, clique ID) is derived from the cluster and node names,
so the same options always produce byte-identical manifests.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsx import errors
from dsx.sim import profiles

NODE_ANNOTATION = "kwok.x-k8s.io/node"
"""kwok manages nodes carrying this annotation with value `fake` (and only those)."""

CLUSTER_LABEL = "sim.dsx.run/cluster"
KERNEL_LOG_ANNOTATION = "sim.dsx.run/kernel-log"
RACK_LABEL = "topology.dsx.run/rack"
BLOCK_LABEL = "topology.dsx.run/block"
CLIQUE_LABEL = "nvidia.com/gpu.clique"
RACKS_PER_BLOCK = 8
PODS_PER_NODE = 110
MAX_NODES = 10_000
"""The largest fleet one 2-core machine runs (docs/sim.md, "Fleet size")."""


@dataclass(frozen=True)
class SimOptions:
    """What `dsx sim up` was asked for; `resolved()` fills defaults and checks combinations."""

    nodes: int = 8
    accelerator: str = "h100"
    gpus_per_node: int | None = None
    cliques: int | None = None
    service: str = "eks"
    os: str = "ubuntu"
    engine: bool = False
    """Run JobSet's and Kubeflow Trainer's controllers (dsx.sim.engine): TrainJobs run for real."""

    def resolved(self) -> SimOptions:
        board = profiles.accelerator(self.accelerator)
        if self.service not in profiles.SERVICES:
            raise errors.BadInputError(
                errors.allowed_values_message("dsx sim", "service", self.service, profiles.SERVICES)
            )
        if self.os not in profiles.OPERATING_SYSTEMS:
            raise errors.BadInputError(
                errors.allowed_values_message("dsx sim", "os", self.os, profiles.OPERATING_SYSTEMS)
            )
        if not 1 <= self.nodes <= MAX_NODES:
            raise errors.BadInputError(f"dsx sim: nodes: {self.nodes} is out of range; allowed: 1..{MAX_NODES}")
        gpus = board.gpus_per_node if self.gpus_per_node is None else self.gpus_per_node
        if not 1 <= gpus <= 16:
            raise errors.BadInputError(f"dsx sim: gpus-per-node: {gpus} is out of range; allowed: 1..16")
        if self.cliques is not None:
            if board.nvlink_domain_max_nodes is None:
                raise errors.BadInputError(
                    f"dsx sim: cliques: {self.accelerator} has no multi-node NVLink domain; "
                    "--cliques applies to gb200 only"
                )
            if not 1 <= self.cliques <= self.nodes:
                raise errors.BadInputError(
                    f"dsx sim: cliques: {self.cliques} is out of range; allowed: 1..{self.nodes} (one per node at most)"
                )
            largest = -(-self.nodes // self.cliques)
            if largest > board.nvlink_domain_max_nodes:
                raise errors.BadInputError(
                    f"dsx sim: cliques: {self.nodes} nodes in {self.cliques} cliques puts {largest} nodes in one "
                    f"NVLink domain; a {self.accelerator} domain holds at most {board.nvlink_domain_max_nodes}"
                )
        return SimOptions(self.nodes, self.accelerator, gpus, self.cliques, self.service, self.os, self.engine)

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "accelerator": self.accelerator,
            "gpusPerNode": self.gpus_per_node,
            "cliques": self.cliques,
            "service": self.service,
            "os": self.os,
            "engine": self.engine,
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> SimOptions:
        return cls(
            nodes=int(raw["nodes"]),
            accelerator=str(raw["accelerator"]),
            gpus_per_node=raw.get("gpusPerNode"),
            cliques=raw.get("cliques"),
            service=str(raw["service"]),
            os=str(raw["os"]),
            engine=bool(raw.get("engine", False)),
        )


@dataclass(frozen=True)
class SimNode:
    """Where one node sits: its rack, block and (for NVLink-domain systems) clique."""

    name: str
    index: int
    rack: int
    block: int
    clique: int | None


def node_name(index: int) -> str:
    return f"gpu-node-{index:02d}"


def layout(options: SimOptions) -> list[SimNode]:
    """Place nodes in racks and blocks; with --cliques, each clique is one rack (NVLink domain)."""
    board = profiles.accelerator(options.accelerator)
    placed: list[SimNode] = []
    if options.cliques:
        # contiguous groups whose sizes differ by at most one
        base, extra = divmod(options.nodes, options.cliques)
        index = 0
        for domain in range(options.cliques):
            for _ in range(base + (1 if domain < extra else 0)):
                placed.append(SimNode(node_name(index), index, domain, domain // RACKS_PER_BLOCK, domain))
                index += 1
        return placed
    for index in range(options.nodes):
        rack = index // board.nodes_per_rack
        clique: int | None = rack if board.nvlink_domain_max_nodes else None
        placed.append(SimNode(node_name(index), index, rack, rack // RACKS_PER_BLOCK, clique))
    return placed


def _digest(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


def _uuid(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "dsx-sim:" + "/".join(parts)))


def provider_id(service: str, cluster: str, node: SimNode) -> str:
    site = profiles.platform().services[service]
    digest = _digest(cluster, node.name, "instance")
    if service == "eks":
        return f"aws:///{site.zone}/i-{digest[:17]}"
    if service == "gke":
        return f"gce://dsx-sim-{cluster}/{site.zone}/{node.name}"
    if service == "aks":
        subscription = _uuid(cluster, "subscription")
        return (
            f"azure:///subscriptions/{subscription}/resourceGroups/mc_dsx-sim_{cluster}_{site.region}"
            f"/providers/Microsoft.Compute/virtualMachineScaleSets/aks-gpu-{digest[:8]}-vmss"
            f"/virtualMachines/{node.index}"
        )
    if service == "oke":
        return f"ocid1.instance.oc1.iad.{digest[:60]}"
    return f"kind://docker/{cluster}/{node.name}"


def clique_id(cluster: str, clique: int) -> str:
    """GPU Feature Discovery's clique label value: `<NVLink cluster UUID>.<clique id>`."""
    return f"{_uuid(cluster, 'nvlink-domain')}.{clique}"


def _service_labels(service: str, board: profiles.Accelerator, cluster: str, node: SimNode) -> dict[str, str]:
    if service == "eks":
        layer = _digest(cluster, "block", str(node.block))[:8]
        return {
            "eks.amazonaws.com/nodegroup": f"gpu-{board.key}",
            "eks.amazonaws.com/capacityType": "ON_DEMAND",
            "topology.k8s.aws/network-node-layer-1": f"nn-{_digest(cluster, 'spine')[:17]}",
            "topology.k8s.aws/network-node-layer-2": f"nn-{layer}{_digest(cluster, 'l2')[:9]}",
            "topology.k8s.aws/network-node-layer-3": f"nn-{_digest(cluster, 'rack', str(node.rack))[:17]}",
        }
    if service == "gke":
        return {
            "cloud.google.com/gke-nodepool": f"gpu-{board.key}",
            "cloud.google.com/gke-accelerator": board.gke_accelerator,
            "cloud.google.com/gce-topology-block": _digest(cluster, "block", str(node.block))[:32],
            "cloud.google.com/gce-topology-subblock": _digest(cluster, "rack", str(node.rack))[:32],
            "cloud.google.com/gce-topology-host": _digest(cluster, node.name, "host")[:32],
        }
    if service == "aks":
        return {"kubernetes.azure.com/agentpool": "gpu", "kubernetes.azure.com/accelerator": "nvidia"}
    return {}


def _quantity_gib(gib: float) -> str:
    return f"{int(gib * 1024 * 1024)}Ki"


def node_manifest(
    cluster: str,
    options: SimOptions,
    node: SimNode,
    *,
    kubelet_version: str,
    kernel_log: Path,
) -> dict[str, Any]:
    """The Node object for one simulated GPU node (status included: capacity and nodeInfo)."""
    board = profiles.accelerator(options.accelerator)
    site = profiles.platform().services[options.service]
    system = profiles.platform().operating_systems[options.os]
    plat = profiles.platform()
    gpus = options.gpus_per_node or board.gpus_per_node
    instance = board.instance_type(options.service, gpus)
    driver_major, driver_minor, driver_rev = plat.driver_version.split(".")
    runtime_major, runtime_minor = plat.cuda_runtime.split(".")
    compute_major, compute_minor = board.compute_capability.split(".")

    labels: dict[str, str] = {
        "kubernetes.io/hostname": node.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": board.architecture,
        "node.kubernetes.io/instance-type": instance.name,
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": board.product,
        "nvidia.com/gpu.count": str(gpus),
        "nvidia.com/gpu.memory": str(board.memory_mib),
        "nvidia.com/gpu.family": board.family,
        "nvidia.com/gpu.compute.major": compute_major,
        "nvidia.com/gpu.compute.minor": compute_minor,
        "nvidia.com/gpu.machine": instance.name,
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig.capable": "false" if board.family == "ada-lovelace" else "true",
        "nvidia.com/cuda.driver.major": driver_major,
        "nvidia.com/cuda.driver.minor": driver_minor,
        "nvidia.com/cuda.driver.rev": driver_rev,
        "nvidia.com/cuda.driver-version.major": driver_major,
        "nvidia.com/cuda.driver-version.minor": driver_minor,
        "nvidia.com/cuda.driver-version.revision": driver_rev,
        "nvidia.com/cuda.runtime.major": runtime_major,
        "nvidia.com/cuda.runtime.minor": runtime_minor,
        "nvidia.com/cuda.runtime-version.major": runtime_major,
        "nvidia.com/cuda.runtime-version.minor": runtime_minor,
        RACK_LABEL: f"rack-{node.rack:02d}",
        BLOCK_LABEL: f"block-{node.block:02d}",
        CLUSTER_LABEL: cluster,
        "type": "kwok",
    }
    if site.region:
        labels["topology.kubernetes.io/region"] = site.region
        labels["topology.kubernetes.io/zone"] = site.zone
    if node.clique is not None:
        labels[CLIQUE_LABEL] = clique_id(cluster, node.clique)
    labels.update(_service_labels(options.service, board, cluster, node))

    cpu_millis = instance.cpu * 1000
    capacity = {
        "cpu": str(instance.cpu),
        "memory": _quantity_gib(instance.memory_gib),
        "ephemeral-storage": _quantity_gib(500),
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "pods": str(PODS_PER_NODE),
        "nvidia.com/gpu": str(gpus),
        **instance.extra,
    }
    allocatable = {
        **capacity,
        "cpu": f"{cpu_millis - 550}m",
        "memory": _quantity_gib(instance.memory_gib * 0.96),
        "ephemeral-storage": _quantity_gib(460),
    }
    spec: dict[str, Any] = {"providerID": provider_id(options.service, cluster, node)}
    if options.service == "gke":
        spec["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]

    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": dict(sorted(labels.items())),
            "annotations": {
                NODE_ANNOTATION: "fake",
                "node.alpha.kubernetes.io/ttl": "0",
                KERNEL_LOG_ANNOTATION: str(kernel_log),
            },
        },
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "nodeInfo": {
                "architecture": board.architecture,
                "bootID": _uuid(cluster, node.name, "boot"),
                "containerRuntimeVersion": plat.container_runtime,
                "kernelVersion": system.kernel_version(site.kernel_flavor, board.architecture),
                "kubeProxyVersion": "",
                "kubeletVersion": kubelet_version,
                "machineID": _digest(cluster, node.name, "machine")[:32],
                "operatingSystem": "linux",
                "osImage": system.image,
                "systemUUID": _uuid(cluster, node.name, "system"),
            },
        },
    }
