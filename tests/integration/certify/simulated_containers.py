"""What the containers of certification pods would do, on dsx sim where pods run nothing.

kwok moves each pod through its lifecycle but runs no process, so nothing prints nccl-tests
output and every pod exits 0. `SimulatedContainers` stands in for the containers only: it
wraps the real `dsx.kube.jobs.RunLauncher` (real Jobs, scheduler, kwok, logs through the
apiserver) and, per node, sets the exit code kwok reports (`sim.dsx.run/exit-code`) and seeds
the pod log kwok serves (`dsx.sim.pod_logs`). It also records every pod it saw, so tests
can check where each Job ran.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsx.executors import kubernetes
from dsx.kube.client import KubeClient
from dsx.kube.jobs import RunLauncher
from dsx.sim import pod_logs
from dsx.sim.cluster import SimCluster

DATA = Path(__file__).resolve().parents[2] / "data" / "certify"  # tests/data/certify


def sample(name: str) -> str:
    """A collected nccl-tests log without the collection's `# source:` first line."""
    return (DATA / name).read_text(encoding="utf-8").split("\n", 1)[1]


@dataclass(frozen=True)
class Container:
    exit_code: int
    log: str


@dataclass(frozen=True)
class SeenPod:
    run: str
    job: str
    role: str
    node_selector: Mapping[str, str]
    node_name: str
    gpus: str


@dataclass
class SimulatedContainers:
    """A JobLauncher: RunLauncher underneath, container behaviour per node on top."""

    inner: RunLauncher
    cluster: SimCluster
    kube: KubeClient
    launcher_log: str
    faulty: Mapping[str, Container] = field(default_factory=dict)
    seen: list[SeenPod] = field(default_factory=list)

    def create(self, run_name: str, objects: Sequence[Mapping[str, Any]]) -> None:
        changed = []
        for original in objects:
            obj = copy.deepcopy(dict(original))
            if obj["kind"] == "Job":
                template = obj["spec"]["template"]
                node = template["spec"]["nodeSelector"][kubernetes.HOSTNAME_LABEL]
                if node in self.faulty:
                    annotations = template["metadata"].setdefault("annotations", {})
                    annotations["sim.dsx.run/exit-code"] = str(self.faulty[node].exit_code)
            changed.append(obj)
        self.inner.create(run_name, changed)

    def wait(self, run_name: str, deadline_seconds: float) -> Mapping[str, int | None]:
        codes = self.inner.wait(run_name, deadline_seconds)
        for pod in self.inner.pods(run_name):
            meta, spec = pod["metadata"], pod["spec"]
            node, role = spec.get("nodeName", ""), meta["labels"][kubernetes.ROLE_LABEL]
            self.seen.append(
                SeenPod(
                    run=run_name,
                    job=meta["labels"]["job-name"],
                    role=role,
                    node_selector=dict(spec.get("nodeSelector") or {}),
                    node_name=node,
                    gpus=spec["containers"][0]["resources"]["limits"][kubernetes.GPU_RESOURCE],
                )
            )
            text = self.faulty[node].log if node in self.faulty else self._healthy_log(role)
            if text:
                pod_logs.seed(self.cluster, self.kube, self.inner.namespace, meta["name"], text)
                self._until_served(run_name, node, text)
        return codes

    def _healthy_log(self, role: str) -> str:
        """nccl-tests prints its table on the launcher; a healthy worker prints nothing of note."""
        return self.launcher_log if role == "launcher" else ""

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
