"""Area of concern: a GPU that faults again after its repair does not stay in service (issue 29).
On the shared `dsx sim` cluster, through the real `dsx sentinel run`: Xid 79 on one node →
quarantine, drain, reboot, re-certification, release; the same Xid on the same GPU 60 s after the
release quarantines the node again (a 300 s burst window once swallowed it), and a burst of 60
lines is one event with 59 lines counted in `dsx_sentinel_kernel_log_repeats_total`. A flapping
GPU (one Xid a second for a minute) is one incident, and each of its 60 lines is an event or a
counted repeat."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsx.health.decisions import nodes
from dsx.health.parsing import xid
from dsx.kube.client import KubeClient
from dsx.model.health import NodeState
from dsx.store import open_store

from .harness import SentinelProcess, gpu_fault_rule, policy_file, restore, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def node(sim_cluster: Any, kube_client: KubeClient) -> Iterator[str]:
    name = sim_cluster.node_names[2]
    try:
        yield name
    finally:
        restore(kube_client, name)


RECURRENCE_AFTER_RELEASE_SECONDS = 60.0
OLD_WINDOW_SECONDS = 300.0
"""The monitor's burst window before issue 29: it outlived the incident."""
STORM_LINES = 60
"""One line a second for a minute: six fatal windows."""


def inject(sim_name: str, node: str, *extra: str) -> None:
    argv = [sys.executable, "-m", "dsx", "sim", "inject", "--name", sim_name, "--node", node, "--fault", "xid:79"]
    subprocess.run([*argv, "--gpu", "0", *extra], check=True, capture_output=True)


def test_the_same_fault_after_the_release_quarantines_again(
    sim_cluster: Any, kube_client: KubeClient, node: str, tmp_path: Path
) -> None:
    policy = policy_file(
        tmp_path,
        {
            "stages": {s: {"enabled": True} for s in ("quarantine", "drain", "remediation", "recertify")},
            "breaker": {"maxQuarantinedPercent": 50},
            "quarantine": {"ruleSets": [gpu_fault_rule(f"node.metadata.name == '{node}'")]},
            "drain": {"pollSeconds": 0.5, "backoffSeconds": 0.5, "maxBackoffSeconds": 2},
            "certification": {"categories": ["nccl-loopback"], "ranksPerNode": 2, "stallTimeoutSeconds": 60},
            "monitors": {"startAtEnd": True},
        },
    )
    store_url = f"sqlite:///{tmp_path / 'events.db'}"
    sentinel = SentinelProcess(tmp_path, policy, store_url, "--sim", sim_cluster.name)
    sentinel.start()
    store = open_store(store_url)
    try:
        first = time.monotonic()
        inject(sim_cluster.name, node)
        wait_for(lambda: nodes.unschedulable(kube_client.get_node(node)), 30, f"{node} cordoned", sentinel)
        wait_for(
            lambda: (
                store.node_state(node).state is NodeState.HEALTHY
                and not nodes.unschedulable(kube_client.get_node(node))
            ),
            240,
            f"{node} repaired, re-certified and released",
            sentinel,
        )
        released = time.monotonic()
        # 60 s after the release: the old window (300 s from the first line) would still be open
        time.sleep(max(0.0, RECURRENCE_AFTER_RELEASE_SECONDS - (time.monotonic() - released)))
        assert time.monotonic() - first < OLD_WINDOW_SECONDS
        inject(sim_cluster.name, node, "--count", "60")
        wait_for(lambda: nodes.unschedulable(kube_client.get_node(node)), 30, f"{node} cordoned again", sentinel)
        xids = [s.event for s in store.events(node_name=node) if s.event.check_name == "KernelLogXid"]
        assert len(xids) == 2 and all(e.error_codes == ("79",) for e in xids)
        moves = [m.to_state.value for m in store.node_history(node)]
        assert moves[:6] == ["quarantined", "draining", "drained", "remediating", "recertifying", "healthy"]
        assert moves[6] == "quarantined"
        wait_for(
            lambda: sentinel.metric("dsx_sentinel_kernel_log_repeats_total") == 59.0 or None,
            30,
            "the storm's 59 folded lines counted",
            sentinel,
        )
        print(f"released {released - first:.1f} s after the first Xid; the second quarantined the node again")
    finally:
        sentinel.stop()
        store.close()


def test_a_flapping_gpu_is_one_incident_and_every_line_is_accounted_for(
    sim_cluster: Any, kube_client: KubeClient, node: str, tmp_path: Path
) -> None:
    policy = policy_file(
        tmp_path,
        {
            "stages": {"quarantine": {"enabled": True}},
            "breaker": {"maxQuarantinedPercent": 50},
            "quarantine": {"ruleSets": [gpu_fault_rule(f"node.metadata.name == '{node}'")]},
            "monitors": {"startAtEnd": True},
        },
    )
    store_url = f"sqlite:///{tmp_path / 'events.db'}"
    sentinel = SentinelProcess(tmp_path, policy, store_url, "--sim", sim_cluster.name)
    sentinel.start()
    store = open_store(store_url)
    try:
        began = time.monotonic()
        for line in range(STORM_LINES):
            time.sleep(max(0.0, began + line - time.monotonic()))
            inject(sim_cluster.name, node)
        took = time.monotonic() - began
        assert took >= STORM_LINES - 1

        def accounted() -> tuple[int, int] | None:
            events = [s for s in store.events(node_name=node) if s.event.check_name == "KernelLogXid"]
            repeats = int(sentinel.metric("dsx_sentinel_kernel_log_repeats_total") or 0)
            return (len(events), repeats) if len(events) + repeats == STORM_LINES else None

        events, repeats = wait_for(accounted, 30, f"all {STORM_LINES} lines stored or counted", sentinel)
        assert events >= STORM_LINES // xid.FATAL_WINDOW_SECONDS  # a new event each fatal window
        moves = [m.to_state.value for m in store.node_history(node)]
        assert moves == ["quarantined"], moves  # one incident: the later events join it
        assert nodes.unschedulable(kube_client.get_node(node))
        print(f"{STORM_LINES} lines in {took:.0f} s: {events} events, {repeats} counted repeats, one incident")
    finally:
        sentinel.stop()
        store.close()
