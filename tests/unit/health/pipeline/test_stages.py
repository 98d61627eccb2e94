"""Area of concern: the stage runner — a stage sees an event only after the stage before it is done
with that event, a node's events are handled in order and one batch at a time, different nodes
are handled in parallel, unfinished events come back later, a failing node does not stop the
others, and a crashed owner's events are handed to the next owner without being acknowledged twice."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from datetime import timedelta

from dsx.health.decisions.eventstore import StageOutcome, StageStatus, StoredEvent
from dsx.pipeline import stages

from .builders import xid


class Recorder:
    """A stage handler that records what it saw; optionally slow, failing or unfinished per node."""

    def __init__(self, name: str, upstream: str | None = None, *, finish_after: int = 0, fail: str = "") -> None:
        self.name, self.upstream = name, upstream
        self.retry_seconds = 0.01
        self.calls: list[tuple[str, list[int]]] = []
        self.finish_after = finish_after
        self.fail = fail
        self.lock = threading.Lock()
        self.active = 0
        self.peak = 0
        self.delay = 0.0

    def handle(self, node_name: str, events: Sequence[StoredEvent]) -> list[StageOutcome]:
        with self.lock:
            self.calls.append((node_name, [e.sequence for e in events]))
            self.active += 1
            self.peak = max(self.peak, self.active)
            attempts = sum(1 for n, _ in self.calls if n == node_name)
        try:
            time.sleep(self.delay)
            if node_name == self.fail:
                raise RuntimeError("apiserver unreachable")
            if attempts <= self.finish_after:
                return []
            return [StageOutcome(e.sequence, StageStatus.DONE, {"node": node_name}) for e in events]
        finally:
            with self.lock:
                self.active -= 1


def drive(store, *runners, rounds: int = 200) -> None:
    """Step until nothing is running, due or done — or `rounds` run out."""
    for _ in range(rounds):
        progressed = sum(r.step() for r in runners)
        if not progressed and not any(r.busy_nodes or r.idle_seconds(1.0) < 1.0 for r in runners):
            return
        time.sleep(0.005)


def test_a_stage_waits_for_its_upstream_per_event(store) -> None:
    first, second = Recorder("first"), Recorder("second", upstream="first")
    store.append([xid("a"), xid("b", "48")])
    downstream = stages.StageRunner(store, second, owner="t", workers=0)
    assert downstream.step() == 0  # nothing is done upstream yet
    upstream = stages.StageRunner(store, first, owner="t", workers=0)
    upstream.step()
    downstream.step()
    assert sorted(second.calls) == [("a", [1]), ("b", [2])]
    assert store.cursor("second") == 2


def test_a_stage_that_is_off_never_runs_its_handler_and_follows_its_upstream(store) -> None:
    first, off, third = Recorder("first"), Recorder("off", upstream="first"), Recorder("third", upstream="off")
    store.append([xid("a"), xid("b", "48"), xid("c")])
    runners = [
        stages.StageRunner(store, first, owner="t", workers=0),
        stages.StageRunner(store, off, owner="t", workers=0, enabled=False),
        stages.StageRunner(store, third, owner="t", workers=0),
    ]
    drive(store, *runners)
    assert off.calls == []
    assert store.cursors() == {"first": 3, "off": 3, "third": 3}
    assert sorted(third.calls) == [("a", [1]), ("b", [2]), ("c", [3])]  # behind the stage that is off
    assert all(r.stage != "off" for s in (1, 2, 3) for r in store.stage_records(s))


def test_upstream_records_past_a_blocked_event_let_other_nodes_through(store) -> None:
    """One node stuck in the upstream stage must not hold back every other node downstream."""
    store.append([xid("slow"), xid("fast", "48")])
    store.ack("first", "t", [StageOutcome(2, StageStatus.DONE, {})])  # 1 is still in flight upstream
    second = Recorder("second", upstream="first")
    stages.StageRunner(store, second, owner="t", workers=0).step()
    assert second.calls == [("fast", [2])]


def test_a_nodes_events_go_together_in_order_and_nodes_run_in_parallel(store) -> None:
    handler = Recorder("stage")
    handler.delay = 0.05
    store.append([xid(f"n{i % 8}", str(40 + i)) for i in range(32)])
    runner = stages.StageRunner(store, handler, owner="t", workers=8)
    try:
        drive(store, runner)
    finally:
        runner.close()
    by_node = {node: seqs for node, seqs in handler.calls}
    assert len(handler.calls) == 8
    assert by_node["n0"] == [1, 9, 17, 25]
    assert handler.peak > 1
    assert store.cursor("stage") == 32


def test_unfinished_events_come_back_and_a_failing_node_does_not_stop_the_rest(store) -> None:
    handler = Recorder("stage", finish_after=2, fail="broken")
    store.append([xid("slow"), xid("broken", "48"), xid("ok", "13")])
    runner = stages.StageRunner(store, handler, owner="t", workers=2)
    try:
        drive(store, runner, rounds=100)
    finally:
        runner.close()
    assert [n for n, _ in handler.calls].count("slow") == 3
    assert store.stage_record("stage", 1) is not None and store.stage_record("stage", 3) is not None
    parked = store.stage_record("stage", 2)  # failed max_attempts times: a dead letter, the rest goes on
    assert parked is not None and parked.status is StageStatus.DEAD_LETTER
    assert parked.detail["attempts"] == runner.errors == runner.max_attempts == 5
    assert store.cursor("stage") == 3


def test_a_crashed_owners_events_go_to_the_next_owner_once(store, clock) -> None:
    store.append([xid("a"), xid("b", "48")])
    assert len(store.claim("stage", "dead", lease_seconds=30)) == 2  # claimed, never acknowledged
    handler = Recorder("stage")
    successor = stages.StageRunner(store, handler, owner="next", workers=0)
    assert successor.step() == 0  # the lease still holds
    clock.advance(31)
    successor.step()
    assert sorted(handler.calls) == [("a", [1]), ("b", [2])]
    assert successor.step() == 0
    assert len(handler.calls) == 2


def test_the_waker_wakes_a_waiting_loop_when_poked() -> None:
    waker = stages.Waker()
    seen = waker.generation
    assert waker.wait(seen, 0.01) is False  # nothing happened: the wait runs out
    threading.Timer(0.05, waker.poke).start()
    assert waker.wait(seen, 60.0) is True  # woken by the poke, not by the timeout
    assert waker.generation == seen + 1


def test_an_outage_is_retried_for_as_long_as_it_lasts_never_dead_lettered(store) -> None:
    from dsx.errors import UnavailableError
    from dsx.health.decisions.policy import DeadLetterSettings

    class Outage(Recorder):
        def handle(self, node_name: str, events: Sequence[StoredEvent]) -> list[StageOutcome]:
            self.calls.append((node_name, [e.sequence for e in events]))
            if len(self.calls) <= 10:
                raise UnavailableError("apiserver: connection refused")
            return [StageOutcome(e.sequence, StageStatus.DONE) for e in events]

    handler = Outage("stage")
    store.append([xid("a")])
    runner = stages.StageRunner(store, handler, owner="t", workers=0, dead_letter=DeadLetterSettings(max_attempts=2))
    for _ in range(12):
        runner.step()
    record = store.stage_record("stage", 1)
    assert record is not None and record.status is StageStatus.DONE
    assert len(handler.calls) == 11 and runner.errors == 10 and runner.dead_letters == 0


def test_dispatches_finished_together_are_acknowledged_in_one_write(store) -> None:
    handler = Recorder("stage")
    handler.delay = 0.05
    store.append([xid(f"n{i}", "79") for i in range(16)])
    acks: list[int] = []
    real_ack = store.ack

    def counting_ack(consumer, owner, outcomes):  # type: ignore[no-untyped-def]
        acks.append(len(outcomes))
        return real_ack(consumer, owner, outcomes)

    store.ack = counting_ack  # type: ignore[method-assign]
    runner = stages.StageRunner(store, handler, owner="t", workers=16)
    try:
        runner.step()  # all sixteen nodes dispatched at once
        deadline = time.monotonic() + 10
        while runner.busy_nodes and time.monotonic() < deadline:
            time.sleep(0.01)
            if all(d.future is not None and d.future.done() for d in runner._running.values()):
                break
        drive(store, runner)
    finally:
        runner.close()
    assert store.cursor("stage") == 16
    assert sum(acks) == 16
    assert len(acks) < 16  # not one write per node


class Settler(Recorder):
    """A handler that settles some nodes in bulk (the rest go to `handle`)."""

    def __init__(self, name: str, settles: set[str], *, broken: bool = False) -> None:
        super().__init__(name)
        self.settles = settles
        self.broken = broken
        self.bulk: list[list[str]] = []

    def settle(self, ready) -> dict[str, list[StageOutcome]]:
        self.bulk.append(sorted(ready))
        if self.broken:
            raise RuntimeError("store unavailable")
        return {
            n: [StageOutcome(e.sequence, StageStatus.SKIPPED, {"node": n, "bulk": True}) for e in events]
            for n, events in ready.items()
            if n in self.settles
        }


def test_nodes_settled_in_bulk_never_reach_the_handler_and_the_rest_do(store) -> None:
    store.append([xid(n, at=timedelta(seconds=i)) for i in range(3) for n in ("n1", "n2", "n3")])
    handler = Settler("quarantine", {"n1", "n3"})
    runner = stages.StageRunner(store, handler, owner="t", workers=2)
    drive(store, runner)
    runner.close()

    assert {n for n, _ in handler.calls} == {"n2"}
    assert handler.bulk and handler.bulk[0] == ["n1", "n2", "n3"]
    assert store.cursor("quarantine") == 9
    bulk = {s for s in range(1, 10) if store.stage_record("quarantine", s).detail.get("bulk")}
    assert bulk == {s.sequence for s in store.events(after_sequence=0) if s.event.node_name in {"n1", "n3"}}


def test_a_failing_bulk_settle_leaves_every_node_to_the_handler(store, caplog) -> None:
    store.append([xid(n) for n in ("n1", "n2")])
    handler = Settler("quarantine", {"n1", "n2"}, broken=True)
    runner = stages.StageRunner(store, handler, owner="t", workers=0)
    drive(store, runner)
    store.append([xid("n3")])
    drive(store, runner)

    assert sorted(n for n, _ in handler.calls) == ["n1", "n2", "n3"]
    assert store.cursor("quarantine") == 3
    assert len(handler.bulk) == 2
    assert [r.message for r in caplog.records].count(
        "stage quarantine: bulk settle failed, handling node by node: RuntimeError: store unavailable"
    ) == 1  # once per error, not once per step


def test_an_expedited_event_is_handled_in_the_next_step_ahead_of_the_traffic_before_it(store) -> None:
    """A fault behind 2,000 routine events: in order it would wait four steps of 500; expedited, one,
    and that step dispatches the fault alone (the ordered batch waits a step, not the fault)."""
    handler = Recorder("quarantine")
    store.append([xid(f"busy-{i % 40}", "31", at=timedelta(seconds=i)) for i in range(2000)])
    (fault,) = store.append([xid("failing", "79")])
    runner = stages.StageRunner(store, handler, owner="t", workers=0, batch_size=500)
    runner.expedite([fault.sequence])
    runner.step()
    handled = [s for _, sequences in handler.calls for s in sequences]
    assert handled == [fault.sequence]
    drive(store, runner)
    handled = [s for _, sequences in handler.calls for s in sequences]
    assert sorted(handled) == list(range(1, 2002))  # everything else still handled, each once
    assert store.cursor("quarantine") == 2001


def test_an_expedited_event_waits_behind_its_own_nodes_earlier_events(store) -> None:
    """Per-node order holds: a node's claimed events before the fault go with it, in order."""
    handler = Recorder("quarantine")
    store.append([xid("failing", "31"), xid("other", "31")])
    runner = stages.StageRunner(store, handler, owner="t", workers=0, batch_size=500)
    runner.step()  # both claimed and handled in order
    store.append([xid("failing", "31", at=timedelta(seconds=5)), xid("other", "31", at=timedelta(seconds=5))])
    (fault,) = store.append([xid("failing", "79", at=timedelta(seconds=9))])
    runner._claim(0.0)  # the routine ones are in hand, not yet dispatched
    runner.expedite([fault.sequence])
    runner.step()
    assert handler.calls[-1] == ("failing", [3, fault.sequence])
    drive(store, runner)
    assert store.cursor("quarantine") == fault.sequence


def test_work_that_can_wait_yields_until_the_expedited_event_is_handled(store) -> None:
    """`yield_to_urgent` holds bulk parsing back from `expedite` until the handler finished the event."""
    handler = Recorder("quarantine")
    runner = stages.StageRunner(store, handler, owner="t", workers=0)
    assert runner.yield_to_urgent(0.0)  # nothing expedited: no wait
    (fault,) = store.append([xid("failing", "79")])
    runner.expedite([fault.sequence])
    assert not runner.yield_to_urgent(0.01)
    runner.step()
    assert handler.calls == [("failing", [fault.sequence])]
    assert runner.yield_to_urgent(0.0)


def test_an_expedited_event_that_is_not_finished_keeps_bulk_work_waiting(store) -> None:
    handler = Recorder("quarantine", finish_after=1)  # the first call returns no outcome (a retry)
    runner = stages.StageRunner(store, handler, owner="t", workers=0)
    (fault,) = store.append([xid("failing", "79")])
    runner.expedite([fault.sequence])
    runner.step()
    assert not runner.yield_to_urgent(0.01)
    drive(store, runner)
    assert runner.yield_to_urgent(0.0)


def test_an_expedited_event_another_owner_holds_is_left_to_it(store) -> None:
    store.append([xid("a"), xid("b")])
    assert [s.sequence for s in store.claim("quarantine", "other", limit=10)] == [1, 2]
    handler = Recorder("quarantine")
    runner = stages.StageRunner(store, handler, owner="t", workers=0)
    runner.expedite([2])
    assert runner.step() == 0
    assert handler.calls == []
    assert runner.yield_to_urgent(0.0)  # another owner's event is not this one's to wait for


def test_a_stage_that_is_off_keeps_no_expedited_events(store) -> None:
    store.append([xid("a")])
    runner = stages.StageRunner(store, Recorder("quarantine"), owner="t", workers=0, enabled=False)
    runner.expedite([1])
    assert runner._urgent == set()
    runner.step()
    assert store.cursor("quarantine") == 1  # it follows (here: everything), claiming nothing
