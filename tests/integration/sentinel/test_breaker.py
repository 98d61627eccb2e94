"""Area of concern: on a real apiserver, with the breaker at 20 % and faults posted for 40 % of the
fleet, the sentinel (Rate mode) cordons exactly 20 % and stops; the trip shows in `dsx sentinel status`, in
/metrics, as a stored event and as a Kubernetes Event; `dsx sentinel breaker reset` closes it
and quarantining resumes — without replaying what was refused while it was open. The fleet is
ten extra Node objects with a label of their own, deleted afterwards."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dsx.health.decisions import nodes, quarantine
from dsx.kube.client import KubeClient
from dsx.model.health import ComponentClass, Entity, EntityType, HealthEvent, RecommendedAction
from dsx.store import open_store

from .harness import SentinelProcess, policy_file, wait_for

pytestmark = pytest.mark.integration
FLEET = 10


def fault(node: str) -> dict[str, Any]:
    return HealthEvent(
        agent="external-monitor",
        component_class=ComponentClass.GPU,
        check_name="GpuFallenOffBus",
        node_name=node,
        generated_at=datetime.now(UTC),
        is_fatal=True,
        is_healthy=False,
        message="GPU 0 has fallen off the bus",
        recommended_action=RecommendedAction.RESTART_BM,
        error_codes=("79",),
        entities=(Entity(EntityType.GPU, "0"),),
    ).to_dict()


@pytest.fixture
def fleet(kube_client: KubeClient) -> Iterator[tuple[str, list[str]]]:
    label = f"breaker-{uuid.uuid4().hex[:6]}"
    names = [f"{label}-{i}" for i in range(FLEET)]
    for name in names:
        kube_client.create(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"dsx-test/fleet": label}}}
        )
    try:
        yield label, names
    finally:
        for name in names:
            kube_client.delete("v1", "Node", name)


def test_the_breaker_stops_at_its_threshold_is_visible_and_resets(
    sim_cluster: Any, kube_client: KubeClient, fleet: tuple[str, list[str]], tmp_path: Path
) -> None:
    label, names = fleet
    policy = policy_file(
        tmp_path,
        {
            "stages": {"quarantine": {"enabled": True}},
            "gpuNodeSelector": {"dsx-test/fleet": label},
            "breaker": {"maxQuarantinedPercent": 20, "windowSeconds": 600, "mode": "Rate"},
            "monitors": {"kubeObjects": False},
        },
    )
    store_url = f"sqlite:///{tmp_path / 'events.db'}"
    sentinel = SentinelProcess(tmp_path, policy, store_url, "--kubeconfig", str(sim_cluster.kubeconfig))
    sentinel.start()
    try:
        faulty = names[:4]  # 40 % of the fleet
        answer = sentinel.post_events([fault(n) for n in faulty])
        assert answer["created"] == 4
        wait_for(lambda: sentinel.metric("dsx_sentinel_breaker_tripped") == 1.0, 30, "the breaker to trip", sentinel)
        store = open_store(store_url)
        try:
            wait_for(lambda: store.cursor("quarantine") >= 5, 30, "the quarantine stage to finish", sentinel)
            cordoned = [n for n in names if nodes.unschedulable(kube_client.get_node(n))]
            assert len(cordoned) == 2 and set(cordoned) <= set(faulty)
            trips = [s.event for s in store.events() if s.event.check_name == quarantine.BREAKER_TRIPPED_CHECK]
            assert len(trips) == 1 and "3 of 10 GPU nodes (30.0%)" in trips[0].message
            events = kube_client.list("v1", "Event", "default")
            assert any(
                e.get("reason") == "CircuitBreakerTripped" and e["involvedObject"]["name"] in faulty for e in events
            )
            shown = subprocess.run(
                [sys.executable, "-m", "dsx", "sentinel", "status", "--store", store_url],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            assert "breaker: tripped (quarantining" in shown.stdout

            reset = subprocess.run(
                [sys.executable, "-m", "dsx", "sentinel", "breaker", "reset", "--store", store_url],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            assert reset.stdout.strip() == "breaker quarantine: tripped → closed (resets: 1)"
            # the refused events are not replayed; a new fault is quarantined again
            assert [n for n in names if nodes.unschedulable(kube_client.get_node(n))] == cordoned
            sentinel.post_events([fault(names[9])])
            wait_for(
                lambda: nodes.unschedulable(kube_client.get_node(names[9])),
                30,
                "a quarantine after the reset",
                sentinel,
            )
            wait_for(
                lambda: sentinel.metric("dsx_sentinel_breaker_tripped") == 0.0,
                30,
                "the metric to follow the reset",
                sentinel,
            )
            assert sorted(n for n in names if nodes.unschedulable(kube_client.get_node(n))) == sorted(
                [*cordoned, names[9]]
            )
        finally:
            store.close()
    finally:
        sentinel.stop()
