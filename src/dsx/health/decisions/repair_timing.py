"""How long each step of a node's repair took: detect → cordon → drained → remediated → recertified.

Why: a repair that takes six hours is spent somewhere; users of NVSentinel asked for the time per
stage, not one total, to see whether drains wait on budgets, remediations on a provider, or
re-certifications on a queue. The timeline is read from the node's state history (the store's
transitions, each with its time) and the monitor's time of the fault, so it is the same in
`/metrics`, `dsx sentinel status` and a replay.

Segments of the latest incident (the last move into QUARANTINED), in seconds:

- `quarantine`: the fault seen by its monitor → the node quarantined (cordoned)
- `drain`: quarantined → drained
- `remediation`: drained → re-certification started (the remediation finished)
- `recertify`: re-certification started → released (HEALTHY)
- `total`: the fault → released

A segment whose end has not happened yet is absent; a node that failed re-certification has no
`recertify` or `total`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from dsx.health.decisions.eventstore import NodeTransition
from dsx.model.health import NodeState

SEGMENTS = ("quarantine", "drain", "remediation", "recertify", "total")
_MILESTONES = {
    NodeState.QUARANTINED: "cordoned",
    NodeState.DRAINED: "drained",
    NodeState.RECERTIFYING: "remediated",
    NodeState.HEALTHY: "released",
}


def segments(history: Sequence[NodeTransition], detected_at: datetime | None) -> dict[str, float]:
    """The latest incident's segments (see the module docstring), in order."""
    starts = [i for i, move in enumerate(history) if move.to_state is NodeState.QUARANTINED]
    if not starts:
        return {}
    seen: dict[str, datetime] = {}
    if detected_at is not None:
        seen["detected"] = detected_at
    for move in history[starts[-1] :]:
        milestone = _MILESTONES.get(move.to_state)
        if milestone is not None and milestone not in seen:
            seen[milestone] = move.at
    spans = {
        "quarantine": ("detected", "cordoned"),
        "drain": ("cordoned", "drained"),
        "remediation": ("drained", "remediated"),
        "recertify": ("remediated", "released"),
        "total": ("detected", "released"),
    }
    return {
        name: max(0.0, (seen[end] - seen[start]).total_seconds())
        for name, (start, end) in spans.items()
        if start in seen and end in seen
    }
