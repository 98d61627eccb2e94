"""Area of concern: the whole operate chain on one node — quarantine, drain, remediation,
re-certification — moves the node through the state machine in order, records every action on
the node and in the store, releases it only after re-certification passed, and keeps it out of
service with the reason when re-certification fails. Runs inline over the in-memory store and
cluster; the same stage code runs live (tests/integration/sentinel)."""

from __future__ import annotations

from dsx.health.decisions import nodes, pipeline_status
from dsx.health.decisions.eventstore import ValidationStatus
from dsx.health.decisions.policy import PIPELINE
from dsx.model.health import NODE_REMEDIATED_CHECK, NodeState

from .builders import T0, FakeRecertifier, Pipeline, cluster, pod, policy_with, xid


def states(store, node: str) -> list[str]:
    return [m.to_state.value for m in store.node_history(node)]


def test_fault_to_release_walks_every_state_and_uncordons_only_after_recertification(store, clock, observer) -> None:
    fleet = cluster(pods=[pod("team-a", "trainer", "n3"), pod("team-a", "web", "n2")])
    pipeline = Pipeline(store, fleet, policy_with(*PIPELINE), clock, observer)

    pipeline.feed(xid("n3"))

    assert states(store, "n3") == ["quarantined", "draining", "drained", "remediating", "recertifying", "healthy"]
    assert [r.kind.value for r in pipeline.provider.requests] == ["reboot-node"]
    assert [r.node_name for r in pipeline.recertifier.requests] == ["n3"]
    assert [w.target for w in fleet.writes("evict")] == ["team-a/trainer"]
    node = fleet.get_node("n3")
    assert not nodes.unschedulable(node)
    assert not nodes.taints(node)
    assert not any(k.startswith("sentinel.dsx.run/") for k in nodes.labels_of(node))
    assert not any(k.startswith("sentinel.dsx.run/") for k in nodes.annotations_of(node))
    remediated = [s.event for s in store.events() if s.event.check_name == NODE_REMEDIATED_CHECK]
    assert [e.node_name for e in remediated] == ["n3"]
    assert [r.status for r in store.validation_requests()] == [ValidationStatus.PASSED]
    # the uncordon is the last write, after the certification ran
    cordon_writes = [w.detail.get("unschedulable") for w in fleet.writes("change-node") if w.target == "n3"]
    assert cordon_writes[0] is True and cordon_writes[-1] is False
    assert [n for n in cordon_writes if n is not None] == [True, False]
    # other tools read the GPU health from a NodeCondition: False while held, True once re-certified
    (condition,) = [c for c in node["status"]["conditions"] if c["type"] == nodes.GPU_HEALTH_CONDITION]
    assert (condition["status"], condition["reason"]) == ("True", "Recertified")
    assert [w.detail["status"] for w in fleet.writes("condition") if w.target == "n3"] == ["False", "True"]
    # the repair's time per stage reached the observer (metrics), and the status document
    timing = observer.repairs["n3"]
    assert list(timing) == ["quarantine", "drain", "remediation", "recertify", "total"]
    assert timing["total"] == sum(timing[s] for s in ("quarantine", "drain", "remediation", "recertify"))
    shown = pipeline_status.document(store, None, now=T0)["nodes"]
    assert [n["repairSeconds"] for n in shown if n["node"] == "n3"] == [{k: round(v, 3) for k, v in timing.items()}]


def test_failing_recertification_keeps_the_node_cordoned_with_the_reason(store, clock, observer) -> None:
    fleet = cluster()
    failing = FakeRecertifier({"n4": "nccl-loopback: WorkloadFailed: rank 1 exited 134"})
    pipeline = Pipeline(store, fleet, policy_with(*PIPELINE), clock, observer, recertifier=failing)

    pipeline.feed(xid("n4"))

    assert store.node_state("n4").state is NodeState.FAILED
    assert "WorkloadFailed" in store.node_state("n4").reason
    node = fleet.get_node("n4")
    assert nodes.unschedulable(node)
    assert nodes.labels_of(node)["sentinel.dsx.run/recertification-failed"] == "true"
    assert "rank 1 exited 134" in nodes.annotations_of(node)["sentinel.dsx.run/reason"]
    assert [w.detail["reason"] for w in fleet.writes("event") if w.target == "n4"] == ["RecertificationFailed"]
    assert "n4" not in observer.repairs  # not back in service: no repair to time
    (condition,) = [c for c in node["status"]["conditions"] if c["type"] == nodes.GPU_HEALTH_CONDITION]
    assert (condition["status"], condition["reason"]) == ("False", "RecertificationFailed")
