"""One failover on a `dsx sim` cluster: two `dsx sentinel run --leader-elect` processes share a
store, an Xid 79 lands on a node, the leader is killed with SIGKILL right after it cordoned the
node, and the standby must take over and carry the node through to healthy.

Used by tests/integration/sentinel/test_leader_election.py (short timings) and by
bench/bench_failover.py (client-go's default timings, five runs, the median).
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dsx.health.decisions import nodes
from dsx.kube.client import KubeClient
from dsx.model.health import NodeState
from dsx.store import open_store

from .harness import SentinelProcess, gpu_fault_rule, policy_file, restore, wait_for

LEADER_METRIC = "dsx_sentinel_leader"


@dataclass(frozen=True)
class Timings:
    lease_duration_seconds: float = 15.0
    renew_deadline_seconds: float = 10.0
    retry_period_seconds: float = 2.0

    def flags(self, lease_name: str) -> list[str]:
        return [
            "--leader-elect",
            f"--leader-elect-lease-name={lease_name}",
            f"--leader-elect-lease-duration={self.lease_duration_seconds}",
            f"--leader-elect-renew-deadline={self.renew_deadline_seconds}",
            f"--leader-elect-retry-period={self.retry_period_seconds}",
        ]


@dataclass(frozen=True)
class FailoverRun:
    takeover_seconds: float
    """SIGKILL of the leader → the standby acting (its dsx_sentinel_leader gauge is 1)."""
    recovered_seconds: float
    """SIGKILL of the leader → the node healthy again."""
    remediations: int
    """Remediations the store recorded for the node."""
    states: list[str]
    """The node's moves, in order."""
    lease_holder: str
    lease_transitions: int


def leading(sentinel: SentinelProcess) -> bool:
    return sentinel.metric(LEADER_METRIC) == 1.0


def run_failover(
    sim_name: str, client: KubeClient, node: str, store_url: str, folder: Path, timings: Timings
) -> FailoverRun:
    """The scenario in the module docstring; restores the node afterwards."""
    folder.mkdir(parents=True, exist_ok=True)
    policy = policy_file(
        folder,
        {
            "stages": {s: {"enabled": True} for s in ("quarantine", "drain", "remediation", "recertify")},
            "breaker": {"maxQuarantinedPercent": 50},
            "quarantine": {"ruleSets": [gpu_fault_rule(f"node.metadata.name == '{node}'")]},
            "certification": {"categories": ["nccl-loopback"], "ranksPerNode": 2, "stallTimeoutSeconds": 60},
            "monitors": {"startAtEnd": True},
        },
    )
    lease_name = f"dsx-sentinel-{uuid.uuid4().hex[:8]}"
    replicas = []
    for name in ("a", "b"):
        (folder / name).mkdir(exist_ok=True)
        extra = ("--sim", sim_name, *timings.flags(lease_name))
        replicas.append(SentinelProcess(folder / name, policy, store_url, *extra))
    first, second = replicas
    store = open_store(store_url)
    try:
        first.start()
        wait_for(lambda: leading(first), 30, "the first replica to lead", first)
        second.start()
        assert not leading(second), "two leaders"
        subprocess.run(
            [sys.executable, "-m", "dsx", "sim", "inject", "--name", sim_name, "--node", node, "--fault", "xid79"],
            check=True,
            capture_output=True,
        )
        wait_for(lambda: nodes.unschedulable(client.get_node(node)), 60, f"{node} cordoned", first)
        assert not leading(second), "the standby acted while the leader lived"
        first.kill()
        killed = time.monotonic()
        wait_for(lambda: leading(second), 3 * timings.lease_duration_seconds, "the standby to take over", second)
        takeover = time.monotonic() - killed
        wait_for(
            lambda: store.node_state(node).state is NodeState.HEALTHY and store.node_history(node),
            300,
            f"{node} healthy again",
            second,
        )
        recovered = time.monotonic() - killed
        lease = client.get_lease("default", lease_name) or {}
        return FailoverRun(
            takeover_seconds=takeover,
            recovered_seconds=recovered,
            remediations=store.count_remediations(node, datetime.fromtimestamp(0, UTC)),
            states=[m.to_state.value for m in store.node_history(node)],
            lease_holder=str(lease.get("spec", {}).get("holderIdentity", "")),
            lease_transitions=int(lease.get("spec", {}).get("leaseTransitions", 0)),
        )
    finally:
        store.close()
        for replica in replicas:
            replica.stop()
        restore(client, node)
        client.delete("coordination.k8s.io/v1", "Lease", lease_name, "default")
