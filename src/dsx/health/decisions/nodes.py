"""What the sentinel reads from Node and Pod objects, and the marks it leaves on nodes.

Every action is recorded on the node itself (labels and annotations under `sentinel.dsx.run/`)
as well as in the store, so `kubectl get nodes -L sentinel.dsx.run/state` shows the pipeline
without dsx, and a restarted sentinel can tell its own cordon from a human's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PREFIX = "sentinel.dsx.run"
STATE_LABEL = f"{PREFIX}/state"
"""Mirror of the node's pipeline state (quarantined, draining, …); removed when healthy."""
REMEDIATION_FAILED_LABEL = f"{PREFIX}/remediation-failed"
RECERTIFICATION_FAILED_LABEL = f"{PREFIX}/recertification-failed"
CERTIFIED_LABEL = f"{PREFIX}/certified"
"""Set when a joining node passed its validation."""
DEFAULT_OPT_OUT_LABEL = f"{PREFIX}/managed"
"""`sentinel.dsx.run/managed=false` keeps the sentinel's hands off a node."""

REASON_ANNOTATION = f"{PREFIX}/reason"
EVENT_ANNOTATION = f"{PREFIX}/event"
"""Idempotency key of the event that opened the incident."""
INCIDENT_ANNOTATION = f"{PREFIX}/incident"
"""Store sequence of that event."""
QUARANTINED_AT_ANNOTATION = f"{PREFIX}/quarantined-at"
PRECORDONED_ANNOTATION = f"{PREFIX}/precordoned"
""""true" when someone else had cordoned the node before the sentinel: it is never uncordoned by us."""
CORDONED_ANNOTATION = f"{PREFIX}/cordoned"
""""true" when the sentinel cordoned the node; an uncordoned node carrying it was uncordoned by a person."""
TAINTS_ANNOTATION = f"{PREFIX}/taints"
"""Comma-separated keys of the taints the sentinel added (removed again on release)."""
LABELS_ANNOTATION = f"{PREFIX}/labels"
"""Comma-separated keys of the labels rule sets added (removed again on release)."""
DRAIN_ANNOTATION = f"{PREFIX}/drain"
DRAIN_STARTED_ANNOTATION = f"{PREFIX}/drain-started-at"
REMEDIATION_ANNOTATION = f"{PREFIX}/remediation"
REMEDIATION_DONE_ANNOTATION = f"{PREFIX}/remediation-done"
"""Request id of the last remediation the provider completed (re-sent requests are skipped)."""
RECERTIFICATION_ANNOTATION = f"{PREFIX}/recertification"
VALIDATION_ANNOTATION = f"{PREFIX}/validation"
MAINTENANCE_LABEL = f"{PREFIX}/maintenance"
"""The MaintenanceRequest holding the node (its name); meanwhile the sentinel neither remediates nor releases it."""
MAINTENANCE_CORDONED_ANNOTATION = f"{PREFIX}/maintenance-cordoned"
""""true" when the maintenance request cordoned the node (it was schedulable): its release uncordons it."""
POD_GPUS_ANNOTATION = f"{PREFIX}/gpus"
"""On a pod: comma-separated GPUs it uses (index, UUID or PCI address), for partial drains."""

INCIDENT_ANNOTATIONS = (
    REASON_ANNOTATION,
    EVENT_ANNOTATION,
    INCIDENT_ANNOTATION,
    QUARANTINED_AT_ANNOTATION,
    PRECORDONED_ANNOTATION,
    CORDONED_ANNOTATION,
    TAINTS_ANNOTATION,
    LABELS_ANNOTATION,
    DRAIN_ANNOTATION,
    DRAIN_STARTED_ANNOTATION,
    REMEDIATION_ANNOTATION,
    REMEDIATION_DONE_ANNOTATION,
    RECERTIFICATION_ANNOTATION,
)
"""Annotations of one incident, all removed when the node returns to service."""

GPU_RESOURCE = "nvidia.com/gpu"


def name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def namespace(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace", ""))


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def under_maintenance(node: Mapping[str, Any]) -> str:
    """The MaintenanceRequest holding the node, or "" when none does."""
    return labels_of(node).get(MAINTENANCE_LABEL, "")


def unschedulable(node: Mapping[str, Any]) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def taints(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list((node.get("spec") or {}).get("taints") or [])


def has_taint(node: Mapping[str, Any], key: str) -> bool:
    return any(t.get("key") == key for t in taints(node))


def ready(node: Mapping[str, Any]) -> bool | None:
    """The Ready condition: True, False, or None when unknown or absent."""
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            status = condition.get("status")
            return True if status == "True" else False if status == "False" else None
    return None


def gpu_count(node: Mapping[str, Any]) -> int:
    """GPUs the node has: capacity nvidia.com/gpu, else GPU feature discovery's count label, else 0."""
    capacity = (node.get("status") or {}).get("capacity") or {}
    for value in (capacity.get(GPU_RESOURCE), labels_of(node).get("nvidia.com/gpu.count")):
        if value is not None:
            try:
                return int(str(value))
            except ValueError:
                continue
    return 0


def selected(node: Mapping[str, Any], selector: Mapping[str, str]) -> bool:
    own = labels_of(node)
    return all(own.get(key) == value for key, value in selector.items())


# -- pods ----------------------------------------------------------------------------------------


def pod_finished(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def pod_owner_kinds(pod: Mapping[str, Any]) -> set[str]:
    return {str(ref.get("kind")) for ref in (pod.get("metadata") or {}).get("ownerReferences") or []}


def pod_is_mirror(pod: Mapping[str, Any]) -> bool:
    return "kubernetes.io/config.mirror" in annotations_of(pod)


def pod_gpu_request(pod: Mapping[str, Any]) -> int:
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        value = (resources.get("limits") or {}).get(GPU_RESOURCE) or (resources.get("requests") or {}).get(GPU_RESOURCE)
        if value is not None:
            try:
                total += int(str(value))
            except ValueError:
                continue
    return total


def pod_gpus(pod: Mapping[str, Any]) -> set[str] | None:
    """The GPUs a pod says it uses (lower-cased identifiers), or None when it does not say."""
    value = annotations_of(pod).get(POD_GPUS_ANNOTATION)
    if value is None:
        return None
    return {item.strip().lower() for item in value.split(",") if item.strip()}


GPU_HEALTH_CONDITION = "DsxGpuHealthy"
"""The NodeCondition the sentinel keeps on nodes it acted on: False from quarantine until a release
(reason the rule set, message the sentinel's reason), True once re-certified. Other tools
(schedulers, cluster autoscalers, NPD-aware dashboards) read conditions, not dsx's labels."""
