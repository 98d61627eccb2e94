"""Area of concern: the quarantine stage — rule sets decide (all/any CEL over event and node), the
node is cordoned, tainted, labelled and annotated in one write, safety valves hold (opt-out
label, someone else's cordon, a person's manual uncordon, dry run), recovery hands the node to
re-certification, and a crash between the store transition and the node write neither loses
the quarantine nor takes it twice."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from dsx.errors import BadInputError
from dsx.health.decisions import nodes, policy, quarantine
from dsx.health.decisions.breaker import CircuitBreaker
from dsx.health.decisions.policy import QuarantineSettings, Stage, StageSwitch
from dsx.health.decisions.ports import NodeChange
from dsx.model.health import BehaviourOverrides, NodeState
from dsx.pipeline import stages

from .builders import cluster, gpu_check, gpu_node, informational, policy_with, xid


def handler(store, fleet, chosen, clock, observer, *, node_view=None) -> quarantine.QuarantineHandler:
    gate = CircuitBreaker(store, chosen.breaker, lambda: 100)
    return quarantine.QuarantineHandler(store, fleet, chosen, gate, observer, clock=clock, node_view=node_view)


def run(store, h, *events) -> dict[int, dict]:
    store.append(list(events))
    runner = stages.StageRunner(store, h, owner="t", workers=0)
    while runner.step():
        pass
    return {seq: dict(store.stage_record("quarantine", seq).detail) for seq in range(1, store.last_sequence() + 1)}


def rules(text: str) -> QuarantineSettings:
    document = {
        "apiVersion": policy.API_VERSION,
        "kind": policy.KIND,
        "quarantine": {"ruleSets": __import__("yaml").safe_load(text)},
    }
    return policy.from_dict(document, source="test.yaml").quarantine


def test_a_fatal_gpu_fault_cordons_taints_labels_and_annotates_in_one_write(store, clock, observer) -> None:
    fleet = cluster()
    records = run(store, handler(store, fleet, policy_with(Stage.QUARANTINE), clock, observer), xid("n1"))

    assert records[1]["disposition"] == "quarantined"
    assert records[1]["rule_sets"] == ["fatal-gpu-fault"]
    node = fleet.get_node("n1")
    assert nodes.unschedulable(node)
    assert nodes.taints(node) == [{"key": "sentinel.dsx.run/quarantined", "value": "gpu-fault", "effect": "NoSchedule"}]
    assert nodes.labels_of(node)["sentinel.dsx.run/state"] == "quarantined"
    marks = nodes.annotations_of(node)
    assert marks["sentinel.dsx.run/incident"] == "1"
    assert marks["sentinel.dsx.run/event"] == xid("n1").idempotency_key
    assert marks["sentinel.dsx.run/reason"].startswith("fatal-gpu-fault: KernelLogXid 79")
    assert len(fleet.writes("change-node")) == 1
    assert store.node_state("n1").state is NodeState.QUARANTINED
    assert observer.latencies == [0.0]


@pytest.mark.parametrize(
    ("event", "disposition"),
    [
        (informational(), "not-fatal"),
        (dataclasses.replace(xid(), quarantine_overrides=BehaviourOverrides(skip=True)), "override-skip"),
    ],
)
def test_events_that_must_not_quarantine_leave_the_node_alone(store, clock, observer, event, disposition) -> None:
    fleet = cluster()
    records = run(store, handler(store, fleet, policy_with(Stage.QUARANTINE), clock, observer), event)
    assert records[1]["disposition"] == disposition
    assert fleet.writes() == []


def test_store_only_events_are_recorded_not_acted_on(store, clock, observer) -> None:
    from dsx.model.health import ProcessingStrategy

    fleet = cluster()
    event = dataclasses.replace(xid(), processing_strategy=ProcessingStrategy.STORE_ONLY)
    records = run(store, handler(store, fleet, policy_with(Stage.QUARANTINE), clock, observer), event)
    assert records[1]["disposition"] == "not-for-remediation"
    assert fleet.writes() == []


def test_all_and_any_conditions_combine_over_event_and_node(store, clock, observer) -> None:
    settings = rules(
        """
        - name: big-nodes-xid79
          match:
            all: ["event.is_fatal", "int(node.status.capacity['nvidia.com/gpu']) >= 8"]
            any: ["'79' in event.error_codes", "'48' in event.error_codes"]
          cordon: false
          taints: [{key: example.com/bad-gpu, effect: NoExecute}]
          labels: {example.com/triage: "yes"}
        """
    )
    chosen = dataclasses.replace(policy_with(Stage.QUARANTINE), quarantine=settings)
    fleet = cluster(["n1", "n2"])
    fleet.add_node(gpu_node("small", gpus=4))
    records = run(
        store,
        handler(store, fleet, chosen, clock, observer),
        xid("n1", "79"),
        xid("n2", "13"),
        xid("small", "79"),
    )
    assert [records[i]["disposition"] for i in (1, 2, 3)] == ["quarantined", "no-rule-matched", "no-rule-matched"]
    node = fleet.get_node("n1")
    assert not nodes.unschedulable(node)  # the rule set taints without cordoning
    assert nodes.taints(node)[0]["effect"] == "NoExecute" and "timeAdded" in nodes.taints(node)[0]
    assert nodes.labels_of(node)["example.com/triage"] == "yes"


def test_an_event_forcing_quarantine_cordons_without_a_rule(store, clock, observer) -> None:
    fleet = cluster()
    forced = dataclasses.replace(informational(), quarantine_overrides=BehaviourOverrides(force=True))
    records = run(store, handler(store, fleet, policy_with(Stage.QUARANTINE), clock, observer), forced)
    assert records[1]["rule_sets"] == [quarantine.FORCED_RULE_SET]
    assert nodes.unschedulable(fleet.get_node("n1"))


def test_the_opt_out_label_is_honoured(store, clock, observer) -> None:
    fleet = cluster(["n1"])
    fleet.add_node(gpu_node("n1", labels={"sentinel.dsx.run/managed": "false"}))
    records = run(store, handler(store, fleet, policy_with(Stage.QUARANTINE), clock, observer), xid("n1"))
    assert records[1]["disposition"] == "opted-out"
    assert fleet.writes() == []


def test_dry_run_touches_nothing_and_says_what_it_would_do(store, clock, observer) -> None:
    fleet = cluster()
    h = handler(store, fleet, policy_with(Stage.QUARANTINE).with_overrides(dry_run=True), clock, observer)
    records = run(store, h, xid("n1"))
    assert records[1]["disposition"] == "planned"
    assert records[1]["would"]["cordon"] is True
    assert fleet.writes() == []
    assert store.node_state("n1").state is NodeState.HEALTHY


def test_a_disabled_stage_does_nothing_not_even_read_the_node(store, clock, observer) -> None:
    fleet = cluster([])  # no nodes at all: a read would fail
    records = run(store, handler(store, fleet, policy_with(), clock, observer), xid("n1"))
    assert records[1]["disposition"] == "stage-disabled"
    assert store.node_state("n1").state is NodeState.HEALTHY


def test_a_node_someone_else_cordoned_is_never_uncordoned_by_us(store, clock, observer) -> None:
    fleet = cluster(["n1"])
    fleet.add_node(gpu_node("n1", unschedulable=True))
    run(store, handler(store, fleet, policy_with(Stage.QUARANTINE), clock, observer), xid("n1"))
    node = fleet.get_node("n1")
    assert nodes.annotations_of(node)["sentinel.dsx.run/precordoned"] == "true"
    assert "sentinel.dsx.run/cordoned" not in nodes.annotations_of(node)
    release = quarantine.release_change(node)
    assert release.unschedulable is None
    after = release.apply_to(node)
    assert nodes.unschedulable(after) and not nodes.taints(after)
    assert not any(k.startswith("sentinel.dsx.run/") for k in nodes.annotations_of(after))


def test_a_manual_uncordon_cancels_the_incident_removes_our_marks_and_is_not_undone(store, clock, observer) -> None:
    fleet = cluster()
    h = handler(store, fleet, policy_with(Stage.QUARANTINE), clock, observer)
    run(store, h, xid("n1"), xid("n1", "48", pci="0000:3c:00.0"))
    store.append([xid("n1", "79", at=timedelta(seconds=1))])  # a repeat, stored before the person acts
    fleet.change_node("n1", quarantine.NodeChange(unschedulable=False))  # a person: kubectl uncordon

    h.reconcile(fleet.get_node("n1"))

    status = store.node_state("n1")
    assert status.state is NodeState.HEALTHY and status.reason.startswith(quarantine.MANUAL_RELEASE)
    node = fleet.get_node("n1")
    assert not nodes.taints(node)
    assert not any(k.startswith("sentinel.dsx.run/") for k in {**nodes.labels_of(node), **nodes.annotations_of(node)})
    # the repeat stored before the uncordon is not acted on; a new fault is
    records = run(store, h)
    assert records[3]["disposition"] == "cancelled-by-manual-uncordon"
    assert not nodes.unschedulable(fleet.get_node("n1"))
    records = run(store, h, xid("n1", "79", at=timedelta(hours=1)))
    assert records[4]["disposition"] == "quarantined"


def test_a_crash_after_the_transition_finishes_the_node_write_once(store, clock, observer) -> None:
    fleet = cluster()
    h = handler(store, fleet, policy_with(Stage.QUARANTINE), clock, observer)
    store.append([xid("n1")])
    # the first owner crashed after begin + transition, before writing the node and acknowledging
    (claimed,) = store.claim("quarantine", "crashed", limit=10, lease_seconds=30)
    decision = quarantine.decide(claimed.event, fleet.get_node("n1"), h.settings)
    store.begin("quarantine", 1, {"node": "n1", "decision": decision.to_dict()})
    store.transition("n1", NodeState.QUARANTINED, reason="x", event_sequence=1, expected=NodeState.HEALTHY)
    clock.advance(31)

    records = run(store, h)

    assert records[1]["disposition"] == "quarantined" and records[1]["resumed"] is True
    assert len(store.node_history("n1")) == 1
    assert nodes.unschedulable(fleet.get_node("n1"))
    assert observer.latencies == []  # a resumed write is not a new fault-to-cordon sample


def test_recovery_of_every_faulty_entity_moves_the_node_to_recertification(store, clock, observer) -> None:
    fleet = cluster()
    h = handler(store, fleet, policy_with(Stage.QUARANTINE), clock, observer)
    records = run(
        store,
        h,
        gpu_check("n1", healthy=False, gpu="0"),
        gpu_check("n1", healthy=False, gpu="1", at=timedelta(seconds=1)),
        gpu_check("n1", healthy=True, gpu="0", at=timedelta(seconds=2)),
    )
    assert records[3]["disposition"] == "faults-still-open"
    records = run(store, h, gpu_check("n1", healthy=True, gpu="1", at=timedelta(seconds=3)))
    assert records[4]["disposition"] == "recovered"
    assert store.node_state("n1").state is NodeState.RECERTIFYING
    assert nodes.unschedulable(fleet.get_node("n1"))  # still out until re-certified


def test_a_bad_rule_is_refused_naming_the_file_and_field() -> None:
    with pytest.raises(BadInputError, match=r"test.yaml.quarantine.ruleSets\[0\].match.all\[0\]: invalid CEL"):
        rules("[{name: x, match: {all: ['event.is_fatal &&']}}]")
    with pytest.raises(BadInputError, match=r"ruleSets\[0\].taints\[0\]: .*effect"):
        rules("[{name: x, match: {all: ['true']}, taints: [{key: k, effect: Sometimes}]}]")
    with pytest.raises(BadInputError, match="give at least one condition"):
        rules("[{name: x, match: {}}]")


def test_stage_switches_default_off_and_enable_turns_them_on() -> None:
    shipped = policy.default()
    assert not shipped.switch(Stage.QUARANTINE).enabled
    assert shipped.switch(Stage.ANALYZER).enabled
    assert shipped.with_overrides(enable=[Stage.QUARANTINE]).switch(Stage.QUARANTINE) == StageSwitch(True, False)
    assert shipped.with_overrides(enable=[Stage.DRAIN], dry_run=True).switch(Stage.DRAIN).acting is False
    with pytest.raises(BadInputError, match="stage: 'drian' is not allowed; allowed values: analyzer, quarantine"):
        policy.parse_stages("quarantine,drian")


def test_routine_traffic_is_decided_without_reading_the_node(store, clock, observer) -> None:
    class CountingReads(type(cluster())):  # type: ignore[misc]
        reads = 0

        def get_node(self, name):
            CountingReads.reads += 1
            return super().get_node(name)

    fleet = CountingReads([gpu_node("n1")])
    h = handler(store, fleet, policy_with(Stage.QUARANTINE), clock, observer)
    records = run(store, h, informational(), gpu_check("n1", healthy=True))
    assert [records[1]["disposition"], records[2]["disposition"]] == ["not-fatal", "no-incident"]
    assert CountingReads.reads == 0
    records = run(store, h, xid())  # a fault still reads the node it cordons
    assert records[3]["disposition"] == "quarantined"
    assert CountingReads.reads == 1


def test_a_fault_is_decided_on_the_watched_node_and_marked_against_the_fresh_one(store, clock, observer) -> None:
    """The node watch's copy saves a read per fault; when it is a moment old (someone cordoned the
    node since), the marks are worked out again from the node as it is, so their cordon is theirs."""
    fleet = cluster()
    stale = fleet.get_node("n1")  # what the watch saw, before a person cordons the node
    fleet.change_node("n1", NodeChange(unschedulable=True))
    reads: list[str] = []
    real_get = fleet.get_node

    def counted(name: str) -> dict:
        reads.append(name)
        return real_get(name)

    fleet.get_node = counted  # type: ignore[method-assign]
    watched = {"n1": stale}
    h = handler(store, fleet, policy_with(Stage.QUARANTINE), clock, observer, node_view=watched.get)
    records = run(store, h, xid("n1"))

    assert records[1]["disposition"] == "quarantined"
    assert reads == []  # decided on the watched copy
    marks = nodes.annotations_of(real_get("n1"))
    assert marks[nodes.PRECORDONED_ANNOTATION] == "true"
    assert nodes.CORDONED_ANNOTATION not in marks  # never uncordoned by us later


def test_a_node_the_watch_has_not_seen_is_read(store, clock, observer) -> None:
    fleet = cluster()
    h = handler(store, fleet, policy_with(Stage.QUARANTINE), clock, observer, node_view=lambda name: None)
    assert run(store, h, xid("n2"))[1]["disposition"] == "quarantined"
    assert nodes.unschedulable(fleet.get_node("n2"))


def test_routine_traffic_settled_in_bulk_is_recorded_as_event_by_event(store, clock, observer) -> None:
    """The bulk path (`settle`) and the per-event path (`handle`) give the same record to every
    routine event: healthy checks on healthy and on quarantined nodes, warnings, store-only."""
    from dsx.testing.inmemory import InMemoryEventStore

    def events() -> list:
        return [
            xid("n1"),  # quarantines n1
            gpu_check("n2", healthy=True),  # healthy node: no incident
            informational("n3"),  # not fatal
            dataclasses.replace(xid("n4"), quarantine_overrides=BehaviourOverrides(skip=True)),
            gpu_check("n1", healthy=False, gpu="1", at=timedelta(seconds=1)),  # a fault still open on n1
            gpu_check("n1", healthy=True, gpu="1", at=timedelta(seconds=2)),  # GPU 1 healed, n1 not yet
        ]

    def records(bulk: bool) -> dict:
        own = InMemoryEventStore(clock=clock)
        h = handler(own, cluster(), policy_with(Stage.QUARANTINE), clock, observer)
        if not bulk:
            h.settle = None  # type: ignore[assignment, method-assign]
        return {s: d.get("disposition") for s, d in run(own, h, *events()).items()}

    assert records(bulk=True) == records(bulk=False)
    assert set(records(bulk=True).values()) >= {"quarantined", "no-incident", "not-fatal", "override-skip"}
