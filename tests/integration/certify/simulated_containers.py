"""What the containers of certification pods would do, on dsx sim where pods run nothing.

kwok moves each pod through its lifecycle but runs no process, so nothing prints nccl-tests
output and every pod exits 0 a second after it is Ready. `SimulatedContainers` stands in for the
containers only: it wraps the real `dsx.kube.jobs.RunLauncher` (real TrainJobs, the real
Trainer and JobSet controllers, Jobs, the scheduler, kwok, logs through the apiserver) and, once
a run's pods have run, seeds the log kwok serves for the pod that prints the results (the MPI
launcher, or Megatron's last rank): a collected real log, slow or healthy depending on whether
the run held the slow node. MPI node pods (sshd) run until their TrainJob ends, as sshd does
(`sim.dsx.run/run-duration`), so the launcher is not scheduled onto a node another rank holds.
It also records the kinds it saw per run (TrainJob, JobSet, Job, Pod) and where each pod ran.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsx.certify.executor import RunStatus
from dsx.kube.client import KubeClient
from dsx.kube.jobs import COMPLETION_INDEX, REPLICATED_JOB_LABEL, RunLauncher
from dsx.sim import pod_logs
from dsx.sim.cluster import SimCluster

DATA = Path(__file__).resolve().parents[2] / "data"
SSHD_RUN_DURATION = "10m"
"""An MPI node's sshd outlives any run here; the TrainJob's end (and its deletion) stops it."""


def sample(name: str, folder: str = "certify") -> str:
    """A collected log without the collection's `# source:` first line."""
    return (DATA / folder / name).read_text(encoding="utf-8").split("\n", 1)[1]


@dataclass(frozen=True)
class SeenPod:
    run: str
    replicated_job: str
    node_name: str
    gpus: str


@dataclass
class SimulatedContainers:
    """A JobLauncher: RunLauncher underneath, the containers' output on top."""

    inner: RunLauncher
    cluster: SimCluster
    kube: KubeClient
    log_for: Callable[[tuple[str, ...], str], str]
    """(the run's nodes, the TrainJob's runtime) → the log its results pod prints."""
    pod_annotations: Mapping[str, str] = field(default_factory=dict)
    """Added to every pod of every run (e.g. `sim.dsx.run/waiting-reason`)."""
    seen: list[SeenPod] = field(default_factory=list)
    kinds: dict[str, set[str]] = field(default_factory=dict)
    nodes: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def create(self, run_name: str, objects: Sequence[Mapping[str, Any]]) -> None:
        changed = []
        for original in objects:
            obj = copy.deepcopy(dict(original))
            if obj["kind"] == "TrainJob":
                spec = obj["spec"]
                first = spec["podTemplateOverrides"][0]
                terms = first["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                self.nodes[run_name] = tuple(terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"])
                if self.pod_annotations:
                    first.setdefault("metadata", {}).setdefault("annotations", {}).update(self.pod_annotations)
                if spec["runtimeRef"]["name"].startswith("dsx-nccl-tests-"):
                    spec["podTemplateOverrides"].append(
                        {
                            "targetJobs": [{"name": "node"}],
                            "metadata": {"annotations": {"sim.dsx.run/run-duration": SSHD_RUN_DURATION}},
                        }
                    )
            changed.append(obj)
        self.inner.create(run_name, changed)

    def apply(self, objects: Sequence[Mapping[str, Any]]) -> None:
        self.inner.apply(objects)

    def delete_labelled(self, labels: Mapping[str, str], kinds: Sequence[tuple[str, str]]) -> list[str]:
        return self.inner.delete_labelled(labels, kinds)

    def wait(self, run_name: str, deadline_seconds: float, notice: Callable[[str], None] | None = None) -> RunStatus:
        status = self.inner.wait(run_name, deadline_seconds, notice)
        namespace = self.inner.namespace
        found = self.kinds.setdefault(run_name, set())
        for api_version, kind in (
            ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
            ("jobset.x-k8s.io/v1alpha2", "JobSet"),
            ("batch/v1", "Job"),
        ):
            if any(o["metadata"]["name"].startswith(run_name) for o in self.kube.list(api_version, kind, namespace)):
                found.add(kind)
        pods = self.inner.pods(run_name)
        if pods:
            found.add("Pod")
        if status.not_started:
            return status
        runtime = self._runtime(run_name)
        results = self._results_pod(pods, runtime)
        for pod in pods:
            meta, spec = pod["metadata"], pod["spec"]
            limits = spec["containers"][0].get("resources", {}).get("limits", {})
            self.seen.append(
                SeenPod(
                    run_name,
                    meta["labels"].get(REPLICATED_JOB_LABEL, ""),
                    spec.get("nodeName", ""),
                    limits.get("nvidia.com/gpu", ""),
                )
            )
        if results is not None:
            text = self.log_for(self.nodes.get(run_name, ()), runtime)
            pod_logs.seed(self.cluster, self.kube, namespace, results["metadata"]["name"], text)
            self._until_served(run_name, results["spec"]["nodeName"], text)
        return status

    def _runtime(self, run_name: str) -> str:
        for obj in self.kube.list("trainer.kubeflow.org/v1alpha1", "TrainJob", self.inner.namespace):
            if obj["metadata"]["name"] == run_name:
                return str(obj["spec"]["runtimeRef"]["name"])
        return ""

    @staticmethod
    def _results_pod(pods: Sequence[dict[str, Any]], runtime: str) -> dict[str, Any] | None:
        """The launcher (mpirun), the last rank (Megatron), or the only pod."""
        placed = [p for p in pods if p["spec"].get("nodeName")]
        if not placed:
            return None
        launchers = [p for p in placed if p["metadata"]["labels"].get(REPLICATED_JOB_LABEL) == "launcher"]
        if launchers:
            return launchers[0]

        def index(pod: dict[str, Any]) -> int:
            value = (pod["metadata"].get("annotations") or {}).get(COMPLETION_INDEX, "0")
            return int(value) if str(value).isdigit() else 0

        ordered = sorted(placed, key=index)
        return ordered[-1] if runtime.startswith("dsx-megatron-lm-") else ordered[0]

    def _until_served(self, run_name: str, node: str, text: str) -> None:
        """kwok picks up a new Logs object within moments; a real container's log exists before it ends."""
        last_line = text.strip().splitlines()[-1].strip()
        self.kube.wait_for(
            lambda: {"log": self.inner.logs(run_name, node)},
            lambda found: last_line in found["log"],
            what=f"seeded log of {run_name} on {node}",
            timeout_seconds=30,
            interval_seconds=0.1,
        )

    def logs(self, run_name: str, node: str) -> str:
        return self.inner.logs(run_name, node)

    def delete(self, run_name: str) -> None:
        self.inner.delete(run_name)
