"""`dsx.health.decisions.ports.NodeOps` over `dsx.kube.client.KubeClient`.

One change to a node is one merge patch guarded by the node's resourceVersion (taints are a
list, so they are computed from the node just read); a 409 means someone wrote in between and
the change is recomputed on the fresh node. Evictions are single attempts: the drain stage owns
backoff and rate. Events are core/v1 Events on the node, as `kubectl describe node` shows them.
"""

from __future__ import annotations

import re
import secrets
import sys
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from dsx import errors, retry
from dsx.health.decisions import nodes
from dsx.health.decisions.ports import ChangeFor, EvictionOutcome, NodeChange
from dsx.kube.client import EvictionOutcome as KubeEviction
from dsx.kube.client import KubeClient

COMPONENT = "dsx-sentinel"
EVENT_NAMESPACE = "default"
CONFLICT_RETRIES = 8


class KubeNodeOps:
    """NodeOps against one cluster."""

    def __init__(self, client: KubeClient, *, event_namespace: str = EVENT_NAMESPACE) -> None:
        self.client = client
        self.event_namespace = event_namespace

    def get_node(self, name: str) -> dict[str, Any]:
        return self.client.get_node(name)

    def list_nodes(self, labels: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        return self.client.list_nodes(labels)

    def change_node(self, name: str, change: ChangeFor, *, current: Mapping[str, Any] | None = None) -> dict[str, Any]:
        node = (
            dict(current)
            if current and (current.get("metadata") or {}).get("resourceVersion")
            else self.client.get_node(name)
        )
        for _ in retry.attempts(max_attempts=CONFLICT_RETRIES, backoff=retry.IMMEDIATE):
            delta = change(node) if callable(change) else change
            if not delta.changes(node):
                return node
            try:
                return self.client.patch("v1", "Node", name, merge_patch(node, delta))
            except errors.ConflictError:
                node = self.client.get_node(name)
        raise errors.ConflictError(
            f"change node {name}: the node kept changing; gave up after {CONFLICT_RETRIES} tries"
        )

    def list_pods(self, node_name: str) -> list[dict[str, Any]]:
        return self.client.list_pods(node_name=node_name)

    def evict(self, namespace: str, name: str, *, grace_period_seconds: int | None = None) -> EvictionOutcome:
        result = self.client.evict(namespace, name, grace_period_seconds=grace_period_seconds, timeout_seconds=0.0)
        return {
            KubeEviction.EVICTED: EvictionOutcome.EVICTED,
            KubeEviction.ALREADY_GONE: EvictionOutcome.ALREADY_GONE,
            KubeEviction.BLOCKED: EvictionOutcome.BLOCKED,
        }[result.outcome]

    def delete_pod(self, namespace: str, name: str, *, grace_period_seconds: int | None = None) -> bool:
        return self.client.delete_pod(namespace, name, grace_period_seconds=grace_period_seconds)

    def set_condition(self, node_name: str, condition_type: str, status: str, *, reason: str, message: str) -> None:
        self.client.set_node_condition(node_name, condition_type, status, reason=reason, message=message[:1024])

    def record_event(self, node_name: str, reason: str, message: str, *, warning: bool = False) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.client.create(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{node_name}.{secrets.token_hex(8)}", "namespace": self.event_namespace},
                "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node_name},
                "reason": reason,
                "message": message[:1024],
                "type": "Warning" if warning else "Normal",
                "source": {"component": COMPONENT},
                "reportingComponent": COMPONENT,
                "reportingInstance": COMPONENT,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            }
        )


def slim_node(node: Mapping[str, Any]) -> dict[str, Any]:
    """What the sentinel keeps of a node between events: name, version, labels, annotations,
    creation time, cordon, taints and GPU capacity — not images, addresses, conditions or nodeInfo.

    A whole Node is 5-10 KB of JSON and several times that as Python objects; at 10,000 nodes the
    node watch's view would be the largest thing in the process. Label and annotation strings
    repeat across a fleet (product, driver, zone), so they are interned and shared.
    """
    metadata = node.get("metadata") or {}
    spec = node.get("spec") or {}
    capacity = (node.get("status") or {}).get("capacity") or {}
    kept_metadata: dict[str, Any] = {
        "name": metadata.get("name", ""),
        "resourceVersion": metadata.get("resourceVersion", ""),
        "creationTimestamp": metadata.get("creationTimestamp"),
        "labels": _interned(metadata.get("labels")),
        "annotations": _interned(metadata.get("annotations")),
    }
    kept_spec = {k: spec[k] for k in ("unschedulable", "taints") if spec.get(k)}
    gpus = capacity.get(nodes.GPU_RESOURCE)
    return {
        "metadata": kept_metadata,
        "spec": kept_spec,
        "status": {"capacity": {nodes.GPU_RESOURCE: gpus}} if gpus is not None else {},
    }


SLIM_PATHS = frozenset(
    {
        ("metadata", "name"),
        ("metadata", "resourceVersion"),
        ("metadata", "creationTimestamp"),
        ("metadata", "labels"),
        ("metadata", "annotations"),
        ("spec", "unschedulable"),
        ("spec", "taints"),
        ("status", "capacity"),
    }
)
"""The first two steps of every path `slim_node` keeps."""
_STRING = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_NODE_PATH = re.compile(r"(?<![\w.])node(?!\w)((?:\s*\.\s*\w+)*)")


def slim_view_serves(expressions: Iterable[str]) -> bool:
    """Whether CEL `expressions` read nothing of the variable `node` that `slim_node` drops.

    Conservative: every use of the variable must start with a kept two-step path written with
    dots (`node.metadata.labels[...]`, `node.spec.taints`); anything else (`node.status.conditions`,
    `has(node.spec)`, `node['metadata']`, the bare variable) means the whole Node is read.
    """
    for expression in expressions:
        code = _STRING.sub("''", expression)
        for match in _NODE_PATH.finditer(code):
            steps = tuple(step.strip() for step in match.group(1).split(".")[1:])
            if steps[:2] not in SLIM_PATHS:
                return False
    return True


def _interned(values: Mapping[str, Any] | None) -> dict[str, str]:
    return {sys.intern(str(k)): sys.intern(str(v)) for k, v in (values or {}).items()}


def merge_patch(node: Mapping[str, Any], change: NodeChange) -> dict[str, Any]:
    """The JSON merge patch applying `change` to `node`, guarded by its resourceVersion."""
    metadata: dict[str, Any] = {"resourceVersion": (node.get("metadata") or {}).get("resourceVersion")}
    if change.labels:
        metadata["labels"] = dict(change.labels)
    if change.annotations:
        metadata["annotations"] = dict(change.annotations)
    spec: dict[str, Any] = {}
    if change.unschedulable is not None and change.unschedulable != nodes.unschedulable(node):
        spec["unschedulable"] = True if change.unschedulable else None
    if change.add_taints or change.remove_taints:
        taints = change.taints_after(nodes.taints(node))
        if taints != nodes.taints(node):
            spec["taints"] = taints or None
    patch: dict[str, Any] = {"metadata": metadata}
    if spec:
        patch["spec"] = spec
    return patch
