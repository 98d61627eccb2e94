"""Drain: take the workloads off a quarantined node, the way each namespace wants it.

Modes per namespace (first matching glob wins, else the default):
- **Immediate** — evict through the Eviction API, so PodDisruptionBudgets hold; a refused
  eviction (HTTP 429) is retried with doubling backoff, never forced;
- **AllowCompletion** — never evict; wait until the pods finish on their own;
- **DeleteAfterTimeout** — wait up to the namespace's timeout (counted from the drain's start,
  which is recorded on the node so a restart does not reset it), then delete.

Never drained: system namespaces, DaemonSet pods (they would come straight back), static
(mirror) pods and finished pods. An event's `drain_overrides` apply to its incident: `force`
evicts every namespace's pods at once (budgets still hold), `skip` leaves the pods and counts
the node as drained. When the incident's strongest action is COMPONENT_RESET,
only pods that use the affected GPUs leave: pods without GPUs stay, and pods that say which
GPUs they use (annotation `sentinel.dsx.run/gpus`) stay when those are other GPUs.

Evictions across all nodes share one token bucket (`evictions_per_second`, `eviction_burst`),
so a mass drain cannot flood the apiserver. A drain is a series of short passes (one every
`poll_seconds`), not a blocked thread: the stage hands the event back until the node is empty.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dsx import retry
from dsx.errors import ConflictError
from dsx.health.decisions import incidents, nodes, stage
from dsx.health.decisions.eventstore import EventStore, NodeStatus, StageOutcome, StageStatus, StoredEvent
from dsx.health.decisions.policy import DrainMode, DrainSettings, NamespaceMode, SentinelPolicy, Stage
from dsx.health.decisions.ports import EvictionOutcome, NodeOps, Observer
from dsx.health.decisions.quarantine import state_change
from dsx.model.health import NodeState, RecommendedAction
from dsx.ratelimit import TokenBucket

STAGE = Stage.DRAIN.value


@dataclass(frozen=True)
class PodPlan:
    namespace: str
    name: str
    mode: DrainMode | None
    """None when the pod stays (see `kept_because`)."""
    kept_because: str = ""
    timeout_seconds: float = 0.0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pod": self.key}
        if self.mode is None:
            out["kept"] = self.kept_because
        else:
            out["mode"] = self.mode.value
        return out


def namespace_mode(namespace: str, settings: DrainSettings) -> NamespaceMode | None:
    """The namespace's drain mode; None for a system namespace."""
    if any(fnmatch.fnmatchcase(namespace, pattern) for pattern in settings.system_namespaces):
        return None
    for entry in settings.namespaces:
        if fnmatch.fnmatchcase(namespace, entry.pattern):
            return entry
    return NamespaceMode("*", settings.default_mode)


def plan(
    pods: Sequence[Mapping[str, Any]],
    settings: DrainSettings,
    *,
    gpus: Sequence[str] | None = None,
    immediate: bool = False,
) -> list[PodPlan]:
    """Which pods leave and how. `gpus` (lower-cased identifiers) limits the drain to those GPUs' users;
    `immediate` (an event's drain override) evicts every namespace's pods at once, budgets still honoured."""
    out = []
    for pod in pods:
        namespace, name = nodes.namespace(pod), nodes.name(pod)
        kept = _kept_because(pod, gpus)
        mode = namespace_mode(namespace, settings)
        if not kept and mode is None:
            kept = "system namespace"
        if kept or mode is None:
            out.append(PodPlan(namespace, name, None, kept))
        else:
            chosen = DrainMode.IMMEDIATE if immediate else mode.mode
            out.append(PodPlan(namespace, name, chosen, timeout_seconds=mode.timeout_seconds))
    return sorted(out, key=lambda p: p.key)


def _kept_because(pod: Mapping[str, Any], gpus: Sequence[str] | None) -> str:
    if nodes.pod_finished(pod):
        return "finished"
    if nodes.pod_is_mirror(pod):
        return "static pod"
    if "DaemonSet" in nodes.pod_owner_kinds(pod):
        return "DaemonSet pod"
    if gpus is not None:
        if nodes.pod_gpu_request(pod) == 0:
            return "uses no GPU (partial drain)"
        used = nodes.pod_gpus(pod)
        if used is not None and not used & set(gpus):
            return "uses other GPUs (partial drain)"
    return ""


@dataclass
class _Backoff:
    due: float
    delay: float
    refusals: int


class DrainHandler:
    """The drain stage (a StageHandler); see the module docstring."""

    name = STAGE
    upstream: str | None = Stage.QUARANTINE.value

    def __init__(
        self,
        store: EventStore,
        node_ops: NodeOps,
        policy: SentinelPolicy,
        observer: Observer,
        *,
        limiter: TokenBucket | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.nodes = node_ops
        self.settings = policy.drain
        self.switch = policy.switch(Stage.DRAIN)
        self.observer = observer
        self.retry_seconds = policy.drain.poll_seconds
        self._clock = clock
        self.evacuator = PodEvacuator(node_ops, self.settings, observer, STAGE, limiter=limiter)

    def settle(self, ready: Mapping[str, Sequence[StoredEvent]]) -> dict[str, list[StageOutcome]]:
        """Every node with nothing to drain, in one store read (`stage.SettlesInBulk`)."""
        if not self.switch.enabled:
            return {}
        return {
            node: _nothing_to_drain(ready[node], status)
            for node, status in self.store.node_states_of(list(ready)).items()
            if not _drains(status)
        }

    def handle(self, node_name: str, events: Sequence[StoredEvent]) -> list[StageOutcome]:
        if not self.switch.enabled:
            return stage.same_outcome(events, StageStatus.SKIPPED, disposition="stage-disabled")
        status = self.store.node_state(node_name)
        incident = status.event_sequence
        if not _drains(status) or incident is None:
            return _nothing_to_drain(events, status)
        if not self.switch.acting:
            would = [p.to_dict() for p in self._plan(node_name, incident) if p.mode is not None]
            self.observer.action(STAGE, "would-drain", node_name, {"pods": would})
            return stage.same_outcome(events, StageStatus.SKIPPED, disposition="planned", would=would)
        if status.state is NodeState.QUARANTINED:
            self.store.begin(STAGE, events[0].sequence, {"node": node_name, "incident": incident})
            try:
                self.store.transition(
                    node_name, NodeState.DRAINING, reason="draining workloads", event_sequence=incident,
                    expected=NodeState.QUARANTINED,
                )  # fmt: skip
            except ConflictError:
                return stage.same_outcome(events, StageStatus.SKIPPED, disposition="moved-on")
            self.nodes.change_node(
                node_name,
                state_change(NodeState.DRAINING, **{nodes.DRAIN_STARTED_ANNOTATION: stamp(self._clock())}),
            )
            self.observer.action(STAGE, "drain-started", node_name, {"incident": incident})
        remaining = self._pass(node_name, incident)
        if remaining:
            return []  # offered again after poll_seconds
        try:
            self.store.transition(
                node_name, NodeState.DRAINED, reason="workloads drained", event_sequence=incident,
                expected=NodeState.DRAINING,
            )  # fmt: skip
        except ConflictError:
            return stage.same_outcome(events, StageStatus.SKIPPED, disposition="moved-on")
        self.nodes.change_node(node_name, state_change(NodeState.DRAINED, **{nodes.DRAIN_ANNOTATION: "drained"}))
        self.observer.action(STAGE, "drained", node_name, {"incident": incident})
        return stage.same_outcome(events, StageStatus.DONE, disposition="drained", incident=incident)

    def _plan(self, node_name: str, incident: int) -> list[PodPlan]:
        faults = list(incidents.open_faults_since(self.store, node_name, incident).values())
        if any(f.drain_overrides.skip for f in faults):
            return []  # an event asked for no drain: the node counts as drained
        partial = incidents.strongest_action(faults) is RecommendedAction.COMPONENT_RESET
        gpus = incidents.gpu_identifiers(faults) if partial else None
        immediate = any(f.drain_overrides.force for f in faults)
        return plan(self.nodes.list_pods(node_name), self.settings, gpus=gpus, immediate=immediate)

    def _pass(self, node_name: str, incident: int) -> list[PodPlan]:
        """One round over the pods that must leave; returns those still there at its start."""
        remaining = [p for p in self._plan(node_name, incident) if p.mode is not None]
        if not remaining:
            return []
        node = self.nodes.get_node(node_name)
        started = parse_stamp(nodes.annotations_of(node).get(nodes.DRAIN_STARTED_ANNOTATION)) or self._clock()
        note = self.evacuator.one_pass(node_name, remaining, started=started, now=self._clock())
        if note and nodes.annotations_of(node).get(nodes.DRAIN_ANNOTATION) != note:
            self.nodes.change_node(node_name, state_change(NodeState.DRAINING, **{nodes.DRAIN_ANNOTATION: note}))
        return remaining


class PodEvacuator:
    """Evicts or deletes the pods a plan says must leave: one pass at a time, rate-limited, with
    a doubling backoff per pod a PodDisruptionBudget refused. The drain stage and maintenance
    requests (`dsx.health.decisions.maintenance`) each have their own.

    The drain stage's workers call one evacuator at once, but the stage runner hands a node to one
    worker at a time, so no two threads touch one pod's backoff entry; the map itself is a dict,
    whose single reads and writes the interpreter keeps whole. The token bucket has its own lock
    (`dsx.ratelimit`)."""

    def __init__(
        self,
        node_ops: NodeOps,
        settings: DrainSettings,
        observer: Observer,
        stage: str,
        *,
        limiter: TokenBucket | None = None,
    ) -> None:
        self.nodes = node_ops
        self.settings = settings
        self.observer = observer
        self.stage = stage
        self._limiter = limiter or TokenBucket(settings.evictions_per_second, settings.eviction_burst)
        self._backoff: dict[str, _Backoff] = {}
        self._eviction_backoff = retry.Backoff(
            settings.backoff_seconds, factor=2.0, max_seconds=settings.max_backoff_seconds
        )

    def one_pass(self, node_name: str, leaving: Sequence[PodPlan], *, started: float, now: float) -> str:
        """Act on each pod once (`started`: when the drain began, for DeleteAfterTimeout); returns a
        note on what holds the drain up ("" when nothing does)."""
        blocked, waiting = [], []
        for pod in leaving:
            if pod.mode is DrainMode.IMMEDIATE:
                if self._evict(node_name, pod, now):
                    continue
                blocked.append(pod.key)
            elif pod.mode is DrainMode.DELETE_AFTER_TIMEOUT and now - started >= pod.timeout_seconds:
                if self.nodes.delete_pod(
                    pod.namespace, pod.name, grace_period_seconds=self.settings.grace_period_seconds
                ):
                    self.observer.action(self.stage, "delete-pod", node_name, {"pod": pod.key})
            else:
                waiting.append(pod.key)
        return _note(blocked, waiting)

    def _evict(self, node_name: str, pod: PodPlan, now: float) -> bool:
        """Try one eviction unless backing off or out of tokens; False when the pod is held back."""
        backoff = self._backoff.get(pod.key)
        if backoff is not None and backoff.due > now:
            return False
        if not self._limiter.take():
            return True  # not refused: simply not this round
        result = self.nodes.evict(pod.namespace, pod.name, grace_period_seconds=self.settings.grace_period_seconds)
        if result is EvictionOutcome.BLOCKED:
            previous = self._backoff.get(pod.key)
            refusals = (previous.refusals if previous else 0) + 1
            delay = self._eviction_backoff.delay(refusals)
            self._backoff[pod.key] = _Backoff(now + delay, delay, refusals)
            self.observer.action(self.stage, "eviction-refused", node_name, {"pod": pod.key, "retry_in_seconds": delay})
            return False
        self._backoff.pop(pod.key, None)
        if result is EvictionOutcome.EVICTED:
            self.observer.action(self.stage, "evict", node_name, {"pod": pod.key})
        return True


def _note(blocked: Sequence[str], waiting: Sequence[str]) -> str:
    parts = []
    if blocked:
        parts.append(f"{len(blocked)} pod(s) held by a PodDisruptionBudget: {', '.join(blocked[:5])}")
    if waiting:
        parts.append(f"{len(waiting)} pod(s) left to finish: {', '.join(waiting[:5])}")
    return "; ".join(parts)


def stamp(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_stamp(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def _drains(status: NodeStatus) -> bool:
    return status.state in (NodeState.QUARANTINED, NodeState.DRAINING) and status.event_sequence is not None


def _nothing_to_drain(events: Sequence[StoredEvent], status: NodeStatus) -> list[StageOutcome]:
    return stage.same_outcome(events, StageStatus.SKIPPED, disposition="nothing-to-drain", state=status.state.value)
