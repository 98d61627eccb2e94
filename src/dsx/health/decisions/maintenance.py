"""Maintenance requests: a node asked for ahead of time, cordoned and drained before the work starts.

A MaintenanceRequest (`dsx.run/v1alpha1`, cluster-scoped; `deploy/helm/dsx-sentinel/crds/`)
names a node and a `startTime`. The sentinel, on each pass over the requests:
- puts its finalizer on the request at once, so a delete waits for the release;
- from `startTime - leadSeconds` on, labels the node `sentinel.dsx.run/maintenance=<request>`,
  cordons it (remembering whether it was schedulable) and drains it the way the drain stage
  does (the namespaces' modes, PodDisruptionBudgets honoured, its own eviction bucket); status
  `Draining`, then `Ready` once only DaemonSet, static and finished pods are left;
- on delete, takes its label off, uncordons only what it cordoned and removes the finalizer.
  When an incident opened meanwhile, the cordon passes to the incident, whose re-certification
  releases the node.

While the label is on, remediation and re-certification wait (`under_maintenance`): the
sentinel never repairs or returns to service a node someone is working on. One request holds
a node at a time; another for the same node stays `Pending`, naming the holder. Each step is
idempotent and reads its state from the node and the request, so a restart anywhere resumes.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dsx.errors import ConflictError, NotFoundError
from dsx.health.decisions import drain, nodes
from dsx.health.decisions.policy import SentinelPolicy, Stage
from dsx.health.decisions.ports import MaintenanceRequests, NodeChange, NodeOps, Observer

log = logging.getLogger("dsx.sentinel")

STAGE = Stage.MAINTENANCE.value
API_VERSION = "dsx.run/v1alpha1"
KIND = "MaintenanceRequest"
PLURAL = "maintenancerequests"
FINALIZER = "dsx.run/maintenance"


class Phase(enum.StrEnum):
    PENDING = "Pending"
    """Before `startTime - leadSeconds`, or waiting for another request on the same node."""
    DRAINING = "Draining"
    READY = "Ready"
    """Cordoned and drained: the node is the maintainer's."""
    FAILED = "Failed"
    """The request cannot be carried out as written (the message says why)."""


@dataclass(frozen=True)
class Request:
    """One MaintenanceRequest as read, its spec checked."""

    name: str
    node_name: str
    start_epoch_seconds: float
    lead_seconds: float
    reason: str
    deleting: bool
    finalizers: tuple[str, ...]
    resource_version: str
    status: Mapping[str, Any]
    problem: str = ""
    """Why the spec cannot be carried out; "" when it can."""

    @property
    def begins_at(self) -> float:
        return self.start_epoch_seconds - self.lead_seconds


def read_request(obj: Mapping[str, Any], default_lead_seconds: float) -> Request:
    """The request in `obj`; a bad spec is kept as `problem` (naming the field), never raised."""
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    name = str(metadata.get("name", ""))
    problems = []
    node_name = spec.get("nodeName")
    if not isinstance(node_name, str) or not node_name:
        problems.append("spec.nodeName: expected the name of a node")
    start = _epoch(spec.get("startTime"))
    if start is None:
        problems.append(f"spec.startTime: expected an RFC 3339 time, got {spec.get('startTime')!r}")
    lead = spec.get("leadSeconds", default_lead_seconds)
    if isinstance(lead, bool) or not isinstance(lead, int | float) or lead < 0:
        problems.append(f"spec.leadSeconds: expected seconds >= 0, got {lead!r}")
        lead = default_lead_seconds
    return Request(
        name=name,
        node_name=node_name if isinstance(node_name, str) else "",
        start_epoch_seconds=start if start is not None else 0.0,
        lead_seconds=float(lead),
        reason=str(spec.get("reason") or ""),
        deleting=bool(metadata.get("deletionTimestamp")),
        finalizers=tuple(metadata.get("finalizers") or ()),
        resource_version=str(metadata.get("resourceVersion", "")),
        status=dict(obj.get("status") or {}),
        problem="; ".join(problems),
    )


def _epoch(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.timestamp() if moment.tzinfo is not None else None


def enter_change(request_name: str) -> Callable[[Mapping[str, Any]], NodeChange]:
    """Label and cordon the node for `request_name`, unless another request holds it (then nothing)."""

    def change(node: Mapping[str, Any]) -> NodeChange:
        holder = nodes.under_maintenance(node)
        if holder == request_name or holder:
            return NodeChange()  # ours already (a retry), or another's: nothing to write
        return NodeChange(
            unschedulable=True,
            labels={nodes.MAINTENANCE_LABEL: request_name},
            annotations={nodes.MAINTENANCE_CORDONED_ANNOTATION: "false" if nodes.unschedulable(node) else "true"},
        )

    return change


def release_change(request_name: str) -> Callable[[Mapping[str, Any]], NodeChange]:
    """Hand the node back: our label off; our cordon undone, or passed to an incident that opened meanwhile."""

    def change(node: Mapping[str, Any]) -> NodeChange:
        if nodes.under_maintenance(node) != request_name:
            return NodeChange()
        own = nodes.annotations_of(node)
        cordoned = own.get(nodes.MAINTENANCE_CORDONED_ANNOTATION) == "true"
        incident = bool(own.get(nodes.INCIDENT_ANNOTATION))
        annotations: dict[str, str | None] = {nodes.MAINTENANCE_CORDONED_ANNOTATION: None}
        if cordoned and incident and own.get(nodes.PRECORDONED_ANNOTATION) == "true":
            # the incident found the node cordoned by us and so would never uncordon it: it is the incident's now
            annotations.update({nodes.PRECORDONED_ANNOTATION: None, nodes.CORDONED_ANNOTATION: "true"})
        return NodeChange(
            unschedulable=False if cordoned and not incident else None,
            labels={nodes.MAINTENANCE_LABEL: None},
            annotations=annotations,
        )

    return change


class MaintenanceController:
    """Carries out every MaintenanceRequest; `step()` is one pass (see the module docstring)."""

    def __init__(
        self,
        requests: MaintenanceRequests,
        node_ops: NodeOps,
        policy: SentinelPolicy,
        observer: Observer,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.requests = requests
        self.nodes = node_ops
        self.settings = policy.maintenance
        self.drain_settings = policy.drain
        self.switch = policy.switch(Stage.MAINTENANCE)
        self.observer = observer
        self._clock = clock
        self.evacuator = drain.PodEvacuator(node_ops, policy.drain, observer, STAGE)
        self.next_due: float | None = None
        """When the earliest waiting request begins (epoch seconds), after a step; None when none waits."""

    def step(self) -> int:
        """One pass over every request, oldest first; returns how many changed something."""
        found = [read_request(obj, self.settings.lead_seconds) for obj in self.requests.list_requests()]
        self.next_due = None
        changed = 0
        for request in sorted(found, key=lambda r: (r.begins_at, r.name)):
            try:
                changed += self._reconcile(request)
            except (ConflictError, NotFoundError) as exc:  # moved on meanwhile: the next pass reads it again
                log.info("maintenance request %s: %s; looking again next pass", request.name, exc)
        return changed

    def _reconcile(self, request: Request) -> int:
        if request.deleting:
            return self._release(request)
        if not self.switch.acting:
            if self._clock() >= request.begins_at and not request.problem:
                self.observer.action(STAGE, "would-drain", request.node_name, {"request": request.name})
            return 0
        if FINALIZER not in request.finalizers:
            self.requests.set_finalizers(
                request.name, (*request.finalizers, FINALIZER), resource_version=request.resource_version
            )
        if request.problem:
            return self._report(request, Phase.FAILED, request.problem)
        now = self._clock()
        if now < request.begins_at:
            self._due(request.begins_at)
            return self._report(request, Phase.PENDING, f"cordon and drain begin at {drain.stamp(request.begins_at)}")
        try:
            node = self.nodes.get_node(request.node_name)
        except NotFoundError:
            return self._report(request, Phase.FAILED, f"spec.nodeName: no node {request.node_name!r}")
        holder = nodes.under_maintenance(node)
        if holder and holder != request.name:
            self._due(now + self.settings.poll_seconds)
            return self._report(request, Phase.PENDING, f"waiting: maintenance request {holder} holds the node")
        changed = 0
        if not holder:
            node = self.nodes.change_node(request.node_name, enter_change(request.name), current=node)
            if nodes.under_maintenance(node) != request.name:  # another took it in between
                return 0
            self.observer.action(STAGE, "cordon", request.node_name, {"request": request.name})
            self._event(request, "MaintenanceStarted", f"cordoned and draining for maintenance request {request.name}")
            changed = 1
        started = _epoch(request.status.get("drainStartedAt")) or now
        leaving = [p for p in drain.plan(self.nodes.list_pods(request.node_name), self.drain_settings) if p.mode]
        if leaving:
            note = self.evacuator.one_pass(request.node_name, leaving, started=started, now=now)
            self._due(now + self.drain_settings.poll_seconds)
            message = f"{len(leaving)} pod(s) to leave" + (f"; {note}" if note else "")
            return changed + self._report(request, Phase.DRAINING, message, drainStartedAt=drain.stamp(started))
        if request.status.get("phase") != Phase.READY.value:
            self.observer.action(STAGE, "drained", request.node_name, {"request": request.name})
            self._event(request, "MaintenanceReady", f"drained for maintenance request {request.name}")
        drained = request.status.get("drainedAt") or drain.stamp(now)
        return changed + self._report(
            request, Phase.READY, "cordoned and drained", drainStartedAt=drain.stamp(started), drainedAt=drained
        )

    def _release(self, request: Request) -> int:
        if FINALIZER not in request.finalizers:
            return 0  # not ours (never acted on, or already released)
        if not self.switch.acting:
            self.observer.action(STAGE, "would-release", request.node_name, {"request": request.name})
            return 0
        try:
            node = self.nodes.get_node(request.node_name) if request.node_name else None
        except NotFoundError:
            node = None  # the node is gone: nothing to hand back
        if node is not None and nodes.under_maintenance(node) == request.name:
            self.nodes.change_node(request.node_name, release_change(request.name), current=node)
            self.observer.action(STAGE, "release", request.node_name, {"request": request.name})
            self._event(request, "MaintenanceEnded", f"maintenance request {request.name} deleted; node handed back")
        kept = tuple(f for f in request.finalizers if f != FINALIZER)
        self.requests.set_finalizers(request.name, kept, resource_version=request.resource_version)
        return 1

    def _report(self, request: Request, phase: Phase, message: str, **fields: str) -> int:
        """Write the status when it differs from what the request shows; returns 1 when written."""
        status = {"phase": phase.value, "message": message[:500], "nodeName": request.node_name, **fields}
        if {k: request.status.get(k) for k in status} == status:
            return 0
        self.requests.set_status(request.name, status)
        return 1

    def _event(self, request: Request, reason: str, message: str) -> None:
        try:  # for people reading `describe node`; losing one is not worth a retry
            self.nodes.record_event(request.node_name, reason, message)
        except Exception as exc:
            log.warning("maintenance request %s: node event not recorded: %s", request.name, exc)

    def _due(self, when: float) -> None:
        self.next_due = when if self.next_due is None else min(self.next_due, when)
