"""Area of concern: maintenance requests — a node asked for ahead of time is cordoned and drained
from `startTime - leadSeconds` (budgets honoured), `Ready` once empty, handed back on delete
(uncordoned only when the request cordoned it; the cordon passes to an incident that opened
meanwhile), one request per node at a time, bad specs reported by field, nothing written in a
dry run; and the pipeline never remediates or releases a node under maintenance."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from dsx.health.decisions import maintenance, nodes
from dsx.health.decisions.maintenance import FINALIZER, MaintenanceController, Phase
from dsx.health.decisions.policy import PIPELINE, MaintenanceSettings, Stage
from dsx.testing.inmemory_maintenance import InMemoryMaintenanceRequests
from dsx.testing.inmemory_nodes import InMemoryNodeOps

from .builders import T0, Pipeline, cluster, pod, policy_with, xid

LEAD = 600


def start_in(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def controller(fleet: InMemoryNodeOps, clock, observer, *stages: Stage, dry_run: bool = False):
    policy = policy_with(Stage.MAINTENANCE, *stages, maintenance=MaintenanceSettings(lead_seconds=LEAD))
    if dry_run:
        policy = policy.with_overrides(dry_run=True)
    requests = InMemoryMaintenanceRequests()
    return requests, MaintenanceController(requests, fleet, policy, observer, clock=clock)


def with_pipeline(store, fleet: InMemoryNodeOps, clock, observer):
    """The four stages and the maintenance controller over one store and one cluster."""
    policy = policy_with(*PIPELINE, Stage.MAINTENANCE, maintenance=MaintenanceSettings(lead_seconds=LEAD))
    requests = InMemoryMaintenanceRequests()
    maint = MaintenanceController(requests, fleet, policy, observer, clock=clock)
    return Pipeline(store, fleet, policy, clock, observer), requests, maint


def phase(requests: InMemoryMaintenanceRequests, name: str) -> tuple[str, str]:
    found = requests.get(name)
    assert found is not None
    return found["status"]["phase"], found["status"]["message"]


def test_a_request_is_held_pending_then_cordons_and_drains_from_its_lead_time(clock, observer) -> None:
    fleet = cluster(pods=[pod("team-a", "trainer", "n1"), pod("gpu-operator", "dcgm", "n1", owner="DaemonSet")])
    requests, maint = controller(fleet, clock, observer)
    requests.create("swap-psu", {"nodeName": "n1", "startTime": start_in(LEAD + 60), "reason": "PSU swap"})

    maint.step()
    assert phase(requests, "swap-psu")[0] == Phase.PENDING
    assert FINALIZER in requests.get("swap-psu")["metadata"]["finalizers"]
    assert not nodes.unschedulable(fleet.get_node("n1"))
    assert maint.next_due == clock() + 60

    clock.advance(60)
    maint.step()
    node = fleet.get_node("n1")
    assert nodes.unschedulable(node) and nodes.under_maintenance(node) == "swap-psu"
    assert nodes.annotations_of(node)[nodes.MAINTENANCE_CORDONED_ANNOTATION] == "true"
    assert [w.target for w in fleet.writes("evict")] == ["team-a/trainer"]
    assert phase(requests, "swap-psu") == (Phase.DRAINING, "1 pod(s) to leave")

    maint.step()  # the trainer is gone; the DaemonSet pod stays
    assert phase(requests, "swap-psu") == (Phase.READY, "cordoned and drained")
    assert [w.detail["reason"] for w in fleet.writes("event")] == ["MaintenanceStarted", "MaintenanceReady"]
    writes = len(fleet.journal)
    maint.step()
    assert len(fleet.journal) == writes  # settled: a pass writes nothing


def test_a_pod_disruption_budget_holds_the_drain_and_the_status_says_so(clock, observer) -> None:
    fleet = cluster(pods=[pod("team-a", "server", "n1")])
    fleet.refuse_evictions("team-a", "server", 1)
    requests, maint = controller(fleet, clock, observer)
    requests.create("m", {"nodeName": "n1", "startTime": start_in(0)})

    maint.step()
    state, message = phase(requests, "m")
    assert state == Phase.DRAINING
    assert "held by a PodDisruptionBudget: team-a/server" in message
    clock.advance(5)
    maint.step()
    maint.step()
    assert phase(requests, "m")[0] == Phase.READY


def test_deleting_the_request_hands_the_node_back_and_lets_the_object_go(clock, observer) -> None:
    fleet = cluster()
    requests, maint = controller(fleet, clock, observer)
    requests.create("m", {"nodeName": "n1", "startTime": start_in(0)})
    maint.step()
    assert nodes.unschedulable(fleet.get_node("n1"))

    requests.delete("m")
    assert requests.get("m") is not None  # the finalizer holds it until the node is back
    maint.step()
    node = fleet.get_node("n1")
    assert not nodes.unschedulable(node)
    assert nodes.under_maintenance(node) == ""
    assert nodes.MAINTENANCE_CORDONED_ANNOTATION not in nodes.annotations_of(node)
    assert requests.get("m") is None
    assert fleet.writes("event")[-1].detail["reason"] == "MaintenanceEnded"


def test_a_node_someone_else_cordoned_stays_cordoned_after_the_maintenance(clock, observer) -> None:
    fleet = cluster()
    fleet.add_node({**fleet.get_node("n1"), "spec": {"unschedulable": True}})
    requests, maint = controller(fleet, clock, observer)
    requests.create("m", {"nodeName": "n1", "startTime": start_in(0)})
    maint.step()
    assert nodes.annotations_of(fleet.get_node("n1"))[nodes.MAINTENANCE_CORDONED_ANNOTATION] == "false"

    requests.delete("m")
    maint.step()
    assert nodes.unschedulable(fleet.get_node("n1"))
    assert requests.get("m") is None


def test_one_request_holds_a_node_and_the_next_waits_for_it(clock, observer) -> None:
    fleet = cluster()
    requests, maint = controller(fleet, clock, observer)
    requests.create("first", {"nodeName": "n1", "startTime": start_in(0)})
    maint.step()
    requests.create("second", {"nodeName": "n1", "startTime": start_in(0)})
    maint.step()
    assert phase(requests, "second") == (Phase.PENDING, "waiting: maintenance request first holds the node")

    requests.delete("first")
    maint.step()  # first released, then second takes the node in the same pass
    node = fleet.get_node("n1")
    assert nodes.under_maintenance(node) == "second" and nodes.unschedulable(node)
    assert phase(requests, "second")[0] == Phase.READY


def test_a_bad_spec_is_reported_by_field_and_touches_no_node(clock, observer) -> None:
    fleet = cluster()
    requests, maint = controller(fleet, clock, observer)
    requests.create("no-time", {"nodeName": "n1", "startTime": "next tuesday"})
    requests.create("no-node", {"nodeName": "n9", "startTime": start_in(0)})
    requests.create("bad-lead", {"nodeName": "n1", "startTime": start_in(0), "leadSeconds": -5})
    maint.step()
    assert phase(requests, "no-time") == (
        Phase.FAILED,
        "spec.startTime: expected an RFC 3339 time, got 'next tuesday'",
    )
    assert phase(requests, "no-node") == (Phase.FAILED, "spec.nodeName: no node 'n9'")
    assert phase(requests, "bad-lead") == (Phase.FAILED, "spec.leadSeconds: expected seconds >= 0, got -5")
    assert fleet.writes("change-node") == []


def test_a_dry_run_writes_nothing_and_says_what_it_would_do(clock, observer) -> None:
    fleet = cluster(pods=[pod("team-a", "trainer", "n1")])
    requests, maint = controller(fleet, clock, observer, dry_run=True)
    requests.create("m", {"nodeName": "n1", "startTime": start_in(0)})
    maint.step()
    assert fleet.journal == []
    assert "finalizers" not in requests.get("m")["metadata"] and "status" not in requests.get("m")
    assert observer.named("would-drain") == ["n1"]


def test_no_remediation_while_under_maintenance_and_the_cordon_passes_to_the_incident(store, clock, observer) -> None:
    fleet = cluster()
    pipeline, requests, maint = with_pipeline(store, fleet, clock, observer)
    requests.create("m", {"nodeName": "n1", "startTime": start_in(0)})
    maint.step()

    pipeline.feed(xid("n1"))  # a fault while the node is someone's: quarantined and drained, not repaired
    assert store.node_state("n1").state.value == "drained"
    assert pipeline.provider.requests == []
    node = fleet.get_node("n1")
    assert nodes.annotations_of(node)[nodes.PRECORDONED_ANNOTATION] == "true"

    requests.delete("m")
    maint.step()
    node = fleet.get_node("n1")
    assert nodes.unschedulable(node), "the incident holds the node now"
    assert nodes.annotations_of(node)[nodes.CORDONED_ANNOTATION] == "true"
    clock.advance(5)
    pipeline.settle()
    assert [r.node_name for r in pipeline.provider.requests] == ["n1"]
    assert store.node_state("n1").state.value == "healthy"
    assert not nodes.unschedulable(fleet.get_node("n1")), "re-certified: the incident uncordons what it took over"


def test_a_recertified_node_waits_for_its_maintenance_to_end(store, clock, observer) -> None:
    fleet = cluster()
    pipeline, requests, maint = with_pipeline(store, fleet, clock, observer)

    store.append([xid("n1")])
    pipeline.run_first(3)  # quarantined, drained, remediated: waiting for re-certification
    requests.create("m", {"nodeName": "n1", "startTime": start_in(0)})
    maint.step()
    clock.advance(5)
    pipeline.settle()
    assert store.node_state("n1").state.value == "recertifying"
    assert nodes.unschedulable(fleet.get_node("n1"))

    requests.delete("m")
    maint.step()
    clock.advance(5)
    pipeline.settle()
    assert store.node_state("n1").state.value == "healthy"
    assert not nodes.unschedulable(fleet.get_node("n1"))


def test_lead_seconds_in_the_spec_beats_the_policy() -> None:
    obj = {
        "metadata": {"name": "m"},
        "spec": {"nodeName": "n1", "startTime": "2026-01-01T01:00:00Z", "leadSeconds": 60},
    }
    request = maintenance.read_request(obj, default_lead_seconds=900)
    assert request.lead_seconds == 60 and request.problem == ""
    assert request.begins_at == request.start_epoch_seconds - 60
    assert dataclasses.replace(request, lead_seconds=900).begins_at == request.start_epoch_seconds - 900
