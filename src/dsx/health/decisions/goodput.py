"""Fleet goodput: how much of the GPU capacity is certified and in service, and GPU-hours per state.

Why: utilisation alone hides loss. A fleet at 95 % utilisation with a tenth of its nodes
quarantined, draining or waiting for certification is losing a tenth of what was paid for; the
sentinel accounts for it. Each GPU node counts its GPUs in exactly one bucket:

- the pipeline state from the store (quarantined, draining, drained, remediating,
  recertifying, failed) when the node is in an incident;
- `held` — healthy but carrying the not-yet-certified taint (joining or re-validating);
- `cordoned` — healthy but made unschedulable by someone else;
- `in-service` — healthy, schedulable, certified.

The goodput ratio is in-service GPUs over all GPUs. `GpuHours` integrates the buckets over time
(GPU count × hours), so the split of a week's capacity can be read from one counter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dsx.health.decisions import nodes
from dsx.model.health import NodeState

IN_SERVICE = "in-service"
HELD = "held"
CORDONED = "cordoned"
BUCKETS = (IN_SERVICE, HELD, CORDONED, *(s.value for s in NodeState if s is not NodeState.HEALTHY))


def capacity_by_bucket(
    node_objects: Iterable[Mapping[str, Any]], states: Mapping[str, NodeState], *, held_taint: str
) -> dict[str, int]:
    """GPUs per bucket (every bucket present, zero when empty)."""
    out = dict.fromkeys(BUCKETS, 0)
    for node in node_objects:
        gpus = nodes.gpu_count(node)
        state = states.get(nodes.name(node), NodeState.HEALTHY)
        if state is not NodeState.HEALTHY:
            bucket = state.value
        elif nodes.has_taint(node, held_taint):
            bucket = HELD
        elif nodes.unschedulable(node):
            bucket = CORDONED
        else:
            bucket = IN_SERVICE
        out[bucket] += gpus
    return out


def goodput_ratio(capacity: Mapping[str, int]) -> float:
    """In-service GPUs over all GPUs (1.0 for an empty fleet: nothing is lost)."""
    total = sum(capacity.values())
    return 1.0 if total == 0 else capacity.get(IN_SERVICE, 0) / total


class GpuHours:
    """Integrates GPU capacity per bucket over time; one caller at a time (the sentinel's fleet loop)."""

    def __init__(self) -> None:
        self._last: tuple[float, Mapping[str, int]] | None = None
        self.totals: dict[str, float] = dict.fromkeys(BUCKETS, 0.0)

    def observe(self, capacity: Mapping[str, int], at_seconds: float) -> dict[str, float]:
        """Credit the previous observation's capacity up to `at_seconds`; returns the hours added per bucket."""
        added = dict.fromkeys(BUCKETS, 0.0)
        if self._last is not None:
            since, previous = self._last
            hours = max(0.0, at_seconds - since) / 3600.0
            for bucket, gpus in previous.items():
                added[bucket] = gpus * hours
                self.totals[bucket] = self.totals.get(bucket, 0.0) + gpus * hours
        self._last = (at_seconds, dict(capacity))
        return added
