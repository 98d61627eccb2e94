"""Area of concern: the HealthEvent record round-trips through JSON unchanged, refuses malformed
input with a one-line error naming the field, and derives the same idempotency key from the
same content; the node state machine allows exactly the documented moves."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsx.errors import BadInputError, ConflictError
from dsx.model import health
from dsx.model.health import (
    BehaviourOverrides,
    ComponentClass,
    Entity,
    EntityType,
    HealthEvent,
    NodeState,
    ProcessingStrategy,
    RecommendedAction,
)

T0 = datetime(2026, 11, 29, 12, 0, 0, 123456, tzinfo=UTC)


def xid79(**changes: object) -> HealthEvent:
    fields: dict[str, object] = {
        "agent": "kernel-log-monitor",
        "component_class": ComponentClass.GPU,
        "check_name": "KernelLogXid",
        "node_name": "n3",
        "generated_at": T0,
        "is_fatal": True,
        "is_healthy": False,
        "message": "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
        "recommended_action": RecommendedAction.RESTART_BM,
        "error_codes": ("79",),
        "entities": (Entity(EntityType.PCI, "0000:3b:00.0"), Entity(EntityType.GPU, "2")),
        "metadata": {"source": "/var/log/kern.log"},
    }
    fields.update(changes)
    return HealthEvent(**fields)  # type: ignore[arg-type]


def test_round_trip_through_json_keeps_every_field() -> None:
    event = xid79(
        drain_overrides=BehaviourOverrides(skip=True),
        processing_strategy=ProcessingStrategy.STORE_AND_ANALYSE,
    )
    text = json.dumps(event.to_dict())
    back = HealthEvent.from_dict(json.loads(text))
    assert back == event
    assert back.idempotency_key == event.idempotency_key
    assert json.loads(text)["recommendedAction"] == "RESTART_BM"
    assert json.loads(text)["generatedAt"] == "2026-11-29T12:00:00.123456Z"


GOLDEN_KEY = "sha256:6277b699cd8833d3f31e269128b6a3f4708292200154fdb3605da4d7a11cb331"
"""The key dsx derived for `golden()` before the camelCase spelling (computed with the old code)."""
GOLDEN_ROW = (
    '{"agent":"kernel-log-monitor","check_name":"KernelLogXid","component_class":"GPU",'
    '"custom_recommended_action":"","drain_overrides":{"force":false,"skip":false},'
    '"entities":[{"type":"PCI","value":"0000:3b:00.0"},{"type":"GPU","value":"2"}],"error_codes":["79"],'
    '"generated_at":"2026-03-01T12:00:00.250000Z","is_fatal":true,"is_healthy":false,"message":"Xid 79",'
    '"metadata":{"line":"7"},"node_name":"gpu-node-1","processing_strategy":"EXECUTE_REMEDIATION",'
    '"quarantine_overrides":{"force":false,"skip":false},"recommended_action":"RESTART_BM","schema_version":1}'
)
"""The document the old dsx stored for `golden()` (events.document)."""


def golden() -> HealthEvent:
    return xid79(
        node_name="gpu-node-1",
        generated_at=datetime(2026, 3, 1, 12, 0, 0, 250000, tzinfo=UTC),
        message="Xid 79",
        metadata={"line": "7"},
    )


def test_the_key_and_the_stored_document_are_those_of_the_old_snake_case_dsx() -> None:
    event = golden()
    assert event.idempotency_key == GOLDEN_KEY
    assert event.canonical_json == GOLDEN_ROW
    assert HealthEvent.from_dict(json.loads(GOLDEN_ROW), source="event store") == event  # an old row reads back
    assert set(event.to_dict()) >= {"checkName", "isFatal", "idempotencyKey"}  # the wire spelling is camelCase


def test_an_old_snake_case_body_reads_as_the_same_event_with_the_same_key() -> None:
    old = {
        re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), key): value for key, value in golden().to_dict().items()
    }
    assert "is_fatal" in old and "idempotency_key" in old
    event = HealthEvent.from_dict(old, source="posted")
    assert event == golden() and event.idempotency_key == GOLDEN_KEY
    assert ("is_fatal", "isFatal") in health.old_keys(old)
    assert health.old_keys(golden().to_dict()) == []


def test_old_field_names_in_cel_rules_are_rewritten_and_reported() -> None:
    text, found = health.camel_expression(
        "event.is_fatal && 'x' in event.metadata.some_key && event.error_codes.size() > 0"
    )
    assert text == "event.isFatal && 'x' in event.metadata.some_key && event.errorCodes.size() > 0"
    assert found == [("event.is_fatal", "event.isFatal"), ("event.error_codes", "event.errorCodes")]


def test_key_is_stable_across_equal_content_and_time_zones() -> None:
    shifted = T0.astimezone(timezone(timedelta(hours=2)))
    assert xid79().idempotency_key == xid79(generated_at=shifted).idempotency_key
    assert xid79().idempotency_key == xid79(metadata={"source": "/var/log/kern.log"}).idempotency_key


@pytest.mark.parametrize(
    "change",
    [
        {"node_name": "n4"},
        {"generated_at": T0 + timedelta(microseconds=1)},
        {"error_codes": ("48",)},
        {"metadata": {"source": "/var/log/kern.log", "line": "7"}},
        {"entities": (Entity(EntityType.PCI, "0000:3c:00.0"),)},
    ],
)
def test_key_changes_with_content(change: dict[str, object]) -> None:
    assert xid79(**change).idempotency_key != xid79().idempotency_key


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d.update(recommendedAction="REBOOT"), "recommendedAction: 'REBOOT' is not allowed"),
        (lambda d: d.update(componentClass="gpu"), "componentClass: 'gpu' is not allowed"),
        (lambda d: d.update(colour="red"), "field: 'colour' is not allowed"),
        (lambda d: d.pop("nodeName"), "nodeName: required"),
        (lambda d: d.update(generatedAt="2026-11-29T12:00:00"), "has no time zone"),
        (lambda d: d.update(generatedAt="yesterday"), "not an RFC 3339 timestamp"),
        (lambda d: d.update(isFatal="yes"), "isFatal: expected true or false"),
        (lambda d: d.update(schemaVersion=2), "schemaVersion: 2 is out of range; allowed: an integer at most 1"),
        (lambda d: d.update(entities=[{"type": "GPU"}]), "entities[0].value: required"),
        (
            lambda d: d.update(entities=[{"type": "DIMM", "value": "1"}]),
            "entities[0]: type: 'DIMM' is not allowed; allowed values: GPU, GPU_UUID",
        ),
        (lambda d: d.update(errorCodes="79"), "errorCodes: expected a list"),
        (lambda d: d.update(metadata={"a": 1}), "metadata.a: expected a string, got 1"),
        (
            lambda d: d.update(drainOverrides={"now": True}),
            "drainOverrides: field: 'now' is not allowed; allowed values: force, skip",
        ),
        (lambda d: d.update(idempotencyKey="sha256:00"), "does not match the content"),
        (lambda d: d.update(isHealthy=True), "isFatal and isHealthy are both true"),
        (lambda d: d.update(recommendedAction="CUSTOM"), "customRecommendedAction is required"),
        (lambda d: d.update(is_fatal=False), "field: 'is_fatal' is not allowed"),  # both spellings of one key
        (lambda d: d.update(nodeName="  "), "nodeName: must not be empty"),
        (lambda d: d.update(errorCodes=["79", ""]), "errorCodes[1]: must not be empty"),
        (lambda d: d.update(entities=[{"type": "GPU", "value": ""}]), "entities[0].value: must not be empty"),
        (lambda d: d.update(entities=["GPU"]), "entities[0]: expected a mapping, got 'GPU'"),
        (lambda d: d.update(drainOverrides={"force": "yes"}), "drainOverrides.force: expected true or false"),
        (lambda d: d.update(schemaVersion=True), "schemaVersion: expected an integer, got True"),
    ],
)
def test_malformed_input_names_the_field(mutate: object, expected: str) -> None:
    data = xid79().to_dict()
    mutate(data)  # type: ignore[operator]
    with pytest.raises(BadInputError, match=r"^posted: ") as info:
        HealthEvent.from_dict(data, source="posted")
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


def test_defaults_fill_optional_fields() -> None:
    event = HealthEvent.from_dict(
        {
            "agent": "a",
            "componentClass": "NODE",
            "checkName": "NodeNotReady",
            "nodeName": "n1",
            "generatedAt": "2026-11-29T12:00:00Z",
            "isFatal": False,
            "isHealthy": True,
        }
    )
    assert event.recommended_action is RecommendedAction.NONE
    assert event.processing_strategy is ProcessingStrategy.EXECUTE_REMEDIATION
    assert event.quarantine_overrides == BehaviourOverrides()
    assert event.schema_version == health.SCHEMA_VERSION


@given(
    node=st.text(min_size=1, max_size=20).filter(str.strip),
    codes=st.lists(st.text(min_size=1, max_size=8), max_size=3),
    meta=st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3),
    micros=st.integers(min_value=0, max_value=10**12),
)
def test_any_valid_event_round_trips(node: str, codes: list[str], meta: dict[str, str], micros: int) -> None:
    event = xid79(
        node_name=node,
        error_codes=tuple(codes),
        metadata=meta,
        generated_at=T0 + timedelta(microseconds=micros),
    )
    assert HealthEvent.from_dict(json.loads(json.dumps(event.to_dict()))) == event


def test_entity_values_filters_by_type() -> None:
    assert xid79().entity_values(EntityType.PCI) == ("0000:3b:00.0",)
    assert xid79().entity_values(EntityType.GPU_UUID) == ()


def test_every_state_has_a_way_back_to_healthy() -> None:
    for start in NodeState:
        seen = {start}
        frontier = [start]
        while frontier:
            for nxt in health.TRANSITIONS[frontier.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    frontier.append(nxt)
        assert NodeState.HEALTHY in seen, start


def test_remediation_cannot_skip_recertification() -> None:
    assert not health.transition_allowed(NodeState.REMEDIATING, NodeState.HEALTHY)
    assert health.transition_allowed(NodeState.REMEDIATING, NodeState.RECERTIFYING)
    assert health.transition_allowed(NodeState.DRAINED, NodeState.DRAINED)
    with pytest.raises(ConflictError, match="node n3: cannot move from remediating to healthy; allowed: failed"):
        health.require_transition("n3", NodeState.REMEDIATING, NodeState.HEALTHY)
