"""Area of concern: high availability — two `dsx sentinel run --leader-elect` processes share one
store (PostgreSQL, as deployed; SQLite, for processes on one host) on the `dsx sim` cluster;
only the Lease holder acts. The leader is killed with SIGKILL right after it cordoned a node:
the standby takes over within the lease duration (plus one retry period, client-go's bound),
the node still goes quarantined → … → healthy, and the store holds exactly one remediation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsx.kube.client import KubeClient

from .failover import Timings, run_failover

pytestmark = pytest.mark.integration

TIMINGS = Timings(lease_duration_seconds=8.0, renew_deadline_seconds=5.0, retry_period_seconds=1.0)
"""Shorter than client-go's 15/10/2 to keep the test quick, with room for a loaded CI machine."""
POLL_SLACK_SECONDS = 1.0
"""The test reads the standby's /metrics every 0.2 s, over HTTP, on a loaded machine."""


@pytest.fixture(params=["postgresql", "sqlite"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'events.db'}"
    return str(request.getfixturevalue("postgres_url"))


def test_the_standby_takes_over_a_killed_leader_and_finishes_the_node(
    sim_cluster: Any, kube_client: KubeClient, store_url: str, tmp_path: Path
) -> None:
    node = sim_cluster.node_names[2]
    run = run_failover(sim_cluster.name, kube_client, node, store_url, tmp_path / "replicas", TIMINGS)
    bound = TIMINGS.lease_duration_seconds + TIMINGS.retry_period_seconds + POLL_SLACK_SECONDS
    assert run.takeover_seconds <= bound, f"takeover after {run.takeover_seconds:.1f} s"
    assert run.states == ["quarantined", "draining", "drained", "remediating", "recertifying", "healthy"]
    assert run.remediations == 1
    assert run.lease_transitions == 1 and run.lease_holder, "the standby holds the lease now"
