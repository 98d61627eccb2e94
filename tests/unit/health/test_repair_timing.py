"""Area of concern: a repair's time per stage comes from the node's state history and the fault's
time, for the latest incident only, and a stage that has not ended yet has no figure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dsx.health.decisions import repair_timing
from dsx.health.decisions.eventstore import NodeTransition
from dsx.model.health import NodeState as S

T0 = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)


def moves(*steps: tuple[S, S, float]) -> list[NodeTransition]:
    return [NodeTransition("n1", a, b, "", 7, T0 + timedelta(seconds=t)) for a, b, t in steps]


FULL = moves(
    (S.HEALTHY, S.QUARANTINED, 2),
    (S.QUARANTINED, S.DRAINING, 3),
    (S.DRAINING, S.DRAINED, 63),
    (S.DRAINED, S.REMEDIATING, 64),
    (S.REMEDIATING, S.RECERTIFYING, 664),
    (S.RECERTIFYING, S.HEALTHY, 904),
)


def test_every_stage_of_a_completed_repair() -> None:
    assert repair_timing.segments(FULL, T0) == {
        "quarantine": 2.0,
        "drain": 61.0,
        "remediation": 601.0,
        "recertify": 240.0,
        "total": 904.0,
    }


def test_a_repair_under_way_has_only_the_stages_that_ended() -> None:
    assert repair_timing.segments(FULL[:3], T0) == {"quarantine": 2.0, "drain": 61.0}
    assert repair_timing.segments(FULL[:3], None) == {"drain": 61.0}  # fault time unknown: no quarantine span


def test_only_the_latest_incident_counts() -> None:
    again = [*FULL, *moves((S.HEALTHY, S.QUARANTINED, 5000), (S.QUARANTINED, S.DRAINING, 5001))]
    assert repair_timing.segments(again, T0 + timedelta(seconds=4990)) == {"quarantine": 10.0}
    assert repair_timing.segments([], T0) == {}
