"""Background health traffic for a fleet, posted the way the per-node monitors post it.

Every node's monitor polls on its own clock and posts what it read since the last poll, one
request per node (`HttpSink`, a fresh connection each, the token of the sentinel); here `senders`
threads each play a share of the nodes. A node's events are spread evenly over time (a fractional
credit per node, phase-shifted by its position, so the totals are exact and the posts are not
synchronized), and `faults_per_second` fatal faults (Xid 79, a GPU fallen off the bus) are mixed
in on distinct nodes, round-robin from a fixed shuffle. Deterministic for the same plan.

`dsx sim load` drives it from the CLI; bench/bench_scale.py drives it under the sentinel it measures.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from dsx import errors
from dsx.controllers.monitors import HttpSink
from dsx.model.health import ComponentClass, Entity, EntityType, HealthEvent, RecommendedAction

AGENT = "dsx-sim-load"
HEALTHY_CHECK = "GpuHealthCheck"
FAULT_CHECK = "GpuFallenOffBus"


@dataclass(frozen=True)
class LoadPlan:
    nodes: tuple[str, ...]
    events_per_node_per_second: float = 0.1
    faults_per_second: float = 0.0
    duration_seconds: float = 60.0
    senders: int = 32
    poll_interval_seconds: float = 1.0
    """A monitor posts what it read since its last poll: events a node produced within one
    interval travel in one request."""
    seed: int = 0

    def check(self) -> None:
        for name, value in (
            ("events-per-node-per-second", self.events_per_node_per_second),
            ("faults-per-second", self.faults_per_second),
        ):
            if not 0 <= value <= 1000:
                raise errors.BadInputError(f"sim load: {name}: {value} is out of range; allowed: 0..1000")
        if not self.nodes:
            raise errors.BadInputError("sim load: no nodes to play")
        if not 1 <= self.senders <= 256:
            raise errors.BadInputError(f"sim load: senders: {self.senders} is out of range; allowed: 1..256")
        if not 0.05 <= self.poll_interval_seconds <= 60:
            raise errors.BadInputError(
                f"sim load: poll-interval: {self.poll_interval_seconds} is out of range; allowed: 0.05..60"
            )


@dataclass
class LoadReport:
    """What was sent; `faults` holds (node, monotonic time of the post) per fault."""

    events: int = 0
    requests: int = 0
    errors: int = 0
    elapsed_seconds: float = 0.0
    faults: list[tuple[str, float]] = field(default_factory=list)
    first_error: str = ""

    def to_dict(self) -> dict[str, object]:
        return {
            "events": self.events,
            "requests": self.requests,
            "faults": len(self.faults),
            "errors": self.errors,
            "firstError": self.first_error,
            "elapsedSeconds": round(self.elapsed_seconds, 2),
            "eventsPerSecond": round(self.events / self.elapsed_seconds, 1) if self.elapsed_seconds else 0.0,
        }


def healthy_event(node: str, gpu: int, now: datetime) -> HealthEvent:
    return HealthEvent(
        agent=AGENT,
        component_class=ComponentClass.GPU,
        check_name=HEALTHY_CHECK,
        node_name=node,
        generated_at=now,
        is_fatal=False,
        is_healthy=True,
        message="GPU health check passed",
        entities=(Entity(EntityType.GPU, str(gpu)),),
    )


def fault_event(node: str, now: datetime) -> HealthEvent:
    return HealthEvent(
        agent=AGENT,
        component_class=ComponentClass.GPU,
        check_name=FAULT_CHECK,
        node_name=node,
        generated_at=now,
        is_fatal=True,
        is_healthy=False,
        message="GPU has fallen off the bus",
        recommended_action=RecommendedAction.RESTART_BM,
        error_codes=("79",),
        entities=(Entity(EntityType.GPU, "0"),),
    )


class FleetLoad:
    """Runs a `LoadPlan` against one sentinel; `run()` blocks, `stop` ends it early."""

    def __init__(
        self,
        plan: LoadPlan,
        sink_factory: Callable[[], HttpSink],
        *,
        stop: threading.Event | None = None,
        on_fault: Callable[[str, float], None] | None = None,
    ) -> None:
        plan.check()
        self.plan = plan
        self._sink_factory = sink_factory
        self.stop = stop or threading.Event()
        self._on_fault = on_fault
        self._lock = threading.Lock()
        self.report = LoadReport()
        order = list(plan.nodes)
        random.Random(plan.seed).shuffle(order)
        self._fault_order = order

    def run(self) -> LoadReport:
        started = time.monotonic()
        threads = [
            threading.Thread(target=self._sender, args=(index, started), name=f"sim-load-{index}", daemon=True)
            for index in range(self.plan.senders)
        ]
        if self.plan.faults_per_second > 0:
            threads.append(threading.Thread(target=self._faults, args=(started,), name="sim-load-faults", daemon=True))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.report.elapsed_seconds = time.monotonic() - started
        return self.report

    def _post(self, sink: HttpSink, events: list[HealthEvent]) -> bool:
        try:
            sink.send(events)
        except errors.DsxError as exc:
            with self._lock:
                self.report.errors += 1
                self.report.first_error = self.report.first_error or exc.message
            return False
        with self._lock:
            self.report.events += len(events)
            self.report.requests += 1
        return True

    def _sender(self, index: int, started: float) -> None:
        plan = self.plan
        mine: Sequence[str] = plan.nodes[index :: plan.senders]
        if not mine or plan.events_per_node_per_second <= 0:
            return
        sink = self._sink_factory()
        per_poll = plan.events_per_node_per_second * plan.poll_interval_seconds
        total = len(plan.nodes)
        # each node starts with a credit set by its place in the fleet: posts are spread, not synchronized
        credit = [((index + k * plan.senders) / total) % 1.0 for k in range(len(mine))]
        rounds = 0
        while not self.stop.is_set():
            round_start = started + rounds * plan.poll_interval_seconds
            if round_start - started >= plan.duration_seconds:
                return
            for k, node in enumerate(mine):
                credit[k] += per_poll
                due = int(credit[k])
                if not due:
                    continue
                credit[k] -= due
                at = round_start + plan.poll_interval_seconds * k / len(mine)
                if self.stop.wait(max(0.0, at - time.monotonic())):
                    return
                now = datetime.now(UTC)
                self._post(sink, [healthy_event(node, gpu % 8, now) for gpu in range(due)])
            rounds += 1

    def _faults(self, started: float) -> None:
        plan = self.plan
        sink = self._sink_factory()
        count = 0
        while not self.stop.is_set() and count < len(self._fault_order):
            at = started + count / plan.faults_per_second
            if at - started >= plan.duration_seconds or self.stop.wait(max(0.0, at - time.monotonic())):
                return
            node = self._fault_order[count]
            count += 1
            sent = time.monotonic()
            if self._post(sink, [fault_event(node, datetime.now(UTC))]):
                with self._lock:
                    self.report.faults.append((node, sent))
                if self._on_fault is not None:
                    self._on_fault(node, sent)
