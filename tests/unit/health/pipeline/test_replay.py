"""Area of concern: `replay` runs stored events through another policy on an in-memory copy of the
fleet and reports what it would have quarantined, drained, remediated and escalated, and where
the breaker would have tripped — the same answer each time, with nothing real touched."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from dsx.health.decisions.eventstore import StoredEvent
from dsx.health.decisions.policy import BreakerSettings, ProviderKind, ProviderSettings
from dsx.model.health import RecommendedAction
from dsx.testing import replay

from .builders import T0, gpu_node, informational, pod, policy_with, xid


def history(*events) -> list[StoredEvent]:
    return [StoredEvent(i + 1, e.generated_at + timedelta(milliseconds=50), e) for i, e in enumerate(events)]


def test_replay_reports_what_a_policy_would_have_done() -> None:
    events = history(
        xid("n1"),
        informational("n2"),
        xid("n3", "119", action=RecommendedAction.CONTACT_SUPPORT, at=timedelta(minutes=1)),
        xid("n4", at=timedelta(minutes=2)),
        xid("n5", at=timedelta(minutes=3)),
    )
    chosen = policy_with()  # switches off: replay evaluates the rules as if every stage were on
    chosen = dataclasses.replace(
        chosen,
        breaker=BreakerSettings(max_quarantined_percent=60),
        remediation=dataclasses.replace(
            chosen.remediation, provider=ProviderSettings(kind=ProviderKind.SCRIPT, command=("x",))
        ),
    )
    fleet = [gpu_node(f"n{i}") for i in range(1, 6)]
    pods = [pod("team-a", "trainer", "n1"), pod("batch-1", "etl", "n4"), pod("kube-system", "dns", "n1", gpus=0)]

    report = replay.replay(events, chosen, node_objects=fleet, pods=pods)

    assert [q["node"] for q in report.quarantined] == ["n1", "n3", "n4"]
    assert report.breaker["state"] == "tripped" and "n5" in report.breaker["reason"]
    assert report.drained == [
        {"node": "n1", "pods": ["team-a/trainer (evict)"], "still_waiting_for": []},
        {"node": "n4", "pods": [], "still_waiting_for": ["batch-1/etl"]},
    ]
    assert [(r["node"], r["request"]) for r in report.remediated] == [("n1", "reboot-node")]
    assert [e["node"] for e in report.escalated] == ["n3"]
    assert report.final_states == {"n1": "healthy", "n3": "failed", "n4": "draining"}
    assert report.dispositions["quarantine"]["breaker-open"] == 1
    assert report.to_dict() == replay.replay(events, chosen, node_objects=fleet, pods=pods).to_dict()


def test_without_a_fleet_every_node_in_the_events_is_a_gpu_node() -> None:
    events = history(xid("a"), xid("b", at=timedelta(minutes=1)))
    report = replay.replay(events, policy_with())
    # the shipped provider is "none": every repair escalates to a person
    assert [e["node"] for e in report.escalated] == ["a"]
    assert report.breaker["state"] == "tripped"  # 2 of 2 nodes is over the shipped 10%
    assert report.quarantined[0]["at"] == T0.strftime("%Y-%m-%dT%H:%M:%SZ")  # the events' own time, not now
