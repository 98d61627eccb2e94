"""Builders for the pipeline unit tests: events, nodes, pods, policies, and a clock tests move by hand."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from dsx.health.decisions import breaker, drain, quarantine, recertify, remediation
from dsx.health.decisions import policy as policy_module
from dsx.health.decisions.policy import SentinelPolicy, Stage
from dsx.health.decisions.ports import (
    Observer,
    RecertificationRequest,
    RecertificationResult,
    RemediationKind,
    RemediationRequest,
    RemediationResult,
)
from dsx.model.health import (
    ComponentClass,
    Entity,
    EntityType,
    HealthEvent,
    ProcessingStrategy,
    RecommendedAction,
)
from dsx.pipeline import stages
from dsx.pipeline.validations import ValidationRunner
from dsx.ratelimit import TokenBucket
from dsx.testing.inmemory import InMemoryEventStore
from dsx.testing.inmemory_nodes import InMemoryNodeOps

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


class Clock:
    """Epoch seconds that move only when a test says so."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start.timestamp()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class RecordingObserver(Observer):
    def __init__(self) -> None:
        self.actions: list[tuple[str, str, str]] = []
        self.latencies: list[float] = []
        self.breakers: list[str] = []
        self.repairs: dict[str, dict[str, float]] = {}

    def action(self, stage: str, action: str, node_name: str, detail: Mapping[str, Any]) -> None:
        self.actions.append((stage, action, node_name))

    def fault_to_cordon(self, seconds: float) -> None:
        self.latencies.append(seconds)

    def breaker(self, state: str, detail: Mapping[str, Any]) -> None:
        self.breakers.append(state)

    def repaired(self, node_name: str, segments: Mapping[str, float]) -> None:
        self.repairs[node_name] = dict(segments)

    def named(self, action: str) -> list[str]:
        return [node for _, a, node in self.actions if a == action]


def xid(
    node: str = "n1",
    code: str = "79",
    *,
    pci: str = "0000:3b:00.0",
    at: timedelta = timedelta(0),
    action: RecommendedAction = RecommendedAction.RESTART_BM,
    fatal: bool = True,
    **changes: Any,
) -> HealthEvent:
    event = HealthEvent(
        agent="kernel-log-monitor",
        component_class=ComponentClass.GPU,
        check_name="KernelLogXid",
        node_name=node,
        generated_at=T0 + at,
        is_fatal=fatal,
        is_healthy=False,
        message=f"NVRM: Xid (PCI:{pci}): {code}",
        recommended_action=action,
        error_codes=(code,),
        entities=(Entity(EntityType.PCI, pci),),
    )
    return dataclasses.replace(event, **changes) if changes else event


def gpu_check(node: str, *, healthy: bool, gpu: str = "0", at: timedelta = timedelta(0)) -> HealthEvent:
    """An NVML-style check on one GPU: unhealthy asks for a GPU reset, healthy reports recovery."""
    return HealthEvent(
        agent="nvml-monitor",
        component_class=ComponentClass.GPU,
        check_name="GpuRemappedRows",
        node_name=node,
        generated_at=T0 + at,
        is_fatal=not healthy,
        is_healthy=healthy,
        message="row remap pending" if not healthy else "row remap cleared",
        recommended_action=RecommendedAction.NONE if healthy else RecommendedAction.COMPONENT_RESET,
        error_codes=() if healthy else ("ROW_REMAP_PENDING",),
        entities=(Entity(EntityType.GPU, gpu),),
    )


def informational(node: str = "n1") -> HealthEvent:
    return dataclasses.replace(
        xid(node, "43", fatal=False, action=RecommendedAction.NONE),
        processing_strategy=ProcessingStrategy.EXECUTE_REMEDIATION,
    )


def gpu_node(name: str, *, gpus: int = 8, labels: Mapping[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {"nvidia.com/gpu.present": "true", **(labels or {})},
            "annotations": {},
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": dict(spec),
        "status": {
            "capacity": {"nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(
    namespace: str,
    name: str,
    node: str,
    *,
    gpus: int = 1,
    owner: str | None = None,
    gpu_ids: str | None = None,
    phase: str = "Running",
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "annotations": {}}
    if owner:
        metadata["ownerReferences"] = [{"kind": owner, "name": f"{name}-owner"}]
    if gpu_ids is not None:
        metadata["annotations"]["sentinel.dsx.run/gpus"] = gpu_ids
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {
        "metadata": metadata,
        "spec": {"nodeName": node, "containers": [{"name": "main", "resources": resources}]},
        "status": {"phase": phase},
    }


def policy_with(*enabled: Stage, **sections: Any) -> SentinelPolicy:
    """The default policy with stages enabled and top-level fields replaced."""
    base = policy_module.default().with_overrides(enable=enabled)
    return dataclasses.replace(base, **sections) if sections else base


def cluster(
    names: Iterable[str] = ("n1", "n2", "n3", "n4", "n5"), pods: Iterable[dict[str, Any]] = ()
) -> InMemoryNodeOps:
    return InMemoryNodeOps([gpu_node(n) for n in names], pods)


class FakeProvider:
    """A remediation provider that succeeds (or not) and counts its calls."""

    name = "fake"

    def __init__(self, *, succeed: bool = True, kinds: Iterable[RemediationKind] = tuple(RemediationKind)) -> None:
        self.succeed = succeed
        self.kinds = frozenset(kinds)
        self.requests: list[RemediationRequest] = []

    def supports(self, kind: RemediationKind) -> bool:
        return kind in self.kinds

    def remediate(self, request: RemediationRequest) -> RemediationResult:
        self.requests.append(request)
        return RemediationResult(self.succeed, "done" if self.succeed else "the BMC did not answer")


class FakeRecertifier:
    """Passes every node except those listed as failing; remembers what it was asked."""

    def __init__(self, failing: Mapping[str, str] | None = None) -> None:
        self.failing = dict(failing or {})
        self.requests: list[RecertificationRequest] = []

    def recertify(self, request: RecertificationRequest) -> RecertificationResult:
        self.requests.append(request)
        why = self.failing.get(request.node_name)
        return RecertificationResult(why is None, why or "", {})


class Pipeline:
    """The four stages and the validation runner, inline over one store and one in-memory cluster."""

    def __init__(
        self,
        store: InMemoryEventStore,
        nodes_: InMemoryNodeOps,
        policy: SentinelPolicy,
        clock: Clock,
        observer: RecordingObserver,
        *,
        provider: FakeProvider | None = None,
        recertifier: FakeRecertifier | None = None,
        owner: str = "test",
    ) -> None:
        self.store, self.nodes, self.policy, self.clock = store, nodes_, policy, clock
        self.provider = provider or FakeProvider()
        self.recertifier = recertifier or FakeRecertifier()
        fleet = lambda: len(nodes_.list_nodes(dict(policy.gpu_node_selector)))  # noqa: E731
        self.breaker = breaker.CircuitBreaker(store, policy.breaker, fleet)
        self.quarantine = quarantine.QuarantineHandler(store, nodes_, policy, self.breaker, observer, clock=clock)
        self.drain = drain.DrainHandler(store, nodes_, policy, observer, clock=clock, limiter=TokenBucket(1e9, 10**6))
        self.remediation = remediation.RemediationHandler(store, nodes_, policy, self.provider, observer, clock=clock)
        self.recertify = recertify.RecertifyHandler(store, nodes_, policy, observer, clock=clock)
        handlers = [self.quarantine, self.drain, self.remediation, self.recertify]
        self.runners = [stages.StageRunner(store, h, owner=owner, workers=0) for h in handlers]
        self.validations = ValidationRunner(store, nodes_, policy, self.recertifier, observer, workers=0)

    def settle(self, rounds: int = 50) -> None:
        """Step every stage until nothing moves."""
        for _ in range(rounds):
            if not sum(r.step() for r in self.runners) + self.validations.step():
                return
        raise AssertionError("the pipeline did not settle")

    def run_first(self, count: int) -> None:
        """Step only the first `count` stages until they stop (the later ones stay where they are)."""
        for runner in self.runners[:count]:
            while runner.step():
                pass

    def feed(self, *events: HealthEvent) -> None:
        self.store.append(list(events))
        self.settle()
