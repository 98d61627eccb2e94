"""InMemoryNodeOps: a cluster of Node and Pod dicts in memory, beside the NodeOps port.

Used by unit tests of the stages and by `dsx sentinel replay`, which runs the real pipeline
against a copy of the fleet without touching it. It follows `NodeChange.apply_to` exactly
and keeps a journal of every write, so a test (or a replay report) can say what was done.
PodDisruptionBudgets are modelled as a count of refusals per pod (`refuse_evictions`).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dsx.errors import NotFoundError
from dsx.health.decisions import nodes
from dsx.health.decisions.ports import ChangeFor, EvictionOutcome, NodeChange


@dataclass(frozen=True)
class Write:
    """One write the pipeline made: what, to which object, and its details."""

    operation: str
    """change-node, evict, evict-refused, delete-pod or event."""
    target: str
    detail: Mapping[str, Any]


class InMemoryNodeOps:
    """NodeOps over dicts; thread-safe."""

    def __init__(self, node_objects: Iterable[Mapping[str, Any]] = (), pods: Iterable[Mapping[str, Any]] = ()) -> None:
        self._lock = threading.Lock()
        self._nodes: dict[str, dict[str, Any]] = {}
        self._pods: dict[tuple[str, str], dict[str, Any]] = {}
        self._refusals: dict[tuple[str, str], int] = {}
        self.journal: list[Write] = []
        self.pod_nodes: dict[str, str] = {}
        """namespace/name → node, kept after the pod is gone (to say where an evicted pod ran)."""
        for node in node_objects:
            self.add_node(node)
        for pod in pods:
            self.add_pod(pod)

    # setup
    def add_node(self, node: Mapping[str, Any]) -> None:
        with self._lock:
            self._nodes[nodes.name(node)] = copy.deepcopy(dict(node))

    def add_pod(self, pod: Mapping[str, Any]) -> None:
        with self._lock:
            key = (nodes.namespace(pod), nodes.name(pod))
            self._pods[key] = copy.deepcopy(dict(pod))
            self.pod_nodes["/".join(key)] = str((pod.get("spec") or {}).get("nodeName", ""))

    def refuse_evictions(self, namespace: str, name: str, times: int) -> None:
        """The next `times` evictions of this pod are refused, as a PodDisruptionBudget would."""
        with self._lock:
            self._refusals[(namespace, name)] = times

    def finish_pod(self, namespace: str, name: str, phase: str = "Succeeded") -> None:
        with self._lock:
            self._pods[(namespace, name)].setdefault("status", {})["phase"] = phase

    def writes(self, operation: str | None = None) -> list[Write]:
        with self._lock:
            return [w for w in self.journal if operation is None or w.operation == operation]

    # NodeOps
    def get_node(self, name: str) -> dict[str, Any]:
        with self._lock:
            node = self._nodes.get(name)
            if node is None:
                raise NotFoundError(f"node {name}: not found")
            return copy.deepcopy(node)

    def list_nodes(self, labels: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [copy.deepcopy(n) for _, n in sorted(self._nodes.items()) if nodes.selected(n, dict(labels or {}))]

    def change_node(self, name: str, change: ChangeFor, *, current: Mapping[str, Any] | None = None) -> dict[str, Any]:
        with self._lock:
            node = self._nodes.get(name)
            if node is None:
                raise NotFoundError(f"node {name}: not found")
            delta = change(node) if callable(change) else change  # always against the node as it is now
            if delta.changes(node):
                node = delta.apply_to(node)
                self._nodes[name] = node
                self.journal.append(Write("change-node", name, _describe(delta)))
            return copy.deepcopy(node)

    def list_pods(self, node_name: str) -> list[dict[str, Any]]:
        with self._lock:
            return [
                copy.deepcopy(p)
                for _, p in sorted(self._pods.items())
                if (p.get("spec") or {}).get("nodeName") == node_name
            ]

    def evict(self, namespace: str, name: str, *, grace_period_seconds: int | None = None) -> EvictionOutcome:
        with self._lock:
            key = (namespace, name)
            if key not in self._pods:
                return EvictionOutcome.ALREADY_GONE
            if self._refusals.get(key, 0) > 0:
                self._refusals[key] -= 1
                self.journal.append(Write("evict-refused", f"{namespace}/{name}", {}))
                return EvictionOutcome.BLOCKED
            del self._pods[key]
            self.journal.append(Write("evict", f"{namespace}/{name}", {}))
            return EvictionOutcome.EVICTED

    def delete_pod(self, namespace: str, name: str, *, grace_period_seconds: int | None = None) -> bool:
        with self._lock:
            if self._pods.pop((namespace, name), None) is None:
                return False
            self.journal.append(Write("delete-pod", f"{namespace}/{name}", {}))
            return True

    def record_event(self, node_name: str, reason: str, message: str, *, warning: bool = False) -> None:
        with self._lock:
            self.journal.append(Write("event", node_name, {"reason": reason, "message": message, "warning": warning}))

    def set_condition(self, node_name: str, condition_type: str, status: str, *, reason: str, message: str) -> None:
        with self._lock:
            node = self._nodes.get(node_name)
            if node is None:
                raise NotFoundError(f"node {node_name}: not found")
            conditions = node.setdefault("status", {}).setdefault("conditions", [])
            kept = [c for c in conditions if c.get("type") != condition_type]
            kept.append({"type": condition_type, "status": status, "reason": reason, "message": message[:1024]})
            node["status"]["conditions"] = kept
            self.journal.append(Write("condition", node_name, {"type": condition_type, "status": status}))


def _describe(change: NodeChange) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if change.unschedulable is not None:
        out["unschedulable"] = change.unschedulable
    if change.labels:
        out["labels"] = dict(change.labels)
    if change.annotations:
        out["annotations"] = dict(change.annotations)
    if change.add_taints:
        out["add_taints"] = [t.to_dict() for t in change.add_taints]
    if change.remove_taints:
        out["remove_taints"] = list(change.remove_taints)
    return out
