"""Area of concern: the drain stage — per-namespace modes (Immediate through the Eviction API with
PodDisruptionBudget backoff, AllowCompletion, DeleteAfterTimeout counted from the recorded
start), what is never drained (system namespaces, DaemonSet, static and finished pods), partial
drains for a GPU reset, the shared eviction rate, and the node moving QUARANTINED → DRAINING →
DRAINED only when the pods that must leave are gone."""

from __future__ import annotations

import dataclasses

from dsx.health.decisions import drain, nodes
from dsx.health.decisions.breaker import CircuitBreaker
from dsx.health.decisions.policy import DrainMode, DrainSettings, NamespaceMode, Stage
from dsx.health.decisions.quarantine import QuarantineHandler
from dsx.model.health import BehaviourOverrides, NodeState
from dsx.pipeline import stages
from dsx.ratelimit import TokenBucket

from .builders import cluster, gpu_check, pod, policy_with, xid

SETTINGS = DrainSettings(
    namespaces=(
        NamespaceMode("batch-*", DrainMode.ALLOW_COMPLETION),
        NamespaceMode("inference", DrainMode.DELETE_AFTER_TIMEOUT, timeout_seconds=120),
    ),
    system_namespaces=("kube-system", "gpu-operator"),
    backoff_seconds=1,
    max_backoff_seconds=4,
    poll_seconds=1,
)


def test_the_plan_follows_namespace_modes_and_keeps_what_must_stay() -> None:
    pods = [
        pod("team-a", "trainer", "n1"),
        pod("batch-nightly", "job", "n1"),
        pod("inference", "server", "n1"),
        pod("kube-system", "proxy", "n1", gpus=0),
        pod("gpu-operator", "dcgm", "n1", owner="DaemonSet"),
        pod("team-a", "logger", "n1", owner="DaemonSet"),
        pod("team-a", "done", "n1", phase="Succeeded"),
    ]
    planned = {p.key: (p.mode.value if p.mode else p.kept_because) for p in drain.plan(pods, SETTINGS)}
    assert planned == {
        "team-a/trainer": "Immediate",
        "batch-nightly/job": "AllowCompletion",
        "inference/server": "DeleteAfterTimeout",
        "kube-system/proxy": "system namespace",
        "gpu-operator/dcgm": "DaemonSet pod",
        "team-a/logger": "DaemonSet pod",
        "team-a/done": "finished",
    }


def test_a_gpu_reset_drains_only_the_pods_of_the_affected_gpu() -> None:
    pods = [
        pod("a", "on-gpu0", "n1", gpu_ids="0"),
        pod("a", "on-gpu3", "n1", gpu_ids="3,4"),
        pod("a", "cpu-only", "n1", gpus=0),
        pod("a", "unknown-gpus", "n1"),
    ]
    planned = {p.key: (p.mode.value if p.mode else p.kept_because) for p in drain.plan(pods, SETTINGS, gpus=["0"])}
    assert planned == {
        "a/on-gpu0": "Immediate",
        "a/on-gpu3": "uses other GPUs (partial drain)",
        "a/cpu-only": "uses no GPU (partial drain)",
        "a/unknown-gpus": "Immediate",  # says nothing about its GPUs: it leaves, to be safe
    }


class Harness:
    def __init__(self, store, clock, observer, pods, settings=SETTINGS) -> None:
        self.fleet = cluster(pods=pods)
        chosen = dataclasses.replace(policy_with(Stage.QUARANTINE, Stage.DRAIN), drain=settings)
        gate = CircuitBreaker(store, chosen.breaker, lambda: 100)
        self.drain = drain.DrainHandler(
            store, self.fleet, chosen, observer, clock=clock, limiter=TokenBucket(1e6, 10**6)
        )
        self.runners = [
            stages.StageRunner(
                store, QuarantineHandler(store, self.fleet, chosen, gate, observer, clock=clock), owner="t", workers=0
            ),
            stages.StageRunner(store, self.drain, owner="t", workers=0),
        ]
        self.store, self.clock = store, clock

    def settle(self) -> None:
        while sum(r.step() for r in self.runners):
            pass

    def state(self) -> NodeState:
        return self.store.node_state("n1").state


def test_a_pod_disruption_budget_is_honoured_with_backoff(store, clock, observer) -> None:
    h = Harness(store, clock, observer, [pod("team-a", "a", "n1"), pod("team-a", "b", "n1")])
    h.fleet.refuse_evictions("team-a", "b", 3)
    store.append([xid("n1")])
    h.settle()
    assert h.state() is NodeState.DRAINING
    assert [w.target for w in h.fleet.writes("evict")] == ["team-a/a"]
    assert (
        "held by a PodDisruptionBudget: team-a/b"
        in nodes.annotations_of(h.fleet.get_node("n1"))["sentinel.dsx.run/drain"]
    )

    for wait in (0.5, 0.6, 1.0, 2.0):  # backoff 1 s, 2 s, 4 s: attempts only when due
        clock.advance(wait)
        h.settle()
    assert len(h.fleet.writes("evict-refused")) == 3
    assert h.state() is NodeState.DRAINING
    clock.advance(4.0)
    h.settle()
    assert [w.target for w in h.fleet.writes("evict")] == ["team-a/a", "team-a/b"]
    h.settle()
    assert h.state() is NodeState.DRAINED


def test_allow_completion_waits_and_delete_after_timeout_deletes_on_time(store, clock, observer) -> None:
    h = Harness(store, clock, observer, [pod("batch-1", "job", "n1"), pod("inference", "srv", "n1")])
    store.append([xid("n1")])
    h.settle()
    clock.advance(119)
    h.settle()
    assert h.fleet.writes("evict") == [] and h.fleet.writes("delete-pod") == []
    clock.advance(2)
    h.settle()
    assert [w.target for w in h.fleet.writes("delete-pod")] == ["inference/srv"]
    assert h.state() is NodeState.DRAINING  # the batch job is still running
    h.fleet.finish_pod("batch-1", "job")
    h.settle()
    assert h.state() is NodeState.DRAINED
    assert h.fleet.writes("evict") == []


def test_a_gpu_reset_incident_keeps_other_gpus_workloads(store, clock, observer) -> None:
    h = Harness(store, clock, observer, [pod("a", "uses-0", "n1", gpu_ids="0"), pod("a", "uses-5", "n1", gpu_ids="5")])
    store.append([gpu_check("n1", healthy=False, gpu="0")])
    h.settle()
    assert h.state() is NodeState.DRAINED
    assert [w.target for w in h.fleet.writes("evict")] == ["a/uses-0"]


def test_the_eviction_rate_is_shared_and_bounded(clock) -> None:
    bucket = TokenBucket(2.0, 3, clock=clock)
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
    clock.advance(0.5)
    assert [bucket.take(), bucket.take()] == [True, False]


def test_dry_run_lists_the_pods_it_would_evict(store, clock, observer) -> None:
    chosen = policy_with(Stage.QUARANTINE, Stage.DRAIN)
    chosen = dataclasses.replace(
        chosen, stages={**chosen.stages, Stage.DRAIN: dataclasses.replace(chosen.stages[Stage.DRAIN], dry_run=True)}
    )
    fleet = cluster(pods=[pod("team-a", "trainer", "n1")])
    gate = CircuitBreaker(store, chosen.breaker, lambda: 100)
    runners = [
        stages.StageRunner(
            store, QuarantineHandler(store, fleet, chosen, gate, observer, clock=clock), owner="t", workers=0
        ),
        stages.StageRunner(
            store, drain.DrainHandler(store, fleet, chosen, observer, clock=clock), owner="t", workers=0
        ),
    ]
    store.append([xid("n1")])
    while sum(r.step() for r in runners):
        pass
    record = store.stage_record("drain", 1)
    assert record.detail["disposition"] == "planned"
    assert record.detail["would"] == [{"pod": "team-a/trainer", "mode": "Immediate"}]
    assert store.node_state("n1").state is NodeState.QUARANTINED
    assert fleet.writes("evict") == []


def test_drain_overrides_force_immediate_eviction_or_skip_the_drain(store, clock, observer) -> None:
    forced = Harness(store, clock, observer, [pod("batch-1", "job", "n1"), pod("inference", "srv", "n1")])
    store.append([dataclasses.replace(xid("n1"), drain_overrides=BehaviourOverrides(force=True))])
    forced.settle()
    assert sorted(w.target for w in forced.fleet.writes("evict")) == ["batch-1/job", "inference/srv"]
    assert forced.state() is NodeState.DRAINED


def test_a_skip_override_leaves_the_pods_and_counts_the_node_drained(store, clock, observer) -> None:
    skipped = Harness(store, clock, observer, [pod("team-a", "trainer", "n1")])
    store.append([dataclasses.replace(xid("n1"), drain_overrides=BehaviourOverrides(skip=True))])
    skipped.settle()
    assert skipped.state() is NodeState.DRAINED
    assert skipped.fleet.writes("evict") == [] and len(skipped.fleet.list_pods("n1")) == 1
