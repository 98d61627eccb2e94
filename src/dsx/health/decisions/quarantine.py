"""Quarantine: rule sets decide, the node is cordoned, tainted, labelled and annotated in one write.

A rule set matches when all of its `match.all` and at least one of its `match.any` CEL
conditions hold over `event` (the HealthEvent) and `node` (the Node object). Every matching
rule set contributes: cordon, taints, labels. The node also gets the sentinel's own marks —
state label, reason, event key, incident sequence — so the cluster shows why it is out.

Safety valves, each answering an upstream NVSentinel complaint:
- a node labelled with the opt-out label (default `sentinel.dsx.run/managed=false`) is left alone;
- the circuit breaker (`dsx.health.decisions.breaker`) refuses quarantines beyond a share of the fleet;
- a node someone else cordoned first is marked `precordoned` and never uncordoned by us (#1424);
- a person's manual uncordon is detected (we cordoned it, it is schedulable again), the
  incident is cancelled and our taints, labels and annotations are removed (#458, #1872); the
  events stored before it are not acted on again;
- dry run and a disabled stage record what would be done and touch nothing (#193).

Recovery: a healthy event that leaves the incident with no open fault moves a quarantined (or
drained) node to re-certification; it is uncordoned only after passing (`dsx.health.decisions.recertify`).

Order of effects for crash safety: the decision is recorded (`begin`), the store transition
HEALTHY → QUARANTINED is made, then the node is written. A crash in between re-delivers the
event; the store says QUARANTINED for this very event, so only the (idempotent) node write is
repeated — the quarantine is never counted or taken twice.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from dsx import cel
from dsx.errors import ConflictError, DsxError, NotFoundError
from dsx.health.decisions import incidents, nodes, stage
from dsx.health.decisions.breaker import CircuitBreaker
from dsx.health.decisions.eventstore import EventStore, NodeStatus, StageOutcome, StageStatus, StoredEvent
from dsx.health.decisions.policy import QuarantineSettings, SentinelPolicy, Stage
from dsx.health.decisions.ports import NodeChange, NodeOps, Observer, Taint, TaintEffect
from dsx.health.decisions.stage import outcome
from dsx.model.health import ComponentClass, HealthEvent, NodeState, ProcessingStrategy

log = logging.getLogger("dsx.sentinel")

STAGE = Stage.QUARANTINE.value
AGENT = "dsx-sentinel"
MANUAL_RELEASE = "manual uncordon"
"""Start of the reason recorded when a person's uncordon ended an incident."""
BREAKER_TRIPPED_CHECK = "CircuitBreakerTripped"
FORCED_RULE_SET = "forced-by-event"
FORCED_TAINT = Taint(f"{nodes.PREFIX}/quarantined", TaintEffect.NO_SCHEDULE, "forced")
"""What an event with `quarantine_overrides.force` gets when no rule set matches it."""
RECOVERABLE = (NodeState.QUARANTINED, NodeState.DRAINED)
"""States a recovery (all faults healed) moves to re-certification from."""
HUMAN_RELEASABLE = (
    NodeState.QUARANTINED,
    NodeState.DRAINING,
    NodeState.DRAINED,
    NodeState.RECERTIFYING,
    NodeState.FAILED,
)


@dataclass(frozen=True)
class Decision:
    """What the matching rule sets ask for."""

    rule_sets: tuple[str, ...] = ()
    cordon: bool = False
    taints: tuple[Taint, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def matched(self) -> bool:
        return bool(self.rule_sets)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule_sets": list(self.rule_sets),
            "cordon": self.cordon,
            "taints": [t.to_dict() for t in self.taints],
            "labels": dict(sorted(self.labels.items())),
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Decision:
        return cls(
            rule_sets=tuple(raw.get("rule_sets", ())),
            cordon=bool(raw.get("cordon")),
            taints=tuple(Taint.from_dict(t, source="stage record") for t in raw.get("taints", ())),
            labels=dict(raw.get("labels", {})),
        )


def decide(event: HealthEvent, node: Mapping[str, Any], settings: QuarantineSettings) -> Decision:
    """Evaluate the rule sets; an event forcing quarantine (override) at least cordons."""
    bindings = {"event": event.content(), "node": node}
    matched: list[str] = []
    cordon = False
    taints: dict[tuple[str, str], Taint] = {}
    labels: dict[str, str] = {}
    for rule_set in settings.rule_sets:
        try:
            hit = rule_set.matches(bindings)
        except cel.CelEvaluationError as exc:
            log.warning("rule set %s on node %s: %s", rule_set.name, nodes.name(node), exc)
            continue
        if hit:
            matched.append(rule_set.name)
            cordon = cordon or rule_set.cordon
            for taint in rule_set.taints:
                taints.setdefault((taint.key, taint.effect.value), taint)
            labels.update(rule_set.labels)
    if not matched and event.quarantine_overrides.force:
        matched, cordon = [FORCED_RULE_SET], True
        taints[(FORCED_TAINT.key, FORCED_TAINT.effect.value)] = FORCED_TAINT
    return Decision(tuple(matched), cordon, tuple(taints.values()), labels)


def opted_out(node: Mapping[str, Any], settings: QuarantineSettings) -> bool:
    key, value = settings.opt_out_label
    return nodes.labels_of(node).get(key) == value


def mark_change(
    node: Mapping[str, Any], decision: Decision, stored: StoredEvent, reason: str, now: datetime
) -> NodeChange:
    """The single write that quarantines `node` for the incident opened by `stored`."""
    own = nodes.annotations_of(node)
    resumed = own.get(nodes.INCIDENT_ANNOTATION) == str(stored.sequence)
    precordoned = own.get(nodes.PRECORDONED_ANNOTATION) == "true" if resumed else nodes.unschedulable(node)
    we_cordon = decision.cordon and not precordoned
    annotations: dict[str, str | None] = {
        nodes.REASON_ANNOTATION: reason,
        nodes.EVENT_ANNOTATION: stored.event.idempotency_key,
        nodes.INCIDENT_ANNOTATION: str(stored.sequence),
        nodes.QUARANTINED_AT_ANNOTATION: own.get(nodes.QUARANTINED_AT_ANNOTATION) if resumed else _stamp(now),
        nodes.PRECORDONED_ANNOTATION: "true" if precordoned else None,
        nodes.CORDONED_ANNOTATION: "true" if we_cordon else None,
        nodes.TAINTS_ANNOTATION: ",".join(sorted({t.key for t in decision.taints})) or None,
        nodes.LABELS_ANNOTATION: ",".join(sorted(decision.labels)) or None,
    }
    return NodeChange(
        unschedulable=True if decision.cordon else None,
        labels={nodes.STATE_LABEL: NodeState.QUARANTINED.value, **decision.labels},
        annotations=annotations,
        add_taints=decision.taints,
    )


def release_change(node: Mapping[str, Any], *, uncordon: bool = True) -> NodeChange:
    """Remove everything an incident put on the node; uncordon only what we cordoned."""
    own = nodes.annotations_of(node)
    labels: dict[str, str | None] = {
        nodes.STATE_LABEL: None,
        nodes.REMEDIATION_FAILED_LABEL: None,
        nodes.RECERTIFICATION_FAILED_LABEL: None,
    }
    labels.update({key: None for key in _keys(own.get(nodes.LABELS_ANNOTATION))})
    we_cordoned = own.get(nodes.CORDONED_ANNOTATION) == "true" and own.get(nodes.PRECORDONED_ANNOTATION) != "true"
    return NodeChange(
        unschedulable=False if uncordon and we_cordoned else None,
        labels=labels,
        annotations=dict.fromkeys(nodes.INCIDENT_ANNOTATIONS),
        remove_taints=_keys(own.get(nodes.TAINTS_ANNOTATION)),
    )


def state_change(state: NodeState, **annotations: str | None) -> NodeChange:
    """Mirror a pipeline state on the node's state label (plus stage annotations)."""
    return NodeChange(labels={nodes.STATE_LABEL: state.value}, annotations=annotations)


def manually_uncordoned(node: Mapping[str, Any]) -> bool:
    """We cordoned this node for an incident and it is schedulable again: a person uncordoned it."""
    own = nodes.annotations_of(node)
    return own.get(nodes.CORDONED_ANNOTATION) == "true" and not nodes.unschedulable(node)


def _keys(value: str | None) -> tuple[str, ...]:
    return tuple(k for k in (value or "").split(",") if k)


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class QuarantineHandler:
    """The quarantine stage (a StageHandler); see the module docstring."""

    name = STAGE
    upstream: str | None = None
    retry_seconds = 2.0

    def __init__(
        self,
        store: EventStore,
        node_ops: NodeOps,
        policy: SentinelPolicy,
        breaker: CircuitBreaker,
        observer: Observer,
        *,
        clock: Callable[[], float] = time.time,
        node_view: Callable[[str], Mapping[str, Any] | None] | None = None,
    ) -> None:
        self.store = store
        self.nodes = node_ops
        self.node_view = node_view
        """The node as the sentinel's node watch last saw it (None: not seen); saves a read per fault."""
        self.settings = policy.quarantine
        self.switch = policy.switch(Stage.QUARANTINE)
        self.breaker = breaker
        self.observer = observer
        self._clock = clock

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock(), UTC)

    def settle(self, ready: Mapping[str, Sequence[StoredEvent]]) -> dict[str, list[StageOutcome]]:
        """Routine traffic of many nodes (healthy checks, warnings) in one store read: every node
        whose events can neither cordon nor start a recovery (`stage.SettlesInBulk`)."""
        if not self.switch.enabled:
            return {}
        routine = {n: events for n, events in ready.items() if not any(may_cordon(s.event) for s in events)}
        asks = [n for n, events in routine.items() if any(_asks_state(s.event) for s in events)]
        states = self.store.node_states_of(asks) if asks else {}
        out: dict[str, list[StageOutcome]] = {}
        for node, events in routine.items():
            settled = [_routine(stored, states.get(node)) for stored in events]
            if all(o is not None for o in settled):
                out[node] = [o for o in settled if o is not None]
        return out

    def handle(self, node_name: str, events: Sequence[StoredEvent]) -> list[StageOutcome]:
        if not self.switch.enabled:
            return stage.same_outcome(events, StageStatus.SKIPPED, disposition="stage-disabled")
        if not any(may_cordon(stored.event) for stored in events):
            # routine traffic (healthy checks, warnings): decided from the store alone, no apiserver
            # read per event (a fleet's background health traffic would be that many GETs a second)
            return [self._one(stored, {})[0] for stored in events]
        try:
            node = self._node(node_name)
        except NotFoundError:
            return [outcome(s, StageStatus.SKIPPED, disposition="node-not-found") for s in events]
        node = self.reconcile(node)
        out: list[StageOutcome] = []
        for stored in events:
            result, node = self._one(stored, node)
            out.append(result)
        return out

    def _node(self, name: str) -> dict[str, Any]:
        """The node from the watch's view when it has it, else read. A view a moment old is safe:
        the write is guarded by the node's version, and the marks are worked out again from the
        fresh node when it meets a newer one (`mark_change` through `change_node`)."""
        seen = self.node_view(name) if self.node_view is not None else None
        return copy.deepcopy(dict(seen)) if seen is not None else self.nodes.get_node(name)

    # -- a person's uncordon -------------------------------------------------------------------

    def reconcile(self, node: dict[str, Any]) -> dict[str, Any]:
        """Respect a manual uncordon: end the incident and take our marks off. Returns the node after."""
        if not manually_uncordoned(node) or not self.switch.acting:
            return node
        name = nodes.name(node)
        status = self.store.node_state(name)
        if status.state not in HUMAN_RELEASABLE:
            return node  # REMEDIATING: the provider owns the node now; looked at again afterwards
        try:
            self.store.transition(
                name,
                NodeState.HEALTHY,
                reason=f"{MANUAL_RELEASE}: a person made the node schedulable; incident cancelled",
                event_sequence=self.store.last_sequence(),
                expected=status.state,
            )
        except ConflictError:
            return node
        node = self.nodes.change_node(name, release_change(node, uncordon=False), current=node)
        self.nodes.record_event(name, "QuarantineCancelled", "manual uncordon detected; sentinel marks removed")
        report_gpu_health(self.nodes, name, healthy=True, reason="ReleasedByPerson", message="manual uncordon")
        self.observer.action(STAGE, "manual-uncordon", name, {"previous_state": status.state.value})
        return node

    def _cancelled_by_person(self, name: str, stored: StoredEvent) -> bool:
        for move in reversed(self.store.node_history(name)):
            if move.to_state is NodeState.HEALTHY:
                return move.reason.startswith(MANUAL_RELEASE) and stored.sequence <= (move.event_sequence or 0)
        return False

    # -- one event -----------------------------------------------------------------------------

    def _one(self, stored: StoredEvent, node: dict[str, Any]) -> tuple[StageOutcome, dict[str, Any]]:
        event, name = stored.event, stored.event.node_name
        routine = _routine(stored, self.store.node_state(name) if _asks_state(event) else None)
        if routine is not None:
            return routine, node
        status = self.store.node_state(name)
        if event.is_healthy:
            return self._recovery(stored, node, status.state, status.event_sequence)
        if status.state is NodeState.QUARANTINED and status.event_sequence == stored.sequence:
            record = self.store.stage_record(STAGE, stored.sequence)
            decision = Decision.from_dict((record.detail if record else {}).get("decision", {}))
            return self._mark(stored, node, decision, resumed=True)
        if status.state is not NodeState.HEALTHY:
            detail = {"state": status.state.value, "incident": status.event_sequence}
            return outcome(stored, StageStatus.SKIPPED, disposition="already-quarantined", **detail), node
        decision = decide(event, node, self.settings)
        if not decision.matched:
            return outcome(stored, StageStatus.SKIPPED, disposition="no-rule-matched"), node
        if opted_out(node, self.settings):
            return outcome(stored, StageStatus.SKIPPED, disposition="opted-out"), node
        if self._cancelled_by_person(name, stored):
            return outcome(stored, StageStatus.SKIPPED, disposition="cancelled-by-manual-uncordon"), node
        admission = self.breaker.admit(name, stored.stored_at)
        if not admission.allowed:
            if admission.tripped_now:
                self._report_trip(stored, admission.reason)
            return outcome(stored, StageStatus.SKIPPED, disposition="breaker-open", reason=admission.reason), node
        if not self.switch.acting:
            self.observer.action(STAGE, "would-quarantine", name, decision.to_dict())
            return outcome(stored, StageStatus.SKIPPED, disposition="planned", would=decision.to_dict()), node
        try:
            self.store.transition(
                name,
                NodeState.QUARANTINED,
                reason=_reason(decision, event),
                event_sequence=stored.sequence,
                expected=NodeState.HEALTHY,
                intent=(STAGE, {"node": name, "decision": decision.to_dict()}),
            )
        except ConflictError:
            status = self.store.node_state(name)
            detail = {"state": status.state.value, "incident": status.event_sequence}
            return outcome(stored, StageStatus.SKIPPED, disposition="already-quarantined", **detail), node
        return self._mark(stored, node, decision, resumed=False)

    def _mark(
        self, stored: StoredEvent, node: dict[str, Any], decision: Decision, *, resumed: bool
    ) -> tuple[StageOutcome, dict[str, Any]]:
        name = stored.event.node_name
        reason, now = _reason(decision, stored.event), self._now()
        node = self.nodes.change_node(
            name, lambda fresh: mark_change(fresh, decision, stored, reason, now), current=node
        )
        if not resumed:
            self.observer.fault_to_cordon(max(0.0, self._clock() - stored.event.generated_at.timestamp()))
        report_gpu_health(self.nodes, name, healthy=False, reason="Quarantined", message=reason)
        self.observer.action(STAGE, "quarantine", name, decision.to_dict())
        detail = {**decision.to_dict(), "precordoned": nodes.annotations_of(node).get(nodes.PRECORDONED_ANNOTATION)}
        return outcome(stored, StageStatus.DONE, disposition="quarantined", resumed=resumed, **detail), node

    def _recovery(
        self, stored: StoredEvent, node: dict[str, Any], state: NodeState, incident: int | None
    ) -> tuple[StageOutcome, dict[str, Any]]:
        name = stored.event.node_name
        if state not in RECOVERABLE or incident is None:
            return outcome(stored, StageStatus.SKIPPED, disposition="no-incident"), node
        still_open = incidents.open_faults_since(self.store, name, incident)
        if still_open:
            detail = {"open_faults": incidents.describe(still_open)}
            return outcome(stored, StageStatus.SKIPPED, disposition="faults-still-open", **detail), node
        if not self.switch.acting:
            return outcome(stored, StageStatus.SKIPPED, disposition="planned", would="recertify"), node
        try:
            self.store.transition(
                name,
                NodeState.RECERTIFYING,
                reason="every faulty entity reported healthy again",
                event_sequence=incident,
                expected=state,
            )
        except ConflictError:
            return outcome(stored, StageStatus.SKIPPED, disposition="moved-on"), node
        node = self.nodes.change_node(name, state_change(NodeState.RECERTIFYING))
        self.observer.action(STAGE, "recovered", name, {"incident": incident})
        return outcome(stored, StageStatus.DONE, disposition="recovered", incident=incident), node

    def _report_trip(self, stored: StoredEvent, reason: str) -> None:
        name = stored.event.node_name
        log.error("circuit breaker %s tripped: %s", self.breaker.name, reason, extra={"node": name})
        self.observer.breaker("tripped", {"reason": reason, "node": name})
        self.store.append(
            [
                HealthEvent(
                    agent=AGENT,
                    component_class=ComponentClass.NODE,
                    check_name=BREAKER_TRIPPED_CHECK,
                    node_name=name,
                    generated_at=stored.stored_at,
                    is_fatal=False,
                    is_healthy=False,
                    message=reason,
                    processing_strategy=ProcessingStrategy.STORE_ONLY,
                    metadata={"breaker": self.breaker.name, "trigger": stored.event.idempotency_key},
                )
            ]
        )
        if self.switch.acting:
            self.nodes.record_event(name, "CircuitBreakerTripped", reason, warning=True)


def _asks_state(event: HealthEvent) -> bool:
    """Whether the node's state decides a routine event (a healthy check: is there an incident?)."""
    return (
        event.processing_strategy is ProcessingStrategy.EXECUTE_REMEDIATION
        and not event.quarantine_overrides.skip
        and event.is_healthy
    )


def _routine(stored: StoredEvent, status: NodeStatus | None) -> StageOutcome | None:
    """The outcome of an event that needs neither the node nor a write; None: `_one` goes on.

    `status` is the node's state, needed only when `_asks_state(stored.event)`.
    """
    event = stored.event
    if event.processing_strategy is not ProcessingStrategy.EXECUTE_REMEDIATION:
        return outcome(stored, StageStatus.SKIPPED, disposition="not-for-remediation")
    if event.quarantine_overrides.skip:
        return outcome(stored, StageStatus.SKIPPED, disposition="override-skip")
    if event.is_healthy:
        if status is None or (status.state in RECOVERABLE and status.event_sequence is not None):
            return None  # a recovery may be due: `_recovery` decides
        return outcome(stored, StageStatus.SKIPPED, disposition="no-incident")
    if not (event.is_fatal or event.quarantine_overrides.force):
        return outcome(stored, StageStatus.SKIPPED, disposition="not-fatal")
    return None


def may_cordon(event: HealthEvent) -> bool:
    """Whether `_one` may read or change the node for this event (the others skip or recover by store state)."""
    return (
        event.processing_strategy is ProcessingStrategy.EXECUTE_REMEDIATION
        and not event.quarantine_overrides.skip
        and not event.is_healthy
        and (event.is_fatal or event.quarantine_overrides.force)
    )


def _reason(decision: Decision, event: HealthEvent) -> str:
    codes = f" {','.join(event.error_codes)}" if event.error_codes else ""
    return f"{'+'.join(decision.rule_sets)}: {event.check_name}{codes}: {event.message}"[:1000]


def report_gpu_health(ops: NodeOps, node_name: str, *, healthy: bool, reason: str, message: str) -> None:
    """Set `nodes.GPU_HEALTH_CONDITION`; advisory, so a failure is logged and the stage goes on."""
    status = "True" if healthy else "False"
    try:
        ops.set_condition(node_name, nodes.GPU_HEALTH_CONDITION, status, reason=reason, message=message)
    except DsxError as exc:
        log.warning("could not set condition %s on node %s: %s", nodes.GPU_HEALTH_CONDITION, node_name, exc)
