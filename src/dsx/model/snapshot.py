"""The snapshot: what a cluster and its hosts are, read from the cluster instead of an inventory.

`dsx snapshot` writes it, `dsx recipe --snapshot` derives criteria from it, and `dsx validate` /
`dsx diff` hold it against a recipe. One document kind covers three shapes, so merging is a union:

- a cluster snapshot (API server facts: version, provider, nodes with labels, taints, capacity
  and nodeInfo, Helm releases, workloads, the GPU Operator ClusterPolicy) fills `cluster` and
  `nodes[]`;
- a node snapshot (what only the host knows: nvidia-smi, PCI devices, os-release, kernel,
  sysctls, modules, systemd units) fills `nodes[].host` for one node;
- a merged snapshot has both.

Facts that could not be read are recorded in `unreadable` with the reason, never guessed, so a
check built on them can say `skipped` instead of passing. There is no wall-clock field other
than `metadata.capturedAt`, which `dsx diff` ignores.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from dsx import serialization
from dsx.errors import BadInputError

API_VERSION = "dsx.run/v1alpha1"
KIND = "Snapshot"
T = TypeVar("T")

# GPU Feature Discovery labels (current names first, then the deprecated spellings)
LABEL_GPU_PRESENT = "nvidia.com/gpu.present"
LABEL_GPU_PRODUCT = "nvidia.com/gpu.product"
LABEL_GPU_COUNT = "nvidia.com/gpu.count"
LABEL_GPU_MEMORY = "nvidia.com/gpu.memory"
LABEL_GPU_FAMILY = "nvidia.com/gpu.family"
LABEL_GPU_CLIQUE = "nvidia.com/gpu.clique"
_DRIVER_LABELS = (
    (
        "nvidia.com/cuda.driver-version.major",
        "nvidia.com/cuda.driver-version.minor",
        "nvidia.com/cuda.driver-version.revision",
    ),
    ("nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor", "nvidia.com/cuda.driver.rev"),
)
_CUDA_LABELS = (
    ("nvidia.com/cuda.runtime-version.major", "nvidia.com/cuda.runtime-version.minor"),
    ("nvidia.com/cuda.runtime.major", "nvidia.com/cuda.runtime.minor"),
)
GPU_RESOURCE = "nvidia.com/gpu"

# providerID scheme → the `service` criteria value it implies
PROVIDER_SCHEMES = {"aws": "eks", "gce": "gke", "azure": "aks", "oci": "oke", "kind": "kind"}


@dataclass(frozen=True)
class Unreadable:
    """A fact that could not be read, and why (permission denied, file missing, tool absent)."""

    fact: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"fact": self.fact, "reason": self.reason}


@dataclass(frozen=True)
class Taint:
    key: str
    effect: str
    value: str = ""

    def to_dict(self) -> dict[str, str]:
        out = {"key": self.key}
        if self.value:
            out["value"] = self.value
        out["effect"] = self.effect
        return out


@dataclass(frozen=True)
class GpuLabels:
    """GPU facts read from a node's `nvidia.com/*` labels (GPU Feature Discovery)."""

    product: str | None = None
    count: int | None = None
    memory_mib: int | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    family: str | None = None
    clique: str | None = None

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> GpuLabels | None:
        """None when the node carries no GPU label at all."""
        if not any(k.startswith("nvidia.com/") for k in labels):
            return None
        return cls(
            product=labels.get(LABEL_GPU_PRODUCT) or None,
            count=_int_or_none(labels.get(LABEL_GPU_COUNT)),
            memory_mib=_int_or_none(labels.get(LABEL_GPU_MEMORY)),
            driver_version=_dotted(labels, _DRIVER_LABELS),
            cuda_version=_dotted(labels, _CUDA_LABELS),
            family=labels.get(LABEL_GPU_FAMILY) or None,
            clique=labels.get(LABEL_GPU_CLIQUE) or None,
        )

    def to_dict(self) -> dict[str, Any]:
        pairs = (
            ("product", self.product),
            ("count", self.count),
            ("memoryMiB", self.memory_mib),
            ("driverVersion", self.driver_version),
            ("cudaVersion", self.cuda_version),
            ("family", self.family),
            ("clique", self.clique),
        )
        return {k: v for k, v in pairs if v is not None}


@dataclass(frozen=True)
class HostGpu:
    """One GPU as nvidia-smi reports it."""

    index: int
    product: str
    uuid: str = ""
    pci_bus_id: str = ""
    memory_mib: int | None = None
    vbios_version: str = ""
    architecture: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index, "product": self.product}
        for key, value in (
            ("uuid", self.uuid),
            ("pciBusId", self.pci_bus_id),
            ("memoryMiB", self.memory_mib),
            ("vbiosVersion", self.vbios_version),
            ("architecture", self.architecture),
        ):
            if value not in ("", None):
                out[key] = value
        return out


@dataclass(frozen=True)
class PciDevice:
    """An NVIDIA PCI function from sysfs; `model` is empty when the device id is not in the table."""

    address: str
    device_id: str
    class_code: str
    model: str = ""
    accelerator: str = ""

    @property
    def is_gpu(self) -> bool:
        """Display (0x0300) and 3D (0x0302) controllers; NVSwitches and bridges are not GPUs."""
        return self.class_code.startswith(("0300", "0302"))

    def to_dict(self) -> dict[str, str]:
        out = {"address": self.address, "vendorId": "10de", "deviceId": self.device_id, "class": self.class_code}
        if self.model:
            out["model"] = self.model
        if self.accelerator:
            out["accelerator"] = self.accelerator
        return out


@dataclass(frozen=True)
class SystemdUnit:
    """What the unit files and the cgroup tree say about one systemd unit."""

    name: str
    unit_file: str = ""
    drop_ins: tuple[str, ...] = ()
    enabled: bool | None = None
    active: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "unitFile": self.unit_file}
        if self.drop_ins:
            out["dropIns"] = list(self.drop_ins)
        if self.enabled is not None:
            out["enabled"] = self.enabled
        if self.active is not None:
            out["active"] = self.active
        return out


@dataclass(frozen=True)
class HostFacts:
    """What only the host knows; see the module docstring."""

    gpus: tuple[HostGpu, ...] = ()
    driver_version: str = ""
    cuda_version: str = ""
    pci_devices: tuple[PciDevice, ...] = ()
    os_release: Mapping[str, str] = field(default_factory=dict)
    kernel_release: str = ""
    sysctls: Mapping[str, str] = field(default_factory=dict)
    kernel_modules: tuple[str, ...] = ()
    systemd_units: tuple[SystemdUnit, ...] = ()
    unreadable: tuple[Unreadable, ...] = ()

    @property
    def pci_gpus(self) -> tuple[PciDevice, ...]:
        return tuple(d for d in self.pci_devices if d.is_gpu)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.driver_version:
            out["driverVersion"] = self.driver_version
        if self.cuda_version:
            out["cudaVersion"] = self.cuda_version
        out["gpus"] = [g.to_dict() for g in self.gpus]
        out["pciDevices"] = [d.to_dict() for d in self.pci_devices]
        out["osRelease"] = dict(self.os_release)
        if self.kernel_release:
            out["kernelRelease"] = self.kernel_release
        out["sysctls"] = dict(self.sysctls)
        out["kernelModules"] = list(self.kernel_modules)
        out["systemdUnits"] = [u.to_dict() for u in self.systemd_units]
        out["unreadable"] = [u.to_dict() for u in self.unreadable]
        return out


@dataclass(frozen=True)
class Node:
    """One node: API-server facts (empty in a node-only snapshot) and host facts (when merged)."""

    name: str
    provider_id: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    capacity: Mapping[str, str] = field(default_factory=dict)
    allocatable: Mapping[str, str] = field(default_factory=dict)
    node_info: Mapping[str, str] = field(default_factory=dict)
    ready: bool | None = None
    unschedulable: bool = False
    host: HostFacts | None = None

    @functools.cached_property
    def gpu(self) -> GpuLabels | None:
        return GpuLabels.from_labels(self.labels)

    @property
    def has_cluster_facts(self) -> bool:
        return bool(self.labels or self.node_info or self.capacity)

    @property
    def is_gpu_node(self) -> bool:
        """Labels, capacity or host PCI devices say it has NVIDIA GPUs."""
        if self.labels.get(LABEL_GPU_PRESENT) == "true" or self.labels.get(LABEL_GPU_PRODUCT):
            return True
        if _int_or_none(self.capacity.get(GPU_RESOURCE)):
            return True
        return self.host is not None and bool(self.host.pci_gpus or self.host.gpus)

    @property
    def gpu_product(self) -> str | None:
        """The GPU product in GPU Feature Discovery's spelling (`NVIDIA-H100-80GB-HBM3`).

        From the label when present; else from nvidia-smi on the host; else from the PCI table,
        so GPUs are named even on nodes that GPU Feature Discovery has not labelled.
        """
        labels = self.gpu
        if labels is not None and labels.product:
            return labels.product
        if self.host is not None:
            if self.host.gpus:
                return gfd_product_name(self.host.gpus[0].product)
            models = [d.model for d in self.host.pci_gpus if d.model]
            if models:
                return gfd_product_name(models[0])
        return None

    @property
    def gpu_driver_version(self) -> str | None:
        labels = self.gpu
        if labels is not None and labels.driver_version:
            return labels.driver_version
        if self.host is not None and self.host.driver_version:
            return self.host.driver_version
        return None

    @property
    def gpu_cuda_version(self) -> str | None:
        labels = self.gpu
        if labels is not None and labels.cuda_version:
            return labels.cuda_version
        if self.host is not None and self.host.cuda_version:
            return self.host.cuda_version
        return None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.has_cluster_facts:
            out["providerID"] = self.provider_id
            out["labels"] = dict(sorted(self.labels.items()))
            out["taints"] = [t.to_dict() for t in self.taints]
            out["capacity"] = dict(sorted(self.capacity.items()))
            out["allocatable"] = dict(sorted(self.allocatable.items()))
            out["nodeInfo"] = dict(self.node_info)
            if self.ready is not None:
                out["ready"] = self.ready
            out["unschedulable"] = self.unschedulable
            gpu = self.gpu
            if gpu is not None:
                out["gpu"] = gpu.to_dict()
        if self.host is not None:
            out["host"] = self.host.to_dict()
        return out


@dataclass(frozen=True)
class HelmRelease:
    """The latest revision of one Helm release, decoded from Helm's release Secret."""

    name: str
    namespace: str
    revision: int
    chart: str
    version: str
    status: str
    app_version: str = ""
    values: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "namespace": self.namespace,
            "chart": self.chart,
            "version": self.version,
        }
        if self.app_version:
            out["appVersion"] = self.app_version
        out["revision"] = self.revision
        out["status"] = self.status
        out["values"] = dict(self.values)
        return out


@dataclass(frozen=True)
class Workload:
    """A Deployment, DaemonSet or StatefulSet with its images and readiness counters."""

    kind: str
    namespace: str
    name: str
    images: tuple[str, ...]
    desired: int = 0
    ready: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "images": list(self.images),
            "desired": self.desired,
            "ready": self.ready,
        }


@dataclass(frozen=True)
class ClusterFacts:
    """Cluster-wide facts from the API server."""

    server_version: str = ""
    provider: str = ""
    helm_releases: tuple[HelmRelease, ...] = ()
    workloads: tuple[Workload, ...] = ()
    cluster_policy: Mapping[str, Any] | None = None
    unreadable: tuple[Unreadable, ...] = ()

    def release(self, name: str, namespace: str) -> HelmRelease | None:
        for release in self.helm_releases:
            if release.name == name and release.namespace == namespace:
                return release
        return None

    def unread(self, *facts: str) -> str | None:
        """Why any of `facts` (e.g. "Secret objects") could not be read, or None when all were read."""
        found = [f"{u.fact}: {u.reason}" for u in self.unreadable if u.fact in facts]
        return "; ".join(found) if found else None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "serverVersion": self.server_version,
            "provider": self.provider,
            "helmReleases": [r.to_dict() for r in self.helm_releases],
            "workloads": [w.to_dict() for w in self.workloads],
        }
        if self.cluster_policy is not None:
            out["clusterPolicy"] = dict(self.cluster_policy)
        out["unreadable"] = [u.to_dict() for u in self.unreadable]
        return out


@dataclass(frozen=True)
class Snapshot:
    """A cluster snapshot, a node snapshot, or both merged (see the module docstring)."""

    nodes: tuple[Node, ...] = ()
    cluster: ClusterFacts | None = None
    generator: str = ""
    captured_at: str = ""
    sources: tuple[str, ...] = ()
    source: str = field(default="", compare=False)

    def node(self, name: str) -> Node | None:
        for node in self.nodes:
            if node.name == name:
                return node
        return None

    @functools.cached_property
    def gpu_nodes(self) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.is_gpu_node)

    def to_dict(self) -> dict[str, Any]:
        metadata: dict[str, Any] = {"generator": self.generator}
        if self.captured_at:
            metadata["capturedAt"] = self.captured_at
        metadata["sources"] = list(self.sources)
        out: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata}
        if self.cluster is not None:
            out["cluster"] = self.cluster.to_dict()
        out["nodes"] = [n.to_dict() for n in self.nodes]
        return out

    @classmethod
    def from_dict(cls, raw: object, *, source: str = "snapshot") -> Snapshot:
        """Read a snapshot document (dsx's, or AICR's measurement list: dsx.model.aicr); malformations
        are BadInputErrors naming `source` and the field."""
        from dsx.model import aicr  # aicr builds on this module

        if aicr.is_aicr_snapshot(raw):
            assert isinstance(raw, Mapping)
            return aicr.snapshot_from_aicr(raw, source=source)
        reader = _Reader(source)
        doc = reader.mapping(raw, "")
        if doc.get("apiVersion") != API_VERSION or doc.get("kind") != KIND:
            raise BadInputError(
                f"{source}: not a dsx snapshot (apiVersion {doc.get('apiVersion')!r}, kind {doc.get('kind')!r}); "
                f"expected apiVersion {API_VERSION}, kind {KIND} (or an AICR snapshot with measurements)"
            )
        meta = reader.mapping(doc.get("metadata") or {}, "metadata")
        cluster_raw = doc.get("cluster")
        cluster = None if cluster_raw is None else reader.cluster(cluster_raw)
        nodes = tuple(reader.node(n, f"nodes[{i}]") for i, n in enumerate(reader.sequence(doc.get("nodes"), "nodes")))
        names = [n.name for n in nodes]
        duplicate = next((n for n in names if names.count(n) > 1), None)
        if duplicate is not None:
            raise BadInputError(f"{source}: nodes: node {duplicate!r} appears twice")
        return cls(
            nodes=nodes,
            cluster=cluster,
            generator=reader.text(meta, "generator", "metadata"),
            captured_at=reader.text(meta, "capturedAt", "metadata"),
            sources=tuple(reader.strings(meta.get("sources"), "metadata.sources")),
            source=source,
        )


def merge(snapshots: Iterable[Snapshot]) -> Snapshot:
    """One document from one cluster snapshot and any number of node snapshots.

    Nodes join by name: the cluster snapshot brings the API-server facts, node snapshots bring
    `host`. Two documents with cluster facts, or two host records for one node, are an error,
    since either choice would silently drop facts.
    """
    items = list(snapshots)
    if not items:
        raise BadInputError("merge: no snapshots given")
    with_cluster = [s for s in items if s.cluster is not None]
    if len(with_cluster) > 1:
        names = ", ".join(s.source or "?" for s in with_cluster)
        raise BadInputError(f"merge: more than one cluster snapshot ({names}); merge takes one cluster snapshot")
    nodes: dict[str, Node] = {}
    origin: dict[tuple[str, str], str] = {}
    for snap in items:
        for node in snap.nodes:
            current = nodes.get(node.name, Node(name=node.name))
            if node.has_cluster_facts:
                if current.has_cluster_facts:
                    raise BadInputError(
                        f"merge: node {node.name} has cluster facts in both {origin[(node.name, 'cluster')]} "
                        f"and {snap.source or '?'}"
                    )
                current = replace(node, host=current.host)
                origin[(node.name, "cluster")] = snap.source or "?"
            if node.host is not None:
                if current.host is not None:
                    raise BadInputError(
                        f"merge: node {node.name} has host facts in both {origin[(node.name, 'host')]} "
                        f"and {snap.source or '?'}"
                    )
                current = replace(current, host=node.host)
                origin[(node.name, "host")] = snap.source or "?"
            nodes[node.name] = current
    sources = sorted({s for snap in items for s in snap.sources})
    captured = max((s.captured_at for s in items), default="")
    return Snapshot(
        nodes=tuple(nodes[name] for name in sorted(nodes)),
        cluster=with_cluster[0].cluster if with_cluster else None,
        generator=max((s.generator for s in items), default=""),
        captured_at=captured,
        sources=tuple(sources),
        source="merged",
    )


def service_from_provider_id(provider_id: str) -> str:
    """`aws:///us-east-1a/i-0…` → `eks`; unknown schemes come back as the scheme, empty as empty."""
    scheme = provider_id.split("://", 1)[0] if "://" in provider_id else ""
    return PROVIDER_SCHEMES.get(scheme, scheme)


def gfd_product_name(name: str) -> str:
    """nvidia-smi's `NVIDIA H100 80GB HBM3` in GPU Feature Discovery's label form `NVIDIA-H100-80GB-HBM3`."""
    return re.sub(r"\s+", "-", name.strip())


def _int_or_none(value: object) -> int | None:
    try:
        return int(str(value)) if value not in (None, "") else None
    except ValueError:
        return None


def _dotted(labels: Mapping[str, str], spellings: tuple[tuple[str, ...], ...]) -> str | None:
    for keys in spellings:
        parts = [labels.get(k) for k in keys]
        if parts[0]:
            present = [p for p in parts if p not in (None, "")]
            return ".".join(str(p) for p in present)
    return None


class _Reader:
    """Field-by-field parsing that names the file and the path of every bad value."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, problem: str) -> BadInputError:
        return BadInputError(f"{self.source}: {where}: {problem}" if where else f"{self.source}: {problem}")

    def mapping(self, raw: object, where: str) -> Mapping[str, Any]:
        if not isinstance(raw, Mapping):
            raise self.fail(where, f"expected a mapping, got {type(raw).__name__}")
        return raw

    def sequence(self, raw: object, where: str) -> list[Any]:
        if raw is None:
            return []
        if not isinstance(raw, list):
            raise self.fail(where, f"expected a list, got {type(raw).__name__}")
        return raw

    def text(self, raw: Mapping[str, Any], key: str, where: str, *, required: bool = False) -> str:
        value = raw.get(key)
        if value is None or value == "":
            if required:
                raise self.fail(where, f"{key} is required")
            return ""
        if isinstance(value, bool | dict | list):
            raise self.fail(where, f"{key} must be a string, got {type(value).__name__}")
        return str(value)

    def strings(self, raw: object, where: str) -> list[str]:
        return [str(x) for x in self.sequence(raw, where)]

    def string_map(self, raw: object, where: str) -> dict[str, str]:
        if raw is None:
            return {}
        return {str(k): "" if v is None else str(v) for k, v in self.mapping(raw, where).items()}

    def integer(self, raw: Mapping[str, Any], key: str, where: str) -> int | None:
        value = raw.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(where, f"{key} must be an integer, got {value!r}")
        return value

    def flag(self, raw: Mapping[str, Any], key: str, where: str) -> bool | None:
        value = raw.get(key)
        if value is None:
            return None
        if not isinstance(value, bool):
            raise self.fail(where, f"{key} must be true or false, got {value!r}")
        return value

    def records(self, raw: object, where: str, build: Callable[[Mapping[str, Any], str], T]) -> tuple[T, ...]:
        """Each item of a list, checked to be a mapping and built with its path (`nodes[3]`)."""
        out = []
        for index, item in enumerate(self.sequence(raw, where)):
            at = f"{where}[{index}]"
            out.append(build(self.mapping(item, at), at))
        return tuple(out)

    def unreadable(self, raw: object, where: str) -> tuple[Unreadable, ...]:
        return self.records(
            raw, where, lambda e, at: Unreadable(self.text(e, "fact", at, required=True), self.text(e, "reason", at))
        )

    def release(self, entry: Mapping[str, Any], at: str) -> HelmRelease:
        return HelmRelease(
            name=self.text(entry, "name", at, required=True),
            namespace=self.text(entry, "namespace", at, required=True),
            revision=self.integer(entry, "revision", at) or 0,
            chart=self.text(entry, "chart", at),
            version=self.text(entry, "version", at),
            status=self.text(entry, "status", at),
            app_version=self.text(entry, "appVersion", at),
            values=dict(self.mapping(entry.get("values") or {}, f"{at}.values")),
        )

    def workload(self, entry: Mapping[str, Any], at: str) -> Workload:
        return Workload(
            kind=self.text(entry, "kind", at, required=True),
            namespace=self.text(entry, "namespace", at),
            name=self.text(entry, "name", at, required=True),
            images=tuple(self.strings(entry.get("images"), f"{at}.images")),
            desired=self.integer(entry, "desired", at) or 0,
            ready=self.integer(entry, "ready", at) or 0,
        )

    def cluster(self, raw: object) -> ClusterFacts:
        doc = self.mapping(raw, "cluster")
        policy = doc.get("clusterPolicy")
        return ClusterFacts(
            server_version=self.text(doc, "serverVersion", "cluster"),
            provider=self.text(doc, "provider", "cluster"),
            helm_releases=self.records(doc.get("helmReleases"), "cluster.helmReleases", self.release),
            workloads=self.records(doc.get("workloads"), "cluster.workloads", self.workload),
            cluster_policy=None if policy is None else dict(self.mapping(policy, "cluster.clusterPolicy")),
            unreadable=self.unreadable(doc.get("unreadable"), "cluster.unreadable"),
        )

    def taint(self, entry: Mapping[str, Any], at: str) -> Taint:
        return Taint(
            key=self.text(entry, "key", at, required=True),
            effect=self.text(entry, "effect", at, required=True),
            value=self.text(entry, "value", at),
        )

    def node(self, raw: object, where: str) -> Node:
        doc = self.mapping(raw, where)
        host_raw = doc.get("host")
        return Node(
            name=self.text(doc, "name", where, required=True),
            provider_id=self.text(doc, "providerID", where),
            labels=self.string_map(doc.get("labels"), f"{where}.labels"),
            taints=self.records(doc.get("taints"), f"{where}.taints", self.taint),
            capacity=self.string_map(doc.get("capacity"), f"{where}.capacity"),
            allocatable=self.string_map(doc.get("allocatable"), f"{where}.allocatable"),
            node_info=self.string_map(doc.get("nodeInfo"), f"{where}.nodeInfo"),
            ready=self.flag(doc, "ready", where),
            unschedulable=bool(self.flag(doc, "unschedulable", where)),
            host=None if host_raw is None else self.host(host_raw, f"{where}.host"),
        )

    def gpu(self, entry: Mapping[str, Any], at: str) -> HostGpu:
        return HostGpu(
            index=self.integer(entry, "index", at) or 0,
            product=self.text(entry, "product", at, required=True),
            uuid=self.text(entry, "uuid", at),
            pci_bus_id=self.text(entry, "pciBusId", at),
            memory_mib=self.integer(entry, "memoryMiB", at),
            vbios_version=self.text(entry, "vbiosVersion", at),
            architecture=self.text(entry, "architecture", at),
        )

    def pci_device(self, entry: Mapping[str, Any], at: str) -> PciDevice:
        return PciDevice(
            address=self.text(entry, "address", at, required=True),
            device_id=self.text(entry, "deviceId", at, required=True),
            class_code=self.text(entry, "class", at),
            model=self.text(entry, "model", at),
            accelerator=self.text(entry, "accelerator", at),
        )

    def unit(self, entry: Mapping[str, Any], at: str) -> SystemdUnit:
        return SystemdUnit(
            name=self.text(entry, "name", at, required=True),
            unit_file=self.text(entry, "unitFile", at),
            drop_ins=tuple(self.strings(entry.get("dropIns"), f"{at}.dropIns")),
            enabled=self.flag(entry, "enabled", at),
            active=self.flag(entry, "active", at),
        )

    def host(self, raw: object, where: str) -> HostFacts:
        doc = self.mapping(raw, where)
        return HostFacts(
            gpus=self.records(doc.get("gpus"), f"{where}.gpus", self.gpu),
            driver_version=self.text(doc, "driverVersion", where),
            cuda_version=self.text(doc, "cudaVersion", where),
            pci_devices=self.records(doc.get("pciDevices"), f"{where}.pciDevices", self.pci_device),
            os_release=self.string_map(doc.get("osRelease"), f"{where}.osRelease"),
            kernel_release=self.text(doc, "kernelRelease", where),
            sysctls=self.string_map(doc.get("sysctls"), f"{where}.sysctls"),
            kernel_modules=tuple(self.strings(doc.get("kernelModules"), f"{where}.kernelModules")),
            systemd_units=self.records(doc.get("systemdUnits"), f"{where}.systemdUnits", self.unit),
            unreadable=self.unreadable(doc.get("unreadable"), f"{where}.unreadable"),
        )


def load(path: str) -> Snapshot:
    """Read a snapshot file (YAML or JSON; `-` is stdin)."""
    return Snapshot.from_dict(serialization.load_mapping_file(path), source=str(path))
