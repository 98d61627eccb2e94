"""Run certification workloads as Kubernetes Jobs: one pod per node, pinned, torchrun inside.

A workload run on N nodes becomes a launcher-plus-workers layout: N Jobs (`<run>-<index>`,
index = node rank) and a headless Service. Job 0 is the launcher — node rank 0, the
rendezvous host (`<run>-0.<run>`), the log the judge reads; the others are workers. Each pod
is pinned to its node by `nodeSelector` on `kubernetes.io/hostname`, so a verdict is about the
node named, requests the node's GPUs (`nvidia.com/gpu`) and the platform's network devices
(catalog `platforms/`: EFA, InfiniBand NICs, with their NCCL/libfabric variables), and runs
the same worker program as the local executor under torchrun.

Runs handed over together use disjoint nodes: they are created together and awaited
together, each within its run deadline; a pod still running at the deadline makes the run a
timeout. Everything created carries the certification's id label and is deleted once its
logs are read, on close (also after an interrupt), and by `dsx certify cleanup --run-id`.
The cluster is reached only through a `JobLauncher` (dsx.kube.jobs.RunLauncher), so this
module renders plain dicts and never imports a Kubernetes client.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dsx.certify import workload
from dsx.certify.executor import JobLauncher, RunOutcome, WorkloadRun
from dsx.errors import DsxError, UnavailableError
from dsx.images import WORKLOAD_IMAGE
from dsx.model import certification as model
from dsx.model import certify_catalog as catalog

CERTIFICATION_LABEL = "certify.dsx.run/certification"
RUN_LABEL = "certify.dsx.run/run"
ROLE_LABEL = "certify.dsx.run/role"
NODE_RANK_LABEL = "certify.dsx.run/node-rank"
WORKLOAD_ANNOTATION = "certify.dsx.run/workload-run"
HOSTNAME_LABEL = "kubernetes.io/hostname"
GPU_RESOURCE = "nvidia.com/gpu"
RENDEZVOUS_PORT = 29500
DEFAULT_IMAGE = WORKLOAD_IMAGE
"""An image with dsx[collectives] (torch with CUDA) installed; `--image` names another."""
TTL_SECONDS_AFTER_FINISHED = 3600
"""A safety net: finished Jobs go even if every cleanup path of this process was cut short."""
SHARED_MEMORY_MOUNT = "/dev/shm"  # noqa: S108  (the container's shared memory, not a temp file here)
"""NCCL and the gloo/torch data loaders need more shared memory than a container's 64 MiB."""
JOB_DEADLINE_GRACE_SECONDS = 60
"""The Job's own activeDeadlineSeconds outlasts the run deadline a little: ours decides first."""


def new_certification_id() -> str:
    return uuid.uuid4().hex[:8]


def run_name(certification_id: str, sequence: int) -> str:
    """A DNS label: `dsx-<id>-<n>`; the engine's run name (`nccl-all-reduce/bisection-3`) is an annotation."""
    return f"dsx-{certification_id}-{sequence}"


def platform_for(nodes: Sequence[model.CandidateNode], interconnect: str = "") -> catalog.Platform:
    """The requested interconnect's platform, else the one whose device every node allocates, else TCP."""
    shipped = catalog.platforms()
    fallback = next(p for p in shipped.values() if not p.detect_resource)
    if interconnect:
        return next((p for p in shipped.values() if p.interconnect == interconnect.lower()), fallback)
    for platform in shipped.values():
        if platform.detect_resource and nodes and all(n.network_devices.get(platform.detect_resource) for n in nodes):
            return platform
    return fallback


def default_ranks_per_node(nodes: Iterable[model.CandidateNode]) -> int:
    """One rank per GPU: the most common allocatable GPU count among the nodes (1 when unknown)."""
    counts = Counter(n.allocatable_gpus for n in nodes if n.allocatable_gpus)
    return max(counts.items(), key=lambda item: (item[1], item[0]))[0] if counts else 1


def render(
    run: WorkloadRun,
    name: str,
    *,
    nodes: Mapping[str, model.CandidateNode],
    certification_id: str,
    image: str = DEFAULT_IMAGE,
    interconnect: str = "",
    tolerations: Sequence[Mapping[str, str]] = (),
) -> list[dict[str, Any]]:
    """The headless Service and one Job per node of `run`, named after `name`.

    `tolerations` are added to the GPU one: a caller that certifies a node it holds out of
    service itself (the sentinel: cordoned, tainted) lets its own pods onto that node."""
    members = [nodes.get(n, model.CandidateNode(n)) for n in run.nodes]
    platform = platform_for(members, interconnect)
    labels = {CERTIFICATION_LABEL: certification_id, RUN_LABEL: name}
    annotations = {WORKLOAD_ANNOTATION: run.name}
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "labels": dict(labels), "annotations": dict(annotations)},
            "spec": {
                "clusterIP": "None",
                "publishNotReadyAddresses": True,
                "selector": {RUN_LABEL: name, ROLE_LABEL: "launcher"},
                "ports": [{"name": "rendezvous", "port": RENDEZVOUS_PORT}],
            },
        }
    ]
    args = workload.worker_args(run.category, run.timeouts, local=False)
    for index, node in enumerate(members):
        role = "launcher" if index == 0 else "worker"
        pod_labels = {**labels, ROLE_LABEL: role, NODE_RANK_LABEL: str(index)}
        objects.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": f"{name}-{index}", "labels": dict(pod_labels), "annotations": dict(annotations)},
                "spec": {
                    "backoffLimit": 0,
                    "completions": 1,
                    "parallelism": 1,
                    "activeDeadlineSeconds": int(run.timeouts.run_timeout_seconds) + JOB_DEADLINE_GRACE_SECONDS,
                    "ttlSecondsAfterFinished": TTL_SECONDS_AFTER_FINISHED,
                    "template": {
                        "metadata": {"labels": pod_labels, "annotations": dict(annotations)},
                        "spec": _pod_spec(run, name, index, node, platform, image, args, tolerations),
                    },
                },
            }
        )
    return objects


def _pod_spec(
    run: WorkloadRun,
    name: str,
    index: int,
    node: model.CandidateNode,
    platform: catalog.Platform,
    image: str,
    args: Sequence[str],
    tolerations: Sequence[Mapping[str, str]] = (),
) -> dict[str, Any]:
    resources = {GPU_RESOURCE: str(run.ranks_per_node)}
    for resource in platform.request_all_of:
        count = node.network_devices.get(resource)
        if count:
            resources[resource] = str(count)
    command = [
        "torchrun",
        f"--nnodes={len(run.nodes)}",
        f"--nproc-per-node={run.ranks_per_node}",
        f"--node-rank={index}",
        f"--master-addr={name}-0.{name}",
        f"--master-port={RENDEZVOUS_PORT}",
        "-m",
        workload.WORKER_MODULE,
        *args,
    ]
    env: list[dict[str, Any]] = [
        {"name": "DSX_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "NCCL_DEBUG", "value": "WARN"},
        *({"name": key, "value": value} for key, value in platform.env.items()),
    ]
    container: dict[str, Any] = {
        "name": "worker",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": command,
        "env": env,
        "resources": {"limits": dict(resources), "requests": dict(resources)},
        "volumeMounts": [{"name": "dshm", "mountPath": SHARED_MEMORY_MOUNT}],
    }
    if platform.capabilities:
        container["securityContext"] = {"capabilities": {"add": list(platform.capabilities)}}
    return {
        "restartPolicy": "Never",
        "nodeSelector": {HOSTNAME_LABEL: node.name},
        "hostname": f"{name}-{index}",
        "subdomain": name,
        "tolerations": [
            {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
            *(dict(t) for t in tolerations),
        ],
        "containers": [container],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
    }


class KubernetesExecutor:
    kind = "kubernetes"
    calibrates = False

    def __init__(
        self,
        launcher: JobLauncher,
        nodes: Sequence[model.CandidateNode],
        *,
        certification_id: str | None = None,
        image: str = DEFAULT_IMAGE,
        interconnect: str = "",
        tolerations: Sequence[Mapping[str, str]] = (),
    ) -> None:
        self.launcher = launcher
        self.tolerations = tuple(tolerations)
        self.certification_id = certification_id or new_certification_id()
        self.image = image
        self.interconnect = interconnect
        self._nodes = {n.name: n for n in nodes}
        self._sequence = 0
        self._live: list[str] = []  # created and not yet deleted

    def nodes(self) -> list[model.CandidateNode]:
        return list(self._nodes.values())

    def render(self, run: WorkloadRun, name: str) -> list[dict[str, Any]]:
        return render(
            run,
            name,
            nodes=self._nodes,
            certification_id=self.certification_id,
            image=self.image,
            interconnect=self.interconnect,
            tolerations=self.tolerations,
        )

    def run(self, runs: Sequence[WorkloadRun]) -> list[RunOutcome]:
        started: list[tuple[str, WorkloadRun, float]] = []
        try:
            for run in runs:
                self._sequence += 1
                name = run_name(self.certification_id, self._sequence)
                self._live.append(name)
                self.launcher.create(name, self.render(run, name))
                started.append((name, run, time.monotonic()))
            return [self._collect(name, run, began) for name, run, began in started]
        finally:
            for name, _, _ in started:
                self._try_delete(name)

    def _collect(self, name: str, run: WorkloadRun, began: float) -> RunOutcome:
        remaining = run.timeouts.run_timeout_seconds - (time.monotonic() - began)
        codes = self.launcher.wait(name, max(remaining, 0.0))
        exits = {node: codes.get(node) for node in run.nodes}
        logs = {node: self._logs(name, node) for node in run.nodes}
        return RunOutcome(
            run=run,
            launcher_log=logs[run.nodes[0]],
            node_logs=logs,
            exit_codes=exits,
            timed_out=any(code is None for code in exits.values()),
            duration_seconds=time.monotonic() - began,
            extra={"kubernetesRun": name},
        )

    def _logs(self, name: str, node: str) -> str:
        """The node's pod log; empty when its pod never started or is gone (the exit code tells why)."""
        try:
            return self.launcher.logs(name, node)
        except DsxError:
            return ""

    def _try_delete(self, name: str) -> DsxError | None:
        try:
            self.launcher.delete(name)
        except DsxError as exc:  # kept in _live: close() tries again and names what is left
            return exc
        self._live.remove(name)
        return None

    def close(self) -> None:
        """Delete every run still on the cluster (after an error or an interrupt)."""
        errors = [e for e in (self._try_delete(name) for name in list(self._live)) if e is not None]
        if errors:
            raise UnavailableError(
                f"could not delete {len(self._live)} run(s) ({errors[-1]}); "
                f"`dsx certify cleanup --run-id {self.certification_id}` removes them"
            )

    def __enter__(self) -> KubernetesExecutor:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
