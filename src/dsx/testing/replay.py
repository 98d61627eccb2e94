"""Replay stored events against a policy and report what it would have done — touching nothing.

Why: a quarantine rule, a breaker threshold or a drain mode is a bet about the fleet's
history. Replaying last week's events through a candidate policy shows which nodes it would
have quarantined, which pods it would have evicted or waited for, which nodes it would have
rebooted and where the breaker would have tripped — before it is deployed. None of the
reference tools can do this (NVSentinel's rules run only live).

It is the real pipeline, not a model of it: the same analyzer, quarantine, drain, remediation
and re-certification stages run inline, in event order, over an in-memory event store and an
in-memory copy of the fleet (`InMemoryNodeOps`, seeded from a read of the live cluster when one
is given, else one GPU node per node name in the events). Time is the events' own store time,
so windows (breaker, analyzer) behave as they did. Every stage counts as enabled (dry-run flags
are moot: nothing real is touched); remediation succeeds when the policy's provider supports the
request, and re-certification is assumed to pass (reported as such).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from dsx.files import health_files
from dsx.health.decisions import analyzer, breaker, drain, nodes, quarantine, recertify, remediation, stage
from dsx.health.decisions.eventstore import StoredEvent
from dsx.health.decisions.policy import PIPELINE, ProviderKind, SentinelPolicy, Stage
from dsx.health.decisions.ports import (
    RecertificationRequest,
    RecertificationResult,
    RemediationKind,
    RemediationRequest,
    RemediationResult,
    SilentObserver,
)
from dsx.model.health import NodeState
from dsx.pipeline import analyzer_stage, stages
from dsx.pipeline.validations import ValidationRunner
from dsx.ratelimit import TokenBucket
from dsx.testing.inmemory import InMemoryEventStore
from dsx.testing.inmemory_nodes import InMemoryNodeOps

PROVIDER_KINDS: Mapping[ProviderKind, frozenset[RemediationKind]] = {
    ProviderKind.NONE: frozenset(),
    ProviderKind.SIM: frozenset({RemediationKind.REBOOT_NODE, RemediationKind.RESET_GPU}),
    ProviderKind.SCRIPT: frozenset(RemediationKind),
    ProviderKind.WEBHOOK: frozenset(RemediationKind),
}


class RecordingProvider:
    """Says yes to what the policy's provider could do, and remembers each request."""

    def __init__(self, kind: ProviderKind) -> None:
        self.name = f"replay-{kind.value}"
        self.kinds = PROVIDER_KINDS[kind]
        self.requests: list[RemediationRequest] = []

    def supports(self, kind: RemediationKind) -> bool:
        return kind in self.kinds

    def remediate(self, request: RemediationRequest) -> RemediationResult:
        self.requests.append(request)
        return RemediationResult(True, "replayed")


class AssumedPass:
    """Re-certification in a replay: assumed to pass, recorded."""

    def __init__(self) -> None:
        self.requests: list[RecertificationRequest] = []

    def recertify(self, request: RecertificationRequest) -> RecertificationResult:
        self.requests.append(request)
        return RecertificationResult(True, "", {"assumed": True})


class _ReplayClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class ReplayReport:
    policy: str
    events: int
    derived_events: int = 0
    quarantined: list[dict[str, Any]] = field(default_factory=list)
    drained: list[dict[str, Any]] = field(default_factory=list)
    remediated: list[dict[str, Any]] = field(default_factory=list)
    escalated: list[dict[str, Any]] = field(default_factory=list)
    recertified: list[dict[str, Any]] = field(default_factory=list)
    final_states: dict[str, str] = field(default_factory=dict)
    breaker: dict[str, Any] = field(default_factory=dict)
    dispositions: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "apiVersion": "dsx.health/v1alpha1",
            "kind": "ReplayReport",
            **dataclasses.asdict(self),
        }


def synthetic_nodes(names: Sequence[str], selector: Mapping[str, str]) -> list[dict[str, Any]]:
    """One schedulable GPU node per name, labelled so the policy's GPU selector counts it."""
    return [
        {
            "metadata": {"name": name, "labels": dict(selector)},
            "spec": {},
            "status": {"capacity": {nodes.GPU_RESOURCE: "8"}, "conditions": [{"type": "Ready", "status": "True"}]},
        }
        for name in sorted(set(names))
    ]


def replay(
    events: Sequence[StoredEvent],
    policy: SentinelPolicy,
    *,
    node_objects: Sequence[Mapping[str, Any]] | None = None,
    pods: Sequence[Mapping[str, Any]] = (),
) -> ReplayReport:
    ordered = sorted(events, key=lambda s: s.sequence)
    policy = policy.with_overrides(enable=[*PIPELINE, Stage.ANALYZER])
    policy = dataclasses.replace(
        policy, dry_run=False, stages={s: dataclasses.replace(w, dry_run=False) for s, w in policy.stages.items()}
    )
    clock = _ReplayClock()
    store = InMemoryEventStore(clock=clock)
    fleet = list(node_objects) if node_objects is not None else synthetic_nodes(
        [s.event.node_name for s in ordered], policy.gpu_node_selector
    )  # fmt: skip
    cluster = InMemoryNodeOps(fleet, pods)
    observer = SilentObserver()
    provider = RecordingProvider(policy.remediation.provider.kind)
    certifier = AssumedPass()
    fleet_size = len(cluster.list_nodes(dict(policy.gpu_node_selector)))
    gate = breaker.CircuitBreaker(store, policy.breaker, lambda: fleet_size, name="replay")
    unlimited = TokenBucket(1e12, 10**9)
    handlers: list[stage.StageHandler] = [
        quarantine.QuarantineHandler(store, cluster, policy, gate, observer, clock=clock),
        drain.DrainHandler(store, cluster, policy, observer, limiter=unlimited, clock=clock),
        remediation.RemediationHandler(store, cluster, policy, provider, observer, clock=clock),
        recertify.RecertifyHandler(store, cluster, policy, observer, clock=clock),
    ]
    runners = [
        stages.StageRunner(store, h, owner="replay", workers=0, dead_letter=policy.dead_letter) for h in handlers
    ]
    rules = health_files.analyzer_rules(policy.analyzer_rules)
    correlate = analyzer_stage.AnalyzerStage(store, analyzer.Analyzer(rules), owner="replay", clock=clock)
    validations = ValidationRunner(store, cluster, policy, certifier, observer, workers=0)
    for stored in ordered:
        clock.now = stored.stored_at.timestamp()
        store.append([stored.event])
        while correlate.step() + sum(r.step() for r in runners) + validations.step():
            pass
    return _report(policy, store, cluster, provider, certifier, gate, len(ordered))


def _report(
    policy: SentinelPolicy,
    store: InMemoryEventStore,
    cluster: InMemoryNodeOps,
    provider: RecordingProvider,
    certifier: AssumedPass,
    gate: breaker.CircuitBreaker,
    count: int,
) -> ReplayReport:
    report = ReplayReport(policy=policy.source, events=count, derived_events=store.last_sequence() - count)
    for status in store.node_states():
        report.final_states[status.node_name] = status.state.value
        for move in store.node_history(status.node_name):
            entry = {"node": move.node_name, "at": _stamp(move.at), "reason": move.reason}
            if move.to_state is NodeState.QUARANTINED:
                report.quarantined.append(entry)
            elif move.to_state is NodeState.FAILED:
                report.escalated.append(entry)
            elif move.to_state is NodeState.HEALTHY and move.from_state is NodeState.RECERTIFYING:
                report.recertified.append({**entry, "assumed_pass": True})
    evictions: dict[str, list[str]] = {}
    for write in cluster.writes():
        if write.operation in ("evict", "delete-pod"):
            evictions.setdefault(write.target, []).append(write.operation)
    pods_by_node = _pods_by_node(cluster, evictions)
    draining = _draining(store)
    for node in sorted(set(pods_by_node) | draining):
        waiting = [f"{nodes.namespace(p)}/{nodes.name(p)}" for p in cluster.list_pods(node)] if node in draining else []
        report.drained.append({"node": node, "pods": pods_by_node.get(node, []), "still_waiting_for": waiting})
    report.remediated = [
        {"node": r.node_name, "request": r.kind.value, "request_id": r.request_id, "reason": r.reason}
        for r in provider.requests
    ]
    report.breaker = {k: v for k, v in gate.status().items() if k in ("state", "reason", "tripped_at")}
    counts: dict[str, Counter[str]] = {}
    for sequence in range(1, store.last_sequence() + 1):
        for record in store.stage_records(sequence):
            counts.setdefault(record.stage, Counter())[str(record.detail.get("disposition", record.status.value))] += 1
    report.dispositions = {stage: dict(sorted(c.items())) for stage, c in sorted(counts.items())}
    return report


def _draining(store: InMemoryEventStore) -> set[str]:
    return {s.node_name for s in store.node_states() if s.state is NodeState.DRAINING}


def _pods_by_node(cluster: InMemoryNodeOps, evictions: Mapping[str, list[str]]) -> dict[str, list[str]]:
    """Evicted or deleted pods per node; the journal names pods, the pods' spec names the node."""
    out: dict[str, list[str]] = {}
    for pod_key, operations in sorted(evictions.items()):
        node = cluster.pod_nodes.get(pod_key, "")
        out.setdefault(node, []).append(f"{pod_key} ({operations[-1]})")
    return out


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
