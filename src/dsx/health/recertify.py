"""The re-certification gate: a repaired node returns to service only after it passes certification.

NVSentinel uncordons a node once its monitors report healthy again (upstream #1427, #695): a
GPU that came back from a reset but runs collectives at a tenth of its bandwidth goes straight
back into training jobs. Here a node in RECERTIFYING — its remediation finished, or every
faulty entity reported healthy — gets a validation request (`dsx.health.validation_requests`:
stored, visible, at most M certifying at once). The request runs the policy's node-level
categories (nccl-loopback and a short training run by default) through the certify engine.

- passed → the node is released: our taints, labels and annotations come off and it is
  uncordoned (unless someone else had cordoned it first), then it is HEALTHY;
- failed → it stays cordoned and goes to FAILED with the reason on the node
  (`sentinel.dsx.run/recertification-failed=true`, reason annotation, a warning Event);
- a new fault arrived after the remediation → FAILED as well: the repair did not hold.

Two `Recertifier`s, chosen once by the sentinel's composition root:

- `ClusterRecertifier` — a real cluster: the certify engine's Kubernetes executor runs the
  categories *on the node*, in Jobs pinned to it that ask for every GPU it has and tolerate the
  sentinel's own cordon and taints (`held_tolerations`); the node's pod logs are judged by the
  catalog's thresholds for its hardware (or `certification.thresholds`);
- `LocalRecertifier` — a simulated cluster: the local executor plays the node (and its
  known-good peers) as processes on this machine, the honest option for a node that has no
  GPUs; its faults come from the policy's `certification.inject` (tests and demos).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dsx import serialization
from dsx.errors import BadInputError, ConflictError
from dsx.health import incidents, nodes, stages, validation_requests
from dsx.health.eventstore import EventStore, StageOutcome, StageStatus, StoredEvent, ValidationStatus
from dsx.health.policy import CertificationSettings, SentinelPolicy, Stage
from dsx.health.ports import (
    NodeChange,
    NodeOps,
    Observer,
    RecertificationRequest,
    RecertificationResult,
    Taint,
    TaintEffect,
)
from dsx.health.quarantine import release_change
from dsx.model import certification as model
from dsx.model.health import NodeState

if TYPE_CHECKING:
    from dsx.certify.executor import Executor, JobLauncher

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


class ClusterRecertifier:
    """Recertifier on the certify engine's Kubernetes executor: the node's own GPUs, in Jobs pinned to it."""

    def __init__(
        self,
        settings: CertificationSettings,
        launcher: JobLauncher,
        read_nodes: Callable[[], Sequence[model.CandidateNode]],
        *,
        tolerations: Sequence[Mapping[str, str]],
    ) -> None:
        if not settings.image:
            raise BadInputError("certification.image: a cluster re-certification needs the workload image")
        self.settings = settings
        self.launcher = launcher
        self.read_nodes = read_nodes
        self.tolerations = tuple(tolerations)

    def recertify(self, request: RecertificationRequest) -> RecertificationResult:
        from dsx.executors import kubernetes

        found = {n.name: n for n in self.read_nodes()}
        detail: dict[str, Any] = {
            "executor": "kubernetes",
            "image": self.settings.image,
            "namespace": self.settings.namespace,
            "categories": list(request.categories),
        }
        node = found.get(request.node_name)
        if node is None:
            return RecertificationResult(False, f"{request.node_name} is no longer in the cluster", detail)
        # the sentinel's own cordon must not exclude the node from its own test; its pods tolerate it
        members = [dataclasses.replace(node, unschedulable=False), *(found[p] for p in request.peers if p in found)]
        ranks = node.allocatable_gpus or 1  # every GPU of the node: any of them may be the one that failed
        certification_id = _certification_id(request)
        if request.request_id:  # a sentinel stopped mid-run left these Jobs on the node, holding its GPUs
            for sequence in range(1, len(request.categories) + len(request.group_categories) + 1):
                self.launcher.delete(kubernetes.run_name(certification_id, sequence))
        with kubernetes.KubernetesExecutor(
            self.launcher,
            members,
            certification_id=certification_id,
            image=self.settings.image,
            interconnect=self.settings.interconnect,
            tolerations=self.tolerations,
        ) as executor:
            detail["certification_id"] = executor.certification_id
            names = {m.name: m.name for m in members}
            failed = _certify(request, self.settings, executor, names, ranks=ranks, group_ranks=ranks, detail=detail)
        return RecertificationResult(failed is None, failed or "", detail)


def _certification_id(request: RecertificationRequest) -> str:
    """Per stored request, the same on every attempt (so a re-run finds its leftovers); else random."""
    if not request.request_id:
        return uuid.uuid4().hex[:8]
    return serialization.digest([request.node_name, request.request_id]).removeprefix("sha256:")[:8]


class LocalRecertifier:
    """Recertifier on the certify engine's local executor (one simulated node per process group)."""

    def __init__(self, settings: CertificationSettings, *, python: str = sys.executable) -> None:
        self.settings = settings
        self.python = python

    def recertify(self, request: RecertificationRequest) -> RecertificationResult:
        from dsx.executors.local.executor import LocalExecutor

        members = (request.node_name, *request.peers)
        local = {name: f"node-{index}" for index, name in enumerate(members)}
        injections = tuple(
            model.FaultInjection(local[name], kind) for name, kind in self.settings.inject.items() if name in local
        )
        detail: dict[str, Any] = {"executor": "local", "nodes": local, "categories": list(request.categories)}
        with LocalExecutor(len(members), injections=injections, python=self.python) as executor:
            ranks = self.settings.ranks_per_node
            failed = _certify(request, self.settings, executor, local, ranks=ranks, group_ranks=1, detail=detail)
        return RecertificationResult(failed is None, failed or "", detail)


def _certify(
    request: RecertificationRequest,
    settings: CertificationSettings,
    executor: Executor,
    names: Mapping[str, str],
    *,
    ranks: int,
    group_ranks: int,
    detail: dict[str, Any],
) -> str | None:
    """The node-level categories on the node alone, then (when asked) the group ones with its peers:
    the node's first failure as one line, or None when it passed. `names`: cluster name → executor's."""
    from dsx.certify import engine

    own = names[request.node_name]
    timeouts = model.Timeouts(settings.run_timeout_seconds, settings.stall_timeout_seconds)
    node_level = model.Certification(
        name=f"recertify-{request.node_name}",
        target=model.Target(node_names=(own,)),
        categories=tuple(model.CategoryRequest(name, _scale(settings, name)) for name in request.categories),
        thresholds=dict(settings.thresholds),
        ranks_per_node=ranks,
        timeouts=timeouts,
        interconnect=settings.interconnect,
        isolate=False,
    )
    failed = _failure(engine.certify(node_level, executor), own)
    if failed is None and request.group_categories and request.peers:
        group = model.Certification(
            name=f"group-{request.node_name}",
            target=model.Target(node_names=tuple(names[n] for n in (request.node_name, *request.peers) if n in names)),
            categories=tuple(model.CategoryRequest(n, model.Scale.FULL_SCALE) for n in request.group_categories),
            thresholds=dict(settings.thresholds),
            ranks_per_node=group_ranks,
            timeouts=timeouts,
            interconnect=settings.interconnect,
            isolate=False,
        )
        detail["group_categories"] = list(request.group_categories)
        detail["peers"] = list(request.peers)
        failed = _failure(engine.certify(group, executor), own)
    return failed


def _scale(settings: CertificationSettings, category: str) -> model.Scale | None:
    return next((c.scale for c in settings.categories if c.name == category), None)


def _failure(result: Any, local_name: str) -> str | None:
    """One line for the node's failure in a certification result, or None when it passed."""
    verdict = result.node_verdicts.get(local_name)
    if verdict is not None and verdict.status is model.Status.PASSED:
        return None
    for category in result.categories:
        own = category.node_verdicts.get(local_name)
        if own is not None and own.status is model.Status.FAILED and own.failure is not None:
            return f"{category.name}: {own.failure.reason.value}: {own.failure.message}"[:500]
    if verdict is not None and verdict.exclusion is not None:
        return f"excluded from certification: {verdict.exclusion.value}"
    return "certification did not pass"


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
            return stages.same_outcome(events, StageStatus.SKIPPED, disposition="stage-disabled")
        status = self.store.node_state(node_name)
        incident = status.event_sequence
        if status.state is not NodeState.RECERTIFYING or incident is None:
            return stages.same_outcome(
                events, StageStatus.SKIPPED, disposition="nothing-to-recertify", state=status.state.value
            )
        if not self.switch.acting:
            return stages.same_outcome(events, StageStatus.SKIPPED, disposition="planned", would="recertify")
        late = incidents.open_faults_since(self.store, node_name, incident)
        if late:
            why = f"a new fault arrived after the repair: {incidents.describe(late)}"
            return stages.same_outcome(events, StageStatus.DONE, **self._fail(node_name, incident, why))
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
            return stages.same_outcome(
                events, StageStatus.DONE, **self._release(node_name, incident, request.request_id)
            )
        return stages.same_outcome(
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
        self.observer.action(STAGE, "released", node_name, {"request_id": request_id, "incident": incident})
        return {"disposition": "passed", "request_id": request_id}

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
        self.observer.action(STAGE, "recertification-failed", node_name, {"reason": why})
        return {"disposition": "failed", "reason": why}
