"""Area of concern: node-problem-detector interop on a live sentinel and a real kube-apiserver (dsx
sim): an Event posted the way NPD's problem client posts it (involved object the Node, namespace
default, source kernel-monitor, type Warning) is stored as a health event for that node by the
shipped policies, once even when the Event is seen again, and an Event from before the
sentinel started is not; a node condition NPD sets is read by the node policies. The node is an
extra Node object with a label of its own, deleted afterwards."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dsx.kube.client import KubeClient
from dsx.store import open_store

from .harness import SentinelProcess, policy_file, wait_for

pytestmark = pytest.mark.integration


def npd_event(node: str, reason: str, message: str, at: datetime) -> dict[str, Any]:
    stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{node}.{uuid.uuid4().hex[:16]}", "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": node, "uid": node},
        "reason": reason,
        "message": message,
        "source": {"component": "kernel-monitor", "host": node},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "type": "Warning",
    }


@pytest.fixture
def node(kube_client: KubeClient) -> Iterator[tuple[str, str]]:
    label = f"npd-{uuid.uuid4().hex[:6]}"
    name = f"{label}-0"
    kube_client.create(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"dsx-test/fleet": label}}}
    )
    try:
        yield label, name
    finally:
        kube_client.delete("v1", "Node", name)


def test_npd_events_and_conditions_become_health_events(
    sim_cluster: Any, kube_client: KubeClient, node: tuple[str, str], tmp_path: Path
) -> None:
    label, name = node
    before = npd_event(
        name,
        "TaskHung",
        "task python3:901 blocked for more than 120 seconds.",
        datetime.now(UTC) - timedelta(minutes=5),
    )
    kube_client.create(before)
    policy = policy_file(tmp_path, {"gpuNodeSelector": {"dsx-test/fleet": label}})
    store_url = f"sqlite:///{tmp_path / 'events.db'}"
    sentinel = SentinelProcess(tmp_path, policy, store_url, "--sim", sim_cluster.name)
    sentinel.start()
    store = open_store(store_url)
    try:
        oops = npd_event(
            name,
            "KernelOops",
            "BUG: unable to handle kernel NULL pointer dereference at 0000000000000010",
            datetime.now(UTC) + timedelta(seconds=2),
        )
        created = kube_client.create(oops)
        kube_client.patch("v1", "Event", created["metadata"]["name"], {"message": oops["message"]}, "default")

        def mine(check: str) -> list[Any]:
            return [s for s in store.events(node_name=name) if s.event.check_name == check]

        (stored,) = wait_for(lambda: mine("NodeKernelOops"), 30, "the NPD Event stored", sentinel)
        assert stored.event.message.startswith("KernelOops: BUG: unable to handle kernel NULL pointer")
        assert stored.event.metadata["eventSource"] == "kernel-monitor"
        assert not mine("NodeTaskHung"), "an Event from before the start is not replayed"

        condition = {
            "type": "XfsShutdown",
            "status": "True",
            "reason": "XfsHasShutdown",
            "message": "XFS (sdb1): shut down",
        }
        kube_client.patch("v1", "Node", name, {"status": {"conditions": [condition]}}, status=True)

        def unhealthy() -> list[Any]:  # the first verdict, healthy, is the node's baseline
            return [s for s in mine("NodeXfsShutdown") if not s.event.is_healthy]

        (xfs,) = wait_for(unhealthy, 30, "the NPD condition read", sentinel)
        assert xfs.event.is_fatal
    finally:
        sentinel.stop()
        store.close()
