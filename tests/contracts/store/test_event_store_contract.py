"""Area of concern: every EventStore (in-memory fake, SQLite, PostgreSQL) keeps the same contract —
idempotent append with gap-free sequences, consumer cursors with claim/lease/ack, stage records
that make replays safe, the node state projection, remediation counts, validation requests,
breaker documents, and wake-ups. Restart tests reopen the durable stores from disk/server."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import pytest

from dsx.errors import BadInputError, ConflictError, NotFoundError
from dsx.health.decisions.eventstore import EventStore, StageOutcome, StageStatus, ValidationStatus
from dsx.model.health import HealthEvent, NodeState
from dsx.store import open_store

from .conftest import T0, Backend, FakeClock

MakeEvent = Callable[..., HealthEvent]


# events -------------------------------------------------------------------------------------


def test_append_assigns_gap_free_sequences_in_order(store: EventStore, make_event: MakeEvent) -> None:
    batch = [make_event(i) for i in range(5)]
    appended = store.append(batch)
    assert [a.sequence for a in appended] == [1, 2, 3, 4, 5]
    assert all(a.created for a in appended)
    assert [a.idempotency_key for a in appended] == [e.idempotency_key for e in batch]
    assert [s.event for s in store.events()] == batch
    assert store.last_sequence() == 5
    assert store.append([make_event(5)])[0].sequence == 6


def test_append_is_idempotent_by_key(store: EventStore, make_event: MakeEvent) -> None:
    first = store.append([make_event(0), make_event(1)])
    again = store.append([make_event(1), make_event(2), make_event(2), make_event(0)])
    assert [(a.sequence, a.created) for a in again] == [(2, False), (3, True), (3, False), (1, False)]
    assert again[3].idempotency_key == first[0].idempotency_key
    assert store.last_sequence() == 3
    assert [s.sequence for s in store.events()] == [1, 2, 3]
    assert store.append([]) == []


def test_get_and_find_return_the_stored_event(store: EventStore, make_event: MakeEvent) -> None:
    event = make_event(7)
    (appended,) = store.append([event])
    by_sequence = store.get(appended.sequence)
    by_key = store.find(event.idempotency_key)
    assert by_sequence is not None and by_key is not None
    assert by_sequence == by_key
    assert by_sequence.event == event
    assert by_sequence.event.idempotency_key == event.idempotency_key
    assert by_sequence.stored_at == T0
    assert store.get(2) is None
    assert store.find("sha256:nothing") is None


def test_events_filter_by_node_time_and_position(store: EventStore, make_event: MakeEvent) -> None:
    store.append([make_event(i, node=f"n{i % 2}", minutes=i) for i in range(10)])
    assert [s.sequence for s in store.events(node_name="n1")] == [2, 4, 6, 8, 10]
    assert [s.sequence for s in store.events(since=T0 + timedelta(minutes=7))] == [8, 9, 10]
    assert [s.sequence for s in store.events(after_sequence=3, limit=4)] == [4, 5, 6, 7]
    assert [s.sequence for s in store.events(after_sequence=2, node_name="n0", limit=2)] == [3, 5]
    assert store.events(after_sequence=10) == []


# consumers ----------------------------------------------------------------------------------


def test_claim_hands_out_events_in_order_up_to_the_limit(store: EventStore, make_event: MakeEvent) -> None:
    store.append([make_event(i) for i in range(5)])
    assert [s.sequence for s in store.claim("quarantine", "w1", limit=3)] == [1, 2, 3]
    assert [s.sequence for s in store.claim("quarantine", "w2", limit=3)] == [4, 5]
    assert store.claim("quarantine", "w3") == []


def test_claim_these_leases_the_named_events_ahead_of_the_ones_before_them(
    store: EventStore, make_event: MakeEvent, clock: FakeClock
) -> None:
    store.append([make_event(i) for i in range(6)])
    assert [s.sequence for s in store.claim_these("quarantine", "w1", [5, 2, 5, 99])] == [2, 5]
    assert store.claim_these("quarantine", "w2", [2, 5]) == []  # leased to w1
    assert [s.sequence for s in store.claim("quarantine", "w1", limit=10)] == [1, 2, 3, 4, 5, 6]
    assert [s.sequence for s in store.claim("quarantine", "w2", limit=10)] == []
    assert store.ack("quarantine", "w1", [StageOutcome(5)]) == 1
    assert store.claim_these("quarantine", "w1", [5]) == []  # acknowledged: not handed out again
    assert store.ack("quarantine", "w1", [StageOutcome(s) for s in (1, 2, 3, 4)]) == 4
    assert store.cursor("quarantine") == 5
    assert store.claim_these("quarantine", "w1", [1, 4]) == []  # behind the cursor
    assert store.claim_these("quarantine", "w1", []) == []
    clock.advance(31)
    assert [s.sequence for s in store.claim_these("quarantine", "w2", [6])] == [6]  # w1's lease ran out


def test_unacked_claims_return_to_the_same_owner_at_once(store: EventStore, make_event: MakeEvent) -> None:
    store.append([make_event(i) for i in range(3)])
    assert [s.sequence for s in store.claim("drain", "w1")] == [1, 2, 3]
    assert [s.sequence for s in store.claim("drain", "w1")] == [1, 2, 3]


def test_a_lease_expires_for_other_owners(store: EventStore, make_event: MakeEvent, clock: FakeClock) -> None:
    store.append([make_event(i) for i in range(2)])
    store.claim("drain", "w1", lease_seconds=30)
    clock.advance(29)
    assert store.claim("drain", "w2", lease_seconds=30) == []
    clock.advance(2)
    assert [s.sequence for s in store.claim("drain", "w2", lease_seconds=30)] == [1, 2]
    assert store.claim("drain", "w1") == []


def test_ack_moves_the_cursor_over_the_acknowledged_prefix_only(store: EventStore, make_event: MakeEvent) -> None:
    store.append([make_event(i) for i in range(5)])
    store.claim("remediation", "w1")
    assert store.ack("remediation", "w1", [StageOutcome(2), StageOutcome(3)]) == 2
    assert store.cursor("remediation") == 0
    assert [s.sequence for s in store.claim("remediation", "w1")] == [1, 4, 5]
    assert store.ack("remediation", "w1", [StageOutcome(1)]) == 1
    assert store.cursor("remediation") == 3
    assert store.ack("remediation", "w1", [StageOutcome(5), StageOutcome(4)]) == 2
    assert store.cursor("remediation") == 5
    assert store.claim("remediation", "w1") == []


def test_an_ack_counts_once_and_keeps_the_first_outcome(store: EventStore, make_event: MakeEvent) -> None:
    store.append([make_event(0), make_event(1)])
    assert store.ack("quarantine", "w1", [StageOutcome(2, StageStatus.SKIPPED, {"why": "healthy"})]) == 1
    assert store.ack("quarantine", "w2", [StageOutcome(2, StageStatus.DONE, {"cordoned": True})]) == 0
    record = store.stage_record("quarantine", 2)
    assert record is not None
    assert (record.status, dict(record.detail)) == (StageStatus.SKIPPED, {"why": "healthy"})
    store.ack("quarantine", "w1", [StageOutcome(1)])
    assert store.ack("quarantine", "w1", [StageOutcome(1), StageOutcome(2)]) == 0
    assert store.cursor("quarantine") == 2


def test_ack_of_an_unknown_event_is_not_found(store: EventStore, make_event: MakeEvent) -> None:
    store.append([make_event(0)])
    with pytest.raises(NotFoundError, match="event 9"):
        store.ack("quarantine", "w1", [StageOutcome(9)])
    with pytest.raises(NotFoundError, match="event 9"):
        store.begin("quarantine", 9, {})
    assert store.cursor("quarantine") == 0


def test_begin_records_intent_and_ack_completes_it(store: EventStore, make_event: MakeEvent) -> None:
    store.append([make_event(0)])
    (claimed,) = store.claim("quarantine", "w1")
    assert store.begin("quarantine", claimed.sequence, {"plan": "cordon n1"}) is None
    intent = store.stage_record("quarantine", 1)
    assert intent is not None and intent.status is StageStatus.IN_PROGRESS
    assert dict(intent.detail) == {"plan": "cordon n1"}
    previous = store.begin("quarantine", 1, {"plan": "cordon n1", "attempt": 2})
    assert previous == intent
    store.ack("quarantine", "w1", [StageOutcome(1, StageStatus.DONE, {"cordoned": ["n1"]})])
    store.ack("drain", "w1", [StageOutcome(1, StageStatus.FAILED, {"error": "PDB"})])
    records = store.stage_records(1)
    assert [(r.stage, r.status, dict(r.detail)) for r in records] == [
        ("drain", StageStatus.FAILED, {"error": "PDB"}),
        ("quarantine", StageStatus.DONE, {"cordoned": ["n1"]}),
    ]
    assert store.stage_record("analyzer", 1) is None


def test_an_ack_of_the_run_after_the_cursor_also_covers_later_acknowledged_events(
    store: EventStore, make_event: MakeEvent
) -> None:
    store.append([make_event(i) for i in range(6)])
    assert len(store.claim("drain", "w1")) == 6
    assert store.ack("drain", "w1", [StageOutcome(5)]) == 1  # out of order: waits for 1..4
    assert store.ack("drain", "w1", [StageOutcome(s) for s in (1, 2, 3)]) == 3
    assert store.cursor("drain") == 3
    assert [s.sequence for s in store.claim("drain", "w1")] == [4, 6]
    assert store.ack("drain", "w1", [StageOutcome(4)]) == 1
    assert store.cursor("drain") == 5  # 4 closed the gap before the earlier 5
    assert store.ack("drain", "w1", [StageOutcome(3), StageOutcome(6)]) == 1  # 3 was acknowledged already
    assert store.cursor("drain") == 6
    assert store.claim("drain", "w1") == []


def test_follow_moves_a_cursor_to_its_upstream_without_records(store: EventStore, make_event: MakeEvent) -> None:
    store.append([make_event(i) for i in range(5)])
    assert len(store.claim("drain", "old-owner")) == 5  # open leases of when the stage was on
    store.ack("quarantine", "w", [StageOutcome(s, StageStatus.SKIPPED, {"why": "healthy"}) for s in (1, 2, 3)])
    assert store.follow("drain", "quarantine") == 3
    assert store.cursor("drain") == 3
    assert store.follow("drain", "quarantine") == 0  # already there
    assert all(r.stage != "drain" for s in range(1, 6) for r in store.stage_records(s))
    assert [s.sequence for s in store.claim("drain", "new-owner", lease_seconds=30)] == []  # 4, 5 still leased
    assert store.follow("remediation", None) == 5  # the first stage follows the newest event
    assert store.follow("recertify", "never-seen") == 0
    assert store.cursors() == {"drain": 3, "quarantine": 3, "remediation": 5}


def test_consumers_have_independent_cursors(store: EventStore, make_event: MakeEvent) -> None:
    store.append([make_event(i) for i in range(4)])
    for consumer in ("analyzer", "quarantine"):
        assert [s.sequence for s in store.claim(consumer, "w")] == [1, 2, 3, 4]
    store.ack("analyzer", "w", [StageOutcome(s) for s in (1, 2, 3, 4)])
    store.ack("quarantine", "w", [StageOutcome(1)])
    assert store.cursors() == {"analyzer": 4, "quarantine": 1}
    assert store.cursor("never-seen") == 0


def test_two_owners_of_one_consumer_split_the_work(backend: Backend, make_event: MakeEvent) -> None:
    writer = backend.open()
    total = 300
    writer.append([make_event(i) for i in range(total)])
    seen: dict[str, list[int]] = {"w1": [], "w2": []}
    errors: list[BaseException] = []

    def work(owner: str) -> None:
        try:
            store = backend.open()
            while batch := store.claim("quarantine", owner, limit=7):
                seen[owner].extend(s.sequence for s in batch)
                store.ack("quarantine", owner, [StageOutcome(s.sequence, detail={"by": owner}) for s in batch])
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(owner,)) for owner in seen]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors
    assert sorted(seen["w1"] + seen["w2"]) == list(range(1, total + 1))
    assert writer.cursor("quarantine") == total
    owners = {r.detail["by"] for s in (1, total) for r in writer.stage_records(s)}
    assert owners <= {"w1", "w2"}


def test_threads_sharing_one_handle_append_claim_and_move_nodes_safely(backend: Backend, make_event: MakeEvent) -> None:
    """A sentinel's threads (ingestion, stages, workers) share one handle; on PostgreSQL they run on
    several pooled connections at once, so they must meet the same guards two replicas meet."""
    store = backend.open()
    owners = [f"t{i}" for i in range(6)]
    per_thread = 40
    seen: dict[str, list[int]] = {owner: [] for owner in owners}
    moved: list[str] = []
    errors: list[BaseException] = []
    start = threading.Barrier(len(owners))

    def work(index: int, owner: str) -> None:
        try:
            start.wait(30)
            store.append([make_event(index * per_thread + i, node=f"n{index}") for i in range(per_thread)])
            try:
                store.transition(
                    "shared", NodeState.QUARANTINED, reason=owner, event_sequence=1, expected=NodeState.HEALTHY
                )
                moved.append(owner)
            except ConflictError:
                pass
            while batch := store.claim("quarantine", owner, limit=5):
                seen[owner].extend(s.sequence for s in batch)
                store.ack("quarantine", owner, [StageOutcome(s.sequence) for s in batch])
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i, owner)) for i, owner in enumerate(owners)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors
    total = len(owners) * per_thread
    assert store.last_sequence() == total
    assert [s.sequence for s in store.events(after_sequence=0, limit=total + 1)] == list(range(1, total + 1))
    assert sorted(s for got in seen.values() for s in got) == list(range(1, total + 1))
    assert store.cursor("quarantine") == total
    assert len(moved) == 1  # exactly one thread won the transition
    assert store.node_state("shared").reason == moved[0]


# restart ------------------------------------------------------------------------------------


def test_everything_survives_a_reopen(durable_backend: Backend, make_event: MakeEvent) -> None:
    before = durable_backend.open()
    events = [make_event(i) for i in range(4)]
    before.append(events)
    before.claim("quarantine", "w1")
    before.begin("quarantine", 3, {"plan": "cordon"})
    before.ack("quarantine", "w1", [StageOutcome(1), StageOutcome(2, StageStatus.SKIPPED)])
    before.transition("n1", NodeState.QUARANTINED, reason="xid 79", event_sequence=1)
    before.record_remediation("n1", "RESTART_BM", 1)
    before.request_validation("n1", "remediated")
    before.save_breaker("quarantine", {"state": "TRIPPED", "cordons": [1.0, 2.0]})
    before.close()

    after = durable_backend.open()
    assert [s.event for s in after.events()] == events
    assert after.append([events[0]])[0].created is False
    assert after.cursor("quarantine") == 2
    assert [s.sequence for s in after.claim("quarantine", "w1")] == [3, 4]
    record = after.stage_record("quarantine", 3)
    assert record is not None and record.status is StageStatus.IN_PROGRESS
    assert after.node_state("n1").state is NodeState.QUARANTINED
    assert after.count_remediations("n1", T0) == 1
    assert [r.node_name for r in after.validation_requests(ValidationStatus.PENDING)] == ["n1"]
    assert after.load_breaker("quarantine") == {"state": "TRIPPED", "cordons": [1.0, 2.0]}
    assert after.append([make_event(99)])[0].sequence == 5


def test_a_crashed_owner_leaves_work_for_the_next(durable_backend: Backend, make_event: MakeEvent) -> None:
    first = durable_backend.open()
    first.append([make_event(i) for i in range(3)])
    first.claim("drain", "worker-a")
    first.ack("drain", "worker-a", [StageOutcome(1)])
    first.close()  # the process dies holding 2 and 3
    second = durable_backend.open()
    assert [s.sequence for s in second.claim("drain", "worker-a")] == [2, 3]


def test_a_second_handle_sees_appends_of_the_first(durable_backend: Backend, make_event: MakeEvent) -> None:
    one, two = durable_backend.open(), durable_backend.open()
    one.append([make_event(0)])
    assert two.last_sequence() == 1
    assert two.append([make_event(0), make_event(1)])[1].sequence == 2
    assert one.last_sequence() == 2


# node state ---------------------------------------------------------------------------------


def test_unknown_nodes_are_healthy(store: EventStore) -> None:
    status = store.node_state("n9")
    assert (status.state, status.reason, status.event_sequence) == (NodeState.HEALTHY, "", None)
    assert store.node_states() == []


def test_node_states_of_answers_every_named_node_in_one_read(store: EventStore) -> None:
    store.transition("n2", NodeState.QUARANTINED, reason="xid 79", event_sequence=7)
    names = [f"n{i}" for i in range(1200)]  # more than one IN list
    states = store.node_states_of(names)
    assert list(states) == names
    assert states["n2"] == store.node_state("n2")
    assert states["n2"].state is NodeState.QUARANTINED and states["n2"].event_sequence == 7
    assert all(states[n].state is NodeState.HEALTHY and states[n].event_sequence is None for n in names if n != "n2")
    assert store.node_states_of([]) == {}


def test_transitions_follow_the_table_and_are_recorded(store: EventStore, clock: FakeClock) -> None:
    path = [NodeState.QUARANTINED, NodeState.DRAINING, NodeState.DRAINED, NodeState.REMEDIATING]
    for minute, state in enumerate(path):
        clock.advance(60)
        status = store.transition("n3", state, reason=f"step {minute}", event_sequence=minute + 1)
        assert status.state is state
    assert store.node_state("n3").since == T0 + timedelta(minutes=4)
    assert store.node_state("n3").reason == "step 3"
    with pytest.raises(ConflictError, match="cannot move from remediating to healthy"):
        store.transition("n3", NodeState.HEALTHY, reason="skip recert")
    with pytest.raises(ConflictError, match="expected state drained, found remediating"):
        store.transition("n3", NodeState.RECERTIFYING, reason="x", expected=NodeState.DRAINED)
    same = store.transition("n3", NodeState.REMEDIATING, reason="replayed")
    assert same.reason == "step 3"
    store.transition("n3", NodeState.RECERTIFYING, reason="rebooted", expected=NodeState.REMEDIATING)
    history = store.node_history("n3")
    assert [(h.from_state, h.to_state) for h in history] == [
        (NodeState.HEALTHY, NodeState.QUARANTINED),
        (NodeState.QUARANTINED, NodeState.DRAINING),
        (NodeState.DRAINING, NodeState.DRAINED),
        (NodeState.DRAINED, NodeState.REMEDIATING),
        (NodeState.REMEDIATING, NodeState.RECERTIFYING),
    ]
    assert [h.event_sequence for h in history] == [1, 2, 3, 4, None]
    assert history[0].at == T0 + timedelta(minutes=1)
    store.transition("n1", NodeState.QUARANTINED, reason="x")
    assert [s.node_name for s in store.node_states()] == ["n1", "n3"]
    assert store.node_history("n2") == []


def test_a_move_with_an_intent_records_both_in_one_step_and_a_refused_move_neither(
    store: EventStore, make_event: MakeEvent
) -> None:
    store.append([make_event(i) for i in range(2)])
    status = store.transition(
        "n1", NodeState.QUARANTINED, reason="xid 79", event_sequence=1, intent=("quarantine", {"node": "n1"})
    )
    assert status.state is NodeState.QUARANTINED
    record = store.stage_record("quarantine", 1)
    assert record is not None and (record.status, record.detail) == (StageStatus.IN_PROGRESS, {"node": "n1"})
    with pytest.raises(ConflictError):  # n1 is not healthy any more: no move, so no intent either
        store.transition(
            "n1", NodeState.QUARANTINED, reason="again", event_sequence=2, expected=NodeState.HEALTHY,
            intent=("quarantine", {"node": "n1"}),
        )  # fmt: skip
    assert store.stage_record("quarantine", 2) is None
    with pytest.raises(NotFoundError):  # an intent for an event the store does not hold moves nothing
        store.transition("n2", NodeState.QUARANTINED, reason="x", event_sequence=99, intent=("quarantine", {}))
    assert store.node_state("n2").state is NodeState.HEALTHY
    assert store.node_history("n2") == []


# remediations, validation requests, breakers -------------------------------------------------


def test_remediations_are_counted_once_per_event(store: EventStore, clock: FakeClock) -> None:
    assert store.record_remediation("n1", "RESTART_BM", 1) is True
    assert store.record_remediation("n1", "RESTART_BM", 1) is False
    clock.advance(3600)
    assert store.record_remediation("n1", "COMPONENT_RESET", 1) is True
    assert store.record_remediation("n2", "RESTART_BM", 2) is True
    assert store.count_remediations("n1", T0) == 2
    assert store.count_remediations("n1", T0 + timedelta(minutes=1)) == 1
    assert store.count_remediations("n3", T0) == 0


def test_validation_requests_open_once_per_node_and_start_at_most_m(store: EventStore, clock: FakeClock) -> None:
    first = store.request_validation("n1", "joined")
    assert store.request_validation("n1", "driver changed") == first
    for node in ("n2", "n3", "n4"):
        clock.advance(1)
        store.request_validation(node, "joined")
    started = store.start_validations(2)
    assert [(r.node_name, r.status) for r in started] == [
        ("n1", ValidationStatus.RUNNING),
        ("n2", ValidationStatus.RUNNING),
    ]
    assert store.start_validations(2) == []
    clock.advance(5)
    passed = store.finish_validation(started[0].request_id, passed=True, detail="nccl-loopback ok")
    assert (passed.status, passed.detail, passed.updated_at) == (
        ValidationStatus.PASSED,
        "nccl-loopback ok",
        T0 + timedelta(seconds=8),
    )
    assert [r.node_name for r in store.start_validations(2)] == ["n3"]
    with pytest.raises(ConflictError, match="is passed, only a running request can finish"):
        store.finish_validation(started[0].request_id, passed=False, detail="again")
    with pytest.raises(NotFoundError, match="validation request 99"):
        store.finish_validation(99, passed=True, detail="")
    again = store.request_validation("n1", "remediated")
    assert again.request_id != first.request_id
    assert [r.node_name for r in store.validation_requests(ValidationStatus.PENDING)] == ["n4", "n1"]
    assert len(store.validation_requests()) == 5


def test_breaker_documents_round_trip(store: EventStore) -> None:
    assert store.load_breaker("quarantine") is None
    store.save_breaker("quarantine", {"state": "CLOSED", "window": []})
    store.save_breaker("quarantine", {"state": "TRIPPED", "window": [1.5], "reason": "20% of GPU nodes"})
    assert store.load_breaker("quarantine") == {"state": "TRIPPED", "window": [1.5], "reason": "20% of GPU nodes"}
    assert store.load_breaker("other") is None


def test_update_breaker_reads_decides_and_writes_in_one_step(store: EventStore) -> None:
    seen: list[object] = []

    def first(document: dict[str, object] | None) -> tuple[dict[str, object], str]:
        seen.append(document)
        return {"state": "closed", "window": [{"node": "n1", "at": 1.0}]}, "recorded"

    assert store.update_breaker("quarantine", first) == "recorded"
    assert store.update_breaker("quarantine", lambda document: (None, document)) == {
        "state": "closed",
        "window": [{"node": "n1", "at": 1.0}],
    }
    assert seen == [None]
    assert store.load_breaker("quarantine") == {"state": "closed", "window": [{"node": "n1", "at": 1.0}]}


def test_a_failing_breaker_decision_writes_nothing(store: EventStore) -> None:
    store.save_breaker("quarantine", {"state": "closed", "window": []})

    def broken(document: dict[str, object] | None) -> tuple[dict[str, object], None]:
        raise ValueError("decision failed")

    with pytest.raises(ValueError, match="decision failed"):
        store.update_breaker("quarantine", broken)
    assert store.load_breaker("quarantine") == {"state": "closed", "window": []}


# wake-ups -----------------------------------------------------------------------------------


def test_wait_returns_at_once_when_newer_events_exist(store: EventStore, make_event: MakeEvent) -> None:
    store.append([make_event(0)])
    assert store.wait_for_events(0, timeout_seconds=30) is True
    assert store.wait_for_events(1, timeout_seconds=0.05) is False


def test_an_append_from_another_handle_wakes_a_waiter(backend: Backend, make_event: MakeEvent) -> None:
    waiter, writer = backend.open(), backend.open()
    waiter.wait_for_events(0, timeout_seconds=0.01)  # a PostgreSQL waiter starts listening here
    woke: list[bool] = []
    thread = threading.Thread(target=lambda: woke.append(waiter.wait_for_events(0, timeout_seconds=60)))
    thread.start()
    writer.append([make_event(0)])
    thread.join(90)
    assert woke == [True]


# opening ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://x", "unknown scheme; allowed: sqlite:///PATH, postgresql://..., memory:"),
        ("sqlite:///", "no database file after sqlite:///"),
        ("sqlite:////nonexistent-dir/x.db", "directory /nonexistent-dir does not exist"),
    ],
)
def test_bad_store_urls_are_bad_input(url: str, message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        open_store(url)


# dead letters --------------------------------------------------------------------------------


def test_dead_letters_are_listed_and_a_reopened_event_is_offered_and_acknowledged_again(
    store: EventStore, make_event: MakeEvent
) -> None:
    store.append([make_event(i) for i in range(4)])
    store.claim("drain", "a")
    parked = {"node": "n1", "attempts": 5, "error": "ValueError: x"}
    store.ack(
        "drain",
        "a",
        [
            StageOutcome(1, StageStatus.DONE),
            StageOutcome(2, StageStatus.DEAD_LETTER, parked),
            StageOutcome(3, StageStatus.DONE),
        ],
    )
    store.ack("quarantine", "a", [StageOutcome(2, StageStatus.DEAD_LETTER, parked)])
    assert [(r.stage, r.sequence, r.detail["attempts"]) for r in store.dead_letters()] == [
        ("drain", 2, 5),
        ("quarantine", 2, 5),
    ]
    assert store.cursor("drain") == 3

    store.reopen("drain", 2)  # behind the cursor
    assert store.stage_record("drain", 2) is None
    assert [(r.stage, r.sequence) for r in store.dead_letters()] == [("quarantine", 2)]
    assert [s.sequence for s in store.claim("drain", "a")] == [2, 4]  # re-opened first, then new
    assert store.claim("drain", "c") == []  # leased to a
    assert store.ack("drain", "a", [StageOutcome(2, StageStatus.DONE, {"again": True})]) == 1
    record = store.stage_record("drain", 2)
    assert record is not None and record.status is StageStatus.DONE and record.detail == {"again": True}
    assert store.cursor("drain") == 3
    assert [s.sequence for s in store.claim("drain", "a")] == [4]  # not offered a third time
    assert store.ack("drain", "a", [StageOutcome(2, StageStatus.FAILED)]) == 0  # first outcome kept

    store.reopen("quarantine", 2)  # past the cursor (1 was never acknowledged)
    assert [s.sequence for s in store.claim("quarantine", "a")] == [1, 2, 3, 4]
    assert store.ack("quarantine", "a", [StageOutcome(s) for s in (1, 2)]) == 2
    assert store.cursor("quarantine") == 2 and store.dead_letters() == []
    with pytest.raises(NotFoundError):
        store.reopen("drain", 99)
