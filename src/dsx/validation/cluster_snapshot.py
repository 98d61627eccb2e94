"""Cluster facts read from the API server into a `Snapshot`.

Reads nodes, Helm release Secrets, workloads and the GPU Operator ClusterPolicy through a
`ClusterReader`. Nodes are what a snapshot is about: a denied node list fails the snapshot
(ForbiddenError, exit 4). Any other kind that is denied (RBAC) is recorded in
`cluster.unreadable` with the reason and the rest of the snapshot is still taken, so the checks
that need it report `skipped`; a ClusterPolicy kind the server does not serve simply means the
GPU Operator is not installed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from dsx.errors import NotFoundError
from dsx.model import snapshot
from dsx.validation import helm_storage, reading

NODE_INFO_KEYS = (
    "osImage",
    "kernelVersion",
    "containerRuntimeVersion",
    "kubeletVersion",
    "architecture",
    "operatingSystem",
)
WORKLOAD_KINDS = ("Deployment", "DaemonSet", "StatefulSet")
CLUSTER_POLICY = ("nvidia.com/v1", "ClusterPolicy")
# server gitVersion suffixes of managed services, for clusters whose nodes carry no providerID
_VERSION_HINTS = (("-eks-", "eks"), ("-gke.", "gke"), ("-aks", "aks"))


def collect(reader: reading.ClusterReader, *, generator: str, captured_at: str = "") -> snapshot.Snapshot:
    """A cluster snapshot: server version, provider, nodes, Helm releases, workloads, ClusterPolicy."""
    unreadable: list[snapshot.Unreadable] = []
    server_version = str(reader.server_version().get("gitVersion") or "")
    node_objects = reading.with_kind(reader.list("v1", "Node"), "Node")
    nodes = tuple(sorted((node_from_object(o) for o in node_objects), key=lambda n: n.name))
    secrets = _list(reader, "v1", "Secret", unreadable, labels=helm_storage.OWNER_LABELS)
    releases, broken = helm_storage.latest_releases(secrets)
    unreadable.extend(broken)
    workloads: list[snapshot.Workload] = []
    for kind in WORKLOAD_KINDS:
        workloads.extend(workload_from_object(o, kind) for o in _list(reader, "apps/v1", kind, unreadable))
    cluster = snapshot.ClusterFacts(
        server_version=server_version,
        provider=provider_of(nodes, server_version),
        helm_releases=releases,
        workloads=tuple(sorted(workloads, key=lambda w: (w.namespace, w.kind, w.name))),
        cluster_policy=_cluster_policy(reader, unreadable),
        unreadable=tuple(unreadable),
    )
    return snapshot.Snapshot(
        nodes=nodes, cluster=cluster, generator=generator, captured_at=captured_at, sources=("cluster",)
    )


def _list(
    reader: reading.ClusterReader,
    api_version: str,
    kind: str,
    unreadable: list[snapshot.Unreadable],
    *,
    labels: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    try:
        return reading.with_kind(reader.list(api_version, kind, labels=labels), kind)
    except reading.DENIED as exc:
        unreadable.append(snapshot.Unreadable(f"{kind} objects", str(exc)))
        return []


def _cluster_policy(reader: reading.ClusterReader, unreadable: list[snapshot.Unreadable]) -> dict[str, Any] | None:
    try:
        policies = _list(reader, *CLUSTER_POLICY, unreadable)
    except NotFoundError:
        return None
    if not policies:
        return None
    policy = min(policies, key=lambda p: str((p.get("metadata") or {}).get("name")))
    return {
        "name": (policy.get("metadata") or {}).get("name", ""),
        "state": (policy.get("status") or {}).get("state", ""),
        "spec": policy.get("spec") or {},
    }


def node_from_object(obj: Mapping[str, Any]) -> snapshot.Node:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    info = status.get("nodeInfo") or {}
    ready = None
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready":
            ready = condition.get("status") == "True"
    return snapshot.Node(
        name=str(meta.get("name") or ""),
        provider_id=str(spec.get("providerID") or ""),
        labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        taints=tuple(
            snapshot.Taint(key=str(t.get("key", "")), effect=str(t.get("effect", "")), value=str(t.get("value") or ""))
            for t in spec.get("taints") or []
        ),
        capacity={str(k): str(v) for k, v in (status.get("capacity") or {}).items()},
        allocatable={str(k): str(v) for k, v in (status.get("allocatable") or {}).items()},
        node_info={k: str(info[k]) for k in NODE_INFO_KEYS if info.get(k)},
        ready=ready,
        unschedulable=bool(spec.get("unschedulable")),
    )


def workload_from_object(obj: Mapping[str, Any], kind: str) -> snapshot.Workload:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    pod = (spec.get("template") or {}).get("spec") or {}
    images = [str(c.get("image", "")) for c in [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]]
    if kind == "DaemonSet":
        desired, ready = status.get("desiredNumberScheduled", 0), status.get("numberReady", 0)
    else:
        desired, ready = spec.get("replicas", 1), status.get("readyReplicas", 0)
    return snapshot.Workload(
        kind=kind,
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        images=tuple(dict.fromkeys(i for i in images if i)),
        desired=int(desired or 0),
        ready=int(ready or 0),
    )


def provider_of(nodes: tuple[snapshot.Node, ...], server_version: str) -> str:
    """The service most nodes' providerIDs name (ties broken by name); else a hint in the server version."""
    counts = Counter(s for s in (snapshot.service_from_provider_id(n.provider_id) for n in nodes) if s)
    if counts:
        return min(counts.items(), key=lambda item: (-item[1], item[0]))[0]
    for marker, service in _VERSION_HINTS:
        if marker in server_version:
            return service
    return ""
