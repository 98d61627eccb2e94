"""Area of concern: validation requests on a live sentinel — a GPU node that joins the cluster is
tainted not-yet-certified at once and released only after it passed node-level certification and
a group test beside a known-good node, and a request queued from the command line
(`request-validation`) is picked up and run by the running sentinel. The sentinel runs with
`--sim`, so certification is the local executor's (on a cluster given by `--kubeconfig` it runs
on the node: test_recertify_on_the_node.py). The nodes are extra Node objects with a label of
their own, deleted afterwards."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsx.health.decisions import nodes
from dsx.health.decisions.eventstore import ValidationStatus
from dsx.kube.client import KubeClient
from dsx.store import open_store

from .harness import SentinelProcess, policy_file, wait_for

pytestmark = pytest.mark.integration
HELD = "sentinel.dsx.run/not-yet-certified"


def gpu_node(name: str, label: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"dsx-test/fleet": label, "nvidia.com/gpu.present": "true"}},
    }


@pytest.fixture
def fleet(kube_client: KubeClient) -> Iterator[tuple[str, list[str]]]:
    label = f"join-{uuid.uuid4().hex[:6]}"
    names = [f"{label}-{i}" for i in range(2)]
    kube_client.create(gpu_node(names[0], label))  # in service before the sentinel: the known-good peer
    try:
        yield label, names
    finally:
        for name in names:
            kube_client.delete("v1", "Node", name)


def test_a_joining_node_is_held_until_certified_and_queued_requests_run(
    sim_cluster: Any, kube_client: KubeClient, fleet: tuple[str, list[str]], tmp_path: Path
) -> None:
    label, (peer, joining) = fleet
    policy = policy_file(
        tmp_path,
        {
            "stages": {"validation": {"enabled": True}},
            "gpuNodeSelector": {"dsx-test/fleet": label},
            "certification": {
                "categories": ["nccl-loopback"],
                "groupCategories": ["nccl-all-reduce"],
                "groupPeers": 1,
                "ranksPerNode": 1,
                "maxRunning": 1,
                "joiningBatchSeconds": 3,
            },
            "monitors": {"kubeObjects": False},
        },
    )
    store_url = f"sqlite:///{tmp_path / 'events.db'}"
    sentinel = SentinelProcess(tmp_path, policy, store_url, "--sim", sim_cluster.name)
    sentinel.start()
    store = open_store(store_url)
    try:
        kube_client.create(gpu_node(joining, label))
        wait_for(lambda: nodes.has_taint(kube_client.get_node(joining), HELD), 30, "the joining node held", sentinel)
        assert not nodes.has_taint(kube_client.get_node(peer), HELD)  # it was there before: not held

        queued = subprocess.run(
            [sys.executable, "-m", "dsx", "sentinel", "request-validation", "--store", store_url, "--node", peer],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert "pending (manual: requested by a person)" in queued.stdout

        def finished() -> bool:
            requests = store.validation_requests()
            return len(requests) == 2 and all(r.status is ValidationStatus.PASSED for r in requests)

        wait_for(finished, 240, "both validation requests to pass", sentinel)
        node = kube_client.get_node(joining)
        assert not nodes.has_taint(node, HELD)
        assert nodes.labels_of(node)["sentinel.dsx.run/certified"] == "true"
        assert "passed (request" in nodes.annotations_of(node)["sentinel.dsx.run/validation"]
        assert not nodes.has_taint(kube_client.get_node(peer), HELD)  # held only while its own test ran
        events = kube_client.list("v1", "Event", "default")
        assert any(e.get("reason") == "ValidationPassed" and e["involvedObject"]["name"] == joining for e in events)
    finally:
        sentinel.stop()
        store.close()
