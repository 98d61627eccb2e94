"""Remediation: turn a drained node's open faults into one request to a provider, or escalate.

The incident's strongest open fault (`dsx.health.decisions.incidents`) picks the recommended action;
the policy maps it to a request (reset GPU, reboot node, replace node). An action with no
mapping, or one the provider cannot do (CONTACT_SUPPORT, RUN_FIELDDIAG, …), escalates: the
node is labelled `sentinel.dsx.run/remediation-failed=true`, stays cordoned and moves to
FAILED for a person. A node whose faults all healed meanwhile skips remediation and goes to
re-certification; a node whose strongest fault asks for no action waits, drained, for recovery.

Equivalent requests are one request: the request id is derived from (node, kind, incident),
recorded on the node before the provider is called and marked done after, so a redelivered
event never sends a second reboot for the same incident; a crash in the provider call itself
re-sends the same id, which providers treat as a repeat (at-least-once, idempotent by id).
After success the stage appends a `NodeRemediated` event (the analyzer counts them: five in a
week escalate to CONTACT_SUPPORT) and hands the node to re-certification.

Providers implement the `RemediationProvider` port (`dsx.health.decisions.ports`); the ones that run
processes or call URLs live in the adapter package `dsx.remediators`, the simulator's in
`dsx.sim.remediation`. The sentinel's composition root builds the one the policy names; this
module keeps only `NoProvider` (escalate everything).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dsx import serialization
from dsx.errors import ConflictError, NotFoundError
from dsx.health.decisions import incidents, nodes, stage
from dsx.health.decisions.eventstore import EventStore, StageOutcome, StageStatus, StoredEvent
from dsx.health.decisions.policy import SentinelPolicy, Stage
from dsx.health.decisions.ports import (
    NodeChange,
    NodeOps,
    Observer,
    RemediationKind,
    RemediationProvider,
    RemediationRequest,
    RemediationResult,
)
from dsx.health.decisions.quarantine import AGENT, state_change
from dsx.model.health import (
    NODE_REMEDIATED_CHECK,
    ComponentClass,
    HealthEvent,
    NodeState,
    ProcessingStrategy,
    RecommendedAction,
)

log = logging.getLogger("dsx.sentinel")

STAGE = Stage.REMEDIATION.value


def request_id(node_name: str, kind: RemediationKind, incident_sequence: int) -> str:
    return "rem-" + serialization.digest([node_name, kind.value, incident_sequence]).removeprefix("sha256:")[:16]


# -- providers -----------------------------------------------------------------------------------


class NoProvider:
    """No provider configured: every action escalates to a person."""

    name = "none"

    def supports(self, kind: RemediationKind) -> bool:
        return False

    def remediate(self, request: RemediationRequest) -> RemediationResult:
        return RemediationResult(False, "no remediation provider is configured")


ALL_KINDS = frozenset(RemediationKind)


# -- the stage -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    request: RemediationRequest | None
    disposition: str = "remediate"
    """remediate, recovered, waiting-for-recovery or escalate."""
    why: str = ""


def remediated_event(request: RemediationRequest, incident_event: HealthEvent) -> HealthEvent:
    """The record of one remediation, built from the request alone: re-appending it after a crash
    stores nothing new. (The provider's own words go to the node's state history instead.)"""
    return HealthEvent(
        agent=AGENT,
        component_class=ComponentClass.NODE,
        check_name=NODE_REMEDIATED_CHECK,
        node_name=request.node_name,
        generated_at=incident_event.generated_at,
        is_fatal=False,
        is_healthy=False,
        message=f"{request.kind.value} done for incident {request.incident_sequence} ({request.request_id})",
        processing_strategy=ProcessingStrategy.STORE_AND_ANALYSE,
        metadata={"request_id": request.request_id, "kind": request.kind.value},
    )


class RemediationHandler:
    """The remediation stage (a StageHandler); see the module docstring."""

    name = STAGE
    upstream: str | None = Stage.DRAIN.value
    retry_seconds = 1.0

    def __init__(
        self,
        store: EventStore,
        node_ops: NodeOps,
        policy: SentinelPolicy,
        provider: RemediationProvider,
        observer: Observer,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.nodes = node_ops
        self.settings = policy.remediation
        self.switch = policy.switch(Stage.REMEDIATION)
        self.provider = provider
        self.observer = observer
        self._clock = clock

    def handle(self, node_name: str, events: Sequence[StoredEvent]) -> list[StageOutcome]:
        if not self.switch.enabled:
            return stage.same_outcome(events, StageStatus.SKIPPED, disposition="stage-disabled")
        status = self.store.node_state(node_name)
        incident = status.event_sequence
        if status.state not in (NodeState.DRAINED, NodeState.REMEDIATING) or incident is None:
            return stage.same_outcome(
                events, StageStatus.SKIPPED, disposition="nothing-to-remediate", state=status.state.value
            )
        if status.state is NodeState.REMEDIATING:
            recorded = _request_on(self.nodes.get_node(node_name))
            plan = (
                _Plan(recorded)
                if recorded and recorded.incident_sequence == incident
                else self._plan(node_name, incident)
            )
            return stage.same_outcome(
                events, StageStatus.DONE, **self._carry_out(node_name, incident, plan, resumed=True)
            )
        if nodes.under_maintenance(self.nodes.get_node(node_name)):
            return []  # offered again after retry_seconds: a node under maintenance is never repaired
        plan = self._plan(node_name, incident)
        if not self.switch.acting:
            would = plan.request.kind.value if plan.request else plan.disposition
            self.observer.action(STAGE, f"would-{would}", node_name, {"why": plan.why})
            return stage.same_outcome(events, StageStatus.SKIPPED, disposition="planned", would=would, why=plan.why)
        if plan.request is None:
            if plan.disposition == "waiting-for-recovery":
                return stage.same_outcome(events, StageStatus.SKIPPED, disposition=plan.disposition, why=plan.why)
            return stage.same_outcome(
                events, StageStatus.DONE, **self._settle(node_name, incident, plan, NodeState.DRAINED)
            )
        request = plan.request
        self.store.begin(STAGE, events[0].sequence, {"node": node_name, "request": request.to_dict()})
        # the request goes on the node before the state moves: a crash in between finds it again
        self.nodes.change_node(
            node_name,
            NodeChange(annotations={nodes.REMEDIATION_ANNOTATION: json.dumps(request.to_dict(), sort_keys=True)}),
        )
        reason = f"{request.kind.value} requested ({request.request_id})"
        if not self._move(node_name, NodeState.REMEDIATING, reason, incident, NodeState.DRAINED):
            return stage.same_outcome(events, StageStatus.SKIPPED, disposition="moved-on")
        return stage.same_outcome(events, StageStatus.DONE, **self._carry_out(node_name, incident, plan, resumed=False))

    def _plan(self, node_name: str, incident: int) -> _Plan:
        """What the incident's open faults call for: a request, recovery, waiting, or escalation."""
        faults = incidents.open_faults_since(self.store, node_name, incident)
        if not faults:
            return _Plan(None, "recovered", "faults healed before remediation")
        action = incidents.strongest_action(faults.values())
        described = incidents.describe(faults)
        if action is RecommendedAction.NONE:
            return _Plan(None, "waiting-for-recovery", described)
        kind = self.settings.actions.get(action)
        if kind is None:
            return _Plan(None, "escalate", f"no remediation for {action.name} (open faults: {described})")
        if not self.provider.supports(kind):
            return _Plan(None, "escalate", f"provider {self.provider.name} cannot {kind.value} (action {action.name})")
        request = RemediationRequest(
            request_id=request_id(node_name, kind, incident),
            node_name=node_name,
            kind=kind,
            incident_sequence=incident,
            reason=f"{action.name}: {described}"[:500],
            gpus=incidents.gpu_identifiers(faults.values()) if kind is RemediationKind.RESET_GPU else (),
        )
        return _Plan(request)

    def _settle(self, node_name: str, incident: int, plan: _Plan, expected: NodeState) -> dict[str, Any]:
        """A plan without a request: the node recovered (re-certify it) or needs a person."""
        if plan.disposition == "recovered":
            moved = self._move(node_name, NodeState.RECERTIFYING, plan.why, incident, expected)
            return {"disposition": "recovered" if moved else "moved-on"}
        return self._escalate(node_name, incident, plan.why, expected)

    def _carry_out(self, node_name: str, incident: int, plan: _Plan, *, resumed: bool) -> dict[str, Any]:
        request = plan.request
        if request is None:
            return self._settle(node_name, incident, plan, NodeState.REMEDIATING)
        node = self.nodes.get_node(node_name)
        if nodes.annotations_of(node).get(nodes.REMEDIATION_DONE_ANNOTATION) == request.request_id:
            result = RemediationResult(True, "completed before a restart")
        else:
            self.nodes.change_node(node_name, state_change(NodeState.REMEDIATING))
            self.observer.action(STAGE, request.kind.value, node_name, request.to_dict())
            result = self.provider.remediate(request)
        if not result.succeeded:
            why = f"{request.kind.value} failed: {result.message}"
            return self._escalate(node_name, incident, why, NodeState.REMEDIATING)
        self.nodes.change_node(
            node_name, NodeChange(annotations={nodes.REMEDIATION_DONE_ANNOTATION: request.request_id})
        )
        self.store.record_remediation(node_name, request.kind.value, incident)
        incident_event = self.store.get(incident)
        if incident_event is not None:
            self.store.append([remediated_event(request, incident_event.event)])
        reason = f"{request.kind.value} done: {result.message}"
        self._move(node_name, NodeState.RECERTIFYING, reason, incident, NodeState.REMEDIATING)
        detail = {"request_id": request.request_id, "message": result.message}
        self.observer.action(STAGE, "remediated", node_name, detail)
        return {
            "disposition": "remediated",
            "request_id": request.request_id,
            "kind": request.kind.value,
            "resumed": resumed,
        }

    def _move(self, node_name: str, target: NodeState, reason: str, incident: int, expected: NodeState) -> bool:
        try:
            self.store.transition(node_name, target, reason=reason, event_sequence=incident, expected=expected)
        except ConflictError:
            return False
        if target is NodeState.RECERTIFYING:
            self.nodes.change_node(node_name, state_change(target))
        return True

    def _escalate(self, node_name: str, incident: int, why: str, expected: NodeState) -> dict[str, Any]:
        if not self._move(node_name, NodeState.FAILED, f"remediation failed: {why}", incident, expected):
            return {"disposition": "moved-on"}
        change = NodeChange(
            labels={nodes.STATE_LABEL: NodeState.FAILED.value, nodes.REMEDIATION_FAILED_LABEL: "true"},
            annotations={nodes.REASON_ANNOTATION: f"remediation failed: {why}"[:1000]},
        )
        try:
            self.nodes.change_node(node_name, change)
        except NotFoundError:
            return {"disposition": "escalated", "reason": why}
        self.nodes.record_event(node_name, "RemediationFailed", why, warning=True)
        self.observer.action(STAGE, "escalate", node_name, {"reason": why})
        return {"disposition": "escalated", "reason": why}


def _request_on(node: Mapping[str, Any]) -> RemediationRequest | None:
    text = nodes.annotations_of(node).get(nodes.REMEDIATION_ANNOTATION)
    if not text:
        return None
    try:
        raw = json.loads(text)
        return RemediationRequest(
            request_id=str(raw["request_id"]),
            node_name=str(raw["node_name"]),
            kind=RemediationKind(raw["kind"]),
            incident_sequence=int(raw["incident_sequence"]),
            reason=str(raw["reason"]),
            gpus=tuple(raw.get("gpus", ())),
        )
    except (ValueError, KeyError, TypeError):
        return None
