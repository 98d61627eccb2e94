"""The seam between the engine and whatever runs workloads: local processes or Kubernetes.

An executor takes workload runs (one category on one ordered set of nodes, with the program
and the fabric the engine chose) and returns what a person would look at afterwards: the log
the results are printed in (mpirun's launcher for nccl-tests, the last rank for Megatron-LM,
rank 0 for the builtin worker), each node's log, each node's exit code, why pods did not start,
and whether the run was stopped for running too long or going silent. Judging is not its job:
the engine parses and judges every executor's output the same way.

Runs handed over together use disjoint nodes; an executor may run them in parallel
(Kubernetes) or one after another (local, so CPU contention does not skew bandwidth).

The Kubernetes executor renders each run as a Kubeflow Trainer TrainJob (or, as an explicit
fallback, plain Jobs) pinned to the run's nodes and talks to the cluster through a
`JobLauncher` (implemented in dsx.kube), which keeps this package free of any Kubernetes client.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from dsx.certify import platforms
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
    """The values of this run's shape measured by a fault-free run of the same round (executors
    that calibrate); the local fault model throttles a slow node against them, so the judge's own
    yardstick sets the slowdown, whatever the machine's load is at that moment."""
    program: model.Program = model.Program.BUILTIN
    fabric: platforms.Fabric | None = None
    """The platform the engine chose for the category: pods are set up for it, thresholds match it."""
    accelerator: str = ""

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
    not_started: str = ""
    """Why the run's pods could not be scheduled or started (it ended there, not at its deadline)."""
    pod_problems: Mapping[str, str] = field(default_factory=dict)
    """Per node (or pod, before it has one): the scheduling or waiting reason its pod showed."""
    pods_alike: bool = False
    """Every pod of the run showed the same problem (the launcher's `RunStatus.alike`)."""


Notice = Callable[[str], None]


class Executor(Protocol):
    kind: str
    calibrates: bool
    """True when thresholds compare against a reference measured by this executor (local CPU)."""

    def nodes(self) -> list[model.CandidateNode]:
        """The nodes this executor can run on, with the facts grouping needs."""
        ...

    def run(self, runs: Sequence[WorkloadRun], notice: Notice | None = None) -> list[RunOutcome]:
        """Run them (disjoint nodes); `notice` hears what happens meanwhile (pods waiting, unschedulable)."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class RunStatus:
    """What a `JobLauncher.wait` saw: exit codes per node, and why pods did not start."""

    exit_codes: Mapping[str, int | None] = field(default_factory=dict)
    """Per node: the first non-zero exit code of its pods, 0, or None while one still runs."""
    not_started: str = ""
    """Set when the wait ended early because pods cannot be scheduled or started (the reason)."""
    problems: Mapping[str, str] = field(default_factory=dict)
    """Per node (or pod name, before it is scheduled): the last scheduling or waiting reason seen."""
    order: tuple[str, ...] = ()
    """The nodes in rank order: a launcher first, then by completion index (node rank)."""
    roles: Mapping[str, str] = field(default_factory=dict)
    """Per node: its pod's role (`launcher`, `node`: Trainer's replicated jobs)."""
    alike: bool = False
    """Every pod the run made shows the same scheduling or start problem (a shared cause)."""
    finished: bool = False
    """The run's owner (TrainJob or Jobs) reached Complete or Failed: a node whose pod is gone served its part."""


class JobLauncher(Protocol):
    """What the Kubernetes executor needs from a cluster (implemented in dsx.kube).

    `create` applies objects the executor rendered and labels them with the run name; `apply`
    applies objects that outlive a run (a certification's training runtimes); `delete_labelled`
    deletes every object of the kinds given that carries the labels (idempotent);
    `wait` returns once all the run's pods ended, the deadline passed, or its pods cannot
    start (a scheduling or waiting reason that outlasts a short grace); `notice` hears each new
    reason as it appears; `logs` returns the log of the run's pod on a node (with kubelet
    timestamps), or of one role's pod; `delete` removes everything carrying the run's label and
    is idempotent (also called on interrupt).
    """

    def create(self, run_name: str, objects: Sequence[Mapping[str, Any]]) -> None: ...

    def apply(self, objects: Sequence[Mapping[str, Any]]) -> None: ...

    def delete_labelled(self, labels: Mapping[str, str], kinds: Sequence[tuple[str, str]]) -> list[str]: ...

    def wait(self, run_name: str, deadline_seconds: float, notice: Notice | None = None) -> RunStatus: ...

    def logs(self, run_name: str, node: str) -> str: ...

    def delete(self, run_name: str) -> None: ...
