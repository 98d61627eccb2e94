"""Facts a recipe constraint can name (`{Type}.{Subtype}.{Key}`), read from a snapshot.

Each fact is measured per subject: the cluster as a whole (`K8s.server.version`) or each node
it concerns (GPU nodes for OS, kernel and GPU facts; every node for kubelet facts). A subject
whose value cannot be read is listed under `missing` with the reason — the readiness phase
turns that into `skipped`, never into a pass.

The names, and where each value comes from, are documented in docs/validate.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from dsx.model import snapshot

CLUSTER = "cluster"
_NO_SNAPSHOT = snapshot.Snapshot()
"""What `measured` asks the cluster facts about: they answer by name, whatever the snapshot holds."""


@dataclass(frozen=True)
class Reading:
    """One fact on each subject it concerns."""

    source: str
    values: Mapping[str, str] = field(default_factory=dict)
    missing: Mapping[str, str] = field(default_factory=dict)


NodeFact = Callable[[snapshot.Node], tuple[str | None, str]]
"""Value (or None) and, when None, why it could not be read."""

_OS_IMAGES = (
    (re.compile(r"^Ubuntu (\d+\.\d+(?:\.\d+)?)"), "ubuntu"),
    (re.compile(r"^Red Hat Enterprise Linux (?!CoreOS)\D*(\d+(?:\.\d+)*)"), "rhel"),
    (re.compile(r"^Amazon Linux (\d+(?:\.\d+)*)"), "amzn"),
    (re.compile(r"^Container-Optimized OS from Google"), "cos"),
)


def read(name: str, snap: snapshot.Snapshot) -> Reading | None:
    """The fact `name` across `snap`, or None when dsx does not measure such a fact."""
    parts = name.split(".", 2)
    if len(parts) != 3:
        return None
    kind, subtype, key = parts
    cluster_fact = _cluster_fact(kind, subtype, key, snap)
    if cluster_fact is not None:
        return cluster_fact
    node_fact = _node_fact(kind, subtype, key)
    if node_fact is None:
        return None
    source, fact, scope = node_fact
    nodes = snap.nodes if scope == "all" else measured_nodes(snap)
    values: dict[str, str] = {}
    missing: dict[str, str] = {}
    for node in nodes:
        value, reason = fact(node)
        if value is None:
            missing[node.name] = reason
        else:
            values[node.name] = value
    if not nodes:
        missing[CLUSTER] = "no GPU nodes in the snapshot" if scope == "gpu" else "no nodes in the snapshot"
    return Reading(source, values, missing)


def measured_nodes(snap: snapshot.Snapshot) -> tuple[snapshot.Node, ...]:
    """The nodes OS and GPU facts are held on: the GPU nodes, or every node of a GPU-less snapshot."""
    return snap.gpu_nodes or snap.nodes


def measured(name: str) -> bool:
    """Whether dsx measures the fact `name` at all (`read` gives a Reading for it), snapshot or not."""
    parts = name.split(".", 2)
    if len(parts) != 3:
        return False
    kind, subtype, key = parts
    return _cluster_fact(kind, subtype, key, _NO_SNAPSHOT) is not None or _node_fact(kind, subtype, key) is not None


def _cluster_fact(kind: str, subtype: str, key: str, snap: snapshot.Snapshot) -> Reading | None:
    cluster = snap.cluster

    def one(source: str, value: str | None, reason: str = "") -> Reading:
        if cluster is None:
            return Reading(source, {}, {CLUSTER: "the snapshot has no cluster facts (take it with dsx snapshot)"})
        if value in (None, ""):
            return Reading(source, {}, {CLUSTER: reason or f"{source} is empty"})
        return Reading(source, {CLUSTER: str(value)}, {})

    if (kind, subtype, key) == ("K8s", "server", "version"):
        return one("cluster.serverVersion", cluster.server_version if cluster else None)
    if (kind, key) == ("K8s", "provider") and subtype in ("server", "node"):
        return one("cluster.provider", cluster.provider if cluster else None, "no providerID on any node")
    if (kind, subtype, key) in (("K8s", "node", "count"), ("NodeTopology", "summary", "node-count")):
        return one("nodes", str(len(snap.nodes)))
    if (kind, subtype, key) == ("GPU", "node", "count"):
        return one("nodes (GPU)", str(len(snap.gpu_nodes)))
    return None


def _node_fact(kind: str, subtype: str, key: str) -> tuple[str, NodeFact, str] | None:
    """(source, reader, scope) where scope is `all` nodes or the measured `gpu` nodes."""
    if kind == "K8s" and subtype == "kubelet" and key == "version":
        return "nodeInfo.kubeletVersion", _node_info("kubeletVersion"), "all"
    if kind == "K8s" and subtype == "containerRuntime" and key in ("version", "name"):
        return f"nodeInfo.containerRuntimeVersion ({key})", _runtime(key), "all"
    if kind == "OS" and subtype == "release":
        return f"os-release {_os_release_key(key)}", _os_release(_os_release_key(key)), "gpu"
    if kind == "OS" and subtype == "kernel" and key in ("version", "release"):
        return "kernel release", _kernel, "gpu"
    if kind == "OS" and subtype == "sysctl":
        sysctl = key.removeprefix("/proc/sys/").replace("/", ".")
        if sysctl == "kernel.osrelease":
            return "kernel release", _kernel, "gpu"
        return f"sysctl {sysctl}", _sysctl(sysctl), "gpu"
    if kind == "OS" and subtype == "kmod":
        return f"kernel module {key}", _module(key), "gpu"
    if kind == "GPU" and (subtype, key) in (("driver", "version"), ("smi", "driver")):
        return "GPU driver version", _gpu(lambda n: n.gpu_driver_version), "gpu"
    if kind == "GPU" and (subtype, key) in (("cuda", "version"), ("smi", "cuda-version")):
        return "CUDA version", _gpu(lambda n: n.gpu_cuda_version), "gpu"
    if kind == "GPU" and (subtype, key) in (("product", "name"), ("smi", "gpu.model")):
        return "GPU product", _gpu(lambda n: n.gpu_product), "gpu"
    if kind == "GPU" and (subtype, key) in (("gpu", "count"), ("smi", "gpu-count")):
        return "GPU count", _gpu(_gpu_count), "gpu"
    if kind == "SystemD":
        # the unit name may hold dots itself: SystemD.kubelet.service.enabled
        unit, _, prop = f"{subtype}.{key}".rpartition(".")
        if prop in ("active", "enabled"):
            unit = unit if "." in unit else f"{unit}.service"
            return f"systemd {unit} {prop}", _unit(unit, prop), "gpu"
    return None


def _node_info(field_name: str) -> NodeFact:
    def fact(node: snapshot.Node) -> tuple[str | None, str]:
        value = node.node_info.get(field_name)
        return (value, "") if value else (None, f"nodeInfo.{field_name} not in the snapshot")

    return fact


def _runtime(part: str) -> NodeFact:
    def fact(node: snapshot.Node) -> tuple[str | None, str]:
        value = node.node_info.get("containerRuntimeVersion", "")
        if "://" not in value:
            return None, "nodeInfo.containerRuntimeVersion not in the snapshot"
        name, version = value.split("://", 1)
        return (name if part == "name" else version), ""

    return fact


def _no_host(node: snapshot.Node) -> str:
    return f"no node snapshot for {node.name} (run dsx snapshot node there and merge it)"


def _host_unreadable(node: snapshot.Node, fact_name: str) -> str | None:
    if node.host is None:
        return None
    for entry in node.host.unreadable:
        if entry.fact == fact_name:
            return f"{fact_name}: {entry.reason}"
    return None


def _os_release_key(key: str) -> str:
    return {"version": "VERSION_ID", "id": "ID"}.get(key.lower(), key.upper())


def _os_release(key: str) -> NodeFact:
    def fact(node: snapshot.Node) -> tuple[str | None, str]:
        if node.host is not None and node.host.os_release:
            value = node.host.os_release.get(key)
            return (value, "") if value else (None, f"os-release has no {key}")
        image = node.node_info.get("osImage", "")
        derived = os_from_image(image)
        if derived is not None and key in ("ID", "VERSION_ID"):
            value = derived[0] if key == "ID" else derived[1]
            if value:
                return value, ""
        return None, _host_unreadable(node, "os-release") or _no_host(node)

    return fact


def os_from_image(image: str) -> tuple[str, str] | None:
    """(os-release ID, version) from a nodeInfo.osImage such as `Ubuntu 24.04.3 LTS`; None if unknown."""
    for pattern, os_id in _OS_IMAGES:
        match = pattern.match(image)
        if match:
            return os_id, match.group(1) if match.groups() else ""
    return None


def _kernel(node: snapshot.Node) -> tuple[str | None, str]:
    if node.host is not None and node.host.kernel_release:
        return node.host.kernel_release, ""
    value = node.node_info.get("kernelVersion")
    if value:
        return value, ""
    return None, _host_unreadable(node, "kernel release") or _no_host(node)


def _sysctl(name: str) -> NodeFact:
    def fact(node: snapshot.Node) -> tuple[str | None, str]:
        if node.host is None:
            return None, _no_host(node)
        value = node.host.sysctls.get(name)
        if value is not None:
            return value, ""
        return None, _host_unreadable(node, f"sysctl {name}") or f"sysctl {name} is not collected by dsx snapshot node"

    return fact


def _module(name: str) -> NodeFact:
    def fact(node: snapshot.Node) -> tuple[str | None, str]:
        if node.host is None:
            return None, _no_host(node)
        unreadable = _host_unreadable(node, "kernel modules")
        if unreadable:
            return None, unreadable
        return ("true" if name in node.host.kernel_modules else "false"), ""

    return fact


def _gpu(getter: Callable[[snapshot.Node], str | None]) -> NodeFact:
    def fact(node: snapshot.Node) -> tuple[str | None, str]:
        value = getter(node)
        if value:
            return value, ""
        if node.host is None:
            return None, "no nvidia.com/* label for it and " + _no_host(node)
        return None, _host_unreadable(node, "nvidia-smi") or "neither node labels nor nvidia-smi report it"

    return fact


def _gpu_count(node: snapshot.Node) -> str | None:
    labels = node.gpu
    if labels is not None and labels.count is not None:
        return str(labels.count)
    if node.host is not None and node.host.gpus:
        return str(len(node.host.gpus))
    return None


def _unit(unit: str, key: str) -> NodeFact:
    def fact(node: snapshot.Node) -> tuple[str | None, str]:
        if node.host is None:
            return None, _no_host(node)
        for entry in node.host.systemd_units:
            if entry.name == unit:
                value = entry.active if key == "active" else entry.enabled
                if value is None:
                    return None, f"systemd state of {unit} not readable on the host"
                return ("true" if value else "false"), ""
        return None, f"{unit} is not collected by dsx snapshot node"

    return fact
