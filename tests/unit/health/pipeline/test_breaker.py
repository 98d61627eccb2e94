"""Area of concern: the circuit breaker stops quarantining at its share of the fleet, counts each
node once per window, stays tripped across restarts (its state is in the store), reports the
trip (metric hook, stored event, Kubernetes event) and only a reset closes it — without
replaying what it refused."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dsx.health.decisions import breaker, nodes, quarantine
from dsx.health.decisions.breaker import BreakerState, CircuitBreaker
from dsx.health.decisions.policy import BreakerMode, BreakerSettings, Stage
from dsx.model.health import NodeState
from dsx.pipeline import stages

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


def test_in_rate_mode_quarantines_outside_the_window_no_longer_count(store) -> None:
    settings = BreakerSettings(max_quarantined_percent=10, window_seconds=60, mode=BreakerMode.RATE)
    gate = CircuitBreaker(store, settings, lambda: 10)
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


def hold(store, node: str, *states: NodeState) -> None:  # type: ignore[no-untyped-def]
    for state in states:
        store.transition(node, state, reason="test")


def test_the_level_counts_nodes_held_however_long_ago_and_not_released_ones(store) -> None:
    """Level mode (the default): twenty nodes held for a week count as twenty; a released one not at all."""
    gate = CircuitBreaker(store, BreakerSettings(max_quarantined_percent=20), lambda: 10)
    assert gate.settings.mode is BreakerMode.LEVEL
    hold(store, "old-1", NodeState.QUARANTINED, NodeState.DRAINING)  # held since long before any window
    hold(store, "back", NodeState.QUARANTINED, NodeState.DRAINING, NodeState.DRAINED, NodeState.REMEDIATING)
    hold(store, "back", NodeState.RECERTIFYING, NodeState.HEALTHY)  # released: no longer counts
    week_later = T0 + timedelta(days=7)
    assert gate.admit("new-1", week_later).allowed  # old-1 + new-1 = 2 of 10: at the 20 % limit
    refused = gate.admit("new-2", week_later + timedelta(seconds=1))
    assert not refused.allowed and refused.tripped_now
    assert refused.reason == (
        "quarantining new-2 would put 3 of 10 GPU nodes (30.0%) out of service; the limit is 2 nodes (20% of 10 = 2)"
    )
    status = gate.status()
    assert (status["limit_nodes"], status["fleet_gpu_nodes"], status["counted"]) == (2, 10, 2)


def test_an_absolute_cap_holds_below_the_share_of_a_large_fleet(store) -> None:
    gate = CircuitBreaker(store, BreakerSettings(max_quarantined_percent=10, max_quarantined_nodes=3), lambda: 5000)
    assert gate.limit(5000) == 3 and gate.limit(20) == 2  # the lower of 10 % and the cap
    for i in range(3):
        assert gate.admit(f"n{i}", T0).allowed
    refused = gate.admit("n3", T0)
    assert not refused.allowed
    assert refused.reason.endswith("the limit is 3 nodes (10% of 5000 = 500, capped at 3)")


def test_a_tripped_breaker_never_holds_back_a_release(store, clock, observer) -> None:
    """Re-certified nodes go back into service while the breaker refuses new quarantines."""
    fleet = cluster(["a", "b", "c"])
    chosen = policy_with(Stage.QUARANTINE)
    gate = CircuitBreaker(store, BreakerSettings(max_quarantined_percent=34), lambda: 3)
    runner = stages.StageRunner(
        store, quarantine.QuarantineHandler(store, fleet, chosen, gate, observer, clock=clock), owner="t", workers=0
    )
    store.append([xid("a"), xid("b")])
    while runner.step():
        pass
    assert gate.state() is BreakerState.TRIPPED and nodes.unschedulable(fleet.get_node("a"))
    hold(store, "a", NodeState.DRAINING, NodeState.DRAINED, NodeState.REMEDIATING, NodeState.RECERTIFYING)
    released = store.transition(
        "a", NodeState.HEALTHY, reason="re-certification passed", expected=NodeState.RECERTIFYING
    )
    assert released.state is NodeState.HEALTHY and gate.state() is BreakerState.TRIPPED
    gate.reset()
    assert gate.admit("b", T0 + timedelta(hours=1)).allowed  # the level is 0 again: a is back in service
