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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Annotated, Any

import msgspec

from dsx.errors import BadInputError
from dsx.model import schema

API_VERSION = "dsx.run/v1alpha1"
KIND = "Snapshot"

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
        if not isinstance(raw, Mapping):
            raise BadInputError(f"{source}: expected a mapping, got {type(raw).__name__}")
        if raw.get("apiVersion") != API_VERSION or raw.get("kind") != KIND:
            raise BadInputError(
                f"{source}: not a dsx snapshot (apiVersion {raw.get('apiVersion')!r}, kind {raw.get('kind')!r}); "
                f"expected apiVersion {API_VERSION}, kind {KIND} (or an AICR snapshot with measurements)"
            )
        doc = schema.decode(raw, _SnapshotDoc, source=source, separator=": ")
        nodes = tuple(_node(n) for n in doc.nodes or ())
        names = [n.name for n in nodes]
        duplicate = next((n for n in names if names.count(n) > 1), None)
        if duplicate is not None:
            raise BadInputError(f"{source}: nodes: node {duplicate!r} appears twice")
        meta = doc.metadata or _MetadataDoc()
        return cls(
            nodes=nodes,
            cluster=None if doc.cluster is None else _cluster(doc.cluster),
            generator=_text(meta.generator),
            captured_at=_text(meta.captured_at),
            sources=tuple(_text(x) for x in meta.sources or ()),
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


# The document's shape, decoded by msgspec (dsx.model.schema). Snapshots come from live clusters
# and hosts, and from dsx versions newer than this one, so the schema is lenient where the old
# reader was: unknown keys are ignored, a text field takes a number (YAML's `cudaVersion: 12.4`),
# and the values of a string map (labels, capacity, sysctls) are taken as text whatever they are.

_Scalar = str | int | float
_Required = Annotated[str, msgspec.Meta(min_length=1)] | int | float


class _Doc(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    """A section of a snapshot: camelCase keys, unknown keys ignored."""


class _UnreadableDoc(_Doc, frozen=True):
    fact: _Required
    reason: _Scalar | None = None


class _TaintDoc(_Doc, frozen=True):
    key: _Required
    effect: _Required
    value: _Scalar | None = None


class _GpuDoc(_Doc, frozen=True):
    product: _Required
    index: int | None = None
    uuid: _Scalar | None = None
    pci_bus_id: _Scalar | None = None
    memory_mib: int | None = msgspec.field(default=None, name="memoryMiB")
    vbios_version: _Scalar | None = None
    architecture: _Scalar | None = None


class _PciDeviceDoc(_Doc, frozen=True):
    address: _Required
    device_id: _Required
    class_code: _Scalar | None = msgspec.field(default=None, name="class")
    model: _Scalar | None = None
    accelerator: _Scalar | None = None


class _UnitDoc(_Doc, frozen=True):
    name: _Required
    unit_file: _Scalar | None = None
    drop_ins: list[_Scalar] | None = None
    enabled: bool | None = None
    active: bool | None = None


class _HostDoc(_Doc, frozen=True):
    gpus: list[_GpuDoc] | None = None
    driver_version: _Scalar | None = None
    cuda_version: _Scalar | None = None
    pci_devices: list[_PciDeviceDoc] | None = None
    os_release: dict[Any, Any] | None = None
    kernel_release: _Scalar | None = None
    sysctls: dict[Any, Any] | None = None
    kernel_modules: list[_Scalar] | None = None
    systemd_units: list[_UnitDoc] | None = None
    unreadable: list[_UnreadableDoc] | None = None


class _NodeDoc(_Doc, frozen=True):
    name: _Required
    provider_id: _Scalar | None = msgspec.field(default=None, name="providerID")
    labels: dict[Any, Any] | None = None
    taints: list[_TaintDoc] | None = None
    capacity: dict[Any, Any] | None = None
    allocatable: dict[Any, Any] | None = None
    node_info: dict[Any, Any] | None = None
    ready: bool | None = None
    unschedulable: bool | None = None
    host: _HostDoc | None = None


class _ReleaseDoc(_Doc, frozen=True):
    name: _Required
    namespace: _Required
    revision: int | None = None
    chart: _Scalar | None = None
    version: _Scalar | None = None
    status: _Scalar | None = None
    app_version: _Scalar | None = None
    values: dict[str, Any] | None = None


class _WorkloadDoc(_Doc, frozen=True):
    kind: _Required
    name: _Required
    namespace: _Scalar | None = None
    images: list[_Scalar] | None = None
    desired: int | None = None
    ready: int | None = None


class _ClusterDoc(_Doc, frozen=True):
    server_version: _Scalar | None = None
    provider: _Scalar | None = None
    helm_releases: list[_ReleaseDoc] | None = None
    workloads: list[_WorkloadDoc] | None = None
    cluster_policy: dict[str, Any] | None = None
    unreadable: list[_UnreadableDoc] | None = None


class _MetadataDoc(_Doc, frozen=True):
    generator: _Scalar | None = None
    captured_at: _Scalar | None = None
    sources: list[_Scalar] | None = None


class _SnapshotDoc(_Doc, frozen=True):
    metadata: _MetadataDoc | None = None
    cluster: _ClusterDoc | None = None
    nodes: list[_NodeDoc] | None = None


def _text(value: object) -> str:
    return "" if value is None else str(value)


def _texts(values: Iterable[object] | None) -> tuple[str, ...]:
    return tuple(_text(v) for v in values or ())


def _text_map(values: Mapping[Any, Any] | None) -> dict[str, str]:
    return {str(k): _text(v) for k, v in (values or {}).items()}


def _unreadable(entries: Iterable[_UnreadableDoc] | None) -> tuple[Unreadable, ...]:
    return tuple(Unreadable(_text(e.fact), _text(e.reason)) for e in entries or ())


def _cluster(doc: _ClusterDoc) -> ClusterFacts:
    return ClusterFacts(
        server_version=_text(doc.server_version),
        provider=_text(doc.provider),
        helm_releases=tuple(
            HelmRelease(
                name=_text(r.name),
                namespace=_text(r.namespace),
                revision=r.revision or 0,
                chart=_text(r.chart),
                version=_text(r.version),
                status=_text(r.status),
                app_version=_text(r.app_version),
                values=r.values or {},
            )
            for r in doc.helm_releases or ()
        ),
        workloads=tuple(
            Workload(
                kind=_text(w.kind),
                namespace=_text(w.namespace),
                name=_text(w.name),
                images=_texts(w.images),
                desired=w.desired or 0,
                ready=w.ready or 0,
            )
            for w in doc.workloads or ()
        ),
        cluster_policy=doc.cluster_policy,
        unreadable=_unreadable(doc.unreadable),
    )


def _node(doc: _NodeDoc) -> Node:
    return Node(
        name=_text(doc.name),
        provider_id=_text(doc.provider_id),
        labels=_text_map(doc.labels),
        taints=tuple(Taint(key=_text(t.key), effect=_text(t.effect), value=_text(t.value)) for t in doc.taints or ()),
        capacity=_text_map(doc.capacity),
        allocatable=_text_map(doc.allocatable),
        node_info=_text_map(doc.node_info),
        ready=doc.ready,
        unschedulable=bool(doc.unschedulable),
        host=None if doc.host is None else _host(doc.host),
    )


def _host(doc: _HostDoc) -> HostFacts:
    return HostFacts(
        gpus=tuple(
            HostGpu(
                index=g.index or 0,
                product=_text(g.product),
                uuid=_text(g.uuid),
                pci_bus_id=_text(g.pci_bus_id),
                memory_mib=g.memory_mib,
                vbios_version=_text(g.vbios_version),
                architecture=_text(g.architecture),
            )
            for g in doc.gpus or ()
        ),
        driver_version=_text(doc.driver_version),
        cuda_version=_text(doc.cuda_version),
        pci_devices=tuple(
            PciDevice(
                address=_text(d.address),
                device_id=_text(d.device_id),
                class_code=_text(d.class_code),
                model=_text(d.model),
                accelerator=_text(d.accelerator),
            )
            for d in doc.pci_devices or ()
        ),
        os_release=_text_map(doc.os_release),
        kernel_release=_text(doc.kernel_release),
        sysctls=_text_map(doc.sysctls),
        kernel_modules=_texts(doc.kernel_modules),
        systemd_units=tuple(
            SystemdUnit(
                name=_text(u.name),
                unit_file=_text(u.unit_file),
                drop_ins=_texts(u.drop_ins),
                enabled=u.enabled,
                active=u.active,
            )
            for u in doc.systemd_units or ()
        ),
        unreadable=_unreadable(doc.unreadable),
    )
