"""Area of concern: under any interleaving of appends (with duplicates), claims by two owners of
two consumers, acks (in any order, repeated, by the wrong owner), intents and lease expiry, the
SQL store answers exactly as the in-memory fake does — the fake the pipeline's unit tests rely on.
(SQLite stands for both SQL stores: they share every statement in dsx.store.sql.)"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from dsx.health.decisions.eventstore import StageOutcome, StageStatus
from dsx.store.sqlite import SqliteEventStore
from dsx.testing.inmemory import InMemoryEventStore

from .conftest import FakeClock, make_event

CONSUMERS = st.sampled_from(["quarantine", "drain"])
OWNERS = st.sampled_from(["w1", "w2"])


class StoreModel(RuleBasedStateMachine):
    @initialize()
    def open_stores(self) -> None:
        self.directory = tempfile.TemporaryDirectory()
        self.clock = FakeClock()
        self.fake = InMemoryEventStore(clock=self.clock)
        self.real = SqliteEventStore(Path(self.directory.name) / "events.db", clock=self.clock)

    def teardown(self) -> None:
        if hasattr(self, "real"):
            self.real.close()
            self.directory.cleanup()

    @rule(indices=st.lists(st.integers(0, 30), min_size=1, max_size=6))
    def append(self, indices: list[int]) -> None:
        events = [make_event(i) for i in indices]
        assert self.real.append(events) == self.fake.append(events)

    @rule(consumer=CONSUMERS, owner=OWNERS, limit=st.integers(1, 5), lease=st.sampled_from([5.0, 30.0]))
    def claim(self, consumer: str, owner: str, limit: int, lease: float) -> None:
        real = self.real.claim(consumer, owner, limit=limit, lease_seconds=lease)
        fake = self.fake.claim(consumer, owner, limit=limit, lease_seconds=lease)
        assert [s.sequence for s in real] == [s.sequence for s in fake]
        assert [s.event for s in real] == [s.event for s in fake]

    @rule(
        consumer=CONSUMERS,
        owner=OWNERS,
        picks=st.lists(st.integers(1, 40), min_size=1, max_size=5),
        status=st.sampled_from(list(StageStatus)),
    )
    def ack(self, consumer: str, owner: str, picks: list[int], status: StageStatus) -> None:
        last = self.fake.last_sequence()
        outcomes = [StageOutcome(p, status, {"n": p}) for p in picks if p <= last]
        if outcomes:
            assert self.real.ack(consumer, owner, outcomes) == self.fake.ack(consumer, owner, outcomes)

    @rule(consumer=CONSUMERS, pick=st.integers(1, 40))
    def begin(self, consumer: str, pick: int) -> None:
        if pick <= self.fake.last_sequence():
            real = self.real.begin(consumer, pick, {"plan": pick})
            fake = self.fake.begin(consumer, pick, {"plan": pick})
            assert (real is None) == (fake is None)
            if real is not None and fake is not None:
                assert (real.status, dict(real.detail)) == (fake.status, dict(fake.detail))

    @rule(seconds=st.sampled_from([1.0, 10.0, 40.0]))
    def advance_clock(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @invariant()
    def same_positions(self) -> None:
        if hasattr(self, "real"):
            assert self.real.last_sequence() == self.fake.last_sequence()
            assert self.real.cursors() == self.fake.cursors()

    @invariant()
    def same_stage_records(self) -> None:
        if hasattr(self, "real"):
            for sequence in range(1, self.fake.last_sequence() + 1, 3):
                real = [(r.stage, r.status, dict(r.detail)) for r in self.real.stage_records(sequence)]
                fake = [(r.stage, r.status, dict(r.detail)) for r in self.fake.stage_records(sequence)]
                assert real == fake


StoreModel.TestCase.settings = settings(
    max_examples=40, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestStoreModel = StoreModel.TestCase
