"""Area of concern: appends from many threads share transactions yet each caller gets exactly its
own results, after its events are stored; a store error reaches every caller of that round."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from dsx import errors
from dsx.health.decisions.eventstore import Appended
from dsx.model.health import ComponentClass, HealthEvent
from dsx.store.group_commit import GroupCommit
from dsx.testing.inmemory import InMemoryEventStore

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def event(node: str, second: int) -> HealthEvent:
    return HealthEvent(
        agent="test",
        component_class=ComponentClass.GPU,
        check_name="GpuHealthCheck",
        node_name=node,
        generated_at=T0 + timedelta(seconds=second),
        is_fatal=False,
        is_healthy=True,
        message="ok",
    )


class SlowStore(InMemoryEventStore):
    """Holds each append until released, so callers pile up behind the first one."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []
        self.gate = threading.Event()

    def append(self, events: Sequence[HealthEvent]) -> list[Appended]:
        self.calls.append(len(events))
        self.gate.wait(5)
        return super().append(events)


def test_concurrent_callers_share_rounds_and_get_their_own_results() -> None:
    store = SlowStore()
    commit = GroupCommit(store)
    results: dict[int, list[Appended]] = {}
    batches = {i: [event(f"n{i}", 0), event(f"n{i}", 1), event("shared", 7)] for i in range(20)}

    def post(i: int) -> None:
        results[i] = commit.append(batches[i])

    threads = [threading.Thread(target=post, args=(i,)) for i in range(20)]
    for thread in threads:
        thread.start()
    while commit._pending_events < 60:  # every caller queued behind the held first round
        threading.Event().wait(0.01)
    store.gate.set()
    for thread in threads:
        thread.join(10)
    assert sorted(results) == list(range(20))
    for i, appended in results.items():
        assert [a.idempotency_key for a in appended] == [e.idempotency_key for e in batches[i]]
        assert all(store.find(a.idempotency_key) is not None for a in appended)
    assert len(store.calls) < 20  # callers queued behind the first round were committed together
    assert commit.rounds == len(store.calls)
    key = batches[0][2].idempotency_key
    shared = {a.sequence for appended in results.values() for a in appended if a.idempotency_key == key}
    assert len(shared) == 1  # the same event from twenty callers is stored once
    assert store.last_sequence() == 41


def test_a_store_error_reaches_the_caller_and_the_next_round_still_works() -> None:
    class Failing(InMemoryEventStore):
        fail = True

        def append(self, events: Sequence[HealthEvent]) -> list[Appended]:
            if self.fail:
                self.fail = False
                raise errors.UnavailableError("database is locked")
            return super().append(events)

    commit = GroupCommit(Failing())
    with pytest.raises(errors.UnavailableError, match="locked"):
        commit.append([event("n1", 0)])
    assert [a.created for a in commit.append([event("n1", 0)])] == [True]


def test_the_queue_is_bounded_but_an_oversized_request_still_goes_alone() -> None:
    store = InMemoryEventStore()
    commit = GroupCommit(store, max_events_per_round=2, max_pending_events=3)
    appended = commit.append([event("n1", s) for s in range(5)])
    assert [a.sequence for a in appended] == [1, 2, 3, 4, 5]
    assert commit.append([]) == []


def test_an_urgent_request_goes_in_the_next_round_ahead_of_the_queue() -> None:
    """Behind a held round, ten routine requests then one urgent: the urgent one is the second round,
    alone; the routine ones follow in order."""
    store = SlowStore()
    commit = GroupCommit(store, max_events_per_round=4)
    stored: dict[str, list[int]] = {}

    def post(name: str, events: list[HealthEvent], urgent: bool = False) -> None:
        stored[name] = [a.sequence for a in commit.append(events, urgent=urgent)]

    first = threading.Thread(target=post, args=("first", [event("n0", 0)]))
    first.start()
    while not store.calls:
        threading.Event().wait(0.01)
    routine = [threading.Thread(target=post, args=(f"r{i}", [event(f"r{i}", s) for s in range(2)])) for i in range(10)]
    for thread in routine:
        thread.start()
    while commit._pending_events < 21:
        threading.Event().wait(0.01)
    fault = threading.Thread(target=post, args=("fault", [event("failing", 0)], True))
    fault.start()
    while commit._pending_events < 22:
        threading.Event().wait(0.01)
    store.gate.set()
    for thread in (first, *routine, fault):
        thread.join(10)
    assert store.calls[:2] == [1, 1]  # the held round, then the urgent one alone
    assert stored["fault"] == [2]  # stored before every routine event queued ahead of it
    assert sorted(s for name, seqs in stored.items() if name.startswith("r") for s in seqs) == list(range(3, 23))
    assert all(size <= 4 for size in store.calls[2:]) and sum(store.calls) == 22
