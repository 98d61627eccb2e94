"""Area of concern: the circuit breaker stops quarantining at its share of the fleet, counts each
node once per window, stays tripped across restarts (its state is in the store), reports the
trip (metric hook, stored event, Kubernetes event) and only a reset closes it — without
replaying what it refused."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dsx.health import breaker, nodes, quarantine, stages
from dsx.health.breaker import BreakerState, CircuitBreaker
from dsx.health.policy import BreakerSettings, Stage
from dsx.model.health import NodeState

from .builders import T0, cluster, policy_with, xid


@pytest.mark.parametrize(
    ("fleet", "percent", "allowed"), [(10, 20, 2), (6, 20, 1), (5, 10, 1), (100, 10, 10), (500, 100, 500), (3, 50, 1)]
)
def test_the_breaker_allows_its_share_of_the_fleet_but_never_less_than_one_node(
    fleet: int, percent: float, allowed: int
) -> None:
    assert breaker.allowed_nodes(fleet, percent) == allowed


def test_quarantines_stop_at_the_threshold_and_the_trip_is_visible(store, clock, observer) -> None:
    fleet = cluster([f"n{i}" for i in range(10)])
    chosen = policy_with(Stage.QUARANTINE)
    settings = BreakerSettings(max_quarantined_percent=20, window_seconds=600)
    gate = CircuitBreaker(store, settings, lambda: len(fleet.list_nodes()))
    runner = stages.StageRunner(
        store, quarantine.QuarantineHandler(store, fleet, chosen, gate, observer, clock=clock), owner="t", workers=0
    )
    store.append([xid(f"n{i}", at=timedelta(seconds=i)) for i in range(4)])
    while runner.step():
        pass

    cordoned = [n for n in (f"n{i}" for i in range(10)) if nodes.unschedulable(fleet.get_node(n))]
    assert cordoned == ["n0", "n1"]
    assert gate.state() is BreakerState.TRIPPED
    assert observer.breakers == ["tripped"]
    assert "3 of 10 GPU nodes (30.0%)" in gate.status()["reason"]
    trips = [s.event for s in store.events() if s.event.check_name == quarantine.BREAKER_TRIPPED_CHECK]
    assert [e.node_name for e in trips] == ["n2"]
    assert [w.detail["reason"] for w in fleet.writes("event")] == ["CircuitBreakerTripped"]
    dispositions = [store.stage_record("quarantine", i).detail["disposition"] for i in range(1, 5)]
    assert dispositions == ["quarantined", "quarantined", "breaker-open", "breaker-open"]


def test_a_tripped_breaker_stays_tripped_for_a_new_process_until_reset(store) -> None:
    settings = BreakerSettings(max_quarantined_percent=10, window_seconds=600)
    first = CircuitBreaker(store, settings, lambda: 10)
    assert first.admit("a", T0).allowed
    assert first.admit("a", T0).allowed  # the same node again does not count twice
    denied = first.admit("b", T0)
    assert not denied.allowed and denied.tripped_now

    restarted = CircuitBreaker(store, settings, lambda: 10)
    later = restarted.admit("c", T0 + timedelta(hours=5))
    assert not later.allowed and not later.tripped_now
    document = restarted.reset()
    assert document["state"] == "closed" and document["window"] == [] and document["resets"] == 1
    assert restarted.admit("c", T0 + timedelta(hours=5)).allowed


def test_quarantines_outside_the_window_no_longer_count(store) -> None:
    gate = CircuitBreaker(store, BreakerSettings(max_quarantined_percent=10, window_seconds=60), lambda: 10)
    assert gate.admit("a", T0).allowed
    assert gate.admit("b", T0 + timedelta(seconds=61)).allowed
    assert not gate.admit("c", T0 + timedelta(seconds=62)).allowed


def test_a_disabled_breaker_admits_everything(store) -> None:
    gate = CircuitBreaker(store, BreakerSettings(enabled=False), lambda: 1)
    assert all(gate.admit(f"n{i}", T0).allowed for i in range(5))
    assert store.load_breaker(breaker.NAME) is None


def test_refused_nodes_stay_in_service(store, clock, observer) -> None:
    fleet = cluster(["a", "b", "c"])
    chosen = policy_with(Stage.QUARANTINE)
    gate = CircuitBreaker(store, BreakerSettings(max_quarantined_percent=34), lambda: 3)
    h = quarantine.QuarantineHandler(store, fleet, chosen, gate, observer, clock=clock)
    store.append([xid("a"), xid("b")])
    runner = stages.StageRunner(store, h, owner="t", workers=0)
    while runner.step():
        pass
    assert store.node_state("b").state is NodeState.HEALTHY
    assert not nodes.unschedulable(fleet.get_node("b"))
