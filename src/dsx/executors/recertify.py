"""The re-certification gate's `Recertifier`s: the certify engine on a real node or on local processes.

`dsx.health.decisions.recertify` decides when a node is re-certified and what the verdict does; these run
the certification itself (the port is `dsx.health.decisions.ports.Recertifier`), and the sentinel's
composition root (`dsx.controllers.sentinel_wiring`) picks one:

- `ClusterRecertifier` — a real cluster: the Kubernetes executor runs the categories *on the
  node*, in Jobs pinned to it that tolerate the sentinel's own cordon and taints;
- `LocalRecertifier` — a simulated cluster: the local executor plays the node (and its
  known-good peers) as processes on this machine; its faults come from `certification.inject`.
"""

from __future__ import annotations

import dataclasses
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dsx import serialization
from dsx.errors import BadInputError
from dsx.health.decisions.policy import CertificationSettings
from dsx.health.decisions.ports import RecertificationRequest, RecertificationResult
from dsx.model import certification as model

if TYPE_CHECKING:
    from dsx.certify.executor import Executor, JobLauncher


class ClusterRecertifier:
    """Recertifier on the certify engine's Kubernetes executor: the node's own GPUs, in Jobs pinned to it."""

    def __init__(
        self,
        settings: CertificationSettings,
        launcher: JobLauncher,
        read_nodes: Callable[[], Sequence[model.CandidateNode]],
        *,
        tolerations: Sequence[Mapping[str, str]],
        choose_engine: Callable[[], Any] | None = None,
    ) -> None:
        """`choose_engine()` says how runs start (`dsx.kube.certify_jobs.choose_engine`: Trainer
        TrainJobs where the cluster serves them, the Jobs fallback otherwise); None: Trainer."""
        if not settings.image:
            raise BadInputError("certification.image: a cluster re-certification needs the workload image")
        self.settings = settings
        self.launcher = launcher
        self.read_nodes = read_nodes
        self.tolerations = tuple(tolerations)
        self.choose_engine = choose_engine

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
        choice = self.choose_engine() if self.choose_engine is not None else None
        engine = choice.engine if choice is not None else kubernetes.Engine.TRAINER
        detail["engine"] = engine.value
        with kubernetes.KubernetesExecutor(
            self.launcher,
            members,
            certification_id=certification_id,
            engine=engine,
            builtin_image=self.settings.image,
            tolerations=self.tolerations,
            gang=choice.gang if choice is not None else None,
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
