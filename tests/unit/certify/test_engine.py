"""Area of concern: the engine's whole flow on a scripted executor — screening, calibration,
judging, isolation, per-node verdicts and the overall result — blames exactly the faulty
nodes with the reason of the run that confirmed them, and nobody else."""

from __future__ import annotations

import pytest

from dsx.certify import calibration, engine
from dsx.certify.executor import Purpose
from dsx.errors import BadInputError, NotFoundError
from dsx.model import certification as model
from dsx.model import certify_catalog as catalog
from dsx.testing.fake_executor import FakeExecutor

ALL_REDUCE = model.Certification(categories=(model.CategoryRequest("nccl-all-reduce"),))


def _failed(result: engine.CertificationResult) -> dict[str, model.NodeVerdict]:
    return {n: v for n, v in result.node_verdicts.items() if v.status is model.Status.FAILED}


def test_healthy_nodes_pass_in_one_screening_run_after_calibration() -> None:
    executor = FakeExecutor(8)
    events: list[engine.Event] = []
    result = engine.certify(ALL_REDUCE, executor, progress=events.append)
    assert result.result is model.Result.PASSED
    assert result.failed_nodes == []
    (category,) = result.categories
    assert category.runs == 1 and category.calibration_runs == engine.CALIBRATION_RUNS
    assert category.control_runs == 1  # the round's fault-free peer, measured right before it
    purposes = [r.purpose for r in executor.runs]
    assert purposes == [Purpose.CALIBRATION, Purpose.CALIBRATION, Purpose.CALIBRATION, Purpose.GROUP]
    control = executor.runs[-2]
    assert "/control-8r-" in control.name
    assert executor.runs[-1].reference  # the run carries the yardstick it is judged by: the control's figures
    assert category.isolation is None
    assert events[-1].groups_done == events[-1].groups_total == 1


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        (model.FaultKind.SLOW, model.Reason.THRESHOLD_VIOLATION),
        (model.FaultKind.CRASH, model.Reason.WORKLOAD_FAILED),
        (model.FaultKind.HANG, model.Reason.TIMEOUT),
        (model.FaultKind.CORRUPT, model.Reason.WRONG_RESULTS),
    ],
)
def test_one_faulty_node_is_found_with_its_reason(fault: model.FaultKind, reason: model.Reason) -> None:
    result = engine.certify(ALL_REDUCE, FakeExecutor(8, faults={"node-5": fault}))
    assert result.result is model.Result.FAILED
    failed = _failed(result)
    assert sorted(failed) == ["node-5"]
    failure = failed["node-5"].failure
    assert failure is not None and failure.reason is reason
    if fault is model.FaultKind.SLOW:
        assert failure.measured is not None and failure.expected is not None
        assert failure.measured < failure.expected
    isolation = result.categories[0].isolation
    assert isolation is not None and sorted(isolation.faulty) == ["node-5"]
    assert isolation.runs <= engine.isolation_bound(8, 1)  # k·⌈log2(N/k)⌉ + 2k = 5


def test_two_faulty_nodes_are_both_found_and_no_healthy_node_is_blamed() -> None:
    faults = {"node-2": model.FaultKind.CORRUPT, "node-6": model.FaultKind.CRASH}
    result = engine.certify(ALL_REDUCE, FakeExecutor(8, faults=faults))
    failed = _failed(result)
    assert sorted(failed) == ["node-2", "node-6"]
    assert failed["node-2"].failure is not None and failed["node-2"].failure.reason is model.Reason.WRONG_RESULTS
    assert failed["node-6"].failure is not None and failed["node-6"].failure.reason is model.Reason.WORKLOAD_FAILED
    assert [n for n, v in result.node_verdicts.items() if v.status is model.Status.PASSED] == [
        f"node-{i}" for i in (0, 1, 3, 4, 5, 7)
    ]


def test_without_isolation_the_whole_failed_group_carries_the_failure() -> None:
    spec = model.Certification(categories=ALL_REDUCE.categories, isolate=False)
    result = engine.certify(spec, FakeExecutor(4, faults={"node-1": model.FaultKind.CORRUPT}))
    assert result.failed_nodes == ["node-0", "node-1", "node-2", "node-3"]
    assert result.categories[0].runs == 1


def test_cordoned_nodes_are_excluded_and_make_the_result_incomplete() -> None:
    nodes = [model.CandidateNode(f"node-{i}", unschedulable=(i == 3)) for i in range(4)]
    result = engine.certify(ALL_REDUCE, FakeExecutor(nodes))
    assert result.result is model.Result.INCOMPLETE
    assert result.excluded == {"node-3": model.ExclusionCause.CORDONED}
    assert result.node_verdicts["node-3"].status is model.Status.EXCLUDED
    assert result.categories[0].groups[0].group.nodes == ("node-0", "node-1", "node-2")


def test_a_calibration_store_supplies_references_measured_before() -> None:
    stored = calibration.Calibration(host="this-host")
    first = engine.certify(ALL_REDUCE, FakeExecutor(8, faults={"node-5": model.FaultKind.SLOW}), calibration=stored)
    assert first.categories[0].calibration_runs > 0
    again = FakeExecutor(8, faults={"node-5": model.FaultKind.SLOW})
    second = engine.certify(ALL_REDUCE, again, calibration=stored)
    assert second.categories[0].calibration_runs == 0
    assert all("/control-" in r.name for r in again.runs if r.purpose is Purpose.CALIBRATION)
    assert second.failed_nodes == ["node-5"]
    key = calibration.shape_key(catalog.get("nccl-all-reduce"), 8)
    restored = calibration.Calibration.from_dict(stored.to_dict(), source="test", this_host="this-host")
    assert restored.references[key] == stored.references[key]


def test_a_calibration_file_from_another_host_is_refused() -> None:
    raw = calibration.Calibration(host="elsewhere").to_dict()
    with pytest.raises(BadInputError, match="measured on host 'elsewhere'"):
        calibration.Calibration.from_dict(raw, source="cal.json", this_host="this-host")


def test_executors_without_calibration_judge_against_catalog_thresholds() -> None:
    spec = model.Certification(
        categories=ALL_REDUCE.categories, thresholds={model.Metric.BUS_BANDWIDTH_GBPS: "value >= 150.0"}
    )
    result = engine.certify(spec, FakeExecutor(2, calibrates=False))  # fake: 100 GB/s algbw, busbw 100 at 2 ranks
    failure = result.node_verdicts["node-0"].failure
    assert result.result is model.Result.FAILED
    assert failure is not None and failure.expected == 150.0
    assert result.categories[0].calibration_runs == 0


def test_node_certification_runs_node_level_categories_on_one_node_alone() -> None:
    spec = engine.node_certification("node-1")
    assert [c.name for c in spec.categories] == list(engine.NODE_CATEGORIES)
    executor = FakeExecutor(3, faults={"node-2": model.FaultKind.SLOW})
    result = engine.certify(spec, executor)
    assert result.result is model.Result.PASSED
    assert list(result.node_verdicts) == ["node-1"]
    assert {r.nodes for r in executor.runs if r.purpose is Purpose.GROUP} == {("node-1",)}
    assert all(r.ranks_per_node == 2 for r in executor.runs)
    slow = engine.certify(engine.node_certification("node-2"), FakeExecutor(3, faults={"node-2": model.FaultKind.SLOW}))
    assert slow.failed_nodes == ["node-2"]


def test_plan_lists_the_screening_runs_per_category_and_group() -> None:
    nodes = [model.CandidateNode(f"n{i}", labels={"nvidia.com/gpu.clique": f"c{i // 2}"}) for i in range(4)]
    spec = model.Certification(
        categories=(model.CategoryRequest("nccl-all-reduce"), model.CategoryRequest("nccl-loopback"))
    )
    runs = engine.plan(spec, FakeExecutor(nodes))
    assert [(r.name, r.nodes) for r in runs] == [
        ("nccl-all-reduce/domain-c0", ("n0", "n1")),
        ("nccl-all-reduce/domain-c1", ("n2", "n3")),
        ("nccl-loopback/n0", ("n0",)),
        ("nccl-loopback/n1", ("n1",)),
        ("nccl-loopback/n2", ("n2",)),
        ("nccl-loopback/n3", ("n3",)),
    ]


def test_bad_requests_fail_before_any_run() -> None:
    executor = FakeExecutor(2)
    with pytest.raises(NotFoundError, match="nccl-nope"):
        engine.certify(model.Certification(categories=(model.CategoryRequest("nccl-nope"),)), executor)
    with pytest.raises(BadInputError, match="no eligible node"):
        engine.certify(model.Certification(target=model.Target(node_names=("gone",))), executor)
    assert executor.runs == []


def test_progress_shows_the_judged_metric_and_each_calibration_run() -> None:
    spec = model.Certification(categories=(model.CategoryRequest("nccl-loopback"), model.CategoryRequest("training")))
    events: list[engine.Event] = []
    engine.certify(spec, FakeExecutor(2), progress=events.append)
    lines = [f"[{e.category}] {e.message}" for e in events]
    assert "[nccl-loopback] calibration 1/2 on 1 rank(s): algorithm bandwidth 100 GB/s in 1.0 s" in lines
    assert "[nccl-loopback] calibration 2/2 on 1 rank(s): algorithm bandwidth 100 GB/s in 1.0 s" in lines
    assert "[nccl-loopback] group node-0 (1 nodes): PASSED algorithm bandwidth 100 GB/s in 1.0 s" in lines
    assert "[training] group all-nodes (2 nodes): PASSED step time 50 ms in 1.0 s" in lines
    assert not any("bus bandwidth" in line or "busbw" in line for line in lines if "loopback" in line)


def _cluster(count: int, **kw: object) -> FakeExecutor:
    nodes = [
        model.CandidateNode(f"node-{i}", labels={"topology.kubernetes.io/rack": f"r{i // 2}"}, allocatable_gpus=1)
        for i in range(count)
    ]
    return FakeExecutor(nodes, calibrates=False, **kw)  # type: ignore[arg-type]


def test_every_node_failing_alike_takes_one_round_and_names_the_common_cause() -> None:
    """Issue 27: when every group of a round fails the same way, bisecting would only repeat it."""
    faults = {f"node-{i}": model.FaultKind.CORRUPT for i in range(8)}
    executor = _cluster(8, faults=faults)
    result = engine.certify(ALL_REDUCE, executor)
    (category,) = result.categories
    assert len(category.groups) == 4 and category.runs == 4  # screening only
    assert category.isolation is None and category.common_cause is not None
    assert category.common_cause.reason is model.Reason.COMMON_CAUSE
    assert "WrongResults" in category.common_cause.message
    assert {v.failure.reason for v in result.node_verdicts.values() if v.failure} == {model.Reason.COMMON_CAUSE}


def test_one_bad_group_among_many_is_still_isolated() -> None:
    executor = _cluster(8, faults={"node-5": model.FaultKind.CORRUPT})
    result = engine.certify(ALL_REDUCE, executor)
    assert result.failed_nodes == ["node-5"]
    assert result.categories[0].common_cause is None


def test_without_a_published_figure_a_cluster_node_is_judged_against_its_peers() -> None:
    """No figure for this (workload, accelerator, interconnect): the round's median is the yardstick."""
    executor = _cluster(8, faults={"node-5": model.FaultKind.SLOW})
    result = engine.certify(ALL_REDUCE, executor)
    (category,) = result.categories
    assert category.applied[model.Metric.BUS_BANDWIDTH_GBPS].expression == "value >= 0.8 * peers"
    assert "no published busBandwidthGBps figure" in category.lacking
    assert result.failed_nodes == ["node-5"]
    failure = result.node_verdicts["node-5"].failure
    assert failure is not None and failure.reason is model.Reason.THRESHOLD_VIOLATION
    assert failure.expected is not None and failure.measured is not None and failure.measured < failure.expected
    assert category.calibration_runs == 0 and category.control_runs == 0


class _LoadSpike(FakeExecutor):
    """Local CPU under passing load spikes: each category's first group run on `node` comes out slow."""

    def __init__(self, node: str) -> None:
        super().__init__(3)
        self.spiked = node
        self.spiked_categories: set[str] = set()

    def run(self, runs, notice=None):  # type: ignore[no-untyped-def]
        first = [r for r in runs if r.purpose is Purpose.GROUP and r.category.name not in self.spiked_categories]
        self.faults = {self.spiked: model.FaultKind.SLOW} if first else {}
        self.spiked_categories |= {r.category.name for r in first}
        return super().run(runs, notice)


def test_a_local_run_below_its_thresholds_is_measured_again_and_the_second_judgement_stands() -> None:
    """A shared machine's load slows one local run; a slow node stays slow. One more run, beside
    a fresh control run, tells them apart (the engine says so in its progress)."""
    told: list[engine.Event] = []
    spiked = _LoadSpike("node-2")
    passed = engine.certify(engine.node_certification("node-2"), spiked, progress=told.append)
    assert passed.result is model.Result.PASSED
    groups = [r for r in spiked.runs if r.purpose is Purpose.GROUP]
    assert len(groups) == 2 * len(engine.NODE_CATEGORIES)  # each category: the spiked run and its re-run
    assert any("measuring again" in event.message for event in told)
    slow = FakeExecutor(3, faults={"node-2": model.FaultKind.SLOW})
    failed = engine.certify(engine.node_certification("node-2"), slow)
    assert failed.failed_nodes == ["node-2"]
    assert len([r for r in slow.runs if r.purpose is Purpose.GROUP]) == 2 * len(engine.NODE_CATEGORIES)
    healthy = FakeExecutor(3)
    engine.certify(engine.node_certification("node-2"), healthy)
    assert len([r for r in healthy.runs if r.purpose is Purpose.GROUP]) == len(engine.NODE_CATEGORIES)
    remote = FakeExecutor(3, faults={"node-2": model.FaultKind.SLOW}, calibrates=False)
    engine.certify(engine.node_certification("node-2"), remote)  # a cluster's run is judged once
    assert len([r for r in remote.runs if r.purpose is Purpose.GROUP]) == len(engine.NODE_CATEGORIES)
