"""Area of concern: the performance phase judges what the certify engine found — one check per
category naming each failed node with the engine's reason, excluded nodes as a failure — and a
local run stands in only for the snapshot GPU nodes the certification targets, capped.

The engine is the real one (dsx.certify.engine) on certify's own FakeExecutor, so the checks are
judged from genuine CertificationResults without processes or a cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from dsx.certify import engine
from dsx.errors import UnavailableError
from dsx.model import certification as model
from dsx.model import recipe, snapshot
from dsx.testing.fake_executor import FakeExecutor
from dsx.validation import attestation, performance, results, run

BLOCK = {"categories": ["nccl-all-reduce"]}
CAPTURED_AT = "2026-02-02T15:00:00Z"


def certify_on(executor: FakeExecutor) -> performance.Certify:
    """A `certify` callable as the entry point builds one, on a fake executor."""

    def certify(block: Mapping[str, Any], snap: snapshot.Snapshot) -> engine.CertificationResult:
        return engine.certify(model.Certification.from_dict(block, source="test"), executor)

    return certify


def gpu_node(name: str, **labels: str) -> snapshot.Node:
    gpu_labels = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    return snapshot.Node(
        name=name,
        labels={**gpu_labels, **labels},
        allocatable={"nvidia.com/gpu": "8"},
        capacity={"nvidia.com/gpu": "8"},
    )


def snap_of(*nodes: snapshot.Node) -> snapshot.Snapshot:
    return snapshot.Snapshot(
        nodes=nodes,
        cluster=snapshot.ClusterFacts(),
        generator="dsx/test",
        captured_at=CAPTURED_AT,
        sources=("cluster",),
    )


def test_healthy_nodes_pass_each_category_with_the_thresholds_applied() -> None:
    block = {"categories": ["nccl-all-reduce", "training"]}
    checks = performance.CertificationRunner(certify_on(FakeExecutor(4)))(block, snap_of())
    assert [(c.name, c.status) for c in checks] == [
        ("performance/nccl-all-reduce", results.Status.PASSED),
        ("performance/training", results.Status.PASSED),
    ]
    first = checks[0]
    assert first.message == "nccl-all-reduce: 4 node(s) passed (fake executor)"
    assert first.evidence["nodes"] == ["node-0", "node-1", "node-2", "node-3"]
    assert first.evidence["executor"] == "fake"
    assert first.evidence["thresholds"]  # the engine's applied thresholds travel as evidence
    assert all(isinstance(v, str) and "value" in v for v in first.evidence["thresholds"].values())


@pytest.mark.parametrize(
    ("fault", "reason"),
    [(model.FaultKind.CRASH, "WorkloadFailed"), (model.FaultKind.CORRUPT, "WrongResults")],
)
def test_a_faulty_node_fails_its_category_named_with_the_engines_reason(fault: model.FaultKind, reason: str) -> None:
    checks = performance.CertificationRunner(certify_on(FakeExecutor(4, faults={"node-2": fault})))(BLOCK, snap_of())
    (check,) = checks
    assert check.status is results.Status.FAILED
    assert check.message.startswith(f"nccl-all-reduce: 1 of 4 node(s) failed: node-2: {reason}")
    assert list(check.evidence["failedNodes"]) == ["node-2"]
    assert check.evidence["failedNodes"]["node-2"]["reason"] == reason


def test_excluded_nodes_are_a_failure_of_their_own() -> None:
    nodes = [model.CandidateNode(f"node-{i}", unschedulable=(i == 3)) for i in range(4)]
    checks = performance.CertificationRunner(certify_on(FakeExecutor(nodes)))(BLOCK, snap_of())
    assert [(c.name, c.status) for c in checks] == [
        ("performance/nccl-all-reduce", results.Status.PASSED),
        ("performance/eligibility", results.Status.FAILED),
    ]
    assert checks[1].message == "1 node(s) not certified: node-3 (Cordoned)"
    assert checks[1].evidence["excluded"] == {"node-3": "Cordoned"}


def test_the_phase_hands_the_recipe_block_to_the_runner_and_reports_an_engine_error(
    recipe_factory: Callable[..., recipe.Recipe],
) -> None:
    target = recipe_factory(certification=BLOCK)
    seen: list[Mapping[str, Any]] = []

    def unreachable(block: Mapping[str, Any], snap: snapshot.Snapshot) -> engine.CertificationResult:
        seen.append(block)
        raise UnavailableError("cannot reach the Kubernetes API at https://127.0.0.1:1")

    report = run.validate(
        target,
        snap_of(gpu_node("gpu-node-00")),
        phases=[results.Phase.PERFORMANCE],
        certification=performance.CertificationRunner(unreachable),
        generator="dsx/test",
    )
    assert seen == [BLOCK]
    (check,) = report.results
    assert (check.name, check.status) == ("performance/certification", results.Status.FAILED)
    assert check.message == "certification did not complete: cannot reach the Kubernetes API at https://127.0.0.1:1"


def test_a_bad_certification_block_fails_the_phase_naming_the_field(
    recipe_factory: Callable[..., recipe.Recipe],
) -> None:
    target = recipe_factory(certification={"categories": ["nccl-all-reduce"], "ranksPerNode": 0})
    report = run.validate(
        target,
        snap_of(gpu_node("gpu-node-00")),
        phases=[results.Phase.PERFORMANCE],
        certification=performance.CertificationRunner(certify_on(FakeExecutor(2))),
        generator="dsx/test",
    )
    (check,) = report.results
    assert check.status is results.Status.FAILED
    assert "ranksPerNode" in check.message


def test_local_stand_ins_are_the_targeted_gpu_nodes_capped() -> None:
    cpu = snapshot.Node(name="cpu-node-00", labels={"kubernetes.io/os": "linux"})
    nodes = [gpu_node(f"gpu-node-{i:02d}", rack=f"rack-{i // 4}") for i in range(12)]
    snap = snap_of(cpu, *nodes)
    everything = performance.local_stand_ins(model.Target(), snap)
    assert everything == [f"gpu-node-{i:02d}" for i in range(performance.LOCAL_NODE_CAP)]
    assert performance.local_stand_ins(model.Target(node_selector={"rack": "rack-2"}), snap) == [
        "gpu-node-08",
        "gpu-node-09",
        "gpu-node-10",
        "gpu-node-11",
    ]
    assert performance.local_stand_ins(model.Target(node_names=("gpu-node-03", "cpu-node-00")), snap) == ["gpu-node-03"]
    assert performance.local_stand_ins(model.Target(node_count=2), snap) == ["gpu-node-00", "gpu-node-01"]
    assert performance.local_stand_ins(model.Target(), snap_of()) == []


def test_the_attestation_says_where_performance_was_measured(recipe_factory: Callable[..., recipe.Recipe]) -> None:
    target = recipe_factory(certification=BLOCK)
    snap = snap_of(gpu_node("gpu-node-00"))
    measured = run.validate(
        target,
        snap,
        phases=[results.Phase.PERFORMANCE],
        certification=performance.CertificationRunner(certify_on(FakeExecutor(2))),
        generator="dsx/test",
    )
    claims = attestation.predicate(measured, snap, validator="qa", key_id="k")
    assert claims["performanceExecutors"] == ["fake"]
    skipped = run.validate(target, snap, phases=[results.Phase.PERFORMANCE], generator="dsx/test")
    assert attestation.predicate(skipped, snap, validator="qa", key_id="k")["performanceExecutors"] == []
    without = run.validate(target, snap, phases=[results.Phase.READINESS], generator="dsx/test")
    assert "performanceExecutors" not in attestation.predicate(without, snap, validator="qa", key_id="k")
