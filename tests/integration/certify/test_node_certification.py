"""Area of concern: the programmatic entry other packages call — `engine.node_certification` +
`engine.certify` on the local executor — runs a real loopback all-reduce and a real DDP
training job on one node, passes a healthy node and fails a slow one with measured vs
expected values (what the sentinel's re-certification gate relies on)."""

from __future__ import annotations

import pytest

from dsx.certify import calibration, engine
from dsx.executors.local.executor import LocalExecutor
from dsx.model import certification as model

pytestmark = pytest.mark.integration

TIMEOUTS = model.Timeouts(run_timeout_seconds=120, stall_timeout_seconds=10)


def test_a_healthy_node_passes_and_a_slow_node_fails_loopback_and_training() -> None:
    stored = calibration.Calibration(host="this-host")  # both certifications judge against one set of references
    slow = model.FaultInjection("gpu-node-01", model.FaultKind.SLOW)
    with LocalExecutor(2, names=("gpu-node-00", "gpu-node-01"), injections=(slow,)) as executor:
        healthy = engine.certify(
            engine.node_certification("gpu-node-00", timeouts=TIMEOUTS), executor, calibration=stored
        )
        degraded = engine.certify(
            engine.node_certification("gpu-node-01", timeouts=TIMEOUTS), executor, calibration=stored
        )

    assert healthy.result is model.Result.PASSED, healthy.node_verdicts
    loopback, training = healthy.categories
    assert (loopback.name, training.name) == ("nccl-loopback", "training")
    (trained,) = training.groups
    assert trained.judgement.measurement.node_step_seconds.keys() == {"gpu-node-00"}
    assert trained.judgement.measurement.metrics[model.Metric.GOODPUT_RATIO] > 0

    assert degraded.failed_nodes == ["gpu-node-01"]
    for category in degraded.categories:  # both workloads see the throttled node
        failure = category.node_verdicts["gpu-node-01"].failure
        assert failure is not None and failure.reason is model.Reason.THRESHOLD_VIOLATION, category.name
        assert failure.measured is not None and failure.expected is not None
    step = degraded.categories[1].node_verdicts["gpu-node-01"].failure
    assert step is not None and step.metric is model.Metric.AVG_STEP_TIME_SECONDS
    assert step.measured is not None and step.expected is not None and step.measured > step.expected
