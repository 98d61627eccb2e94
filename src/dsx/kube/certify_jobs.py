"""Certification's view of a cluster: nodes as certify candidates, and cleanup by certification id.

The Kubernetes executor (`dsx.executors.kubernetes`) creates, awaits, reads and deletes its runs
through `dsx.kube.jobs.RunLauncher` (its `JobLauncher`). What only certification needs lives
here: reading nodes into the facts grouping and rendering use (labels, cordon, GPUs,
network devices), and deleting everything one certification created, by its id label,
whichever process created it — the way out after a killed `dsx certify run`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dsx import errors
from dsx.executors import kubernetes
from dsx.kube import jobs
from dsx.kube.client import KubeClient
from dsx.model import certification as model

_CORE_RESOURCES = frozenset({"cpu", "memory", "pods", "ephemeral-storage"})


def candidate(node: Mapping[str, Any]) -> model.CandidateNode:
    """A Node object as certification sees it."""
    metadata, spec, status = node.get("metadata", {}), node.get("spec", {}), node.get("status", {})
    labels = dict(metadata.get("labels") or {})
    allocatable = status.get("allocatable") or {}
    gpus = _count(allocatable.get(kubernetes.GPU_RESOURCE))
    devices = {
        name: count
        for name, value in sorted(allocatable.items())
        if "/" in name and name != kubernetes.GPU_RESOURCE and name not in _CORE_RESOURCES and (count := _count(value))
    }
    return model.CandidateNode(
        name=str(metadata["name"]),
        labels=labels,
        unschedulable=bool(spec.get("unschedulable", False)),
        allocatable_gpus=gpus,
        gpu_product=labels.get("nvidia.com/gpu.product", ""),
        network_devices=devices,
    )


def candidate_nodes(client: KubeClient) -> list[model.CandidateNode]:
    return sorted((candidate(n) for n in client.list_nodes()), key=lambda n: n.name)


def delete_certification(
    client: KubeClient, namespace: str, certification_id: str, *, dry_run: bool = False
) -> list[str]:
    """Delete every object labelled with the certification id; returns `Kind/name` of each (idempotent)."""
    labels = {kubernetes.CERTIFICATION_LABEL: certification_id}
    found = []
    for api_version, kind in jobs.CERTIFICATION_KINDS:
        try:
            objects = client.list(api_version, kind, namespace, labels=labels)
        except errors.NotFoundError:  # the cluster serves no such kind (no Trainer): nothing of it to delete
            continue
        for obj in objects:
            name = obj["metadata"]["name"]
            found.append(f"{kind}/{name}")
            if not dry_run:
                client.delete(api_version, kind, name, namespace)
    return found


TRAINJOB_CRD = "trainjobs.trainer.kubeflow.org"
JOBSET_CRD = "jobsets.jobset.x-k8s.io"
KAI_QUEUE_CRD = "queues.scheduling.run.ai"
KAI_SCHEDULER = "kai-scheduler"


@dataclass(frozen=True)
class EngineChoice:
    engine: kubernetes.Engine
    gang: kubernetes.GangScheduler | None
    note: str  # what was chosen and why, for the progress line


def choose_engine(client: KubeClient, requested: str = "auto", gang: str = "auto") -> EngineChoice:
    """Trainer when the cluster serves TrainJobs (and JobSets), else the Jobs fallback, said so.

    `requested`: auto, trainer or jobs; `gang`: auto (KAI when its queues and a ready
    kai-scheduler Deployment are there), none, or a scheduler name (`NAME[:QUEUE]`)."""
    has_trainer = _has_crd(client, TRAINJOB_CRD) and _has_crd(client, JOBSET_CRD)
    if requested == kubernetes.Engine.TRAINER.value and not has_trainer:
        raise errors.NotFoundError(
            f"--engine trainer: the cluster serves no {TRAINJOB_CRD} or {JOBSET_CRD}; install the "
            "kubeflow-trainer component (its chart brings JobSet), or pass --engine jobs "
            "(the builtin worker in plain Jobs)"
        )
    if requested == kubernetes.Engine.JOBS.value or not has_trainer:
        why = "as asked" if requested == kubernetes.Engine.JOBS.value else f"the cluster serves no {TRAINJOB_CRD}"
        return EngineChoice(
            kubernetes.Engine.JOBS,
            None,
            f"engine: plain Jobs ({why}); they run dsx's builtin worker, judged against its peers only",
        )
    scheduler = _gang(client, gang)
    said = f"; gang scheduling by {scheduler.scheduler_name} (queue {scheduler.queue})" if scheduler else ""
    return EngineChoice(kubernetes.Engine.TRAINER, scheduler, f"engine: Kubeflow Trainer TrainJobs{said}")


def _gang(client: KubeClient, gang: str) -> kubernetes.GangScheduler | None:
    if gang == "none":
        return None
    if gang != "auto":
        name, _, queue = gang.partition(":")
        return kubernetes.GangScheduler(name, queue=queue or "default-queue")
    if not _has_crd(client, KAI_QUEUE_CRD):
        return None
    for deployment in client.list("apps/v1", "Deployment", None):
        available = deployment.get("status", {}).get("availableReplicas") or 0
        if deployment["metadata"]["name"] == KAI_SCHEDULER and available:
            return kubernetes.GangScheduler(KAI_SCHEDULER)
    return None


def _has_crd(client: KubeClient, name: str) -> bool:
    try:
        client.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
    except errors.NotFoundError:
        return False
    return True


def _count(value: Any) -> int | None:
    """A device-plugin quantity ("8") as an int; None for absent or non-integer quantities (e.g. "2Gi")."""
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None
