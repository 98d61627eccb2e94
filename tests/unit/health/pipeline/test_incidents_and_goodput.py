"""Area of concern: the facts the stages derive — which faults of an incident are still open (healthy
events close them, a remediation closes all), the strongest action, the GPUs they name; the
fleet's GPU capacity per bucket, its goodput ratio and GPU-hours over time; and the parsing of
posted events (all-or-nothing, bounded)."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from datetime import timedelta

import pytest

from dsx.errors import BadInputError, PayloadTooLargeError
from dsx.health.decisions import goodput, incidents
from dsx.health.decisions.ports import NodeChange, Taint, TaintEffect
from dsx.health.parsing import ingest
from dsx.model.health import NODE_REMEDIATED_CHECK, NodeState, RecommendedAction

from .builders import gpu_check, gpu_node, informational, xid


def test_open_faults_close_on_recovery_and_on_remediation() -> None:
    sick0, sick1 = gpu_check("n1", healthy=False, gpu="0"), gpu_check("n1", healthy=False, gpu="1")
    assert len(incidents.open_faults([sick0, sick1])) == 2
    assert list(incidents.open_faults([sick0, sick1, gpu_check("n1", healthy=True, gpu="0")]).values()) == [sick1]
    everything_healthy = dataclasses.replace(gpu_check("n1", healthy=True), entities=())
    assert incidents.open_faults([sick0, sick1, everything_healthy]) == {}
    remediated = dataclasses.replace(informational(), check_name=NODE_REMEDIATED_CHECK, is_fatal=False)
    assert incidents.open_faults([xid(), remediated]) == {}
    assert len(incidents.open_faults([xid(), remediated, xid(at=timedelta(seconds=1))])) == 1
    assert incidents.open_faults([informational()]) == {}


def test_the_strongest_action_and_the_named_gpus() -> None:
    faults = [gpu_check("n1", healthy=False, gpu="3"), xid(pci="0000:3B:00.0")]
    assert incidents.strongest_action(faults) is RecommendedAction.RESTART_BM
    contact = xid(action=RecommendedAction.CONTACT_SUPPORT)
    assert incidents.strongest_action([*faults, contact]) is RecommendedAction.CONTACT_SUPPORT
    assert incidents.strongest_action([]) is RecommendedAction.NONE
    assert incidents.gpu_identifiers(faults) == ("0000:3b:00.0", "3")
    assert incidents.describe(incidents.open_faults(faults)).startswith("GpuRemappedRows ROW_REMAP_PENDING (GPU=3)")


def test_capacity_buckets_goodput_and_gpu_hours() -> None:
    held = Taint("sentinel.dsx.run/not-yet-certified", TaintEffect.NO_SCHEDULE)
    fleet = [
        gpu_node("a"),
        gpu_node("b"),
        NodeChange(add_taints=(held,)).apply_to(gpu_node("c")),
        gpu_node("d", unschedulable=True),
        gpu_node("e", gpus=4),
    ]
    capacity = goodput.capacity_by_bucket(fleet, {"b": NodeState.DRAINING}, held_taint=held.key)
    assert {k: v for k, v in capacity.items() if v} == {"in-service": 12, "draining": 8, "held": 8, "cordoned": 8}
    assert goodput.goodput_ratio(capacity) == pytest.approx(12 / 36)
    assert goodput.goodput_ratio(goodput.capacity_by_bucket([], {}, held_taint=held.key)) == 1.0

    hours = goodput.GpuHours()
    assert sum(hours.observe(capacity, 0.0).values()) == 0.0
    added = hours.observe(capacity, 1800.0)
    assert added["draining"] == pytest.approx(4.0) and added["in-service"] == pytest.approx(6.0)
    assert hours.totals["held"] == pytest.approx(4.0)


def test_posted_events_parse_in_every_accepted_shape() -> None:
    one = xid().to_dict()
    assert len(ingest.parse_body(json.dumps(one).encode())) == 1
    assert len(ingest.parse_body(json.dumps([one, xid("n2").to_dict()]).encode())) == 2
    assert ingest.parse_document(ingest.to_document([xid()]))[0] == xid()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "not JSON"),
        (b"[]", "no events"),
        (b'"text"', "expected a HealthEvent object"),
        (json.dumps([xid().to_dict(), {**xid().to_dict(), "bogus": 1}]).encode(), r"events\[1\]: field: 'bogus'"),
        (json.dumps({**xid().to_dict(), "idempotencyKey": "sha256:00"}).encode(), "does not match the content"),
    ],
)
def test_bad_posts_are_refused_whole_with_the_item_named(body: bytes, message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        ingest.parse_body(body)


def test_oversized_batches_are_refused() -> None:
    with pytest.raises(PayloadTooLargeError, match="at most 1000"):
        ingest.parse_document([xid().to_dict()] * 1001)


def test_an_old_snake_case_post_is_stored_with_the_same_key_and_warned_about_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest, "_warned", set())
    event = xid()
    old = {re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), k): v for k, v in event.to_dict().items()}
    body = json.dumps({"events": [old, old]}).encode()
    with caplog.at_level(logging.WARNING, logger="dsx.health.parsing.ingest"):
        first = ingest.parse_body(body)
        second = ingest.parse_body(body)
    assert first == second == [event, event]
    assert first[0].idempotency_key == event.idempotency_key
    warned = [r.getMessage() for r in caplog.records]
    assert "request body: is_fatal: old snake_case key, read as isFatal; rename it (keys are camelCase)" in warned
    assert len(warned) == len(set(warned)) == len([k for k in old if "_" in k])  # once per key and process
    assert ingest.deprecation_headers({"events": [old]}) is not None
    assert ingest.deprecation_headers({"events": [event.to_dict()]}) is None
