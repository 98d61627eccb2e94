"""Turn what an executor saw into a verdict for one run: measured values and a reason.

The order of precedence follows what a person would blame first: pods that never started
(the scheduling or waiting reason) → a run that had to be stopped (hang, deadline) → a rank
that exited non-zero (the rank whose log shows no transport error is the cause; the others
died of its absence) → NCCL on another transport than the platform's (TCP sockets where EFA
or InfiniBand was expected; the run "works" at a fraction of the fabric's bandwidth) → a
transport error printed by a run that still exited cleanly → no result at all → wrong results
→ a threshold missed. Evidence is a few log lines, never the whole log.

Figures come from the program that ran: nccl-tests' own out-of-place columns (as NVCRE reads
them), Megatron-LM's `training_log` lines (megatron-lm log profile), the builtin worker's
lines (whose bandwidth is recomputed from its time column: on CPU the printed 0.01 GB/s
resolution is too coarse).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from dsx.certify import platforms, thresholds, workload
from dsx.certify.executor import RunOutcome, WorkloadRun
from dsx.certify.parsing import nccl, profiles, training, transport
from dsx.model import certification as model

EVIDENCE_LINES = 6

_TRANSPORT_ERROR = re.compile(
    r"NCCL WARN|Test NCCL failure|NCCL error|ncclInternalError|ncclSystemError|ncclRemoteError|"
    r"Connection (?:closed|reset) by peer|Broken pipe|ECONNRESET|ProcessGroupGloo|gloo/transport|Socket Timeout",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class SizePoint:
    size_bytes: int
    algbw_gbps: float
    busbw_gbps: float


@dataclass(frozen=True)
class Measurement:
    metrics: Mapping[model.Metric, float] = field(default_factory=dict)
    sizes: tuple[SizePoint, ...] = ()  # out-of-place, per message size
    node_step_seconds: Mapping[str, float] = field(default_factory=dict)  # training, per node
    transports: transport.Transports = field(default_factory=transport.Transports)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"metrics": {m.value: _round(v) for m, v in sorted(self.metrics.items())}}
        if self.transports.reported:
            out["transports"] = sorted(t.value for t in self.transports.used)
        if self.sizes:
            out["sizes"] = [
                {
                    "sizeBytes": p.size_bytes,
                    "algBandwidthGBps": _round(p.algbw_gbps),
                    "busBandwidthGBps": _round(p.busbw_gbps),
                }
                for p in self.sizes
            ]
        if self.node_step_seconds:
            out["nodeStepSeconds"] = {n: _round(v) for n, v in sorted(self.node_step_seconds.items())}
        return out


@dataclass(frozen=True)
class Judgement:
    run: str
    nodes: tuple[str, ...]
    failure: model.Failure | None
    measurement: Measurement
    duration_seconds: float
    bounds: Mapping[model.Metric, float] = field(default_factory=dict)
    """Per judged metric, the value it was held to (the bound of its threshold, with this run's
    reference or peers); absent where the threshold is not a plain bound or had nothing to compare with."""
    alike: bool = False
    """Every pod of the run showed the same problem (pods that could not start for one reason)."""

    @property
    def passed(self) -> bool:
        return self.failure is None


def judge(
    outcome: RunOutcome,
    applied: Mapping[model.Metric, thresholds.Applied],
    reference: Mapping[model.Metric, float] | None = None,
    peers: Mapping[model.Metric, float] | None = None,
    *,
    measurement: Measurement | None = None,
) -> Judgement:
    """`reference`: this machine's calibration (local); `peers`: the round's median per metric;
    `measurement`: what `measure(outcome)` gave, when the caller has it already."""
    measurement = measurement or measure(outcome)
    failure = (
        _execution_failure(outcome)
        or _transport_failure(outcome, measurement.transports)
        or _result_failure(outcome, measurement)
    )
    if failure is None:
        failure = judge_metrics(measurement, applied, reference, peers)
    if failure is not None:
        failure = _stamped(failure, outcome.run.name)
    bounds = {
        metric: bound
        for metric, rule in applied.items()
        if metric in measurement.metrics
        and (
            bound := thresholds.expected_value(
                rule.expression, (reference or {}).get(metric), (peers or {}).get(metric)
            )
        )
        is not None
    }
    return Judgement(
        outcome.run.name,
        outcome.run.nodes,
        failure,
        measurement,
        outcome.duration_seconds,
        bounds=bounds,
        alike=_alike(outcome),
    )


def ran_clean(outcome: RunOutcome) -> bool:
    """Started, finished within its deadline, every rank exited 0: its figures can be a peer's."""
    return (
        not outcome.not_started
        and not outcome.timed_out
        and not outcome.stalled
        and all(code == 0 for code in outcome.exit_codes.values())
    )


def _alike(outcome: RunOutcome) -> bool:
    return bool(outcome.not_started) and outcome.pods_alike


def judge_metrics(
    measurement: Measurement,
    applied: Mapping[model.Metric, thresholds.Applied],
    reference: Mapping[model.Metric, float] | None = None,
    peers: Mapping[model.Metric, float] | None = None,
) -> model.Failure | None:
    """The first threshold the measurement misses (a judged metric that was not measured fails)."""
    for metric, rule in applied.items():
        if metric not in measurement.metrics:
            return model.Failure(
                reason=model.Reason.WORKLOAD_FAILED,
                message=f"{metric.value} was not measured (missing data counts as a failure)",
                metric=metric,
                expression=rule.expression,
            )
        failure = thresholds.judge(
            rule, measurement.metrics[metric], (reference or {}).get(metric), (peers or {}).get(metric)
        )
        if failure is not None:
            return failure
    return None


def measure(outcome: RunOutcome) -> Measurement:
    category = outcome.run.category
    found = transport.read(outcome.launcher_log)
    if category.workload is model.WorkloadKind.TRAINING:
        return replace(_training_measurement(outcome), transports=found)
    log = nccl.parse(outcome.launcher_log)
    if not log.tables:
        return Measurement(transports=found)
    table = log.tables[-1]
    ranks = outcome.run.world_size
    collective = category.collective.value if category.collective else "all_reduce"
    builtin = outcome.run.program is model.Program.BUILTIN
    points = []
    for row in table.rows:
        time_us = row.out_of_place.time_us
        if builtin and time_us:  # the time column keeps 4+ digits; busbw is rounded to 0.01 GB/s, too coarse on CPU
            algbw, busbw = nccl.bandwidths_gbps(collective, row.size_bytes, time_us, ranks)
        else:  # nccl-tests' own figures, as NVCRE reads them
            algbw, busbw = row.out_of_place.algbw_gbps or 0.0, row.out_of_place.busbw_gbps or 0.0
        points.append(SizePoint(row.size_bytes, algbw, busbw))
    metrics: dict[model.Metric, float] = {}
    if points:
        metrics[model.Metric.BUS_BANDWIDTH_GBPS] = max(p.busbw_gbps for p in points)
        metrics[model.Metric.ALG_BANDWIDTH_GBPS] = max(p.algbw_gbps for p in points)
    return Measurement(metrics=metrics, sizes=tuple(points), transports=found)


def _training_measurement(outcome: RunOutcome) -> Measurement:
    profile = _training_profile(outcome.run, outcome.launcher_log)
    summary = training.parse(outcome.launcher_log, profile)
    metrics: dict[model.Metric, float] = {}
    if summary.step_time_seconds is not None:
        metrics[model.Metric.AVG_STEP_TIME_SECONDS] = summary.step_time_seconds.mean
    tflops = summary.stats.get("tflops_per_gpu")
    if tflops is not None:
        metrics[model.Metric.AVG_TFLOPS_PER_GPU] = tflops.mean
    if summary.goodput is not None:
        metrics[model.Metric.GOODPUT_RATIO] = summary.goodput.ratio
    per_node = {}
    for node, text in outcome.node_logs.items():
        node_summary = training.parse(text, profile)
        if node_summary.step_time_seconds is not None:
            per_node[node] = node_summary.step_time_seconds.mean
    return Measurement(metrics=metrics, node_step_seconds=per_node)


def _training_profile(run: WorkloadRun, text: str) -> profiles.LogProfile:
    """The program's log profile, leaving out the warm-up steps of the shape that ran."""
    category = run.category
    if run.program is model.Program.MEGATRON_LM and category.megatron is not None:
        return replace(profiles.load("megatron-lm"), warmup_steps=category.megatron.warmup_steps)
    profile = profiles.load("dsx-train")
    shape = category.local_training
    if shape is None or shape.warmup_steps == profile.warmup_steps:
        return profile
    return replace(profile, warmup_steps=shape.warmup_steps)


def _execution_failure(outcome: RunOutcome) -> model.Failure | None:
    run = outcome.run
    if outcome.not_started:
        return model.Failure(
            reason=model.Reason.NOT_STARTED,
            message=f"{run.category.name} on {len(run.nodes)} node(s) did not start: {outcome.not_started}",
            evidence=tuple(f"{who}: {why}" for who, why in sorted(outcome.pod_problems.items()))[:EVIDENCE_LINES],
        )
    if outcome.timed_out or outcome.stalled:
        why = (
            f"no output for {run.timeouts.stall_timeout_seconds:g} s (hang)"
            if outcome.stalled
            else f"ran past {run.timeouts.run_timeout_seconds:g} s"
        )
        stalled_lines = [ln for text in outcome.node_logs.values() for ln in text.splitlines() if "hang" in ln]
        return model.Failure(
            reason=model.Reason.TIMEOUT,
            message=f"{run.category.name} on {len(run.nodes)} node(s) {why}; every rank was stopped",
            evidence=tuple(stalled_lines[:2]) + _tail(outcome.launcher_log, EVIDENCE_LINES - 2),
        )
    failing = {node: code for node, code in outcome.exit_codes.items() if code not in (0, None)}
    if not failing:
        return None
    causes = [n for n in run.nodes if n in failing and not _TRANSPORT_ERROR.search(outcome.node_logs.get(n, ""))]
    if causes:
        node = causes[0]
        return model.Failure(
            reason=model.Reason.WORKLOAD_FAILED,
            message=f"rank(s) on {node} exited with code {failing[node]}"
            + (f"; {len(failing) - 1} other node(s) failed after it" if len(failing) > 1 else ""),
            exit_code=failing[node],
            evidence=_tail(outcome.node_logs.get(node, ""), EVIDENCE_LINES),
        )
    node = next(n for n in run.nodes if n in failing)
    line = _first_match(outcome.node_logs.get(node, ""))
    return model.Failure(
        reason=model.Reason.NETWORK_ERROR,
        message=f"transport error on {node} (exit code {failing[node]}): {line}",
        exit_code=failing[node],
        evidence=(line,),
    )


def _transport_failure(outcome: RunOutcome, found: transport.Transports) -> model.Failure | None:
    """The platform's transport missing from a run that reported its transports (NCCL_DEBUG=INFO)."""
    fabric = outcome.run.fabric
    if fabric is None or not fabric.expected:
        return None
    if fabric.interconnect == platforms.NVLINK:
        used = found.connections  # one node: how its GPUs connected, whatever NET plugin loaded
    else:
        used = found.network or frozenset(t for t in found.connections if t.value.startswith("NET/"))
    if not used or used & fabric.expected:
        return None
    wanted = " or ".join(sorted(t.value for t in fabric.expected))
    seen = ", ".join(sorted(t.value for t in used)) or found.describe()
    return model.Failure(
        reason=model.Reason.TRANSPORT_FALLBACK,
        message=(f"NCCL used {seen} where the {fabric.platform.name} platform ({fabric.interconnect}) needs {wanted}"),
        evidence=found.evidence[:EVIDENCE_LINES],
    )


def _result_failure(outcome: RunOutcome, measurement: Measurement) -> model.Failure | None:
    category = outcome.run.category
    if category.workload is model.WorkloadKind.TRAINING:
        drift = [ln for ln in outcome.launcher_log.splitlines() if workload.WRONG_RESULTS_MARKER in ln]
        if drift:
            return model.Failure(
                model.Reason.WRONG_RESULTS, "model replicas diverged across ranks", evidence=tuple(drift[:2])
            )
        if model.Metric.AVG_STEP_TIME_SECONDS not in measurement.metrics:
            return _no_results(outcome, "no training step lines in the log")
        return None
    log = nccl.parse(outcome.launcher_log)
    if not log.tables:
        return _no_results(outcome, "no nccl-tests result table in the log")
    table = log.tables[-1]
    decisive = [f for f in table.failure_lines if f.kind.decisive] + [f for f in log.failure_lines if f.kind.decisive]
    wrong_rows = [r for r in table.rows if r.wrong > 0]
    if wrong_rows or any(f.kind in (nccl.FailureKind.OUT_OF_BOUNDS, nccl.FailureKind.WRONG_RESULTS) for f in decisive):
        lines = outcome.launcher_log.splitlines()
        evidence = [lines[r.line_number - 1] for r in wrong_rows if 0 < r.line_number <= len(lines)]
        evidence += [f.text for f in decisive]
        total = sum(r.wrong for r in wrong_rows)
        return model.Failure(
            model.Reason.WRONG_RESULTS,
            f"{total} wrong element(s) over {len(wrong_rows)} message size(s)",
            evidence=tuple(evidence[:EVIDENCE_LINES]),
        )
    if decisive:
        return model.Failure(model.Reason.NETWORK_ERROR, decisive[0].text, evidence=tuple(f.text for f in decisive[:3]))
    return None


def _no_results(outcome: RunOutcome, message: str) -> model.Failure:
    line = _first_match(outcome.launcher_log)
    if line:
        return model.Failure(model.Reason.NETWORK_ERROR, f"{message}: {line}", evidence=(line,))
    return model.Failure(model.Reason.WORKLOAD_FAILED, message, evidence=_tail(outcome.launcher_log, EVIDENCE_LINES))


def _first_match(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if _TRANSPORT_ERROR.search(ln)), "")


def _tail(text: str, count: int) -> tuple[str, ...]:
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    return tuple(lines[-count:]) if count > 0 else ()


def _stamped(failure: model.Failure, run: str) -> model.Failure:
    return replace(failure, run=run)


def _round(value: float) -> float:
    return round(value, 6)
