"""The seam between the engine and whatever runs workloads: local processes or Kubernetes Jobs.

An executor takes workload runs (one category on one ordered set of nodes) and returns what
a person would look at afterwards: the launcher's log (rank 0: the nccl-tests table or the
training lines), each node's log, each node's exit code, and whether the run was stopped for
running too long or going silent. Judging is not its job: the engine parses and judges every
executor's output the same way.

Runs handed over together use disjoint nodes; an executor may run them in parallel
(Kubernetes) or one after another (local, so CPU contention does not skew bandwidth).

The Kubernetes executor renders each run as an Indexed Job pinned to the run's nodes and
talks to the cluster through a `JobLauncher` (implemented in dsx.kube), which keeps this
package free of any Kubernetes client.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from dsx.model import certification as model
from dsx.model import certify_catalog as catalog


class Purpose(enum.StrEnum):
    GROUP = "group"  # a category's own groups (screening)
    ISOLATION = "isolation"  # a run the fault isolation asked for
    CALIBRATION = "calibration"  # a reference run on no node in particular (local only)


@dataclass(frozen=True)
class WorkloadRun:
    name: str
    category: catalog.Category
    nodes: tuple[str, ...]  # rank order: node i holds ranks i*r .. i*r + r - 1
    ranks_per_node: int
    timeouts: model.Timeouts
    purpose: Purpose = Purpose.GROUP
    reference: Mapping[model.Metric, float] = field(default_factory=dict)
    """The calibrated values of this run's shape (executors that calibrate); the local fault
    model throttles a slow node against them, so the judge's own yardstick sets the slowdown."""

    @property
    def world_size(self) -> int:
        return len(self.nodes) * self.ranks_per_node


@dataclass(frozen=True)
class RunOutcome:
    run: WorkloadRun
    launcher_log: str
    node_logs: Mapping[str, str]
    exit_codes: Mapping[str, int | None]  # per node: first non-zero rank exit, 0, or None (killed)
    timed_out: bool = False  # ran past run_timeout_seconds
    stalled: bool = False  # printed nothing for stall_timeout_seconds
    duration_seconds: float = 0.0
    extra: Mapping[str, Any] = field(default_factory=dict)


class Executor(Protocol):
    kind: str
    calibrates: bool
    """True when thresholds compare against a reference measured by this executor (local CPU)."""

    def nodes(self) -> list[model.CandidateNode]:
        """The nodes this executor can run on, with the facts grouping needs."""
        ...

    def run(self, runs: Sequence[WorkloadRun]) -> list[RunOutcome]: ...

    def close(self) -> None: ...


class JobLauncher(Protocol):
    """What the Kubernetes executor needs from a cluster (implemented in dsx.kube).

    `create` applies objects the executor rendered and labels them with the run name;
    `wait` returns per pod (node name → exit code, None while unknown) once all pods ended or
    the deadline passed; `logs` returns a pod's log with kubelet timestamps; `delete` removes
    everything carrying the run's label and is idempotent (also called on interrupt).
    """

    def create(self, run_name: str, objects: Sequence[Mapping[str, Any]]) -> None: ...

    def wait(self, run_name: str, deadline_seconds: float) -> Mapping[str, int | None]: ...

    def logs(self, run_name: str, node: str) -> str: ...

    def delete(self, run_name: str) -> None: ...
