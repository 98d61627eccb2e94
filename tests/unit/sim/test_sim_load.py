"""Area of concern: `dsx sim load` offers exactly the planned traffic — every node's events at its
rate, one request per node per poll, faults on distinct nodes — and names a bad plan's field."""

from __future__ import annotations

import threading

import pytest

from dsx import errors
from dsx.controllers import sim_load
from dsx.model.health import HealthEvent


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[list[HealthEvent]] = []

    def send(self, events: list[HealthEvent]) -> int:
        with self.lock:
            self.requests.append(list(events))
        return len(events)


def test_each_node_posts_its_share_and_faults_land_on_distinct_nodes() -> None:
    recorder = Recorder()
    nodes = tuple(f"n{i}" for i in range(20))
    plan = sim_load.LoadPlan(
        nodes=nodes,
        events_per_node_per_second=2.0,
        faults_per_second=20.0,
        duration_seconds=0.5,
        senders=4,
        poll_interval_seconds=0.1,
    )
    report = sim_load.FleetLoad(plan, lambda: recorder).run()  # type: ignore[arg-type,return-value]
    healthy = [e for r in recorder.requests for e in r if e.is_healthy]
    per_node = {n: sum(1 for e in healthy if e.node_name == n) for n in nodes}
    assert set(per_node.values()) == {1}  # 2/s × 0.5 s each, spread by phase: one event per node
    assert all(len({e.node_name for e in r}) == 1 for r in recorder.requests)  # one node per request
    faulted = [node for node, _ in report.faults]
    assert len(faulted) == len(set(faulted)) >= 5
    assert report.events == len(healthy) + len(faulted)
    assert report.errors == 0


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"events_per_node_per_second": -1}, "events-per-node-per-second"),
        ({"senders": 0}, "senders"),
        ({"poll_interval_seconds": 0}, "poll-interval"),
        ({"nodes": ()}, "no nodes"),
    ],
)
def test_a_bad_plan_names_its_field(change: dict[str, object], field: str) -> None:
    plan = sim_load.LoadPlan(**{"nodes": ("n1",), **change})  # type: ignore[arg-type]
    with pytest.raises(errors.BadInputError, match=field):
        plan.check()
