"""Run a certification: categories one after another, groups, verdicts, fault isolation.

Per category: group the eligible nodes at the category's scale, run every group once
(screening), judge each run, then hand failed groups to the isolator, whose runs go through
the same executor and the same judge. A confirmed node carries the failure of the run that
confirmed it (reason, measured vs expected, evidence); nodes of a failed group that could not
be narrowed down inherit the group's failure. A node passes when it passed every category.

On executors that calibrate (local CPU), thresholds compare against a reference measured on
this machine with the same workload shape (same category, same number of ranks) on no node
in particular, so no fault injection applies: twice, keeping the worse value, so a lucky fast
reference does not make healthy groups fail. A `calibration.Calibration` passed in supplies
references measured before and keeps the new ones.

Programmatic use (the sentinel's re-certification gate, the validate performance phase, the
demo): build a `model.Certification` (or `node_certification(node)` for one node), hand it
to `certify` with an executor, read `CertificationResult` or `reports.document(result)`.
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from dsx.certify import calibration, grouping, isolation, measure, platforms, thresholds
from dsx.certify.executor import Executor, Purpose, RunOutcome, WorkloadRun
from dsx.errors import BadInputError, UnavailableError
from dsx.model import certification as model
from dsx.model import certify_catalog as catalog

LOWER_IS_BETTER = frozenset({model.Metric.AVG_STEP_TIME_SECONDS})
CALIBRATION_RUNS = 2
NODE_CATEGORIES = ("nccl-loopback", "training")
"""What proves one node on its own: all-reduce across its GPUs and a short training job on them."""


@dataclass(frozen=True)
class Event:
    """A progress report: what just happened and how far along the run is."""

    category: str
    message: str
    groups_done: int
    groups_total: int
    runs: int
    eta_seconds: float | None


Progress = Callable[[Event], None]


@dataclass(frozen=True)
class GroupResult:
    group: grouping.Group
    judgement: measure.Judgement


@dataclass(frozen=True)
class CategoryResult:
    name: str
    description: str
    workload: model.WorkloadKind
    scale: model.Scale
    applied: Mapping[model.Metric, thresholds.Applied]
    references: Mapping[int, Mapping[model.Metric, float]]  # world size → calibrated values
    groups: tuple[GroupResult, ...]
    isolation: isolation.Outcome | None
    isolation_runs: Mapping[str, measure.Judgement]  # run name → judgement, for evidence
    node_verdicts: Mapping[str, model.NodeVerdict]
    runs: int
    calibration_runs: int
    control_runs: int = 0  # local: the fault-free run of each round its runs are judged against
    program: model.Program = model.Program.BUILTIN
    workload_id: str = ""  # what ran, as thresholds name it (nccl-tests/all_reduce_perf)
    fabric: str = ""  # the platform decision, in words
    interconnect: str = ""
    lacking: str = ""  # which published figure is missing (then peers judge)
    common_cause: model.Failure | None = None  # every node failed alike: no isolation ran

    @property
    def status(self) -> model.Status:
        if any(v.status is model.Status.FAILED for v in self.node_verdicts.values()):
            return model.Status.FAILED
        if any(not g.judgement.passed for g in self.groups) or (
            self.isolation and self.isolation.infrastructure_faults
        ):
            return model.Status.FAILED
        return model.Status.PASSED


@dataclass(frozen=True)
class CertificationResult:
    spec: model.Certification
    executor: str
    architecture: str
    nodes: tuple[str, ...]
    excluded: Mapping[str, model.ExclusionCause]
    categories: tuple[CategoryResult, ...]
    node_verdicts: Mapping[str, model.NodeVerdict]
    injections: tuple[model.FaultInjection, ...] = ()
    duration_seconds: float = 0.0

    @property
    def result(self) -> model.Result:
        return model.overall_result(
            [v.status for v in self.node_verdicts.values()] + [c.status for c in self.categories]
        )

    @property
    def failed_nodes(self) -> list[str]:
        return sorted(n for n, v in self.node_verdicts.items() if v.status is model.Status.FAILED)

    @property
    def runs(self) -> int:
        return sum(c.runs for c in self.categories)


@dataclass
class _Clock:
    durations: list[float] = field(default_factory=list)

    def eta(self, remaining_runs: int) -> float | None:
        if not self.durations:
            return None
        return statistics.median(self.durations) * remaining_runs


def node_certification(
    node: str,
    *,
    ranks_per_node: int = 2,
    timeouts: model.Timeouts | None = None,
    categories: Sequence[str] = NODE_CATEGORIES,
) -> model.Certification:
    """A certification of one node alone: every category at intra-node scale, no isolation.

    `ranks_per_node` is the node's GPU count on a cluster; locally 2 ranks give the loopback
    and the training job something to exchange.
    """
    return model.Certification(
        name=f"node-{node}",
        target=model.Target(node_names=(node,)),
        categories=tuple(model.CategoryRequest(name, scale=model.Scale.INTRA_NODE) for name in categories),
        timeouts=timeouts or model.Timeouts(),
        ranks_per_node=ranks_per_node,
        isolate=False,
    )


def certify(
    spec: model.Certification,
    executor: Executor,
    *,
    progress: Progress | None = None,
    calibration: calibration.Calibration | None = None,
) -> CertificationResult:
    """Run every category of `spec` on `executor`'s eligible nodes; never raises for a failed node.

    BadInputError when no node is eligible or a category is unknown (NotFoundError); the
    executor's own errors (UnavailableError: no torch, no cluster) pass through.
    """
    started = time.monotonic()
    categories, plan = _prepare(spec, executor)
    accelerator = spec.accelerator or plan.architecture
    results = []
    for category in categories:
        runner = _CategoryRunner(spec, executor, category, plan, accelerator, progress or (lambda _: None), calibration)
        results.append(runner.run())
    verdicts = _merge(plan, results)
    return CertificationResult(
        spec=spec,
        executor=executor.kind,
        architecture=accelerator,
        nodes=tuple(n.name for n in plan.eligible),
        excluded=plan.excluded,
        categories=tuple(results),
        node_verdicts=verdicts,
        injections=spec.injections,
        duration_seconds=time.monotonic() - started,
    )


def plan(spec: model.Certification, executor: Executor) -> list[WorkloadRun]:
    """The screening runs `certify` starts with, one per category and group (what --dry-run shows)."""
    categories, eligible = _prepare(spec, executor)
    accelerator = spec.accelerator or eligible.architecture
    runs = []
    for category in categories:
        runner = _CategoryRunner(spec, executor, category, eligible, accelerator, lambda _: None)
        for group in grouping.partition(eligible.eligible, runner.scale, min_nodes=category.min_nodes):
            runs.append(runner._workload(f"{category.name}/{group.name}", group.nodes, Purpose.GROUP))
    return runs


def _prepare(spec: model.Certification, executor: Executor) -> tuple[list[catalog.Category], grouping.Eligibility]:
    names = [c.name for c in spec.categories] or ["nccl-all-reduce"]
    categories = [catalog.get(name) for name in names]
    gpus_needed = spec.ranks_per_node if executor.kind != "local" else 0
    eligible = grouping.eligibility(executor.nodes(), spec.target, gpus_per_node=gpus_needed)
    if not eligible.eligible:
        raise BadInputError("certification: no eligible node matches the target (see excluded nodes)")
    return categories, eligible


def _merge(plan: grouping.Eligibility, results: Sequence[CategoryResult]) -> dict[str, model.NodeVerdict]:
    verdicts: dict[str, model.NodeVerdict] = {}
    for node in plan.eligible:
        failed = [r.node_verdicts[node.name] for r in results if r.node_verdicts.get(node.name, None) is not None]
        first = next((v for v in failed if v.status is model.Status.FAILED), None)
        verdicts[node.name] = first or model.NodeVerdict(node.name, model.Status.PASSED)
    for name, cause in plan.excluded.items():
        verdicts[name] = model.NodeVerdict(name, model.Status.EXCLUDED, exclusion=cause)
    return dict(sorted(verdicts.items()))


class _CategoryRunner:
    def __init__(
        self,
        spec: model.Certification,
        executor: Executor,
        category: catalog.Category,
        plan: grouping.Eligibility,
        accelerator: str,
        progress: Progress,
        stored: calibration.Calibration | None = None,
    ) -> None:
        self.spec, self.executor, self.category, self.plan = spec, executor, category, plan
        self.progress = progress
        self.stored = stored
        self.accelerator = accelerator
        self.scale = spec.scale_for(category.name) or category.scale
        self.program = category.program_for(builtin=executor.calibrates or spec.builtin)
        self.fabric = platforms.fabric(
            plan.eligible, accelerator=accelerator, scale=self.scale, requested=spec.interconnect
        )
        self.workload = category.workload_id(self.program)
        context = thresholds.Context(
            self.workload, accelerator, self.fabric.interconnect, self.scale, local=executor.calibrates
        )
        selection = thresholds.choose(category, context, spec.thresholds_for(category.name))
        self.applied = dict(selection.applied)
        self.lacking = selection.lacking
        self.references: dict[int, dict[model.Metric, float]] = {}
        self.peers: dict[bool, dict[model.Metric, float]] = {}  # cluster: per "one node per run", the round's medians
        self.runs = 0
        self.calibration_runs = 0
        self.control_runs = 0
        self.judgements: dict[str, measure.Judgement] = {}
        self.clock = _Clock()
        self.groups_total = 0
        self.groups_done = 0
        self._sequence = 0

    # --- screening ----------------------------------------------------------------------------

    def run(self) -> CategoryResult:
        groups = grouping.partition(self.plan.eligible, self.scale, min_nodes=self.category.min_nodes)
        self.groups_total = len(groups)
        self._tell(f"{self.workload} on {self.fabric.describe()}" + (f"; {self.lacking}" if self.lacking else ""))
        results: list[GroupResult] = []
        # local runs go one by one (CPU contention would skew them) and report as each ends;
        # a cluster runs every group of the round at once: their nodes are disjoint
        batches = [[g] for g in groups] if self.executor.calibrates else [list(groups)]
        for batch in batches:
            judgements = self._judge([g.nodes for g in batch], Purpose.GROUP, [g.name for g in batch])
            if self.executor.calibrates:
                judgements = [self._measured_again(g, j) for g, j in zip(batch, judgements, strict=True)]
            for group, judgement in zip(batch, judgements, strict=True):
                self.groups_done += 1
                results.append(GroupResult(group, judgement))
                self._tell(f"group {group.name} ({len(group.nodes)} nodes): {self._summary(judgement)}")
        failed = [r for r in results if not r.judgement.passed]
        outcome = None
        verdicts: dict[str, model.NodeVerdict] = {}
        common = _common_cause(results)
        if common is not None:
            self._tell(f"{common.message}; not isolating: the cause is shared, not a node")
            for result in results:
                for node in result.group.nodes:
                    verdicts.setdefault(
                        node, model.NodeVerdict(node, model.Status.FAILED, common, group=result.group.name)
                    )
        elif failed and self.spec.isolate and any(len(r.group.nodes) > 1 for r in failed):
            outcome = self._isolate(results)
            for result in results:
                for node in result.group.nodes:
                    if node in outcome.faulty:
                        verdicts[node] = model.NodeVerdict(
                            node, model.Status.FAILED, _failure(outcome.faulty[node]), group=result.group.name
                        )
                    elif node in outcome.unresolved:
                        detail = _failure(outcome.unresolved[node]) or result.judgement.failure
                        verdicts[node] = model.NodeVerdict(node, model.Status.FAILED, detail, group=result.group.name)
        for result in results:
            for node in result.group.nodes:
                if node in verdicts or node in result.group.borrowed:
                    continue
                if result.judgement.passed or outcome is not None:
                    verdicts[node] = model.NodeVerdict(node, model.Status.PASSED, group=result.group.name)
                else:
                    verdicts[node] = model.NodeVerdict(
                        node, model.Status.FAILED, result.judgement.failure, group=result.group.name
                    )
        for result in results:  # a borrowed node is judged by its home group
            for node in result.group.borrowed:
                verdicts.setdefault(node, model.NodeVerdict(node, model.Status.PASSED, group=result.group.name))
        return CategoryResult(
            name=self.category.name,
            description=self.category.description,
            workload=self.category.workload,
            scale=self.scale,
            applied=self.applied,
            references={k: dict(v) for k, v in sorted(self.references.items())},
            groups=tuple(results),
            isolation=outcome,
            isolation_runs=dict(self.judgements),
            node_verdicts=dict(sorted(verdicts.items())),
            runs=self.runs,
            calibration_runs=self.calibration_runs,
            control_runs=self.control_runs,
            program=self.program,
            workload_id=self.workload,
            fabric=self.fabric.describe(),
            interconnect=self.fabric.interconnect,
            lacking=self.lacking,
            common_cause=common,
        )

    # --- isolation ----------------------------------------------------------------------------

    def _isolate(self, results: Sequence[GroupResult]) -> isolation.Outcome:
        healthy = [n for r in results if r.judgement.passed for n in r.group.nodes]
        failed = [r for r in results if not r.judgement.passed and len(r.group.nodes) > 1]
        nodes = sorted({n for r in failed for n in r.group.nodes})
        self._tell(f"isolating {len(nodes)} node(s) in {len(failed)} failed group(s)")
        domains = grouping.domains(n for n in self.plan.eligible)
        isolator = isolation.Isolator(
            self._probe,
            healthy=healthy,
            domains=domains,
            max_runs=4 * len(self.plan.eligible) + 16,
        )
        return isolator.isolate([r.group.nodes for r in failed], [r.judgement for r in failed])

    def _probe(self, groups: Sequence[tuple[str, ...]], stage: isolation.Stage) -> list[isolation.ProbeVerdict]:
        names = []
        for _ in groups:
            self._sequence += 1
            names.append(f"{stage.value}-{self._sequence}")
        judgements = self._judge(groups, Purpose.ISOLATION, names)
        verdicts = []
        for group, judgement in zip(groups, judgements, strict=True):
            self.judgements[judgement.run] = judgement
            self._tell(f"{stage.value} {', '.join(group)}: {self._summary(judgement)}")
            verdicts.append(isolation.ProbeVerdict(judgement.passed, judgement))
        return verdicts

    # --- running ------------------------------------------------------------------------------

    def _measured_again(self, group: grouping.Group, judgement: measure.Judgement) -> measure.Judgement:
        """Local CPU: a run below its thresholds is measured once more, beside a fresh control run,
        and the second judgement stands. A shared 2-core machine's load moves one run 3× within
        seconds; the local `slow` fault holds a node at a fifth of its peers every time."""
        failure = judgement.failure
        if failure is None or failure.reason is not model.Reason.THRESHOLD_VIOLATION:
            return judgement
        self._tell(f"group {group.name}: {failure.message}; measuring again (local runs move with the machine's load)")
        (again,) = self._judge([group.nodes], Purpose.GROUP, [f"{group.name}-again"])
        return again

    def _judge(
        self, groups: Sequence[tuple[str, ...]], purpose: Purpose, names: Sequence[str]
    ) -> list[measure.Judgement]:
        sizes = [len(nodes) * self.spec.ranks_per_node for nodes in groups]
        references = [self._reference(size) for size in sizes]
        controls = {size: self._control(size) for size in dict.fromkeys(sizes)} if self.executor.calibrates else {}
        runs = [
            self._workload(f"{self.category.name}/{name}", nodes, purpose, controls.get(size))
            for name, nodes, size in zip(names, groups, sizes, strict=True)
        ]
        outcomes = self.executor.run(runs, notice=self._notice)
        self.runs += len(runs)
        measurements = [measure.measure(outcome) for outcome in outcomes]
        if not self.executor.calibrates:
            self._remember_peers(outcomes, measurements, screening=purpose is Purpose.GROUP)
        out = []
        for outcome, measured, reference, size in zip(outcomes, measurements, references, sizes, strict=True):
            self.clock.durations.append(outcome.duration_seconds)
            peers = controls.get(size) if self.executor.calibrates else self.peers.get(len(outcome.run.nodes) == 1)
            out.append(measure.judge(outcome, self.applied, reference, peers, measurement=measured))
        return out

    def _remember_peers(
        self, outcomes: Sequence[RunOutcome], measurements: Sequence[measure.Measurement], *, screening: bool
    ) -> None:
        """The round's median per metric, by whether runs span one node or several (NVLink vs fabric).

        Screening rounds set it (every node once); isolation rounds fill it only where
        screening had fewer than two runs of that span to compare."""
        spans: dict[bool, list[measure.Measurement]] = {}
        for outcome, measured in zip(outcomes, measurements, strict=True):
            if measure.ran_clean(outcome):
                spans.setdefault(len(outcome.run.nodes) == 1, []).append(measured)
        for single, found in spans.items():
            if len(found) < 2 or (not screening and single in self.peers):
                continue
            metrics = {m for measured in found for m in measured.metrics}
            self.peers[single] = {
                m: statistics.median(measured.metrics[m] for measured in found if m in measured.metrics)
                for m in sorted(metrics)
            }

    def _workload(
        self, name: str, nodes: Sequence[str], purpose: Purpose, reference: Mapping[model.Metric, float] | None = None
    ) -> WorkloadRun:
        return WorkloadRun(
            name=name,
            category=self.category,
            nodes=tuple(nodes),
            ranks_per_node=self.spec.ranks_per_node,
            timeouts=self.spec.timeouts,
            purpose=purpose,
            reference=dict(reference or {}),
            program=self.program,
            fabric=self.fabric,
            accelerator=self.accelerator,
        )

    def _control(self, world_size: int) -> dict[model.Metric, float]:
        """A fault-free run of this shape in this round (local): the peer the round is judged against.

        Measured right before the runs it judges, so load on the machine moves it and them alike;
        the calibration (`reference`) stays as a floor."""
        self._sequence += 1
        judgement = self._fault_free(f"control-{world_size}r-{self._sequence}", world_size, "control")
        self.control_runs += 1
        return dict(judgement.measurement.metrics)

    def _fault_free(self, name: str, world_size: int, what: str) -> measure.Judgement:
        """One run of this shape on no node in particular (no fault applies); it must not fail."""
        nodes = tuple(f"calibration-{i}" for i in range(world_size // self.spec.ranks_per_node))
        run = self._workload(f"{self.category.name}/{name}", nodes, Purpose.CALIBRATION)
        (outcome,) = self.executor.run([run], notice=self._notice)
        judgement = measure.judge(outcome, {}, None)
        if judgement.failure is not None:
            raise UnavailableError(
                f"{self.category.name}: the {what} run on {world_size} rank(s) failed: {judgement.failure.message}"
            )
        return judgement

    def _reference(self, world_size: int) -> dict[model.Metric, float] | None:
        if not self.executor.calibrates:
            return None
        if world_size in self.references:
            return self.references[world_size]
        known = self.stored.get(self.category, world_size) if self.stored is not None else None
        if known is not None:
            self.references[world_size] = known
            return known
        self._tell(f"calibrating the local reference for {world_size} rank(s): {CALIBRATION_RUNS} runs")
        values: dict[model.Metric, list[float]] = {}
        for index in range(1, CALIBRATION_RUNS + 1):  # one at a time, so each reports as it ends
            judgement = self._fault_free(f"calibration-{world_size}r-{index - 1}", world_size, "calibration")
            self.calibration_runs += 1
            summary = self._summary(judgement, verdict=False)
            self._tell(f"calibration {index}/{CALIBRATION_RUNS} on {world_size} rank(s):{summary}")
            for metric, value in judgement.measurement.metrics.items():
                values.setdefault(metric, []).append(value)
        reference = {m: (max(v) if m in LOWER_IS_BETTER else min(v)) for m, v in values.items()}
        self.references[world_size] = reference
        if self.stored is not None:
            self.stored.put(self.category, world_size, reference)
        return reference

    def _summary(self, judgement: measure.Judgement, *, verdict: bool = True) -> str:
        """Verdict, then the metrics the category is judged on (bus bandwidth is 0 for one rank: not shown)."""
        measured = judgement.measurement.metrics
        judged = [m for m in self.applied if m in measured] or [
            m for m in (model.Metric.BUS_BANDWIDTH_GBPS, model.Metric.AVG_STEP_TIME_SECONDS) if m in measured
        ][:1]
        shown = "".join(f" {m.label} {m.with_unit(measured[m])}" for m in judged)
        said = ""
        if verdict:
            said = "PASSED" if judgement.failure is None else f"FAILED ({judgement.failure.reason.value})"
            if judgement.failure is not None and judgement.failure.reason is model.Reason.NOT_STARTED:
                shown = f" {judgement.failure.message}"
        return f"{said}{shown} in {judgement.duration_seconds:.1f} s"

    def _notice(self, message: str) -> None:
        """What the executor saw while runs were going (a pod waiting, unschedulable): a progress line."""
        self._tell(message)

    def _tell(self, message: str) -> None:
        remaining = self.groups_total - self.groups_done
        self.progress(
            Event(
                category=self.category.name,
                message=message,
                groups_done=self.groups_done,
                groups_total=self.groups_total,
                runs=self.runs,
                eta_seconds=self.clock.eta(remaining),
            )
        )


def _common_cause(results: Sequence[GroupResult]) -> model.Failure | None:
    """One failure for a round in which every node failed alike; None when the nodes differ.

    Alike: every group failed with the same reason and the same message once node names and
    numbers are taken out (two groups or more), or a single group's pods could not start for
    one reason shared by every pod. Then bisecting would only repeat it: the cause is the
    image, the configuration, the fabric or the thresholds, not a node."""
    if not results or any(r.judgement.passed for r in results):
        return None
    failures = [r.judgement.failure for r in results]
    if any(f is None for f in failures):
        return None
    nodes = [n for r in results for n in r.group.nodes]
    signatures = {_signature(f, nodes) for f in failures if f is not None}
    first = failures[0]
    assert first is not None
    if len(signatures) != 1:
        return None
    if len(results) == 1 and not (first.reason is model.Reason.NOT_STARTED and results[0].judgement.alike):
        return None
    return dataclasses.replace(
        first,
        reason=model.Reason.COMMON_CAUSE,
        message=f"every node of the round failed alike ({first.reason.value}): {first.message}",
    )


_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_POD = re.compile(r"\bpods? [\w.-]+")


def _signature(failure: model.Failure, nodes: Sequence[str]) -> tuple[str, str]:
    """The failure without what differs between groups that failed for one cause: node and pod names, numbers."""
    message = failure.message
    for node in sorted(nodes, key=len, reverse=True):
        message = message.replace(node, "<node>")
    return failure.reason.value, _NUMBER.sub("#", _POD.sub("pod", message))


def _failure(detail: object) -> model.Failure | None:
    return detail.failure if isinstance(detail, measure.Judgement) else None


def isolation_bound(nodes: int, faulty: int) -> int:
    """k·⌈log2(N/k)⌉ + 2k: the run budget the isolation aims for after screening."""
    if faulty <= 0:
        return 0
    return faulty * math.ceil(math.log2(max(nodes / faulty, 1))) + 2 * faulty
