"""Area of concern: the judge turns what an executor saw into exactly one reason from the closed
set, in the order a person would blame (stopped run → the crashing rank → transport error →
no result → wrong results → threshold), with measured values and evidence lines."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from dsx.certify import measure, thresholds
from dsx.certify.executor import RunOutcome, WorkloadRun
from dsx.certify.parsing import nccl, nccl_writer
from dsx.model import certification as model
from dsx.model import certify_catalog as catalog

TIMEOUTS = model.Timeouts(run_timeout_seconds=60, stall_timeout_seconds=10)
NODES = ("node-0", "node-1")
DATA = Path(__file__).resolve().parents[2] / "data" / "certify"


def _run(category: str = "nccl-all-reduce", nodes: tuple[str, ...] = NODES) -> WorkloadRun:
    return WorkloadRun("nccl-all-reduce/all-nodes", catalog.get(category), nodes, 1, TIMEOUTS)


def _table(busbw_scale: float = 1.0, *, wrong: int = 0) -> str:
    rows = [_row(size, size / 1e3 / busbw_scale, wrong) for size in (1 << 18, 1 << 20, 1 << 22)]
    return nccl_writer.format_run("all_reduce", rows)


def _row(size: int, time_us: float, wrong: int) -> nccl.ResultRow:
    """A 2-rank all-reduce row: busbw = algbw = size / time."""
    return nccl_writer.measure_row(
        "all_reduce",
        size_bytes=size,
        count=size // 4,
        type_name="float",
        redop="sum",
        root=-1,
        ranks=2,
        out_of_place_us=time_us,
        in_place_us=time_us,
        out_of_place_wrong=wrong,
        in_place_wrong=wrong,
    )


def _outcome(
    launcher: str = "",
    codes: Mapping[str, int | None] | None = None,
    logs: Mapping[str, str] | None = None,
    *,
    run: WorkloadRun | None = None,
    **flags: bool,
) -> RunOutcome:
    run = run or _run()
    logs = dict(logs or {n: "" for n in run.nodes})
    logs.setdefault(run.nodes[0], launcher)
    return RunOutcome(run, launcher, logs, dict(codes or {n: 0 for n in run.nodes}), duration_seconds=1.0, **flags)


def _rule(
    expression: str, metric: model.Metric = model.Metric.BUS_BANDWIDTH_GBPS
) -> dict[model.Metric, thresholds.Applied]:
    return {metric: thresholds.Applied(metric, expression, "test")}


def test_a_clean_table_passes_and_reports_the_best_size() -> None:
    judgement = measure.judge(_outcome(_table()), _rule("value >= 0.5"))
    assert judgement.passed
    metrics = judgement.measurement.metrics
    assert metrics[model.Metric.BUS_BANDWIDTH_GBPS] == pytest.approx(1.0, rel=1e-3)  # 2(n-1)/n = 1 for 2 ranks
    assert [p.size_bytes for p in judgement.measurement.sizes] == [1 << 18, 1 << 20, 1 << 22]


def test_threshold_violation_names_measured_and_expected() -> None:
    judgement = measure.judge(
        _outcome(_table(0.2)), _rule("value >= 0.25 * reference"), {model.Metric.BUS_BANDWIDTH_GBPS: 2.0}
    )
    failure = judgement.failure
    assert failure is not None and failure.reason is model.Reason.THRESHOLD_VIOLATION
    assert failure.measured == pytest.approx(0.2, rel=1e-3)  # times are printed to 4-5 digits
    assert failure.expected == pytest.approx(0.5)
    assert "measured 0.2" in failure.message and ">= 0.5" in failure.message
    assert failure.run == "nccl-all-reduce/all-nodes"


def test_a_metric_that_was_not_measured_fails_rather_than_counting_as_zero() -> None:
    judgement = measure.judge(_outcome(_table()), _rule("value >= 1.0", model.Metric.GOODPUT_RATIO))
    assert judgement.failure is not None
    assert judgement.failure.reason is model.Reason.WORKLOAD_FAILED
    assert "not measured" in judgement.failure.message


def test_wrong_elements_are_wrong_results_with_the_rows_as_evidence() -> None:
    judgement = measure.judge(_outcome(_table(wrong=3)), _rule("value >= 0.0"))
    failure = judgement.failure
    assert failure is not None and failure.reason is model.Reason.WRONG_RESULTS
    assert failure.message.startswith("18 wrong element(s) over 3 message size(s)")  # 3 + 3 per row, oop + ip
    assert all(line.split()[0].isdigit() for line in failure.evidence[:3])


def test_a_stalled_run_is_a_hang_even_with_a_table_so_far() -> None:
    logs = {"node-0": _table(), "node-1": "dsx-worker: rank 1 on node-1: injected hang, stalling\n"}
    judgement = measure.judge(
        _outcome(_table(), {"node-0": None, "node-1": None}, logs, stalled=True), _rule("value >= 0")
    )
    failure = judgement.failure
    assert failure is not None and failure.reason is model.Reason.TIMEOUT
    assert "hang" in failure.message and "injected hang" in failure.evidence[0]


def test_a_run_past_its_deadline_is_a_timeout() -> None:
    judgement = measure.judge(_outcome("", {"node-0": None, "node-1": None}, timed_out=True), {})
    assert judgement.failure is not None and judgement.failure.reason is model.Reason.TIMEOUT
    assert "ran past 60 s" in judgement.failure.message


def test_the_crashing_rank_is_blamed_not_the_peers_that_lost_it() -> None:
    logs = {
        "node-0": "RuntimeError: Connection closed by peer\n",
        "node-1": "dsx-worker: rank 1 on node-1: injected crash, exiting with code 134\n",
    }
    judgement = measure.judge(_outcome("", {"node-0": 1, "node-1": 134}, logs), {})
    failure = judgement.failure
    assert failure is not None and failure.reason is model.Reason.WORKLOAD_FAILED
    assert failure.exit_code == 134
    assert "node-1 exited with code 134" in failure.message and "1 other node(s)" in failure.message


def test_when_every_failing_rank_shows_a_transport_error_it_is_a_network_error() -> None:
    sample = (DATA / "08-allreduce-h100-2node-init-failure-WARN.log").read_text().split("\n", 1)[1]
    judgement = measure.judge(_outcome(sample, {"node-0": 1, "node-1": 1}, {"node-1": sample}), {})
    failure = judgement.failure
    assert failure is not None and failure.reason is model.Reason.NETWORK_ERROR
    assert failure.exit_code == 1
    assert "NCCL WARN" in failure.evidence[0] or "Test NCCL failure" in failure.evidence[0]


def test_no_table_is_a_workload_failure_and_an_nccl_line_makes_it_a_network_error() -> None:
    plain = measure.judge(_outcome("starting\n"), {})
    assert plain.failure is not None and plain.failure.reason is model.Reason.WORKLOAD_FAILED
    assert "no nccl-tests result table" in plain.failure.message
    warned = measure.judge(_outcome("host: NCCL WARN NET/Socket : peer closed\n"), {})
    assert warned.failure is not None and warned.failure.reason is model.Reason.NETWORK_ERROR


def test_out_of_bounds_footer_counts_as_wrong_results() -> None:
    text = _table().replace("# Out of bounds values : 0 OK", "# Out of bounds values : 2 FAILED")
    judgement = measure.judge(_outcome(text), {})
    assert judgement.failure is not None and judgement.failure.reason is model.Reason.WRONG_RESULTS


def test_the_training_workloads_own_output_gives_step_time_throughput_and_goodput() -> None:
    launcher = (DATA / "dsx-train-2ranks-launcher.log").read_text()
    worker = (DATA / "dsx-train-2ranks-node-1.log").read_text()
    run = _run("training")
    judgement = measure.judge(_outcome(launcher, logs={"node-0": launcher, "node-1": worker}, run=run), {})
    assert judgement.passed
    metrics = judgement.measurement.metrics
    # 20 steps, 2 warm-up: the mean of the 18 logged step times after warm-up, in seconds
    step_ms = [float(line.split("(ms):")[1].split("|")[0]) for line in launcher.splitlines() if "iteration " in line]
    assert len(step_ms) == 20
    assert metrics[model.Metric.AVG_STEP_TIME_SECONDS] == pytest.approx(sum(step_ms[2:]) / 18 / 1e3, rel=1e-6)
    assert 0 < metrics[model.Metric.GOODPUT_RATIO] <= 1
    assert model.Metric.AVG_TFLOPS_PER_GPU in metrics
    assert set(judgement.measurement.node_step_seconds) == {"node-0", "node-1"}


def test_diverged_replicas_are_wrong_results_and_missing_steps_fail() -> None:
    run = _run("training")
    drift = " [2026-11-29 21:45:01.000000] validation: replicas out of sync: ranks [1] differ from rank 0\n"
    launcher = (DATA / "dsx-train-2ranks-launcher.log").read_text()
    judged = measure.judge(_outcome(launcher + drift, run=run), {})
    assert judged.failure is not None and judged.failure.reason is model.Reason.WRONG_RESULTS
    empty = measure.judge(_outcome("using world size: 2\n", run=run), {})
    assert empty.failure is not None and empty.failure.reason is model.Reason.WORKLOAD_FAILED
    assert "no training step lines" in empty.failure.message
