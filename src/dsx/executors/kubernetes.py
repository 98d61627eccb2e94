"""Run certification workloads on Kubernetes: Kubeflow Trainer TrainJobs, or plain Jobs as a fallback.

The engine (`Engine.TRAINER`, what dsx's recipes install and NVCRE uses): each workload run is
one TrainJob (JobSet underneath) that references a training runtime from the catalog component
`kubeflow-trainer-runtimes`: `dsx-nccl-tests` (MPI: mpirun on the launcher, sshd on the other
nodes), `dsx-megatron-lm` (torch), `dsx-torch` (one container per node: nccl-tests loopback,
the builtin worker). A certification applies its own namespaced copies of those runtimes
(`TrainingRuntime <name>-<id>`, labelled with its id, deleted with it), with the fabric's image
in every container and the gang scheduler where the cluster has one, so it needs no
cluster-scoped write and cannot drift from the version of dsx that judges it. Each TrainJob
pins its pods to the run's nodes (required node affinity on the hostname, one pod per node by
anti-affinity), requests the nodes' GPUs and the platform's devices, sets the platform's
variables and `NCCL_DEBUG=INFO`, and tolerates what the caller says (the sentinel's own cordon
and taints for a re-certification).

The fallback (`Engine.JOBS`, `--engine jobs`, chosen when the cluster serves no TrainJob and
said so): one Job per node plus a headless Service, torchrun inside, running the builtin worker
only; it is judged against its peers, never by a published figure.

Runs handed over together use disjoint nodes: they are created together and awaited
together, each within its run deadline; pods that cannot start end their run within seconds
(`dsx.kube.jobs`). Everything created carries the certification's id label and is deleted once
its logs are read, on close (also after an interrupt), and by `dsx certify cleanup --run-id`.
The cluster is reached only through a `JobLauncher` (dsx.kube.jobs.RunLauncher), so this module
renders plain dicts and never imports a Kubernetes client.
"""

from __future__ import annotations

import copy
import enum
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dsx import catalog as catalog_data
from dsx import serialization
from dsx.certify import platforms, workload
from dsx.certify.executor import JobLauncher, Notice, RunOutcome, RunStatus, WorkloadRun
from dsx.errors import DsxError, UnavailableError
from dsx.files import documents
from dsx.images import WORKLOAD_IMAGE
from dsx.model import certification as model
from dsx.model import certify_catalog as catalog

CERTIFICATION_LABEL = "certify.dsx.run/certification"
RUN_LABEL = "certify.dsx.run/run"
ROLE_LABEL = "certify.dsx.run/role"
NODE_RANK_LABEL = "certify.dsx.run/node-rank"
WORKLOAD_ANNOTATION = "certify.dsx.run/workload-run"
HOSTNAME_LABEL = "kubernetes.io/hostname"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
GPU_RESOURCE = "nvidia.com/gpu"
TRAINER_API = "trainer.kubeflow.org/v1alpha1"
RUNTIMES_COMPONENT = "kubeflow-trainer-runtimes"
RENDEZVOUS_PORT = 29500
DEFAULT_IMAGE = WORKLOAD_IMAGE
"""dsx's workload image (dsx[collectives]: torch with CUDA): what the builtin worker runs in."""
TTL_SECONDS_AFTER_FINISHED = 3600
"""A safety net: finished Jobs go even if every cleanup path of this process was cut short."""
SHARED_MEMORY_MOUNT = "/dev/shm"  # noqa: S108  (the container's shared memory, not a temp file here)
"""NCCL and the gloo/torch data loaders need more shared memory than a container's 64 MiB."""
JOB_DEADLINE_GRACE_SECONDS = 60
"""The Job's own activeDeadlineSeconds outlasts the run deadline a little: ours decides first."""


class Engine(enum.StrEnum):
    TRAINER = "trainer"  # Kubeflow Trainer TrainJobs (JobSet underneath)
    JOBS = "jobs"  # plain Jobs, the builtin worker only (fallback)


@dataclass(frozen=True)
class GangScheduler:
    """A scheduler that places a run's pods all together or not at all (KAI: its queue label)."""

    scheduler_name: str
    queue_label: str = "kai.scheduler/queue"
    queue: str = "default-queue"


def new_certification_id() -> str:
    return uuid.uuid4().hex[:8]


def run_name(certification_id: str, sequence: int) -> str:
    """A DNS label: `dsx-<id>-<n>`; the engine's run name (`nccl-all-reduce/bisection-3`) is an annotation."""
    return f"dsx-{certification_id}-{sequence}"


def default_ranks_per_node(nodes: Iterable[model.CandidateNode]) -> int:
    """One rank per GPU: the most common allocatable GPU count among the nodes (1 when unknown)."""
    counts = Counter(n.allocatable_gpus for n in nodes if n.allocatable_gpus)
    return max(counts.items(), key=lambda item: (item[1], item[0]))[0] if counts else 1


def runtime_name(name: str, certification_id: str) -> str:
    return f"{name}-{certification_id}"


def training_runtimes(
    certification_id: str,
    *,
    names: Iterable[str],
    image_for: Mapping[str, str],
    capabilities_for: Mapping[str, Sequence[str]] | None = None,
    gang: GangScheduler | None = None,
) -> list[dict[str, Any]]:
    """The certification's namespaced copies of the catalog's training runtimes it uses.

    `image_for`: runtime name → the image every container of it runs (the fabric's).
    `capabilities_for`: runtime name → the capabilities its containers add (the fabrics' union; a
    one-node certification adds none, so a baseline Pod Security namespace admits its pods), in
    place of the shipped runtime's; None keeps the shipped ones."""
    wanted = set(names)
    out = []
    for document in shipped_runtimes():
        name = document["metadata"]["name"]
        if name not in wanted:
            continue
        runtime = copy.deepcopy(document)
        runtime["kind"] = "TrainingRuntime"
        runtime["metadata"] = {
            "name": runtime_name(name, certification_id),
            "labels": {**document["metadata"].get("labels", {}), CERTIFICATION_LABEL: certification_id},
        }
        image = image_for.get(name)
        for replicated in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
            pod = replicated["template"]["spec"]["template"]["spec"]
            for container in [*pod.get("initContainers", []), *pod.get("containers", [])]:
                if image:
                    container["image"] = image
                if capabilities_for is not None:
                    _set_added_capabilities(container, capabilities_for.get(name, ()))
            if gang is not None:
                pod["schedulerName"] = gang.scheduler_name
                labels = replicated["template"]["spec"]["template"].setdefault("metadata", {}).setdefault("labels", {})
                labels[gang.queue_label] = gang.queue
        out.append(runtime)
    return sorted(out, key=lambda r: r["metadata"]["name"])


def _set_added_capabilities(container: dict[str, Any], capabilities: Sequence[str]) -> None:
    """The container adds exactly `capabilities` where the shipped runtime adds any."""
    context = container.get("securityContext") or {}
    added = context.get("capabilities") or {}
    if "add" not in added:
        return
    if capabilities:
        added["add"] = sorted(set(capabilities))
        return
    del added["add"]
    if not added:
        del context["capabilities"]
    if not context:
        del container["securityContext"]


def _fabric(run: WorkloadRun, nodes: Mapping[str, model.CandidateNode]) -> platforms.Fabric:
    """The engine's decision for the run's category, else the full-scale one for its nodes."""
    members = [nodes.get(n, model.CandidateNode(n)) for n in run.nodes]
    return run.fabric or platforms.fabric(members, accelerator=run.accelerator, scale=model.Scale.FULL_SCALE)


def shipped_runtimes() -> list[dict[str, Any]]:
    """The ClusterTrainingRuntime documents of the catalog component (the files a bundle installs)."""
    folder = catalog_data.path("components") / RUNTIMES_COMPONENT
    return [documents.load_mapping_file(str(path)) for path in sorted(folder.glob("*.yaml"))]


def render_trainjob(
    run: WorkloadRun,
    name: str,
    *,
    nodes: Mapping[str, model.CandidateNode],
    certification_id: str,
    image: str = "",
    builtin_image: str = DEFAULT_IMAGE,
    tolerations: Sequence[Mapping[str, str]] = (),
    gang: GangScheduler | None = None,
    megatron_source: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The TrainJob of one run, named `name`, referencing the certification's runtime copy."""
    members = [nodes.get(n, model.CandidateNode(n)) for n in run.nodes]
    fabric = _fabric(run, nodes)
    plan = workload.launch(
        run.category,
        run.program,
        nodes=len(members),
        gpus_per_node=run.ranks_per_node,
        platform=fabric.platform,
        accelerator=run.accelerator,
        timeouts=run.timeouts,
        image=image,
        builtin_image=builtin_image,
        megatron_source=megatron_source,
    )
    labels = {CERTIFICATION_LABEL: certification_id, RUN_LABEL: name}
    resources = _resources(run, members, fabric.platform)
    targets = _replicated_jobs(plan.runtime)
    override: dict[str, Any] = {
        "targetJobs": [{"name": target} for target in targets],
        "metadata": {"labels": dict(labels) | ({gang.queue_label: gang.queue} if gang else {})},
        "spec": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": list(run.nodes)}]}
                        ]
                    }
                },
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {JOBSET_NAME_LABEL: name}}, "topologyKey": HOSTNAME_LABEL}
                    ]
                },
            },
            "tolerations": [
                {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
                *(dict(t) for t in tolerations),
            ],
        },
    }
    overrides = [override]
    if plan.init_env and "megatron-source" in _init_containers(plan.runtime):
        overrides.append(
            {
                "targetJobs": [{"name": "node"}],
                "spec": {
                    "initContainers": [
                        {
                            "name": "megatron-source",
                            "env": [{"name": k, "value": v} for k, v in sorted(plan.init_env.items())],
                        }
                    ]
                },
            }
        )
    trainjob: dict[str, Any] = {
        "apiVersion": TRAINER_API,
        "kind": "TrainJob",
        "metadata": {"name": name, "labels": dict(labels), "annotations": {WORKLOAD_ANNOTATION: run.name}},
        "spec": {
            "runtimeRef": {
                "name": runtime_name(plan.runtime, certification_id),
                "apiGroup": "trainer.kubeflow.org",
                "kind": "TrainingRuntime",
            },
            "trainer": {
                "image": plan.image,
                "command": list(plan.command),
                "numNodes": len(members),
                "numProcPerNode": plan.procs_per_node,
                "resourcesPerNode": {"limits": dict(resources), "requests": dict(resources)},
                "env": [
                    {"name": "DSX_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    *({"name": k, "value": v} for k, v in sorted(plan.env.items())),
                ],
            },
            "labels": dict(labels) | ({gang.queue_label: gang.queue} if gang else {}),
            "podTemplateOverrides": overrides,
        },
    }
    return [trainjob]


def render_jobs(
    run: WorkloadRun,
    name: str,
    *,
    nodes: Mapping[str, model.CandidateNode],
    certification_id: str,
    image: str = DEFAULT_IMAGE,
    tolerations: Sequence[Mapping[str, str]] = (),
) -> list[dict[str, Any]]:
    """The fallback: a headless Service and one Job per node of `run` running the builtin worker.

    `tolerations` are added to the GPU one: a caller that certifies a node it holds out of
    service itself (the sentinel: cordoned, tainted) lets its own pods onto that node."""
    members = [nodes.get(n, model.CandidateNode(n)) for n in run.nodes]
    fabric = _fabric(run, nodes)
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
                        "spec": _job_pod_spec(run, name, index, node, fabric.platform, image, args, tolerations),
                    },
                },
            }
        )
    return objects


def _resources(run: WorkloadRun, members: Sequence[model.CandidateNode], platform: catalog.Platform) -> dict[str, str]:
    """The run's GPUs per node and, in full, the platform's devices (the fewest any member has)."""
    resources = {GPU_RESOURCE: str(run.ranks_per_node)}
    for resource in platform.request_all_of:
        counts: list[int] = [n.network_devices.get(resource) or 0 for n in members]
        fewest = min(counts, default=0)
        if fewest:
            resources[resource] = str(fewest)
    return resources


def _replicated_jobs(runtime: str) -> list[str]:
    for document in shipped_runtimes():
        if document["metadata"]["name"] == runtime:
            return [r["name"] for r in document["spec"]["template"]["spec"]["replicatedJobs"]]
    raise UnavailableError(f"the catalog component {RUNTIMES_COMPONENT} ships no runtime {runtime}")


def _init_containers(runtime: str) -> list[str]:
    for document in shipped_runtimes():
        if document["metadata"]["name"] == runtime:
            return [
                c["name"]
                for r in document["spec"]["template"]["spec"]["replicatedJobs"]
                for c in r["template"]["spec"]["template"]["spec"].get("initContainers", [])
            ]
    return []


def _job_pod_spec(
    run: WorkloadRun,
    name: str,
    index: int,
    node: model.CandidateNode,
    platform: catalog.Platform,
    image: str,
    args: Sequence[str],
    tolerations: Sequence[Mapping[str, str]] = (),
) -> dict[str, Any]:
    resources = _resources(run, [node], platform)
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
        *({"name": key, "value": value} for key, value in sorted({**workload.NCCL_DEBUG, **platform.env}.items())),
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
        engine: Engine = Engine.TRAINER,
        image: str = "",
        builtin_image: str = DEFAULT_IMAGE,
        tolerations: Sequence[Mapping[str, str]] = (),
        gang: GangScheduler | None = None,
        megatron_source: Mapping[str, str] | None = None,
    ) -> None:
        """`image` replaces every program's image; `builtin_image` is the builtin worker's."""
        self.launcher = launcher
        self.tolerations = tuple(tolerations)
        self.certification_id = certification_id or new_certification_id()
        self.engine = engine
        self.image = image
        self.builtin_image = builtin_image
        self.gang = gang
        self.megatron_source = dict(megatron_source or {})
        self._nodes = {n.name: n for n in nodes}
        self._sequence = 0
        self._live: list[str] = []  # created and not yet deleted
        self._runtimes: dict[str, bytes] = {}  # runtime copies applied: name → their canonical JSON

    def nodes(self) -> list[model.CandidateNode]:
        return list(self._nodes.values())

    def render(self, run: WorkloadRun, name: str) -> list[dict[str, Any]]:
        """The run's objects; on the Trainer engine, preceded by the runtime copies it needs."""
        if self.engine is Engine.JOBS:
            return render_jobs(
                run,
                name,
                nodes=self._nodes,
                certification_id=self.certification_id,
                image=self.image or self.builtin_image,
                tolerations=self.tolerations,
            )
        return render_trainjob(
            run,
            name,
            nodes=self._nodes,
            certification_id=self.certification_id,
            image=self.image,
            builtin_image=self.builtin_image,
            tolerations=self.tolerations,
            gang=self.gang,
            megatron_source=self.megatron_source,
        )

    def runtimes_for(self, runs: Sequence[WorkloadRun]) -> list[dict[str, Any]]:
        """The training runtime copies `runs` reference (each with the image its fabric needs)."""
        if self.engine is Engine.JOBS:
            return []
        images: dict[str, str] = {}
        capabilities: dict[str, set[str]] = {}
        for run in runs:
            trainjob = self.render(run, "plan")[0]
            runtime = trainjob["spec"]["runtimeRef"]["name"].removesuffix(f"-{self.certification_id}")
            images.setdefault(runtime, trainjob["spec"]["trainer"]["image"])
            capabilities.setdefault(runtime, set()).update(_fabric(run, self._nodes).platform.capabilities)
        return training_runtimes(
            self.certification_id,
            names=images,
            image_for=images,
            capabilities_for={name: sorted(caps) for name, caps in capabilities.items()},
            gang=self.gang,
        )

    def run(self, runs: Sequence[WorkloadRun], notice: Notice | None = None) -> list[RunOutcome]:
        started: list[tuple[str, WorkloadRun, float]] = []
        try:
            # a copy is applied again when it changed (a multi-node category adds IPC_LOCK after a
            # one-node one); the runs of the previous call have all ended
            wanted = {r["metadata"]["name"]: r for r in self.runtimes_for(runs)}
            texts = {n: serialization.canonical_json(r) for n, r in wanted.items()}
            changed = {n: text for n, text in texts.items() if self._runtimes.get(n) != text}
            if changed:
                self.launcher.apply([wanted[n] for n in changed])
                self._runtimes.update(changed)
            for run in runs:
                self._sequence += 1
                name = run_name(self.certification_id, self._sequence)
                self._live.append(name)
                self.launcher.create(name, self.render(run, name))
                started.append((name, run, time.monotonic()))
            return [self._collect(name, run, began, notice) for name, run, began in started]
        finally:
            for name, _, _ in started:
                self._try_delete(name)

    def _collect(self, name: str, run: WorkloadRun, began: float, notice: Notice | None) -> RunOutcome:
        remaining = run.timeouts.run_timeout_seconds - (time.monotonic() - began)
        status: RunStatus = self.launcher.wait(name, max(remaining, 0.0), notice)
        gone = 0 if status.finished else None  # a finished run's pods may be cleaned up already
        exits = {node: status.exit_codes.get(node, gone) for node in run.nodes}
        logs = {node: self._logs(name, node) for node in run.nodes if node in status.exit_codes}
        source = self._results_node(run, status)
        return RunOutcome(
            run=run,
            launcher_log=logs.get(source, "") if source else "",
            node_logs={node: logs.get(node, "") for node in run.nodes},
            exit_codes=exits,
            timed_out=not status.not_started and any(code is None for code in exits.values()),
            duration_seconds=time.monotonic() - began,
            extra={"kubernetesRun": name, "engine": self.engine.value},
            not_started=status.not_started,
            pod_problems=dict(status.problems),
            pods_alike=status.alike,
        )

    def _results_node(self, run: WorkloadRun, status: RunStatus) -> str:
        """The node whose pod printed the figures: the launcher, rank 0, or the last rank."""
        order = [n for n in status.order if n in run.nodes] or [n for n in run.nodes if n in status.exit_codes]
        if not order:
            return ""
        if self.engine is Engine.JOBS or run.program is model.Program.BUILTIN:
            return order[0]
        if run.program is model.Program.MEGATRON_LM:
            return order[-1]
        launchers = [n for n in order if status.roles.get(n) == "launcher"]
        return launchers[0] if launchers else order[0]

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
        """Delete every run still on the cluster (after an error or an interrupt), then the runtime copies."""
        errors = [e for e in (self._try_delete(name) for name in list(self._live)) if e is not None]
        if self._runtimes and not errors:
            try:
                self.launcher.delete_labelled(
                    {CERTIFICATION_LABEL: self.certification_id}, [(TRAINER_API, "TrainingRuntime")]
                )
                self._runtimes.clear()
            except DsxError as exc:
                errors.append(exc)
        if errors:
            raise UnavailableError(
                f"could not delete {len(self._live)} run(s) ({errors[-1]}); "
                f"`dsx certify cleanup --run-id {self.certification_id}` removes them"
            )

    def __enter__(self) -> KubernetesExecutor:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
