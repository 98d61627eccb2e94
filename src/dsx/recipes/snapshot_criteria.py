"""Criteria from what a cluster reports about its nodes (`dsx recipe --snapshot FILE`).

Node labels and node info already say which cloud, GPU and OS a cluster runs; reading them
beats asking people to type it. Accepted inputs: a dsx snapshot (`nodes:` at the top level or
under `spec`/`cluster`), a plain `kubectl get nodes -o yaml` list, or an AICR snapshot (read
through dsx.model.aicr first). Per node we read `spec.providerID` (or `providerID`), the
`nvidia.com/gpu.product` label (else nvidia-smi's product from host facts) and
`status.nodeInfo.osImage` (or `nodeInfo.osImage` / `osImage`, else the host's os-release).

Without a providerID the service comes from the version suffixes managed services stamp on their
builds: the kubelet's (`v1.30.4-eks-a737599`, `v1.30.5-gke.1014001`), the kernel's
(`6.8.0-1021-aws`, `6.1.102-111.182.amzn2023.x86_64`, `5.15.0-1064-azure`, `-gke`), and, when
no node says anything, the API server's. A suffix that names no service is no reading.

Unknown or mixed hardware is not guessed: that dimension is left out with a warning, and the
rest of the criteria still apply. Intent and platform cannot be read from nodes.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dsx.errors import BadInputError

GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
OPENSHIFT_LABEL = "node.openshift.io/os_id"

# providerID scheme → service
PROVIDER_SERVICES = {"aws": "eks", "gce": "gke", "azure": "aks", "oci": "oke", "kind": "kind", "openshift": "openshift"}
# version suffixes → service, checked in order (kubelet and API server first, then the kernel)
VERSION_SERVICES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"-eks-"), "eks"),
    (re.compile(r"-gke\b"), "gke"),
    (re.compile(r"-aks\b"), "aks"),
    (re.compile(r"-aws\b|\.amzn2(?:023)?\."), "eks"),
    (re.compile(r"-gcp\b"), "gke"),
    (re.compile(r"-azure\b"), "aks"),
    (re.compile(r"-oracle\b|\.el\d+uek\."), "oke"),
)
# gpu.product patterns → accelerator, checked in order (GB200 before B200, L40S is not L40)
ACCELERATOR_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"GB200"), "gb200"),
    (re.compile(r"(?<![G])B200"), "b200"),
    (re.compile(r"H200"), "h200"),
    (re.compile(r"H100"), "h100"),
    (re.compile(r"A100"), "a100"),
    (re.compile(r"L40S"), "l40s"),
    (re.compile(r"RTX[- ]?PRO[- ]?6000"), "rtx-pro-6000"),
)
# osImage patterns → os
OS_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"ubuntu", re.IGNORECASE), "ubuntu"),
    (re.compile(r"red hat|rhel|coreos", re.IGNORECASE), "rhel"),
    (re.compile(r"container-optimized os|\bcos\b", re.IGNORECASE), "cos"),
    (re.compile(r"amazon linux", re.IGNORECASE), "amazonlinux"),
)


@dataclass(frozen=True)
class Derived:
    """Criteria read from a snapshot, and what could not be read."""

    criteria: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


def derive(snapshot: Mapping[str, Any], *, source: str) -> Derived:
    """Service, accelerator, os and node count from the nodes in `snapshot`."""
    nodes = _nodes(snapshot, source)
    warnings: list[str] = []
    criteria: dict[str, Any] = {}
    gpu_nodes = [n for n in nodes if _gpu_product(n)]
    sample = gpu_nodes or nodes

    services = _classify(sample, _provider, service_for_node, "providerID", source)
    if not services.counts and not services.unknown_nodes:
        server = _server_version(snapshot)
        if service_for_version(server):
            services.counts[str(service_for_version(server))] += 1
    _choose("service", services, criteria, warnings, source, unknown="unknown provider")

    accelerators = _classify(gpu_nodes, _gpu_product, accelerator_for_product, "GPU product", source)
    _choose("accelerator", accelerators, criteria, warnings, source, unknown="unknown hardware")
    systems = _classify(sample, _os_image, os_for_image, "OS image", source)
    _choose("os", systems, criteria, warnings, source, unknown="unknown OS image")

    if gpu_nodes:
        criteria["nodes"] = len(gpu_nodes)
    else:
        warnings.append(
            f"{source}: no node carries {GPU_PRODUCT_LABEL} or nvidia-smi facts; accelerator and nodes left out"
        )
    return Derived(criteria=criteria, warnings=tuple(warnings))


def accelerator_for_product(product: str) -> str | None:
    """`NVIDIA-H100-80GB-HBM3` → h100; None for hardware dsx has no criteria value for."""
    normalized = product.upper().replace("_", "-")
    for pattern, accelerator in ACCELERATOR_PATTERNS:
        if pattern.search(normalized):
            return accelerator
    return None


def os_for_image(image: str) -> str | None:
    """`Ubuntu 24.04.1 LTS` → ubuntu; None for an OS dsx has no criteria value for."""
    for pattern, system in OS_PATTERNS:
        if pattern.search(image):
            return system
    return None


@dataclass
class _Tally:
    """How many nodes report each criteria value; `unknown` holds the readings nothing maps to."""

    what: str = ""
    counts: Counter[str] = field(default_factory=Counter)
    unknown_nodes: dict[str, list[str]] = field(default_factory=dict)
    """Unmapped reading → the nodes reporting it (one warning per reading, not per node)."""

    def unknown(self, source: str) -> list[str]:
        lines = []
        for text, names in self.unknown_nodes.items():
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            nodes = f"node {shown}" if len(names) == 1 else f"{len(names)} nodes ({shown})"
            lines.append(f"{source}: {self.what} {text!r} on {nodes} is not a known criteria value")
        return lines


def _classify(
    nodes: list[Mapping[str, Any]],
    reading: Callable[[Mapping[str, Any]], str],
    classify: Callable[[str], str | None],
    what: str,
    source: str,
) -> _Tally:
    tally = _Tally(what=what)
    for node in nodes:
        text = reading(node)
        if not text:
            continue
        value = classify(text)
        if value is None:
            tally.unknown_nodes.setdefault(text, []).append(_name(node))
        else:
            tally.counts[value] += 1
    return tally


def _choose(
    dimension: str, found: _Tally, criteria: dict[str, Any], warnings: list[str], source: str, *, unknown: str
) -> None:
    """Set `dimension` when every node agrees on one known value; otherwise warn and leave it out."""
    if found.unknown_nodes:
        warnings.extend(found.unknown(source))
        warnings.append(f"{source}: {dimension} left out of the criteria ({unknown})")
        return
    counts = found.counts
    if len(counts) == 1:
        criteria[dimension] = next(iter(counts))
    elif len(counts) > 1:
        seen = ", ".join(f"{k} ({v} nodes)" for k, v in sorted(counts.items()))
        warnings.append(f"{source}: nodes disagree on {dimension}: {seen}; left out of the criteria")


def _nodes(snapshot: Mapping[str, Any], source: str) -> list[Mapping[str, Any]]:
    candidates: list[Any] = [snapshot.get("nodes"), snapshot.get("items")]
    for holder in ("spec", "cluster", "status"):
        inner = snapshot.get(holder)
        if isinstance(inner, Mapping):
            candidates.append(inner.get("nodes"))
    for candidate in candidates:
        if isinstance(candidate, list) and candidate:
            if not all(isinstance(n, Mapping) for n in candidate):
                raise BadInputError(f"{source}: nodes must be a list of mappings")
            return list(candidate)
    raise BadInputError(f"{source}: no nodes found (expected a 'nodes' list, or a kubectl List with 'items')")


def _labels(node: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = node.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    if labels is None:
        labels = node.get("labels")
    return labels if isinstance(labels, Mapping) else {}


def _name(node: Mapping[str, Any]) -> str:
    meta = node.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return str(name or node.get("name") or "?")


def _provider(node: Mapping[str, Any]) -> str:
    """The node's providerID, or `openshift://` for OpenShift nodes (whatever cloud they run on).

    Without a providerID: the kubelet or kernel version when its suffix names a service, else "".
    """
    if _labels(node).get(OPENSHIFT_LABEL):
        return "openshift://"
    spec = node.get("spec")
    provider_id = (spec.get("providerID") if isinstance(spec, Mapping) else None) or node.get("providerID")
    if provider_id:
        return str(provider_id)
    info = _node_info(node)
    for key in ("kubeletVersion", "kernelVersion"):
        version = str(info.get(key) or "")
        if service_for_version(version):
            return version
    return ""


def service_for_node(reading: str) -> str | None:
    """A providerID (`scheme://…`) or a version string with a service suffix → service."""
    return service_for_provider(reading) if "://" in reading else service_for_version(reading)


def service_for_provider(provider_id: str) -> str | None:
    """`aws:///us-east-1a/i-0abc` → eks; None for a provider dsx has no criteria value for."""
    scheme = provider_id.split("://", 1)[0].lower() if "://" in provider_id else ""
    return PROVIDER_SERVICES.get(scheme)


def service_for_version(version: str) -> str | None:
    """`v1.30.4-eks-a737599` → eks, `6.8.0-1021-aws` → eks; None when no suffix names a service."""
    for pattern, service in VERSION_SERVICES:
        if pattern.search(version):
            return service
    return None


def _server_version(snapshot: Mapping[str, Any]) -> str:
    cluster = snapshot.get("cluster")
    version = cluster.get("serverVersion") if isinstance(cluster, Mapping) else None
    return str(version or "")


def _node_info(node: Mapping[str, Any]) -> Mapping[str, Any]:
    status = node.get("status")
    info = status.get("nodeInfo") if isinstance(status, Mapping) else None
    if not isinstance(info, Mapping):
        info = node.get("nodeInfo")
    return info if isinstance(info, Mapping) else {}


def _host(node: Mapping[str, Any]) -> Mapping[str, Any]:
    host = node.get("host")
    return host if isinstance(host, Mapping) else {}


def _gpu_product(node: Mapping[str, Any]) -> str:
    """The GPU Feature Discovery label, else the first GPU nvidia-smi reported in host facts."""
    label = _labels(node).get(GPU_PRODUCT_LABEL)
    if label:
        return str(label)
    gpus = _host(node).get("gpus")
    first = gpus[0] if isinstance(gpus, list) and gpus else None
    return str(first.get("product") or "") if isinstance(first, Mapping) else ""


def _os_image(node: Mapping[str, Any]) -> str:
    image = _node_info(node).get("osImage") or node.get("osImage")
    if not image:
        release = _host(node).get("osRelease")
        if isinstance(release, Mapping):
            image = release.get("PRETTY_NAME") or release.get("NAME")
    return str(image or "")
