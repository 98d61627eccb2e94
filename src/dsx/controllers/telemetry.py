"""What the sentinel tells operators: Prometheus metrics (its log lines are `dsx.logs`).

`SentinelTelemetry` is the `dsx.health.decisions.ports.Observer` of the live pipeline. Metric names
(all prefixed `dsx_sentinel_`) are listed in docs/sentinel.md with the alerts that use them; they
follow Prometheus naming (base units such as seconds, `_total` on counters), which
tests/unit/health/pipeline/test_metric_names.py holds:

- `events_ingested_total{source}`        events newly stored, by door (kernel-log, kube, http, …)
- `kernel_log_repeats_total`              kernel-log lines folded into an earlier event of their burst
- `actions_total{stage,action}`           every change made (or, in dry run, planned)
- `breaker_tripped` / `breaker_trips_total`  circuit breaker state and trips
- `stage_lag_events{stage}`              stored events a stage has not finished yet
- `stage_lag_seconds{stage}`             how long the oldest of them has waited
- `stage_history_lost{stage}`            1 when a stage's cursor is past the newest event (history lost)
- `fault_to_cordon_seconds`              histogram: monitor saw the fault → node cordoned
- `repair_stage_seconds{stage}`          histogram per repair stage of a node back in service (quarantine,
                                          drain, remediation, recertify, total: dsx.health.decisions.repair_timing)
- `nodes{state}`                         nodes per pipeline state
- `gpu_seconds_total{bucket}`            GPU capacity integrated over time per bucket, GPU-seconds
                                          (dsx.health.decisions.goodput)
- `fleet_goodput_ratio`                  in-service GPUs / all GPUs
- `loop_errors_total{loop}`              exceptions a background loop caught (logged, retried)
- `loop_failing{loop}`                   1 while a loop's last round failed (also shown by /readyz)
- `dead_letters{stage}`                  events a stage parked after repeated errors (`dsx sentinel retry`)
- `leader`                               1 on the replica that acts (holds the Lease, or runs alone), else 0
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from dsx.health.decisions import goodput
from dsx.health.decisions.pipeline_status import ConsumerLag
from dsx.model.health import NodeState

SECONDS_PER_HOUR = 3600.0
REPAIR_BUCKETS_SECONDS = (1.0, 10.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0, 43200.0, 86400.0, 259200.0)
"""A repair stage takes seconds (a cordon) to days (a replaced board)."""
LATENCY_BUCKETS_SECONDS = (0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

actions_log = logging.getLogger("dsx.sentinel.actions")


class SentinelTelemetry:
    """Prometheus registry of one sentinel process, and its Observer."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.events_ingested = Counter("dsx_sentinel_events_ingested", "Events newly stored", ["source"], registry=r)
        self.kernel_log_repeats = Counter(
            "dsx_sentinel_kernel_log_repeats", "Kernel-log lines folded into an earlier event of a burst", registry=r
        )
        self.actions = Counter(
            "dsx_sentinel_actions", "Actions taken (or planned in dry run)", ["stage", "action"], registry=r
        )
        self.breaker_tripped = Gauge(
            "dsx_sentinel_breaker_tripped", "1 while the quarantine breaker is tripped", registry=r
        )
        self.breaker_trips = Counter("dsx_sentinel_breaker_trips", "Times the quarantine breaker tripped", registry=r)
        self.stage_lag = Gauge(
            "dsx_sentinel_stage_lag_events", "Stored events a stage has not finished", ["stage"], registry=r
        )
        self.stage_lag_seconds = Gauge(
            "dsx_sentinel_stage_lag_seconds",
            "How long the oldest event a stage has not finished has waited",
            ["stage"],
            registry=r,
        )
        self.stage_history_lost = Gauge(
            "dsx_sentinel_stage_history_lost",
            "1 when a stage's cursor is past the newest stored event: the store lost history",
            ["stage"],
            registry=r,
        )
        self.repair_stage_seconds = Histogram(
            "dsx_sentinel_repair_stage_seconds",
            "Per stage of a repaired node: fault → quarantined → drained → remediated → released, and the total",
            ["stage"],
            buckets=REPAIR_BUCKETS_SECONDS,
            registry=r,
        )
        self.fault_to_cordon_seconds = Histogram(
            "dsx_sentinel_fault_to_cordon_seconds",
            "From the monitor seeing a fault to the node being cordoned",
            buckets=LATENCY_BUCKETS_SECONDS,
            registry=r,
        )
        self.nodes = Gauge("dsx_sentinel_nodes", "Nodes per pipeline state", ["state"], registry=r)
        self.gpu_seconds = Counter(
            "dsx_sentinel_gpu_seconds", "GPU capacity over time per bucket, in GPU-seconds", ["bucket"], registry=r
        )
        self.goodput = Gauge("dsx_sentinel_fleet_goodput_ratio", "GPUs certified and in service / all GPUs", registry=r)
        self.leader = Gauge("dsx_sentinel_leader", "1 while this replica acts on nodes", registry=r)
        self.stage_errors = Counter("dsx_sentinel_stage_errors", "Handler failures (retried)", ["stage"], registry=r)
        self.loop_errors = Counter(
            "dsx_sentinel_loop_errors", "Exceptions a background loop caught (logged, retried)", ["loop"], registry=r
        )
        self.loop_failing = Gauge(
            "dsx_sentinel_loop_failing", "1 while a loop's last round failed", ["loop"], registry=r
        )
        self.dead_letters = Gauge(
            "dsx_sentinel_dead_letters", "Events a stage parked after repeated errors", ["stage"], registry=r
        )
        for bucket in goodput.BUCKETS:
            self.gpu_seconds.labels(bucket)
        for state in NodeState:
            self.nodes.labels(state.value)

    # Observer
    def action(self, stage: str, action: str, node_name: str, detail: Mapping[str, Any]) -> None:
        self.actions.labels(stage, action).inc()
        actions_log.info(
            "%s %s %s",
            stage,
            action,
            node_name,
            extra={"stage": stage, "action": action, "node": node_name, "detail": dict(detail)},
        )

    def repaired(self, node_name: str, segments: Mapping[str, float]) -> None:
        for stage, seconds in segments.items():
            self.repair_stage_seconds.labels(stage).observe(seconds)
        actions_log.info(
            "node %s repaired", node_name, extra={"node": node_name, "stage": "recertify", "seconds": dict(segments)}
        )

    def fault_to_cordon(self, seconds: float) -> None:
        self.fault_to_cordon_seconds.observe(seconds)

    def breaker(self, state: str, detail: Mapping[str, Any]) -> None:
        self.breaker_tripped.set(1 if state == "tripped" else 0)
        if state == "tripped":
            self.breaker_trips.inc()

    # periodic figures
    def fleet(
        self, capacity: Mapping[str, int], hours_added: Mapping[str, float], states: Mapping[NodeState, int]
    ) -> None:
        self.goodput.set(goodput.goodput_ratio(capacity))
        for bucket, hours in hours_added.items():
            if hours > 0:
                self.gpu_seconds.labels(bucket).inc(hours * SECONDS_PER_HOUR)  # Prometheus base unit
        for state in NodeState:
            self.nodes.labels(state.value).set(states.get(state, 0))

    def lag(self, consumers: Sequence[ConsumerLag]) -> None:
        for consumer in consumers:
            self.stage_lag.labels(consumer.consumer).set(max(0, consumer.behind_events))
            self.stage_lag_seconds.labels(consumer.consumer).set(consumer.behind_seconds)
            self.stage_history_lost.labels(consumer.consumer).set(1 if consumer.history_lost else 0)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
