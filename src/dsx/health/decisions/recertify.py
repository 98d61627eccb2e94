"""The re-certification gate: a repaired node returns to service only after it passes certification.

NVSentinel uncordons a node once its monitors report healthy again (upstream #1427, #695): a
GPU that came back from a reset but runs collectives at a tenth of its bandwidth goes straight
back into training jobs. Here a node in RECERTIFYING — its remediation finished, or every
faulty entity reported healthy — gets a validation request (`dsx.health.decisions.validation_requests`:
stored, visible, at most M certifying at once). The request runs the policy's node-level
categories (nccl-loopback and a short training run by default) through the certify engine.

- passed → the node is released: our taints, labels and annotations come off and it is
  uncordoned (unless someone else had cordoned it first), then it is HEALTHY;
- failed → it stays cordoned and goes to FAILED with the reason on the node
  (`sentinel.dsx.run/recertification-failed=true`, reason annotation, a warning Event);
- a new fault arrived after the remediation → FAILED as well: the repair did not hold.

Two `Recertifier`s (the port is `dsx.health.decisions.ports.Recertifier`; both live in the adapter
package `dsx.executors.recertify`), chosen once by the sentinel's composition root:

- `ClusterRecertifier` — a real cluster: the certify engine's Kubernetes executor runs the
  categories *on the node*, in TrainJobs pinned to it that ask for every GPU it has and tolerate the
  sentinel's own cordon and taints (`held_tolerations`); the node's pod logs are judged by the
  catalog's thresholds for its hardware (or `certification.thresholds`);
- `LocalRecertifier` — a simulated cluster: the local executor plays the node (and its
  known-good peers) as processes on this machine, the honest option for a node that has no
  GPUs; its faults come from the policy's `certification.inject` (tests and demos).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from dsx.errors import ConflictError
from dsx.health.decisions import incidents, nodes, repair_timing, stage, validation_requests
from dsx.health.decisions.eventstore import EventStore, StageOutcome, StageStatus, StoredEvent, ValidationStatus
from dsx.health.decisions.policy import SentinelPolicy, Stage
from dsx.health.decisions.ports import (
    NodeChange,
    NodeOps,
    Observer,
    Taint,
    TaintEffect,
)
from dsx.health.decisions.quarantine import release_change, report_gpu_health
from dsx.model.health import NodeState

STAGE = Stage.RECERTIFY.value


CORDON_TAINT = "node.kubernetes.io/unschedulable"
"""The taint Kubernetes puts on a cordoned node; a pod that tolerates it may be scheduled there."""


def held_tolerations(policy: SentinelPolicy) -> list[dict[str, str]]:
    """Tolerations for what the sentinel itself holds a node with: its cordon, its rule sets' taints and
    the not-yet-certified taint — and nothing else, so a node someone else tainted stays untouched."""
    taints = {
        (taint.key, taint.effect.value)
        for taint in (
            Taint(CORDON_TAINT, TaintEffect.NO_SCHEDULE),
            policy.certification.taint,
            *(t for rule in policy.quarantine.rule_sets for t in rule.taints),
        )
    }
    return [{"key": key, "operator": "Exists", "effect": effect} for key, effect in sorted(taints)]


class RecertifyHandler:
    """The re-certification stage (a StageHandler); see the module docstring."""

    name = STAGE
    upstream: str | None = Stage.REMEDIATION.value
    retry_seconds = 2.0

    def __init__(
        self,
        store: EventStore,
        node_ops: NodeOps,
        policy: SentinelPolicy,
        observer: Observer,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.nodes = node_ops
        self.switch = policy.switch(Stage.RECERTIFY)
        self.observer = observer
        self._clock = clock

    def handle(self, node_name: str, events: Sequence[StoredEvent]) -> list[StageOutcome]:
        if not self.switch.enabled:
            return stage.same_outcome(events, StageStatus.SKIPPED, disposition="stage-disabled")
        status = self.store.node_state(node_name)
        incident = status.event_sequence
        if status.state is not NodeState.RECERTIFYING or incident is None:
            return stage.same_outcome(
                events, StageStatus.SKIPPED, disposition="nothing-to-recertify", state=status.state.value
            )
        if not self.switch.acting:
            return stage.same_outcome(events, StageStatus.SKIPPED, disposition="planned", would="recertify")
        late = incidents.open_faults_since(self.store, node_name, incident)
        if late:
            why = f"a new fault arrived after the repair: {incidents.describe(late)}"
            return stage.same_outcome(events, StageStatus.DONE, **self._fail(node_name, incident, why))
        reason = validation_requests.reason(validation_requests.ValidationKind.RECERTIFY, f"incident {incident}")
        request = validation_requests.latest(self.store, node_name, reason)
        if request is None:
            request = self.store.request_validation(node_name, reason)
            self.nodes.change_node(
                node_name,
                NodeChange(annotations={nodes.RECERTIFICATION_ANNOTATION: f"pending (request {request.request_id})"}),
            )
            self.observer.action(STAGE, "recertification-requested", node_name, {"request_id": request.request_id})
        if request.status in validation_requests.OPEN:
            return []  # asked again after retry_seconds
        if request.status is ValidationStatus.PASSED:
            if nodes.under_maintenance(self.nodes.get_node(node_name)):
                return []  # asked again after retry_seconds: released once the maintenance ends
            return stage.same_outcome(
                events, StageStatus.DONE, **self._release(node_name, incident, request.request_id)
            )
        return stage.same_outcome(
            events, StageStatus.DONE, **self._fail(node_name, incident, f"re-certification failed: {request.detail}")
        )

    def _release(self, node_name: str, incident: int, request_id: int) -> dict[str, Any]:
        node = self.nodes.get_node(node_name)
        self.nodes.change_node(node_name, release_change(node), current=node)
        try:
            self.store.transition(
                node_name, NodeState.HEALTHY, reason=f"re-certification passed (request {request_id})",
                event_sequence=incident, expected=NodeState.RECERTIFYING,
            )  # fmt: skip
        except ConflictError:
            return {"disposition": "moved-on"}
        self.nodes.record_event(
            node_name, "Recertified", f"re-certification passed (request {request_id}); back in service"
        )
        report_gpu_health(
            self.nodes,
            node_name,
            healthy=True,
            reason="Recertified",
            message=f"re-certification passed (request {request_id})",
        )
        self.observer.action(STAGE, "released", node_name, {"request_id": request_id, "incident": incident})
        self.observer.repaired(
            node_name, repair_timing.segments(self.store.node_history(node_name), self._seen(incident))
        )
        return {"disposition": "passed", "request_id": request_id}

    def _seen(self, incident: int) -> datetime | None:
        """When the incident's monitor saw the fault."""
        stored = self.store.get(incident) if incident else None
        return stored.event.generated_at if stored is not None else None

    def _fail(self, node_name: str, incident: int, why: str) -> dict[str, Any]:
        change = NodeChange(
            labels={nodes.STATE_LABEL: NodeState.FAILED.value, nodes.RECERTIFICATION_FAILED_LABEL: "true"},
            annotations={
                nodes.REASON_ANNOTATION: why[:1000],
                nodes.RECERTIFICATION_ANNOTATION: json.dumps({"passed": False, "reason": why[:500]}),
            },
        )
        self.nodes.change_node(node_name, change)
        try:
            self.store.transition(
                node_name, NodeState.FAILED, reason=why, event_sequence=incident, expected=NodeState.RECERTIFYING
            )
        except ConflictError:
            return {"disposition": "moved-on"}
        self.nodes.record_event(node_name, "RecertificationFailed", why, warning=True)
        report_gpu_health(self.nodes, node_name, healthy=False, reason="RecertificationFailed", message=why)
        self.observer.action(STAGE, "recertification-failed", node_name, {"reason": why})
        return {"disposition": "failed", "reason": why}
