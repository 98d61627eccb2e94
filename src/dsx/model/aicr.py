"""NVIDIA AICR's documents, read and written as dsx's: the Snapshot (a list of measurements) and
RecipeCriteria. People moving from AICR bring exactly these files.

An AICR snapshot is `{kind: Snapshot, apiVersion: aicr.run/v1 (or aicr.run/v1alpha2,
aicr.nvidia.com/v1alpha1), metadata: {source-node, timestamp, version}, measurements: [{type,
subtypes: [{subtype, data, context}]}]}` with types `K8s` (server, node, image, policy), `GPU`
(smi), `OS` (release, sysctl, kmod, grub), `SystemD` (one subtype per unit) and `NodeTopology`
(summary, label, taint). Most facts describe the one node the agent ran on (`K8s.node`,
`metadata.source-node`); NodeTopology lists every node's labels and taints as
`key → "value|node1,node2"` (taints `"effect|value|nodes"`), or, in newer versions, as `items`
with `context {key, value, effect}` and `data {node-list, ...}`.

`snapshot_from_aicr` gives the dsx `Snapshot` those facts make: the agent's node with its
providerID, nodeInfo and host facts (nvidia-smi's first GPU × gpu-count, os-release, sysctls,
modules, systemd units), every node named in NodeTopology with its labels and taints, and the
server version. Nothing is invented: pod images and grub arguments have no dsx field and are
left out. `snapshot_to_aicr` writes the reverse, which `aicr recipe --snapshot` reads.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from dsx.errors import BadInputError, allowed_values_message
from dsx.model import snapshot as model

API_GROUPS = ("aicr.run", "aicr.nvidia.com", "eidos.nvidia.com", "cns.nvidia.com")
"""AICR's API groups over its renames; any version of them is read."""
WRITE_API_VERSION = "aicr.run/v1"
"""What `dsx snapshot --format aicr` writes: the stable track AICR's snapshot loader accepts."""
CRITERIA_KIND = "RecipeCriteria"
CRITERIA_KEYS = ("service", "accelerator", "os", "intent", "platform", "nodes")
# AICR spellings dsx names differently (criteria values are otherwise the same words)
CRITERIA_ALIASES: dict[str, dict[str, str]] = {
    "service": {"self-managed": "any", "self": "any", "vanilla": "any"},
    "os": {"al2": "amazonlinux", "al2023": "amazonlinux"},
    "accelerator": {"l40": "l40s"},
}
MEASUREMENT_TYPES = ("K8s", "GPU", "OS", "SystemD", "NodeTopology")
_PROC_SYS = "/proc/sys/"


def _group(document: Mapping[str, Any]) -> str:
    api_version = document.get("apiVersion")
    return api_version.split("/", 1)[0] if isinstance(api_version, str) else ""


def is_aicr_snapshot(document: object) -> bool:
    """An AICR snapshot: a measurements list under an AICR apiVersion, or under no apiVersion at all."""
    if not isinstance(document, Mapping) or "measurements" not in document:
        return False
    kind = document.get("kind")
    return kind in (None, "", model.KIND) and (not document.get("apiVersion") or _group(document) in API_GROUPS)


def is_aicr_criteria(document: object) -> bool:
    return (
        isinstance(document, Mapping)
        and str(document.get("kind", "")).lower() == CRITERIA_KIND.lower()
        and (not document.get("apiVersion") or _group(document) in API_GROUPS)
    )


def criteria_mapping(document: Mapping[str, Any], *, source: str) -> dict[str, Any]:
    """The plain criteria mapping of an AICR RecipeCriteria (`spec`), in dsx's spellings.

    `nodes: 0` means unset in AICR; AICR-only aliases (`self-managed`, `al2023`, `l40`) become
    dsx's values. Values dsx does not know stay as written, so the caller's check names them.
    """
    spec = document.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, Mapping):
        raise BadInputError(f"{source}: spec: expected a mapping of criteria (service, accelerator, ...)")
    out: dict[str, Any] = {}
    for key, value in spec.items():
        if key not in CRITERIA_KEYS:
            raise BadInputError(allowed_values_message(source, "spec key", key, CRITERIA_KEYS))
        if key == "nodes" and value in (0, "0"):
            continue
        if isinstance(value, str):
            value = CRITERIA_ALIASES.get(key, {}).get(value.strip().lower(), value)
        out[key] = value
    return out


# ---- AICR → dsx ----------------------------------------------------------------------------


class _Measurements:
    """`type → subtype → data` of an AICR snapshot, validated as read; errors name `source` and the entry."""

    def __init__(self, document: Mapping[str, Any], source: str) -> None:
        self.source = source
        self.data: dict[tuple[str, str], dict[str, Any]] = {}
        self.items: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        self.order: list[tuple[str, str]] = []
        raw = document.get("measurements")
        if not isinstance(raw, list):
            raise BadInputError(f"{source}: measurements: expected a list of {{type, subtypes}}")
        usable = 0
        for index, measurement in enumerate(raw):
            if measurement is None:
                continue
            where = f"measurements[{index}]"
            if not isinstance(measurement, Mapping):
                raise BadInputError(f"{source}: {where}: expected a mapping with type and subtypes")
            kind = measurement.get("type")
            if not isinstance(kind, str) or not kind:
                continue  # AICR itself ignores typeless entries
            usable += 1
            subtypes = measurement.get("subtypes") or []
            if not isinstance(subtypes, list):
                raise BadInputError(f"{source}: {where}.subtypes: expected a list")
            for position, subtype in enumerate(subtypes):
                self._subtype(kind, subtype, f"{where}.subtypes[{position}]")
        if not usable:
            raise BadInputError(f"{source}: measurements: no measurement with a type; not an AICR snapshot")

    def _subtype(self, kind: str, subtype: object, where: str) -> None:
        if not isinstance(subtype, Mapping):
            raise BadInputError(f"{self.source}: {where}: expected a mapping with subtype and data")
        name = subtype.get("subtype", subtype.get("name", ""))
        data = subtype.get("data") or {}
        items = subtype.get("items") or []
        if not isinstance(name, str) or not isinstance(data, Mapping) or not isinstance(items, list):
            raise BadInputError(f"{self.source}: {where}: expected subtype (text), data (mapping), items (list)")
        key = (kind, name)
        if key not in self.data:
            self.order.append(key)
        readings = {str(k): _scalar(v) for k, v in data.items() if not isinstance(v, Mapping | list)}
        self.data.setdefault(key, {}).update(readings)
        self.items.setdefault(key, []).extend(i for i in items if isinstance(i, Mapping))

    def get(self, kind: str, subtype: str) -> dict[str, Any]:
        return self.data.get((kind, subtype), {})

    def text(self, kind: str, subtype: str, key: str) -> str:
        value = self.get(kind, subtype).get(key)
        return "" if value is None or isinstance(value, bool) else str(value)

    def subtypes(self, kind: str) -> list[str]:
        return [name for k, name in self.order if k == kind]


def _scalar(value: object) -> object:
    """A reading as read, except non-finite floats, kept as text so every output stays strict JSON."""
    return str(value) if isinstance(value, float) and not math.isfinite(value) else value


def snapshot_from_aicr(document: Mapping[str, Any], *, source: str = "snapshot") -> model.Snapshot:
    """The dsx snapshot an AICR snapshot's facts make (see the module docstring)."""
    found = _Measurements(document, source)
    meta = document.get("metadata") if isinstance(document.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    agent = found.text("K8s", "node", "source-node") or str(meta.get("source-node") or "")
    labels, taints = _topology(found)
    names = sorted(set(labels) | set(taints) | ({agent} if agent else set()))
    nodes = []
    for name in names:
        is_agent = name == agent
        nodes.append(
            model.Node(
                name=name,
                provider_id=found.text("K8s", "node", "provider-id") if is_agent else "",
                labels=dict(sorted(labels.get(name, {}).items())),
                taints=tuple(taints.get(name, ())),
                node_info=_node_info(found) if is_agent else {},
                host=_host(found) if is_agent else None,
            )
        )
    server = found.get("K8s", "server")
    cluster = None
    if server or found.get("K8s", "node"):
        cluster = model.ClusterFacts(
            server_version=found.text("K8s", "server", "version"),
            provider=found.text("K8s", "server", "service") or found.text("K8s", "node", "provider"),
            cluster_policy=_policy(found.get("K8s", "policy")),
        )
    version = str(meta.get("version") or "")
    return model.Snapshot(
        nodes=tuple(nodes),
        cluster=cluster,
        generator=f"aicr/{version}" if version else "aicr",
        captured_at=str(meta.get("timestamp") or ""),
        sources=(source,),
        source=source,
    )


def _node_info(found: _Measurements) -> dict[str, str]:
    pairs = (
        ("containerRuntimeVersion", "container-runtime-id"),
        ("kernelVersion", "kernel-version"),
        ("kubeletVersion", "kubelet-version"),
        ("operatingSystem", "operating-system"),
        ("osImage", "os-image"),
    )
    return {ours: found.text("K8s", "node", theirs) for ours, theirs in pairs if found.text("K8s", "node", theirs)}


def _host(found: _Measurements) -> model.HostFacts | None:
    smi = found.get("GPU", "smi") or found.get("GPU", "device")
    release = {k: str(v) for k, v in found.get("OS", "release").items()}
    sysctls = {
        k.removeprefix(_PROC_SYS).replace("/", "."): " ".join(str(v).split())
        for k, v in found.get("OS", "sysctl").items()
    }
    modules = tuple(sorted(k for k, v in found.get("OS", "kmod").items() if v is not False and v != "false"))
    units = tuple(_unit(name, found.get("SystemD", name)) for name in sorted(found.subtypes("SystemD")))
    if not (smi or release or sysctls or modules or units):
        return None
    model_name = str(smi.get("gpu.model") or smi.get("model") or "")
    count = _gpu_count(smi.get("gpu-count"), found.source)
    gpus = tuple(
        model.HostGpu(
            index=i,
            product=model_name,
            vbios_version=str(smi.get("gpu.vbios-version") or ""),
            architecture=str(smi.get("gpu.product-architecture") or ""),
        )
        for i in range(count if model_name else 0)
    )
    return model.HostFacts(
        gpus=gpus,
        driver_version=str(smi.get("driver") or ""),
        cuda_version=str(smi.get("cuda-version") or ""),
        os_release=release,
        kernel_release=sysctls.get("kernel.osrelease", found.text("K8s", "node", "kernel-version")),
        sysctls=dict(sorted(sysctls.items())),
        kernel_modules=modules,
        systemd_units=units,
    )


MAX_GPUS_PER_NODE = 256


def _gpu_count(value: object, source: str) -> int:
    """GPU.smi gpu-count as an int in [0, MAX_GPUS_PER_NODE]; absent is 0."""
    if value is None or value == "":
        return 0
    try:
        count = int(str(value))
    except ValueError:
        count = -1
    if isinstance(value, bool) or not 0 <= count <= MAX_GPUS_PER_NODE:
        raise BadInputError(
            f"{source}: GPU.smi.gpu-count: {value!r} is not a GPU count (an integer 0..{MAX_GPUS_PER_NODE})"
        )
    return count


def _unit(name: str, data: Mapping[str, Any]) -> model.SystemdUnit:
    active = data.get("ActiveState")
    enabled = data.get("UnitFileState")
    return model.SystemdUnit(
        name=name,
        unit_file=str(data.get("FragmentPath") or ""),
        active=None if active is None else active == "active",
        enabled=None if enabled is None else enabled == "enabled",
    )


def _policy(flat: Mapping[str, Any]) -> dict[str, Any] | None:
    """AICR flattens the ClusterPolicy spec to dot keys; dsx keeps the nested spec."""
    if not flat:
        return None
    spec: dict[str, Any] = {}
    for key in sorted(flat):
        *parents, leaf = key.split(".")
        at = spec
        for part in parents:
            nested = at.setdefault(part, {})
            if not isinstance(nested, dict):
                break
            at = nested
        else:
            at.setdefault(leaf, flat[key])
    return {"name": "", "state": "", "spec": spec}


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


_MORE = re.compile(r"^\(\+\d+ more\)$")


def _node_names(text: str) -> list[str]:
    """A rendered node list; the `(+N more)` truncation marker is not a node."""
    return [n.strip() for n in text.split(",") if n.strip() and not _MORE.match(n.strip())]


def _topology(found: _Measurements) -> tuple[dict[str, dict[str, str]], dict[str, list[model.Taint]]]:
    labels: dict[str, dict[str, str]] = {}
    taints: dict[str, list[model.Taint]] = {}
    for key, value, nodes in _readings(found, "label"):
        for node in nodes:
            labels.setdefault(node, {})[key] = value
    for item in found.items.get(("NodeTopology", "taint"), []):
        context, data = _mapping(item.get("context")), _mapping(item.get("data"))
        for node in _node_names(str(data.get("node-list") or "")):
            taints.setdefault(node, []).append(
                model.Taint(str(context.get("key", "")), str(context.get("effect", "")), str(context.get("value", "")))
            )
    if not found.items.get(("NodeTopology", "taint")):
        for raw_key, text in sorted(found.get("NodeTopology", "taint").items()):
            parts = str(text).split("|", 2)
            if len(parts) == 3:  # key → effect|value|nodes
                key, (effect, value, listed) = raw_key, parts
            elif len(parts) == 2:  # key.effect → value|nodes (several effects for one key)
                key, _, effect = raw_key.rpartition(".")
                value, listed = parts
            else:
                continue
            for node in _node_names(listed):
                taints.setdefault(node, []).append(model.Taint(key or raw_key, effect, value))
    return labels, taints


def _readings(found: _Measurements, subtype: str) -> list[tuple[str, str, list[str]]]:
    """(key, value, nodes) per NodeTopology label reading, from `items` when present, else `data`."""
    items = found.items.get(("NodeTopology", subtype), [])
    if items:
        out = []
        for item in items:
            context, data = _mapping(item.get("context")), _mapping(item.get("data"))
            if context.get("key"):
                out.append(
                    (str(context["key"]), str(context.get("value", "")), _node_names(str(data.get("node-list", ""))))
                )
        return out
    readings = []
    for key, text in sorted(found.get("NodeTopology", subtype).items()):
        value, _, listed = str(text).partition("|")
        readings.append((key, value, _node_names(listed)))
    # a key with several values is written `<key>.<value>`; fold it back when the suffix is the value
    return [(k.removesuffix(f".{v}") if v and k.endswith(f".{v}") else k, v, n) for k, v, n in readings]


# ---- dsx → AICR ----------------------------------------------------------------------------


def snapshot_to_aicr(snap: model.Snapshot, *, version: str = "") -> dict[str, Any]:
    """An AICR snapshot document of `snap`, which `aicr recipe --snapshot` reads.

    The per-node measurements describe one node, as AICR's agent does: the first GPU node with
    cluster facts (else the first node). OS.release comes from the host's os-release, or is
    read off nodeInfo.osImage when only cluster facts exist (its context says so).
    """
    agent = next((n for n in snap.gpu_nodes if n.has_cluster_facts), None) or (snap.nodes[0] if snap.nodes else None)
    measurements: list[dict[str, Any]] = []
    k8s = _k8s(snap, agent)
    if k8s:
        measurements.append({"type": "K8s", "subtypes": k8s})
    if agent is not None:
        gpu = _smi(agent)
        if gpu:
            measurements.append({"type": "GPU", "subtypes": [{"subtype": "smi", "data": gpu}]})
        os_subtypes = _os(agent)
        if os_subtypes:
            measurements.append({"type": "OS", "subtypes": os_subtypes})
        if agent.host is not None and agent.host.systemd_units:
            units = [_unit_data(u) for u in agent.host.systemd_units]
            measurements.append({"type": "SystemD", "subtypes": units})
    topology = _topology_subtypes(snap)
    if topology:
        measurements.append({"type": "NodeTopology", "subtypes": topology})
    metadata = {"timestamp": snap.captured_at, "version": version or snap.generator}
    if agent is not None:
        metadata["source-node"] = agent.name
    return {
        "kind": model.KIND,
        "apiVersion": WRITE_API_VERSION,
        "metadata": {k: v for k, v in metadata.items() if v},
        "measurements": measurements,
    }


def _k8s(snap: model.Snapshot, agent: model.Node | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    server: dict[str, Any] = {}
    if snap.cluster is not None and snap.cluster.server_version:
        server["version"] = snap.cluster.server_version
    service = model.service_from_provider_id(agent.provider_id) if agent is not None else ""
    if service in ("eks", "gke", "aks", "oke"):
        server["service"] = service
    if server:
        out.append({"subtype": "server", "data": server})
    if agent is not None and agent.has_cluster_facts:
        node: dict[str, Any] = {"source-node": agent.name}
        if agent.provider_id:
            node["provider"] = service
            node["provider-id"] = agent.provider_id
        info = agent.node_info
        runtime = info.get("containerRuntimeVersion", "")
        pairs = (
            ("container-runtime-id", runtime),
            ("container-runtime-name", runtime.partition("://")[0] if "://" in runtime else ""),
            ("container-runtime-version", runtime.partition("://")[2]),
            ("kubelet-version", info.get("kubeletVersion", "")),
            ("kernel-version", info.get("kernelVersion", "")),
            ("operating-system", info.get("operatingSystem", "")),
            ("os-image", info.get("osImage", "")),
        )
        node.update({k: v for k, v in pairs if v})
        out.append({"subtype": "node", "data": node})
    policy = snap.cluster.cluster_policy if snap.cluster is not None else None
    if policy and isinstance(policy.get("spec"), Mapping) and policy["spec"]:
        out.append({"subtype": "policy", "data": _flatten(policy["spec"])})
    return out


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in sorted(tree):
        value = tree[key]
        if isinstance(value, Mapping) and value:
            out.update(_flatten(value, f"{prefix}{key}."))
        elif isinstance(value, str | int | float | bool):
            out[f"{prefix}{key}"] = value
        elif value is not None:
            out[f"{prefix}{key}"] = str(value)
    return out


def _smi(node: model.Node) -> dict[str, Any]:
    product = node.gpu_product
    if product is None:
        return {}
    data: dict[str, Any] = {"gpu.model": product.replace("-", " ")}
    labels = node.gpu
    count = labels.count if labels is not None and labels.count is not None else None
    host = node.host
    if host is not None and host.gpus:
        data["gpu.model"] = host.gpus[0].product
        count = len(host.gpus)
        if host.gpus[0].architecture:
            data["gpu.product-architecture"] = host.gpus[0].architecture
        if host.gpus[0].vbios_version:
            data["gpu.vbios-version"] = host.gpus[0].vbios_version
    if count is not None:
        data["gpu-count"] = count
    if node.gpu_driver_version:
        data["driver"] = node.gpu_driver_version
    if node.gpu_cuda_version:
        data["cuda-version"] = node.gpu_cuda_version
    return data


def _os(node: model.Node) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    host = node.host
    if host is not None and host.os_release:
        out.append({"subtype": "release", "data": dict(host.os_release)})
    elif node.node_info.get("osImage"):
        release = _release_from_image(node.node_info["osImage"])
        if release:
            out.append({"subtype": "release", "data": release, "context": {"source": "nodeInfo.osImage"}})
    if host is not None:
        sysctls = {_PROC_SYS + k.replace(".", "/"): v for k, v in host.sysctls.items()}
        if host.kernel_release:
            sysctls.setdefault(_PROC_SYS + "kernel/osrelease", host.kernel_release)
        if sysctls:
            out.append({"subtype": "sysctl", "data": dict(sorted(sysctls.items()))})
        if host.kernel_modules:
            out.append({"subtype": "kmod", "data": dict.fromkeys(host.kernel_modules, True)})
    return out


_IMAGE_IDS = (
    (re.compile(r"^ubuntu\s+(\d+\.\d+)", re.I), "ubuntu"),
    (re.compile(r"^amazon linux\s+(\d+)", re.I), "amzn"),
    (re.compile(r"^red hat enterprise linux.*?(\d+\.\d+)", re.I), "rhel"),
    (re.compile(r"^red hat enterprise linux coreos\s+(\S+)", re.I), "rhcos"),
    (re.compile(r"^container-optimized os", re.I), "cos"),
)


def _release_from_image(image: str) -> dict[str, str]:
    for pattern, os_id in _IMAGE_IDS:
        match = pattern.search(image)
        if match:
            out = {"ID": os_id, "PRETTY_NAME": image}
            if match.groups():
                out["VERSION_ID"] = match.group(1)
            return out
    return {}


def _unit_data(unit: model.SystemdUnit) -> dict[str, Any]:
    data: dict[str, Any] = {"Id": unit.name}
    if unit.unit_file:
        data["FragmentPath"] = unit.unit_file
    if unit.active is not None:
        data["ActiveState"] = "active" if unit.active else "inactive"
    if unit.enabled is not None:
        data["UnitFileState"] = "enabled" if unit.enabled else "disabled"
    return {"subtype": unit.name, "data": data}


def _topology_subtypes(snap: model.Snapshot) -> list[dict[str, Any]]:
    labelled = [n for n in snap.nodes if n.has_cluster_facts]
    if not labelled:
        return []
    by_label: dict[tuple[str, str], list[str]] = {}
    for node in labelled:
        for key, value in node.labels.items():
            by_label.setdefault((key, value), []).append(node.name)
    values_per_key: dict[str, int] = {}
    for key, _ in by_label:
        values_per_key[key] = values_per_key.get(key, 0) + 1
    labels = {
        (f"{k}.{v}" if values_per_key[k] > 1 else k): f"{v}|{','.join(sorted(names))}"
        for (k, v), names in sorted(by_label.items())
    }
    by_taint: dict[tuple[str, str, str], list[str]] = {}
    for node in labelled:
        for taint in node.taints:
            by_taint.setdefault((taint.key, taint.effect, taint.value), []).append(node.name)
    per_key: dict[str, int] = {}
    for key, _, _ in by_taint:
        per_key[key] = per_key.get(key, 0) + 1
    taints = {}
    for (key, effect, value), names in sorted(by_taint.items()):
        listed = ",".join(sorted(names))
        if per_key[key] > 1:
            taints[f"{key}.{effect}"] = f"{value}|{listed}"
        else:
            taints[key] = f"{effect}|{value}|{listed}"
    summary = {"node-count": len(labelled), "label-count": len(labels), "taint-count": len(taints)}
    out = [{"subtype": "summary", "data": summary}]
    if labels:
        out.append({"subtype": "label", "data": labels})
    if taints:
        out.append({"subtype": "taint", "data": taints})
    return out
