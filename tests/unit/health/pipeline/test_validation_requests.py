"""Area of concern: validation requests — a GPU node that joins is tainted at once and certified
(node-level plus a group test beside known-good peers) before the taint comes off; joining nodes
are queued together when their batch's period is over (kept in the store across a restart); no
node serves two group tests at once; a failed one stays held with the reason; `dsx diff` drift
names the nodes to re-validate; at most M certify at once; requests interrupted by a restart
run again; re-certification of repaired nodes goes through the same queue and fails closed
when a new fault arrives after the repair."""

from __future__ import annotations

import dataclasses
import threading
from datetime import timedelta

import pytest

from dsx.errors import BadInputError
from dsx.health.decisions import nodes, validation_requests
from dsx.health.decisions.eventstore import ValidationStatus
from dsx.health.decisions.policy import PIPELINE, Stage
from dsx.health.decisions.ports import RecertificationResult
from dsx.health.decisions.validation_requests import JoiningNodes, ValidationKind
from dsx.model.health import NodeState
from dsx.pipeline.validations import ValidationRunner

from .builders import FakeRecertifier, Pipeline, cluster, gpu_node, policy_with, xid

TAINT = "sentinel.dsx.run/not-yet-certified"


def unbatched(policy):
    """Joining nodes queued at once (joiningBatchSeconds 0)."""
    return dataclasses.replace(policy, certification=dataclasses.replace(policy.certification, joining_batch_seconds=0))


def joined(name: str, created: str = "2026-11-29T13:00:00Z", **labels: str) -> dict:
    node = gpu_node(name, labels=labels)
    node["metadata"]["creationTimestamp"] = created
    return node


def test_a_joining_gpu_node_is_held_until_it_passes_with_known_good_peers(store, clock, observer) -> None:
    fleet = cluster(["n1", "n2", "n3"])
    fleet.add_node(joined("new"))
    chosen = policy_with(Stage.VALIDATION)
    watch = JoiningNodes(store, fleet, chosen, observer, clock=clock)
    certifier = FakeRecertifier()
    runner = ValidationRunner(store, fleet, chosen, certifier, observer, workers=0)

    assert [watch.observe(n) for n in fleet.list_nodes()] == [False, False, False, True]
    assert nodes.has_taint(fleet.get_node("new"), TAINT)
    assert watch.observe(fleet.get_node("new")) is False  # already held: no second request
    runner.step()
    assert certifier.requests == [] and store.validation_requests() == []  # the batch is open for 60 s
    clock.advance(59)
    assert watch.close_batch() == 0
    clock.advance(1)
    assert watch.close_batch() == 1
    runner.step()

    (asked,) = certifier.requests
    assert asked.node_name == "new" and asked.peers == ("n1",)
    assert asked.categories == ("nccl-loopback", "training") and asked.group_categories == ("nccl-all-reduce",)
    node = fleet.get_node("new")
    assert not nodes.has_taint(node, TAINT)
    assert nodes.labels_of(node)["sentinel.dsx.run/certified"] == "true"
    assert [r.status for r in store.validation_requests()] == [ValidationStatus.PASSED]


def test_nodes_that_existed_before_the_watch_or_are_not_gpu_nodes_are_left_alone(store, clock, observer) -> None:
    fleet = cluster(["old"])
    cpu = joined("cpu")
    del cpu["metadata"]["labels"]["nvidia.com/gpu.present"]
    fleet.add_node(cpu)
    watch = JoiningNodes(store, fleet, policy_with(Stage.VALIDATION), observer, clock=clock)
    assert not any(watch.observe(n) for n in fleet.list_nodes())
    assert store.validation_requests() == []


def test_the_joining_selector_chooses_which_new_gpu_nodes_are_held(store, clock, observer) -> None:
    """certification.joiningSelector (CEL over the Node): only the chosen instance type is gated."""
    fleet = cluster(["n1"])
    fleet.add_node(joined("p5", **{"node.kubernetes.io/instance-type": "p5.48xlarge"}))
    fleet.add_node(joined("g6", **{"node.kubernetes.io/instance-type": "g6.xlarge"}))
    chosen = policy_with(Stage.VALIDATION)
    selector = "node.metadata.labels['node.kubernetes.io/instance-type'] == 'p5.48xlarge'"
    chosen = dataclasses.replace(
        chosen, certification=dataclasses.replace(chosen.certification, joining_selector=selector)
    )
    watch = JoiningNodes(store, fleet, unbatched(chosen), observer, clock=clock)
    assert [n for n in ("p5", "g6") if watch.observe(fleet.get_node(n))] == ["p5"]
    assert nodes.has_taint(fleet.get_node("p5"), TAINT) and not nodes.has_taint(fleet.get_node("g6"), TAINT)
    assert [r.node_name for r in store.validation_requests()] == ["p5"]


def test_a_joining_selector_that_is_not_cel_is_refused_naming_the_field() -> None:
    from dsx.health.decisions import policy as policy_module

    document = {
        "apiVersion": "dsx.health/v1alpha1",
        "kind": "SentinelPolicy",
        "certification": {"joiningSelector": "node.metadata.labels[="},
    }
    with pytest.raises(BadInputError, match=r"p\.yaml\.certification\.joiningSelector: invalid CEL"):
        policy_module.from_dict(document, source="p.yaml")


def test_a_node_that_fails_validation_stays_held_with_the_reason(store, clock, observer) -> None:
    fleet = cluster(["n1"])
    fleet.add_node(joined("new"))
    chosen = policy_with(Stage.VALIDATION)
    chosen = unbatched(chosen)
    JoiningNodes(store, fleet, chosen, observer, clock=clock).observe(fleet.get_node("new"))
    ValidationRunner(
        store, fleet, chosen, FakeRecertifier({"new": "nccl-all-reduce: ThresholdViolation"}), observer, workers=0
    ).step()
    node = fleet.get_node("new")
    assert nodes.has_taint(node, TAINT)
    assert "ThresholdViolation" in nodes.annotations_of(node)["sentinel.dsx.run/validation"]
    assert store.validation_requests()[0].detail == "nccl-all-reduce: ThresholdViolation"


def test_dry_run_holds_nothing(store, clock, observer) -> None:
    fleet = cluster(["n1"])
    fleet.add_node(joined("new"))
    chosen = policy_with(Stage.VALIDATION).with_overrides(dry_run=True)
    assert JoiningNodes(store, fleet, chosen, observer, clock=clock).observe(fleet.get_node("new")) is False
    assert fleet.writes() == [] and store.validation_requests() == []


def test_drift_names_the_nodes_to_revalidate() -> None:
    report = {
        "kind": "DriftReport",
        "changes": [
            {"kind": "node", "subject": "n2", "path": "labels.nvidia.com/cuda.driver.major"},
            {"kind": "node-added", "subject": "n9"},
            {"kind": "node", "subject": "cpu-1", "path": "labels.x"},
        ],
    }
    assert validation_requests.nodes_from_drift(report, ["n1", "n2", "n9"]) == {
        "n2": "node n2 labels.nvidia.com/cuda.driver.major",
        "n9": "node-added n9",
    }
    fleet_wide = {"changes": [{"kind": "version", "subject": "gpu-operator", "path": "version"}]}
    assert sorted(validation_requests.nodes_from_drift(fleet_wide, ["n1", "n2"])) == ["n1", "n2"]
    assert validation_requests.nodes_from_drift({"changes": []}, ["n1"]) == {}


def test_at_most_m_nodes_certify_at_once_and_interrupted_requests_run_again(store, clock, observer) -> None:
    fleet = cluster([f"n{i}" for i in range(5)])
    chosen = policy_with(Stage.VALIDATION)
    chosen = dataclasses.replace(chosen, certification=dataclasses.replace(chosen.certification, max_running=2))
    for i in range(5):
        store.request_validation(f"n{i}", validation_requests.reason(ValidationKind.DRIFT, "driver 580 → 590"))
    running = store.start_validations(2)  # a sentinel that died with two requests running
    assert [r.node_name for r in running] == ["n0", "n1"]
    assert store.start_validations(2) == []  # the limit holds across callers

    certifier = FakeRecertifier()
    runner = ValidationRunner(store, fleet, chosen, certifier, observer, workers=0)
    # the restarted runner first resumes the two interrupted ones, then starts at most two at a time
    steps = []
    for _ in range(4):
        runner.step()
        steps.append([r.node_name for r in certifier.requests])
    full = ["n0", "n1", "n2", "n3", "n4"]
    assert steps == [["n0", "n1"], ["n0", "n1", "n2", "n3"], full, full]
    assert {r.status for r in store.validation_requests()} == {ValidationStatus.PASSED}


def test_a_fault_arriving_after_the_repair_fails_the_gate(store, clock, observer) -> None:
    fleet = cluster()
    pipeline = Pipeline(store, fleet, policy_with(*PIPELINE), clock, observer)
    store.append([xid("n1")])
    pipeline.run_first(3)
    assert store.node_state("n1").state is NodeState.RECERTIFYING
    store.append([xid("n1", "48", pci="0000:3c:00.0", at=timedelta(minutes=5))])
    pipeline.settle()
    status = store.node_state("n1")
    assert status.state is NodeState.FAILED
    assert "a new fault arrived after the repair: KernelLogXid 48" in status.reason
    assert nodes.unschedulable(fleet.get_node("n1"))
    assert pipeline.recertifier.requests == []


def test_recertification_waits_for_its_request_and_is_visible_meanwhile(store, clock, observer) -> None:
    fleet = cluster()
    pipeline = Pipeline(store, fleet, policy_with(*PIPELINE), clock, observer)
    store.append([xid("n1")])
    pipeline.run_first(4)
    (request,) = store.validation_requests()
    assert request.status is ValidationStatus.PENDING and request.reason == "recertify: incident 1"
    assert "pending (request 1)" in nodes.annotations_of(fleet.get_node("n1"))["sentinel.dsx.run/recertification"]
    assert nodes.unschedulable(fleet.get_node("n1"))
    pipeline.settle()
    assert store.node_state("n1").state is NodeState.HEALTHY


def test_within_the_baselines_second_the_known_nodes_decide(store, clock, observer) -> None:
    """creationTimestamp has whole seconds; a node created in the same second as the baseline still joins."""
    clock.advance(0.5)
    fleet = cluster([])
    fleet.add_node(joined("old", created="2026-11-29T12:00:00Z"))
    watch = JoiningNodes(store, fleet, policy_with(Stage.VALIDATION), observer, clock=clock)
    fleet.add_node(joined("new", created="2026-11-29T12:00:00Z"))
    assert watch.observe(fleet.get_node("old")) is False
    assert watch.observe(fleet.get_node("new")) is True
    restarted = JoiningNodes(store, fleet, policy_with(Stage.VALIDATION), observer, clock=clock)
    assert restarted.known == frozenset({"old"}) and restarted.since == watch.since


@pytest.mark.parametrize(
    ("report", "message"),
    [
        ({"changes": "node n1"}, r"drift\.json: changes: expected a list, got str"),
        ({"changes": ["node n1"]}, r"drift\.json: changes\[0\]: expected a mapping, got str"),
        ({"changes": [{"kind": "node", "subject": ["n1"]}]}, r"drift\.json: changes\[0\]\.subject: expected a string"),
    ],
)
def test_a_malformed_drift_report_names_the_field(report: dict[str, object], message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        validation_requests.nodes_from_drift(report, ["n1"], source="drift.json")


def test_a_batch_survives_a_restart_and_its_nodes_are_queued_together(store, clock, observer) -> None:
    fleet = cluster(["n1"])
    chosen = policy_with(Stage.VALIDATION)
    watch = JoiningNodes(store, fleet, chosen, observer, clock=clock)
    fleet.add_node(joined("rack-0"))
    assert watch.observe(fleet.get_node("rack-0"))
    assert (
        "batch closes 2026-11-29T12:01:00Z"
        in nodes.annotations_of(fleet.get_node("rack-0"))["sentinel.dsx.run/validation"]
    )
    clock.advance(30)
    fleet.add_node(joined("rack-1"))
    restarted = JoiningNodes(store, fleet, chosen, observer, clock=clock)  # the batch is in the store
    assert restarted.observe(fleet.get_node("rack-1"))
    clock.advance(29)
    assert restarted.close_batch() == 0 and store.validation_requests() == []
    clock.advance(1)  # 60 s after the first joined, not the last
    assert restarted.close_batch() == 2
    assert sorted(r.node_name for r in store.validation_requests()) == ["rack-0", "rack-1"]
    assert restarted.close_batch() == 0  # emptied: nothing queued twice
    fleet.add_node(joined("late"))
    assert restarted.observe(fleet.get_node("late"))
    clock.advance(59)
    assert restarted.close_batch() == 0  # a new batch opened with the late node


def test_a_node_batched_but_not_yet_tainted_is_tainted_on_the_next_look(store, clock, observer) -> None:
    """A crash between the store write and the taint: the batch remembers the node."""
    fleet = cluster(["n1"])
    fleet.add_node(joined("new"))
    store.save_breaker(validation_requests.BATCH_DOCUMENT, {"opened_at": clock(), "nodes": ["new"]})
    watch = JoiningNodes(store, fleet, policy_with(Stage.VALIDATION), observer, clock=clock)
    assert watch.observe(fleet.get_node("new"))
    assert nodes.has_taint(fleet.get_node("new"), TAINT)
    assert store.load_breaker(validation_requests.BATCH_DOCUMENT)["nodes"] == ["new"]


class BlockingRecertifier(FakeRecertifier):
    """Holds every run until released, recording which nodes each run used while others ran."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.started = threading.Semaphore(0)
        self.lock = threading.Lock()
        self.in_use: list[set[str]] = []
        self.overlaps: list[set[str]] = []

    def recertify(self, request):
        used = {request.node_name, *request.peers}
        with self.lock:
            self.requests.append(request)
            self.overlaps.extend(used & other for other in self.in_use if used & other)
            self.in_use.append(used)
        self.started.release()
        self.release.wait(10)
        with self.lock:
            self.in_use.remove(used)
        return RecertificationResult(True, "", {})


def test_no_node_serves_two_group_tests_at_once(store, clock, observer) -> None:
    fleet = cluster(["good-0", "good-1", "good-2"])
    for name in ("new-0", "new-1", "new-2"):
        fleet.add_node(joined(name))
    chosen = unbatched(policy_with(Stage.VALIDATION))
    chosen = dataclasses.replace(chosen, certification=dataclasses.replace(chosen.certification, max_running=3))
    watch = JoiningNodes(store, fleet, chosen, observer, clock=clock)
    for name in ("new-0", "new-1", "new-2"):
        watch.observe(fleet.get_node(name))
    certifier = BlockingRecertifier()
    runner = ValidationRunner(store, fleet, chosen, certifier, observer, workers=3)
    try:
        runner.step()
        for _ in range(3):
            assert certifier.started.acquire(timeout=10)
        peers = sorted(r.peers for r in certifier.requests)
        assert peers == [("good-0",), ("good-1",), ("good-2",)]  # three runs at once, three different peers
    finally:
        certifier.release.set()
        runner.close()
    assert certifier.overlaps == []


def test_a_run_waits_for_a_peer_another_group_uses(store, clock, observer) -> None:
    fleet = cluster(["good-0"])
    fleet.add_node(joined("new-0"))
    fleet.add_node(joined("new-1"))
    chosen = unbatched(policy_with(Stage.VALIDATION))
    chosen = dataclasses.replace(chosen, certification=dataclasses.replace(chosen.certification, max_running=2))
    watch = JoiningNodes(store, fleet, chosen, observer, clock=clock)
    watch.observe(fleet.get_node("new-0"))
    watch.observe(fleet.get_node("new-1"))
    certifier = BlockingRecertifier()
    runner = ValidationRunner(store, fleet, chosen, certifier, observer, workers=2)
    try:
        runner.step()
        assert certifier.started.acquire(timeout=10)
        assert not certifier.started.acquire(timeout=1.5), "the second run started beside the first on one peer"
        certifier.release.set()
        assert certifier.started.acquire(timeout=10)
    finally:
        certifier.release.set()
        runner.close()
    assert [r.peers for r in certifier.requests] == [("good-0",), ("good-0",)]
    assert certifier.overlaps == []
