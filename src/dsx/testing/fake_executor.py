"""Stand-ins for the `Executor` and `JobLauncher` ports, for unit tests of the pure logic.

`FakeExecutor` answers each run with what a real one would have seen — an nccl-tests table
written by the parsers' own writer, Megatron-like training lines, exit codes, a stopped run —
computed from a fault model (node → FaultKind), with no process and no clock: a slow node
divides the group's bandwidth by `slow_factor`, a corrupt one adds wrong elements, a crash
exits 134 while its peers report a lost connection, a hang stalls the run. The engine, the
judge, isolation and the reports run unchanged on top of it.

`FakeJobLauncher` keeps what the Kubernetes executor created, answers `wait` and `logs` from
per-node scripts, and records deletions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsx.certify import collectives, workload
from dsx.certify.executor import Notice, Purpose, RunOutcome, RunStatus, WorkloadRun
from dsx.certify.parsing import nccl, nccl_writer, training
from dsx.model import certification as model

NOMINAL_ALGBW_GBPS = 100.0
NOMINAL_STEP_SECONDS = 0.05
RUN_SECONDS = 1.0
PEER_LOST = "dsx-worker: rank {rank} on {node}: RuntimeError: Connection closed by peer [127.0.0.1]:29500"


class FakeExecutor:
    kind = "fake"

    def __init__(
        self,
        nodes: Sequence[model.CandidateNode] | int,
        *,
        faults: Mapping[str, model.FaultKind] | None = None,
        calibrates: bool = True,
        slow_factor: float = 5.0,
    ) -> None:
        if isinstance(nodes, int):
            nodes = [model.CandidateNode(f"node-{i}") for i in range(nodes)]
        self._nodes = list(nodes)
        self.faults = dict(faults or {})
        self.calibrates = calibrates
        self.slow_factor = slow_factor
        self.runs: list[WorkloadRun] = []
        self.closed = False

    def nodes(self) -> list[model.CandidateNode]:
        return list(self._nodes)

    def run(self, runs: Sequence[WorkloadRun], notice: Notice | None = None) -> list[RunOutcome]:
        self.runs.extend(runs)
        return [self._outcome(r) for r in runs]

    def close(self) -> None:
        self.closed = True

    def _outcome(self, run: WorkloadRun) -> RunOutcome:
        faults = (
            {} if run.purpose is Purpose.CALIBRATION else {n: self.faults[n] for n in run.nodes if n in self.faults}
        )
        kinds = set(faults.values())
        if model.FaultKind.HANG in kinds:
            logs = {n: "" for n in run.nodes}
            hung = next(n for n, k in faults.items() if k is model.FaultKind.HANG)
            logs[hung] = f"dsx-worker: rank 0 on {hung}: injected hang, stalling\n"
            codes: dict[str, int | None] = {n: None for n in run.nodes}
            return RunOutcome(run, "", logs, codes, stalled=True, duration_seconds=RUN_SECONDS)
        crashed = [n for n, k in faults.items() if k is model.FaultKind.CRASH]
        if crashed:
            logs = {
                n: f"dsx-worker: rank {i} on {n}: injected crash, exiting with code {workload.CRASH_EXIT_CODE}\n"
                if n in crashed
                else PEER_LOST.format(rank=i, node=n) + "\n"
                for i, n in enumerate(run.nodes)
            }
            codes = {n: workload.CRASH_EXIT_CODE if n in crashed else 1 for n in run.nodes}
            return RunOutcome(run, logs[run.nodes[0]], logs, codes, duration_seconds=RUN_SECONDS)
        slow = model.FaultKind.SLOW in kinds
        corrupt = model.FaultKind.CORRUPT in kinds
        if run.category.workload is model.WorkloadKind.TRAINING:
            text = _training_log(run, slow=slow, slow_factor=self.slow_factor, corrupt=corrupt)
        else:
            text = _nccl_log(run, slow=slow, slow_factor=self.slow_factor, corrupt=corrupt)
        logs = {
            n: (text if i == 0 or run.category.workload is model.WorkloadKind.TRAINING else "")
            for i, n in enumerate(run.nodes)
        }
        return RunOutcome(run, text, logs, {n: 0 for n in run.nodes}, duration_seconds=RUN_SECONDS)


def _nccl_log(run: WorkloadRun, *, slow: bool, slow_factor: float, corrupt: bool) -> str:
    category = run.category
    sweep = category.local_sweep or category.sweep
    assert sweep is not None and category.collective is not None
    collective = category.collective
    ranks = run.world_size
    algbw = NOMINAL_ALGBW_GBPS / (slow_factor if slow else 1.0)
    rows = []
    for size in sweep.sizes():
        count = collectives.count(collective, size, ranks, 4)
        if count == 0:
            continue
        moved = collectives.buffer_bytes(collective, size, ranks, 4)
        time_us = moved / (algbw * 1e3)
        wrong = max(1, count // 8) if corrupt else 0
        rows.append(
            nccl_writer.measure_row(
                collective.value,
                size_bytes=moved,
                count=count,
                type_name="float",
                redop=collectives.redop(collective),
                root=collectives.root(collective),
                ranks=ranks,
                out_of_place_us=time_us,
                in_place_us=time_us,
                out_of_place_wrong=wrong,
                in_place_wrong=wrong,
            )
        )
    devices = [
        nccl.RankDevice(
            rank=r, host=run.nodes[r // run.ranks_per_node], pid=1000 + r, device=0, bus_id="0x00", name="cpu"
        )
        for r in range(ranks)
    ]
    return nccl_writer.format_run(collective.value, rows, devices=devices)


def _training_log(run: WorkloadRun, *, slow: bool, slow_factor: float, corrupt: bool) -> str:
    shape = run.category.local_training
    assert shape is not None
    step_ms = NOMINAL_STEP_SECONDS * 1e3 * (slow_factor if slow else 1.0)
    lines = [
        training.format_dsx_train_line(
            step=step,
            total_steps=shape.steps,
            step_time_ms=step_ms,
            tflops_per_gpu=0.01,
            tokens_per_second=run.world_size * 16 / (step_ms / 1e3),
            loss=2.0 - step * 0.01,
            global_batch_size=run.world_size * 16,
        )
        for step in range(1, shape.steps + 1)
        if step % shape.log_interval == 0
    ]
    if corrupt:
        lines.append(f" validation: {workload.WRONG_RESULTS_MARKER}: ranks [1] differ from rank 0")
    return "\n".join(lines) + "\n"


@dataclass
class FakeJobLauncher:
    """Remembers created objects per run; `codes`/`logs` script each node's pod; `not_started`
    makes every run end as pods that could not start (with `problems` per node)."""

    codes: dict[str, int | None] = field(default_factory=dict)  # node → exit code (absent: 0)
    logs_by_node: dict[str, str] = field(default_factory=dict)
    interrupt_on_wait: bool = False
    not_started: str = ""
    problems: dict[str, str] = field(default_factory=dict)
    created: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    applied: list[dict[str, Any]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    deleted_labelled: list[dict[str, str]] = field(default_factory=list)

    def create(self, run_name: str, objects: Sequence[Mapping[str, Any]]) -> None:
        self.created.setdefault(run_name, []).extend(dict(o) for o in objects)

    def apply(self, objects: Sequence[Mapping[str, Any]]) -> None:
        self.applied.extend(dict(o) for o in objects)

    def nodes_of(self, run_name: str) -> list[str]:
        """The nodes a run's objects pin their pods to, in the order rendered."""
        nodes: list[str] = []
        for o in self.created.get(run_name, []):
            if o["kind"] == "Job":
                nodes.append(o["spec"]["template"]["spec"]["nodeSelector"]["kubernetes.io/hostname"])
            elif o["kind"] == "TrainJob":
                override = o["spec"]["podTemplateOverrides"][0]["spec"]
                terms = override["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                nodes.extend(terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"])
        return nodes

    def wait(self, run_name: str, deadline_seconds: float, notice: Notice | None = None) -> RunStatus:
        if self.interrupt_on_wait:
            raise KeyboardInterrupt
        if not math.isfinite(deadline_seconds):
            raise ValueError("deadline must be finite")
        nodes = self.nodes_of(run_name)
        if self.not_started:
            if notice is not None:
                notice(f"run {run_name} cannot start: {self.not_started}")
            return RunStatus(not_started=self.not_started, problems=dict(self.problems))
        trainjob = any(o["kind"] == "TrainJob" for o in self.created.get(run_name, []))
        roles = {n: ("launcher" if trainjob and i == 0 and len(nodes) > 1 else "node") for i, n in enumerate(nodes)}
        codes = {node: self.codes.get(node, 0) for node in nodes}
        finished = None not in codes.values()
        return RunStatus(exit_codes=codes, order=tuple(nodes), roles=roles, finished=finished)

    def logs(self, run_name: str, node: str) -> str:
        return self.logs_by_node.get(node, "")

    def delete(self, run_name: str) -> None:
        self.deleted.append(run_name)

    def delete_labelled(self, labels: Mapping[str, str], kinds: Sequence[tuple[str, str]]) -> list[str]:
        self.deleted_labelled.append(dict(labels))
        return []
