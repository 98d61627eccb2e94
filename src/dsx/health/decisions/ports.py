"""The ports the operate pipeline needs from the outside world, stated by the pipeline itself.

Why here: the stages (quarantine, drain, remediation, re-certification, validation requests)
are domain code and must not know lightkube, a CSP SDK or the certify executors. They ask for
three small things — change and read nodes and pods (`NodeOps`), have a node repaired
(`RemediationProvider`), have a node certified (`Recertifier`) — and report what they did to an
`Observer` (metrics and logs live in the entry tier). `dsx.controllers` plugs in the real
implementations; `dsx.testing.inmemory_nodes.InMemoryNodeOps` is the in-memory cluster beside
this port (unit tests and `dsx sentinel replay`).

`NodeOps.change_node` is one write for everything the pipeline does to a Node (cordon,
taints, labels, annotations): quarantining a node costs one read and one write, which is what
lets hundreds of nodes be cordoned per second instead of NVSentinel's ~2.5.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from dsx.errors import BadInputError, allowed_values_message


class TaintEffect(enum.StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


@dataclass(frozen=True)
class Taint:
    """A node taint; a node holds at most one taint per (key, effect)."""

    key: str
    effect: TaintEffect = TaintEffect.NO_SCHEDULE
    value: str = ""

    def to_dict(self) -> dict[str, str]:
        out = {"key": self.key, "effect": self.effect.value}
        if self.value:
            out["value"] = self.value
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], *, source: str) -> Taint:
        if not isinstance(raw, Mapping) or not isinstance(raw.get("key"), str) or not raw["key"]:
            raise BadInputError(f"{source}: expected a mapping with a non-empty key (and optional value, effect)")
        unknown = sorted(set(raw) - {"key", "value", "effect"})
        if unknown:
            raise BadInputError(allowed_values_message(source, "field", unknown[0], ("key", "value", "effect")))
        effect = raw.get("effect", TaintEffect.NO_SCHEDULE.value)
        if not isinstance(effect, str) or effect not in {e.value for e in TaintEffect}:
            raise BadInputError(allowed_values_message(source, "effect", effect, [e.value for e in TaintEffect]))
        value = raw.get("value", "")
        if not isinstance(value, str):
            raise BadInputError(f"{source}.value: expected a string")
        return cls(str(raw["key"]), TaintEffect(effect), value)


@dataclass(frozen=True)
class NodeChange:
    """What to change on one Node in a single write. Empty fields change nothing.

    `apply_to` is the reference semantics every NodeOps implementation follows: labels and
    annotations with a None value are removed; a taint replaces the one with the same key and
    effect; `remove_taints` drops every taint with one of those keys.
    """

    unschedulable: bool | None = None
    labels: Mapping[str, str | None] = field(default_factory=dict)
    annotations: Mapping[str, str | None] = field(default_factory=dict)
    add_taints: tuple[Taint, ...] = ()
    remove_taints: tuple[str, ...] = ()

    def apply_to(self, node: Mapping[str, Any], *, now: datetime | None = None) -> dict[str, Any]:
        """The node after this change (a new dict; `node` is not modified)."""
        metadata = dict(node.get("metadata") or {})
        spec = dict(node.get("spec") or {})
        metadata["labels"] = _merged(metadata.get("labels"), self.labels)
        metadata["annotations"] = _merged(metadata.get("annotations"), self.annotations)
        if self.unschedulable is not None:
            if self.unschedulable:
                spec["unschedulable"] = True
            else:
                spec.pop("unschedulable", None)
        spec["taints"] = self.taints_after(spec.get("taints") or [], now=now)
        if not spec["taints"]:
            del spec["taints"]
        return {**node, "metadata": metadata, "spec": spec}

    def taints_after(self, taints: list[dict[str, Any]], *, now: datetime | None = None) -> list[dict[str, Any]]:
        added = {(t.key, t.effect.value) for t in self.add_taints}
        kept = [
            t for t in taints if t.get("key") not in self.remove_taints and (t.get("key"), t.get("effect")) not in added
        ]
        out = list(kept)
        for taint in self.add_taints:
            existing = next(
                (t for t in taints if (t.get("key"), t.get("effect")) == (taint.key, taint.effect.value)), None
            )
            entry: dict[str, Any] = taint.to_dict()
            if taint.effect is TaintEffect.NO_EXECUTE:
                entry["timeAdded"] = (existing or {}).get("timeAdded") or _stamp(now)
            out.append(entry)
        return out

    def changes(self, node: Mapping[str, Any]) -> bool:
        """True when applying this change to `node` would modify it."""
        return _comparable(self.apply_to(node)) != _comparable(node)


def _merged(current: Mapping[str, str] | None, updates: Mapping[str, str | None]) -> dict[str, str]:
    out = dict(current or {})
    for key, value in updates.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def _stamp(now: datetime | None) -> str:
    return (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _comparable(node: Mapping[str, Any]) -> tuple[Any, ...]:
    metadata = node.get("metadata") or {}
    spec = node.get("spec") or {}
    taints = sorted(
        (str(t.get("key")), str(t.get("effect")), str(t.get("value") or "")) for t in spec.get("taints") or []
    )
    return (
        sorted((metadata.get("labels") or {}).items()),
        sorted((metadata.get("annotations") or {}).items()),
        bool(spec.get("unschedulable")),
        taints,
    )


class EvictionOutcome(enum.StrEnum):
    EVICTED = "evicted"
    ALREADY_GONE = "already-gone"
    BLOCKED = "blocked"
    """A PodDisruptionBudget refused the eviction now (HTTP 429); try again later."""


ChangeFor = NodeChange | Callable[[Mapping[str, Any]], NodeChange]
"""A change, or how to work it out from the node it is written against: a change that depends on
what the node looked like (quarantine: did someone else cordon it first?) is worked out again
from the fresh node when the write meets a newer version."""


class NodeOps(Protocol):
    """Reads and writes of Nodes and Pods the pipeline performs (one cluster)."""

    def get_node(self, name: str) -> dict[str, Any]:
        """The Node object; NotFoundError when it does not exist."""
        ...

    def list_nodes(self, labels: Mapping[str, str] | None = None) -> list[dict[str, Any]]: ...

    def change_node(self, name: str, change: ChangeFor, *, current: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Apply `change` in one write (nothing is written when it changes nothing); the node after.

        `current` is the node as the caller last saw it (a read, or the node watch's view): an
        implementation may write against it without reading again, and must re-read, and work a
        `change` function out again, when the node changed in between.
        """
        ...

    def list_pods(self, node_name: str) -> list[dict[str, Any]]:
        """Every pod bound to the node, in all namespaces."""
        ...

    def evict(self, namespace: str, name: str, *, grace_period_seconds: int | None = None) -> EvictionOutcome:
        """One eviction attempt through the Eviction API (PodDisruptionBudgets apply)."""
        ...

    def delete_pod(self, namespace: str, name: str, *, grace_period_seconds: int | None = None) -> bool:
        """Delete a pod outright (no budget check); False when it was already gone."""
        ...

    def record_event(self, node_name: str, reason: str, message: str, *, warning: bool = False) -> None:
        """A Kubernetes Event on the node, for `kubectl describe node` and event exporters."""
        ...

    def set_condition(self, node_name: str, condition_type: str, status: str, *, reason: str, message: str) -> None:
        """One NodeCondition (status "True" or "False"), as node-problem-detector writes them, for
        schedulers, autoscalers and dashboards that read conditions; NotFoundError for an unknown node."""
        ...


# -- remediation ---------------------------------------------------------------------------------


class RemediationKind(enum.StrEnum):
    """What a provider is asked to do to a node."""

    RESET_GPU = "reset-gpu"
    REBOOT_NODE = "reboot-node"
    REPLACE_NODE = "replace-node"


@dataclass(frozen=True)
class RemediationRequest:
    request_id: str
    """Stable for one (node, kind, incident): providers deduplicate on it, so a re-sent request is a no-op."""
    node_name: str
    kind: RemediationKind
    incident_sequence: int
    """Sequence of the event that opened the node's incident."""
    reason: str
    gpus: tuple[str, ...] = ()
    """Identifiers (PCI address, UUID or index) of the GPUs to reset, for RESET_GPU."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "node_name": self.node_name,
            "kind": self.kind.value,
            "incident_sequence": self.incident_sequence,
            "reason": self.reason,
            "gpus": list(self.gpus),
        }


@dataclass(frozen=True)
class RemediationResult:
    succeeded: bool
    message: str


class RemediationProvider(Protocol):
    """Carries out remediation requests (a CSP API, a bare-metal script, the simulator)."""

    name: str

    def supports(self, kind: RemediationKind) -> bool: ...

    def remediate(self, request: RemediationRequest) -> RemediationResult:
        """Do it and wait until the node is back (or the provider's timeout passes)."""
        ...


# -- certification -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecertificationRequest:
    node_name: str
    categories: tuple[str, ...]
    """Node-level categories run on the node alone (e.g. nccl-loopback, training)."""
    peers: tuple[str, ...] = ()
    """Known-good nodes the node is tested alongside in `group_categories`."""
    group_categories: tuple[str, ...] = ()
    request_id: int = 0
    """The stored validation request (0: none); a re-run of the same request after a restart
    finds and removes what its first attempt left on the cluster."""


@dataclass(frozen=True)
class RecertificationResult:
    passed: bool
    reason: str
    """One line: what failed and why (empty when passed)."""
    detail: Mapping[str, Any] = field(default_factory=dict)


class Recertifier(Protocol):
    """Runs certification for one node (local executor, Kubernetes executor, …)."""

    def recertify(self, request: RecertificationRequest) -> RecertificationResult: ...


# -- maintenance requests ------------------------------------------------------------------------


class MaintenanceRequests(Protocol):
    """The cluster's MaintenanceRequest objects (`dsx.run/v1alpha1`, cluster-scoped; dsx.health.decisions.maintenance).

    Objects are plain dicts as the apiserver returns them. Deleting one that carries finalizers
    only sets `metadata.deletionTimestamp`; it is gone once the last finalizer is removed.
    """

    def list_requests(self) -> list[dict[str, Any]]:
        """Every MaintenanceRequest; NotFoundError when the cluster serves no such kind (CRD absent)."""
        ...

    def set_finalizers(self, name: str, finalizers: Sequence[str], *, resource_version: str) -> dict[str, Any]:
        """Replace the finalizers, guarded by resourceVersion (ConflictError when it moved on,
        NotFoundError when the object is gone). Returns the object after."""
        ...

    def set_status(self, name: str, status: Mapping[str, Any]) -> None:
        """Replace the status (the status subresource); NotFoundError when the object is gone."""
        ...


# -- what happened -------------------------------------------------------------------------------


class Observer(Protocol):
    """Receives what the stages did; the entry tier turns it into metrics and structured logs."""

    def action(self, stage: str, action: str, node_name: str, detail: Mapping[str, Any]) -> None:
        """A change made to the cluster or the node state (or, in dry-run, one that would be made)."""
        ...

    def fault_to_cordon(self, seconds: float) -> None:
        """Time from the monitor seeing a fault to the node being cordoned."""
        ...

    def breaker(self, state: str, detail: Mapping[str, Any]) -> None: ...

    def repaired(self, node_name: str, segments: Mapping[str, float]) -> None:
        """A node back in service after a repair: seconds per stage (dsx.health.decisions.repair_timing)."""
        ...


class SilentObserver:
    """An Observer that keeps nothing (replay, unit tests that do not look)."""

    def action(self, stage: str, action: str, node_name: str, detail: Mapping[str, Any]) -> None:
        """Dropped."""

    def fault_to_cordon(self, seconds: float) -> None:
        """Dropped."""

    def breaker(self, state: str, detail: Mapping[str, Any]) -> None:
        """Dropped."""

    def repaired(self, node_name: str, segments: Mapping[str, float]) -> None:
        """Dropped."""
